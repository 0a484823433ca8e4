"""Tree-sitter queries, one folder per dialect; loaded by swzc.frontend.queries."""
