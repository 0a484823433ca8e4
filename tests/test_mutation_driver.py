"""bench/mutation/run.py makes the mutants it says it makes, each a one-place change that still parses."""

import ast
import importlib.util
import sys

import pytest
from support import ROOT

spec = importlib.util.spec_from_file_location("mutation_run", ROOT / "bench" / "mutation" / "run.py")
run = importlib.util.module_from_spec(spec)
sys.modules["mutation_run"] = run  # its dataclasses look themselves up there
spec.loader.exec_module(run)

MODULE = b'''"""A module."""
LIMIT = 1 << 4
TABLE = (1, 2, 3, 4)


def check(x, items):
    """Docstring."""
    if not x:
        return None
    if x > 3 and x in items:
        x += 1
    total = 0
    total = sum(items) - x
    raise ValueError("bad") if x == 2 else None
    return any(items) or total >= 0


def other(x):
    return x == "ok"
'''


def mutants(functions=None, named=()):
    target = run.Target("t", "t.py", "g", ("tests/",), functions=functions, named=named)
    return run._Generator(target, MODULE).run()


def applied(m) -> bytes:
    return MODULE[: m.start] + m.replacement + MODULE[m.end :]


def test_every_mutant_changes_one_place_and_still_parses():
    found = mutants()
    assert found and len({m.id for m in found}) == len(found)
    for m in found:
        assert applied(m) != MODULE
        ast.parse(applied(m))


def test_the_operators_and_what_is_left_alone():
    found = mutants()
    described = {(m.operator, m.function, m.description) for m in found}
    assert ("compare", "check", "x > 3 -> >=") in described
    assert ("compare", "check", "x in items -> not in") in described
    assert ("drop-not", "check", "not x -> (x)") in described
    assert ("swap-call", "check", "any -> all") in described
    assert ("augmented-op", "check", "x -= 1") in described
    assert ("string", "other", "\"ok\" -> 'ok_X'") in described
    assert ("constant", "<module>", "4 -> 3") in described and all(m.line != 3 for m in found)  # not the table
    assert ("delete-statement", "check", "total = sum(items) - x -> pass") in described  # a re-assignment
    assert not any(m.description.startswith("total = 0") for m in found)  # a first assignment
    assert not any("Docstring" in m.description or "A module" in m.description for m in found)
    assert not any(m.operator == "negate-if" and "not x" in m.description for m in found)  # the same as drop-not
    assert not any(m.operator == "delete-statement" and m.description.startswith("return None") for m in found)  # its if body


def test_only_the_functions_asked_for_are_mutated():
    assert {m.function for m in mutants(functions=("other",))} == {"other"}


def test_a_named_mutant_must_name_its_text_exactly_once():
    (named,) = [m for m in mutants(functions=("other",), named=(run.TextMutant("x", "x == \"ok\"", "True"),)) if m.named]
    assert applied(named).endswith(b"return True\n")
    with pytest.raises(SystemExit, match="occurs 0 times"):
        mutants(named=(run.TextMutant("missing", "no such text", ""),))
