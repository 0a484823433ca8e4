"""Passes: each a pure function of (parsed file, analysis, hardware model) returning edits or refusals.

A pass registers itself in PASSES; the pipeline runs the one it is asked for.  No pass writes files or prints.
"""

from __future__ import annotations

from swzc.passes import block_swizzle

PASSES = {"block_swizzle": block_swizzle}
