"""Headers that let nvcc compile-check HIP sources."""
