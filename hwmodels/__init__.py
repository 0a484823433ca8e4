"""One TOML file per GPU; loaded by swzc.hw."""
