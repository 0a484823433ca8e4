"""One FileContext per file: every stage reads the file in its build's context (its -D and -I), whatever was
asked before, and nothing is kept between files."""

import ast
from pathlib import Path

import pytest

from swzc.verify import harness

from swzc.pipeline import driver as pipeline
from swzc.analysis.kernels import analyze
from swzc.analysis.context import FileContext
from swzc.verify.harness import Buffer, plan_launch
from swzc.target.hw import load as load_hw
from swzc.frontend.preprocess import CompileContext
from swzc.frontend.source import load_bytes

ROOT = Path(__file__).resolve().parent.parent

# The output's size follows STRIDE, which the build's -DLARGE chooses; `m` is a scalar a --set may bind.
SIZED = """\
#ifdef LARGE
#define STRIDE 4
#else
#define STRIDE 1
#endif
__global__ void scale(float* out, const float* in, int m) {
  int i = blockIdx.x * 256 + threadIdx.x;
  out[i * STRIDE] = in[i] * m;
}
int main() {
  float *out, *in;
  scale<<<16, 256>>>(out, in, 3);
}
"""

# A 2-D grid the built-in orders fit, sized the same way.
SIZED_2D = """\
#ifdef LARGE
#define N 1024
#else
#define N 64
#endif
__global__ void add(float* c, const float* a, const float* b) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  c[row * N + col] = a[row * N + col] + b[col * N + row];
}
int main() {
  float *a, *b, *c;
  add<<<dim3(N / 16, N / 16), dim3(16, 16)>>>(c, a, b);
}
"""

LARGE = CompileContext(defines=(("LARGE", "1"),))


def _counts(plan) -> dict[str, int]:
    return {p.name: p.count for p in plan.params if isinstance(p, Buffer)}


@pytest.mark.parametrize("bindings", [{}, {"m": 3}])
def test_the_harness_plans_the_build_s_branch_with_or_without_a_set(tmp_path, bindings):
    """With -DLARGE the plan sizes the buffers from the LARGE branch, --set m=3 or not (the plan once took
    the #else branch when a --set made the analysis's cached scope miss)."""
    path = tmp_path / "k.cu"
    path.write_text(SIZED)
    ctx, analysis = pipeline.analyze_file(str(path), bindings, LARGE)
    plan = plan_launch(ctx, analysis.kernels[0])
    assert _counts(plan) == {"out": 16384, "in": 4096}


def test_without_the_define_the_other_branch_is_planned(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(SIZED)
    ctx, analysis = pipeline.analyze_file(str(path), {"m": 3})
    plan = plan_launch(ctx, analysis.kernels[0])
    assert _counts(plan) == {"out": 4096, "in": 4096}


def test_a_result_does_not_depend_on_what_was_asked_before():
    """The same file in two contexts, asked in either order, gives each context's own answer."""
    src = load_bytes("k.cu", SIZED.encode())
    answers = []
    for order in ((LARGE, CompileContext()), (CompileContext(), LARGE)):
        got = {}
        for build in order:
            ctx = FileContext(src, build)
            got[build] = _counts(plan_launch(ctx, analyze(ctx, {"m": 3}).kernels[0]))["out"]
        answers.append(got)
    assert answers[0] == answers[1] == {LARGE: 16384, CompileContext(): 4096}


def test_the_benchmark_builds_the_variants_with_the_build_s_flags(tmp_path, monkeypatch):
    """The harness compiles both variants with the include folders and defines the analysis and the compile
    check used (a stand-in nvcc logs its arguments and fails, so nothing runs)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "calls"
    nvcc = folder / "nvcc"
    nvcc.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\necho "stand-in" >&2\nexit 1\n')
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    src = load_bytes(str(tmp_path / "k.cu"), SIZED.encode())
    ctx = FileContext(src, LARGE)
    plan = plan_launch(ctx, analyze(ctx).kernels[0])
    with pytest.raises(Exception):
        harness.build(src.path, src.data, src.data, plan, "sm_90", 0, str(tmp_path), tmp_path / "out",
                      flags=(*LARGE.compile_flags(), "-lineinfo"))
    variants = [line for line in log.read_text().splitlines() if "-shared" in line]
    assert len(variants) == 2 and all("-DLARGE -lineinfo" in line for line in variants)


def test_the_acceptance_loop_hands_the_build_s_flags_to_the_benchmark(tmp_path, monkeypatch):
    seen = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            seen.append(kwargs.get("flags"))
            raise pipeline.SwzcError("no GPU in this test")

    monkeypatch.setattr(pipeline, "Bencher", Recorder)
    path = tmp_path / "k.cu"
    path.write_text(SIZED_2D)
    options = pipeline.Options(hw=load_hw("h200"), compile=False, bench=True, context=LARGE, compile_flags=("-lineinfo",),
                               swizzle=pipeline.parse_swizzle("grouped:2"))
    pipeline.rewrite_file(str(path), options)
    assert seen == [("-DLARGE", "-lineinfo")]


def _module_level_containers(path: Path) -> list[str]:
    """Names bound at a module's top level to a mutable container (a dict, list or set display or call)."""
    found = []
    for node in ast.parse(path.read_text()).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("dict", "list", "set"))
        if mutable:
            targets = [t for t in targets if not (isinstance(t, ast.Name) and t.id == "__all__")]
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(t)}" for t in targets]
    return found


def test_no_module_keeps_a_cache_of_files():
    """Per-file facts live in the file's context.  A module-level dict, list or set is a table written once
    (its name in capitals, never assigned into); none is a cache that an earlier call fills."""
    modules = sorted((ROOT / "swzc").rglob("*.py")) + sorted((ROOT / "passes").rglob("*.py"))
    containers = [c for m in modules for c in _module_level_containers(m)]
    assert containers, "the scan finds the module-level tables"
    lowercase = [c for c in containers if not c.rsplit(": ", 1)[1].lstrip("_").isupper()]
    assert not lowercase, lowercase
    for module in modules:
        tree = ast.parse(module.read_text())
        tables = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                  for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            written = None
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                for target in (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]):
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        written = target.value.id
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                    and node.func.attr in ("append", "extend", "clear", "update", "setdefault", "pop", "add", "insert", "remove"):
                written = node.func.value.id
            if written is not None and written in tables and written.lstrip("_").isupper():
                pytest.fail(f"{module.relative_to(ROOT)}:{node.lineno}: module-level {written} is written after import")


# The functions swzc memoizes, each a function of its arguments and the installed package alone: what they give
# never depends on the file in hand or on an earlier call.  A new one is added here with its reason, once it
# is shown to be such a function.
MEMOIZED = {
    "swzc/frontend/queries.py:_query": "a query of the installed grammars, compiled once",
    "swzc/frontend/source.py:_parser": "the parser, which keeps nothing from one parse to the next",
    "swzc/frontend/evaluate.py:expression_of": "the parse of an expression's text, a function of the text",
    "swzc/formulas/prove.py:_private_folder": "this process's own folder for provers",
    "swzc/formulas/prove.py:build_prover": "a prover built from exactly these formulas' C++ text",
}


def test_every_memoized_function_is_one_of_the_known_pure_ones():
    found = {}
    for module in sorted((ROOT / "swzc").rglob("*.py")) + sorted((ROOT / "passes").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    name = ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
                    if name.rsplit(".", 1)[-1] in ("cache", "lru_cache", "cached_property"):
                        if name.rsplit(".", 1)[-1] != "cached_property":  # per object, not per module
                            found[f"{module.relative_to(ROOT)}:{node.name}"] = name
    assert set(found) == set(MEMOIZED), sorted(set(found) ^ set(MEMOIZED))
