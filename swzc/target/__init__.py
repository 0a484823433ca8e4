"""Target: hardware models (hwmodels/), the probe that writes them, and the toolchain's compile check."""
