"""The import contracts of pyproject.toml ([tool.importlinter]) hold for the checkout, and an import that runs
against them is caught: one added to a copy of the package makes `lint-imports` report the contract it breaks.

The copy is laid out as the package is installed (passes/, grammars/ and hwmodels/ inside swzc/, as
pyproject.toml's package-dir says), because the contracts name swzc.passes and the rest by their installed
names.  Each case adds one import and names the one contract it is there to break; it may break others too."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"
SETTINGS = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
CONTRACTS = {contract["id"]: contract["name"] for contract in SETTINGS["tool"]["importlinter"]["contracts"]}
VERDICT = re.compile(r"^(?P<name>.+) (?P<verdict>KEPT|BROKEN)(?: \(.*\))?$", re.MULTILINE)


def installed_layout(dest: Path) -> Path:
    """Copy the package's folders from the checkout to `dest` where installing puts them."""
    folders = SETTINGS["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(folders.items()):  # swzc before swzc.passes, which goes inside it
        shutil.copytree(ROOT / folder, dest.joinpath(*package.split(".")),
                        ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def lint_imports(tree: Path) -> tuple[int, dict[str, str], str]:
    """Run lint-imports on the package under `tree`: its exit status, each contract's verdict by id, and what
    it printed."""
    # lint-imports reads the package found first on sys.path, and puts its working directory first.
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--config", str(CONFIG), "--no-cache", "--no-logo"],
        cwd=tree, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "1000"},  # one line per contract, however long its name
    )
    by_name = {match["name"]: match["verdict"] for match in VERDICT.finditer(done.stdout)}
    verdicts = {key: by_name.get(name, "missing") for key, name in CONTRACTS.items()}
    assert "missing" not in verdicts.values(), done.stdout + done.stderr
    return done.returncode, verdicts, done.stdout + done.stderr


def test_the_contracts_hold(tmp_path: Path) -> None:
    status, verdicts, said = lint_imports(installed_layout(tmp_path))
    assert verdicts == dict.fromkeys(CONTRACTS, "KEPT"), said
    assert status == 0, said


@pytest.mark.parametrize("module, added, broken", [
    # the bottom layer reaching the top: a layer imports one above it
    ("core/errors.py", "from swzc.commands import cli", "layers"),
    # one stage reaching the one just above it
    ("model/rank.py", "from swzc.rewrite import edits", "layers"),
    # a stage above search may import it, but the LLM only through the pipeline
    ("verify/bench.py", "from swzc.search.llm import client", "llm"),
    # inside one stage, where its modules may import each other: outputs -> errors -> outputs
    ("core/errors.py", "from swzc.core import outputs", "circles"),
    # inside the analysis, a record reaching the kernels that build it
    ("analysis/records.py", "from swzc.analysis import kernels", "analysis"),
    # the shared click group reaching a command
    ("commands/cli.py", "from swzc.commands import review", "commands"),
    # the driver and the project's config side by side
    ("pipeline/config.py", "from swzc.pipeline import driver", "pipeline"),
], ids=["core imports commands", "model imports rewrite", "bench imports llm", "circle inside core",
        "records import kernels", "cli imports a command", "config imports the driver"])
def test_an_added_import_breaks_its_contract(tmp_path: Path, module: str, added: str, broken: str) -> None:
    tree = installed_layout(tmp_path)
    path = tree / "swzc" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{added}\n", encoding="utf-8")
    status, verdicts, said = lint_imports(tree)
    assert verdicts[broken] == "BROKEN", said
    assert status != 0, said
