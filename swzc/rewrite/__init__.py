"""Rewrite machinery: byte edits re-parsed through a source map, and unified patches (the passes live in passes/)."""
