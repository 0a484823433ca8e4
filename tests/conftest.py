"""Tests are hermetic: `swzc rewrite` must not start its GPU loop on its own, even on a machine with a GPU.
The GPU tests ask for the loop explicitly."""

import os

os.environ["SWZC_NO_GPU"] = "1"
