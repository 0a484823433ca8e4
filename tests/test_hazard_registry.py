"""Hazards are registered rules: each has a stable id, a fixture folder (fixtures/hazards/<name>/) whose refused
kernel its detector refuses and whose clean kernel nothing refuses, and the kernel is no longer refused for
it when the rule is switched off.  The ids reach the JSON outputs."""

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from swzc.analysis.kernels import analyze
from swzc.commands.cli import main
from swzc.analysis.context import FileContext
from swzc.passes import block_swizzle
from swzc.analysis.records import HAZARD_RULES, HAZARDS, Hazard
from swzc.frontend.source import load_bytes

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "fixtures" / "hazards"


def _kernel(path: Path, off: frozenset[str] = frozenset()):
    analysis = analyze(FileContext(load_bytes(path.name, path.read_bytes())), off=off)
    index = next(i for i, k in enumerate(analysis.kernels) if k.name == "k")
    return analysis.kernels[index], block_swizzle.refusal(analysis, index)


def test_the_registry_has_stable_unique_ids_and_a_folder_for_each_rule():
    assert len({r.id for r in HAZARDS}) == len({r.name for r in HAZARDS}) == len(HAZARDS)
    assert all(r.id.startswith("SWZ1") and len(r.id) == 6 for r in HAZARDS)
    assert sorted(p.name for p in FOLDER.iterdir() if p.is_dir()) == sorted(HAZARD_RULES)


@pytest.mark.parametrize("rule", [r.name for r in HAZARDS])
def test_each_rule_refuses_its_fixture_and_only_through_its_detector(rule):
    kernel, decision = _kernel(FOLDER / rule / "refused.cu")
    assert rule in {h.rule for h in kernel.hazards}, kernel.hazards
    assert decision is not None and decision.status == "refused" and HAZARD_RULES[rule].id in decision.rules
    off, decision_off = _kernel(FOLDER / rule / "refused.cu", frozenset({rule}))
    assert rule not in {h.rule for h in off.hazards}
    assert decision_off is None or HAZARD_RULES[rule].id not in decision_off.rules
    clean, clean_decision = _kernel(FOLDER / rule / "clean.cu")
    assert clean.hazards == () and (clean_decision is None or clean_decision.status != "refused"), clean_decision


def test_every_hazard_the_code_makes_names_a_registered_rule():
    """Each Hazard(...) in swzc/ gives its rule as a string the registry holds (or takes it from a table whose
    values it holds)."""
    named = []
    for module in sorted((ROOT / "swzc").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Hazard":
                rule = node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "rule"), None)
                assert rule is not None, f"{module.name}:{node.lineno}: a Hazard without a rule"
                if isinstance(rule, ast.Constant):
                    named.append((f"{module.name}:{node.lineno}", rule.value))
    assert named and all(value in HAZARD_RULES for _, value in named), [n for n in named if n[1] not in HAZARD_RULES]
    from swzc.analysis.hazards import _GRID_SYNC
    assert all(rule in HAZARD_RULES for rule, _ in _GRID_SYNC.values())
    assert Hazard(1, "x", "wait").rule_id == "SWZ101" and Hazard(1, "x", "").rule_id == ""


def test_the_rule_ids_reach_the_json_of_rewrite_analyze_and_suggest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_bytes((FOLDER / "grid-sync" / "refused.cu").read_bytes())
    runner = CliRunner()
    rewrite = json.loads(runner.invoke(main, ["rewrite", "k.cu", "--no-compile", "--json"]).output)
    assert rewrite["kernels"][0]["status"] == "refused" and rewrite["kernels"][0]["rules"] == ["SWZ103"]
    analysed = json.loads(runner.invoke(main, ["analyze", "k.cu", "--no-compile", "--json"]).output)
    (kernel,) = analysed["kernels"]
    assert kernel["rules"] == ["SWZ103"] and kernel["hazards"][0]["id"] == "SWZ103" and kernel["hazards"][0]["rule"] == "grid-sync"
    suggested = json.loads(runner.invoke(main, ["suggest", "k.cu", "--json"]).output)
    assert suggested["files"][0]["kernels"][0]["rules"] == ["SWZ103"]
