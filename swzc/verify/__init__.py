"""Verify: build, time and accept on a GPU; observe a program's launches; benchmark the user's own program."""
