"""Tests are hermetic: `swzc rewrite` must not start its GPU loop on its own, even on a machine with a GPU.
The GPU tests ask for the loop explicitly.  Nor do they read or fill the user's results cache (tests change the
model's constants in place, which its key cannot see): tests/test_memo.py turns it on in a folder of its own."""

import os

os.environ["SWZC_NO_GPU"] = "1"
os.environ["SWZC_NO_CACHE"] = "1"
