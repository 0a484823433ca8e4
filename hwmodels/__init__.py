"""One TOML file per GPU; loaded by swzc.target.hw."""
