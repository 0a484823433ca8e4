#!/usr/bin/env bash
# Wheels for the GPU machine (Python 3.12, x86-64, no network there): swzc itself and the dependencies
# that machine lacks, into wheels/ (ignored by git). Each GPU run starts with:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site wheels/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf wheels && mkdir -p wheels
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d wheels "tree-sitter>=0.25" "tree-sitter-cuda>=0.21.2" "unidiff>=0.7.5"
# the command line (click, rich and what rich needs): not every image of that machine has them
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d wheels "click>=8.1" "rich>=13"
# the LLM client (openai, pydantic) and matplotlib (show, the report's page) with what they need
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d wheels "openai>=1.92" "pydantic>=2.7" "matplotlib>=3.8"
python3 -m pip wheel -q --no-deps -w wheels .
ls wheels
