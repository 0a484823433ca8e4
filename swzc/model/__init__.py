"""Model: footprints, residency, the L2 model and the ranking of orders."""
