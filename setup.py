"""Which packages swzc installs; everything else about the build is in pyproject.toml.

Every package under swzc/ is found, so a new one is installed without being listed.  passes/, grammars/
and hwmodels/ sit at the top of the repository and are installed inside swzc (package-dir in
pyproject.toml); a search names a package by its folder and cannot find them under those names, and
pyproject.toml takes either a search or a list, not both, hence this file.
"""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["swzc", "swzc.*"]) + ["swzc.passes", "swzc.grammars", "swzc.hwmodels"])
