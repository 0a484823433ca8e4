"""swzc: hardware-aware block swizzles for CUDA and HIP kernels, as a source-to-source pass."""

__version__ = "0.1.0"
