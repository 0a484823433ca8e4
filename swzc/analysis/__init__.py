"""Analysis: one file in its build's context (FileContext), its kernels, launches, templates, tile loops, hazards."""
