"""Core: errors, signals, processes, the one bounded read, the one staged write, clean text, swzc's own cache."""
