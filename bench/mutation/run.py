"""Mutation testing of swzc's safety-critical code: do the tests notice when it breaks?

    .venv/bin/python bench/mutation/run.py                      # every module; writes bench/results/mutation.{md,json}
    .venv/bin/python bench/mutation/run.py --module prove --module edits --max-mutants 50
    .venv/bin/python bench/mutation/run.py --list --module hazards   # the mutants, without running them

Each mutant is one small change to one module (a comparison turned round, `and` for `or`, a `not` dropped, a
condition negated, an `if` body or a statement deleted, a `return` of None, a constant changed, a status
string misspelt; for the C++ harness header, a set of hand-written changes), made in a private copy of the
repository, never in the working tree.  A mutant is *killed* when a test fails with it (a test run past its
time limit counts as killed, and is reported as timed out), and *survives* when every test passes.

Which tests run: a coverage pass first records, for every test of the suite, the lines of the mutated code
it runs, in the test process and in the Python processes it starts (the console script).  A mutant then
runs the tests that reach its line, fastest first, stopping at the first failure (`-x`); a mutant of
module-level code runs every test that reaches its module.  A mutant no test reaches survives without a
run.  Survivors that cannot change behaviour are explained in bench/mutation/equivalent.toml and counted
apart; the score is (killed + timed out) / (mutants - equivalent).

Each worker (two at most) has its own copy of the repository and runs pytest with HOME, TMPDIR and
XDG_CACHE_HOME in fresh private folders.  Tests that write to system paths are left out of the runs
(EXCLUDED_TESTS).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RESULTS = ROOT / "bench" / "results"
EXPLAINED = HERE / "equivalent.toml"

# Tests aimed at system paths (/dev/..., /missing/...).  None of them exercises a mutated module, and a mutant
# that disabled a guard could make them write there: they never run under a mutant.
EXCLUDED_TESTS = (
    "tests/test_safety.py::test_output_onto_a_device_or_fifo_is_refused",
    "tests/test_safety.py::test_a_failed_output_leaves_the_other_outputs_unwritten",
    "tests/test_safety.py::test_outputs_are_checked_before_any_work",
    "tests/test_safety.py::test_dev_zero_as_input_is_refused_at_once",
    "tests/test_safety.py::test_the_limit_holds_for_a_file_that_says_it_is_empty",
)

# ---- what is mutated ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """Part of a function: the lines from the one holding `first` to the end of the statement holding `last`."""

    function: str
    first: str
    last: str


@dataclass(frozen=True)
class TextMutant:
    """A hand-written mutant: `old` (found exactly once in the file) replaced by `new`."""

    name: str  # what it breaks, in words
    old: str
    new: str
    tests: tuple[str, ...] = ()  # node-id prefixes to run; empty: the tests that reach the changed lines


@dataclass(frozen=True)
class Target:
    name: str
    path: str  # relative to the repository
    group: str  # how the results are summed up (the list)
    tests: tuple[str, ...]  # where its tests are (files, folders, node ids); a mutant runs those that reach its line
    functions: tuple[str, ...] | None = None  # None: the whole file
    regions: tuple[Region, ...] = ()
    constants: tuple[str, ...] = ()  # module-level assignments mutated too, by the name they assign
    text_mutants: tuple[TextMutant, ...] = ()  # the only mutants of a non-Python file
    named: tuple[TextMutant, ...] = ()  # hand-written mutants of a Python file, on top of the generated ones


ALL_TESTS = ("tests/",)  # narrowed per mutant to the tests that run its line
HOST_TESTS = ("tests/test_harness_host.py", "tests/test_bench.py::test_generated_harness_compiles",
              "tests/test_bench.py::test_hip_harness_builds_with_nvcc_through_the_compat_header")

TARGETS = (
    Target("prove", "swzc/formulas/prove.py", "prove", ALL_TESTS,
           named=(TextMutant("the pipeline ignores a failed proof (prover answers always 'ok')",
                             "if not a.startswith(\"ok\"))", "if False)"),)),
    Target("pipeline", "swzc/pipeline/driver.py", "pipeline", ALL_TESTS,
           named=(TextMutant("the pipeline ignores a failed proof", "            if not proof.ok:\n",
                             "            if False:\n"),
                  TextMutant("a compile failure is ignored", "        if report.status == \"failed\":\n",
                             "        if False:\n"))),
    Target("edits", "swzc/rewrite/edits.py", "edits", ALL_TESTS),
    Target("patch", "swzc/rewrite/patch.py", "patch", ALL_TESTS),
    Target("compile", "swzc/target/compile.py", "compile", ALL_TESTS,
           named=(TextMutant("the compile check is always 'ok'",
                             "    code, cmd, detail = _compile(name, new, dialect, hw, flags, include_dir)\n",
                             "    code, cmd, detail = _compile(name, new, dialect, hw, flags, include_dir)\n"
                             "    if cmd is not None:\n        return CompileReport(\"ok\", shlex.join(cmd))\n"),)),
    # the hazard detectors (analysis/hazards.py), each kernel's hazard collection (analysis/kernels.py) and the
    # hazards of block-index readers the rewrite cannot follow (analysis/calls.py)
    Target("hazards", "swzc/analysis/hazards.py", "hazard detection", ALL_TESTS,
           functions=("_hazards", "_spins", "_volatile_names", "_block_macros", "_syntax_hazards", "_kernels_in_errors"),
           named=(TextMutant("a volatile busy-wait is not detected (a volatile in the condition)",
                             "    if \"volatile\" in cond_text:\n        return True\n", ""),
                  TextMutant("a volatile busy-wait is not detected (no volatile names)",
                             "    names = set()\n    todo = [root]\n", "    names = set()\n    todo = []\n"))),
    Target("kernel_hazards", "swzc/analysis/kernels.py", "hazard detection", ALL_TESTS,
           functions=("_kernel_hazards",),
           regions=(Region("_kernel", "hazards += [effect] if effect", "hazards += [effect] if effect"),
                    Region("_kernel", "hazards += tiles.hazards", "hazards += tiles.hazards"),
                    Region("_kernel", 'if "Cooperative" in site.launch.api', '"cooperative-launch"'),
                    Region("analyze", "records += [replace(r, hazards", "pre.inactive)]")),
           named=(TextMutant("hazards inside helpers are ignored",
                             "            hazards += _hazards(src, h, hfunc.child_by_field_name(\"body\"), file.block_macros, "
                             "file.volatile | _volatile_names(hfunc, True))\n",
                             "            pass\n"),
                  TextMutant("a cooperative launch is not detected", "        if \"Cooperative\" in site.launch.api:\n",
                             "        if False:\n"))),
    Target("call_hazards", "swzc/analysis/calls.py", "hazard detection", ALL_TESTS,
           functions=("unseen_reader_hazards", "external_helper_hazards")),
    Target("tileloop", "swzc/analysis/tileloop.py", "hazard detection", ALL_TESTS,
           functions=("find", "_hazards", "_varies", "_is_index_x_or_thread", "_skipped_by_some_blocks", "_past_last_tile",
                      "_leaves", "_in_lambda", "_combines", "_index_type")),
    Target("splice_safety", "swzc/analysis/splice_safety.py", "hazard detection", ALL_TESTS),
    Target("block_swizzle", "passes/block_swizzle.py", "hazard detection", ALL_TESTS,
           functions=("refusal", "settle"),
           named=(TextMutant("the helper consistency rule (settle) is disabled",
                             "    kept = dict(proposals)\n    refused: list[Decision] = []\n",
                             "    return dict(proposals), []\n    kept = dict(proposals)\n    refused: list[Decision] = []\n"),)),
    Target("pass_registry", "passes/__init__.py", "hazard detection", ALL_TESTS, functions=("for_kernel", "run")),
    Target("pass_base", "passes/base.py", "hazard detection", ALL_TESTS, functions=("variable_name",),
           named=(TextMutant("the swzc_block name-collision guard is off", "    while name in analysis.identifiers:\n",
                             "    while False:\n"),)),
    Target("block_index", "passes/block_index.py", "hazard detection", ALL_TESTS),
    Target("tile_loop_pass", "passes/tile_loop.py", "hazard detection", ALL_TESTS),
    # sizes set at run time: the sweep and its choice (model/sweep.py), and the loop's rule over several sizes
    Target("sweep", "swzc/model/sweep.py", "sizes", ALL_TESTS,
           functions=("rank_over_sizes", "pays", "crossovers", "_choose", "_gated", "measured_sizes", "rank_over_launches",
                      "_block", "_bindable", "data_bytes")),
    Target("sized_loop", "swzc/verify/bench.py", "sizes", ALL_TESTS, functions=("_combined", "_sized_attempt", "size_table")),
    Target("harness", "swzc/verify/harness.py", "harness comparison", ALL_TESTS,
           functions=("harness_source", "fill_parts", "_buffer_shape", "run_harness", "_json_lines")),
    Target("harness_host", "swzc/native/harness_host.h", "harness comparison", HOST_TESTS, text_mutants=(
        TextMutant("the byte comparison always passes", "    if (a[i] != b[i]) { *at = i; return false; }\n", ""),
        TextMutant("the byte comparison misses the last byte (loop bound off by one)", "for (size_t i = 0; i < n; ++i)\n",
                   "for (size_t i = 0; i + 1 < n; ++i)\n"),
        TextMutant("buffers of different sizes compare equal", "  if (a.size() != b.size()) { *at = n; return false; }\n", ""),
        TextMutant("the poisoning is skipped", "  for (size_t i = 0; i < image.size(); ++i) image[i] = 0xff;\n", ""),
        TextMutant("the poison is zero bytes", "image[i] = 0xff;", "image[i] = 0x00;"),
        TextMutant("outputs are not poisoned before a run", "          poison(image);\n", ""),
        TextMutant("the tolerance test is inverted", "std::fabs(x - y) <= tol * scale", "std::fabs(x - y) > tol * scale"),
        TextMutant("NaN and infinity pass the tolerance", "std::isfinite(x) && std::isfinite(y) && ", ""),
        TextMutant("the tolerance comparison misses the last element", "i + width <= a.size()", "i + width < a.size()"),
        TextMutant("the tolerance ignores its scale", "tol * scale", "tol"),
        TextMutant("a tolerance of zero is not bit for bit", "if (tol <= 0.0 || !is_float(kind))", "if (!is_float(kind))"),
        TextMutant("integers are compared with the tolerance", "if (tol <= 0.0 || !is_float(kind))", "if (tol <= 0.0)"),
        TextMutant("one seed only", "seed <= 2", "seed <= 1"),
        TextMutant("the fill is not seeded", "Rng rng((uint64_t)seed * 1000003ull + index);", "Rng rng(1000003ull + index);"),
        TextMutant("every buffer gets the same fill", "Rng rng((uint64_t)seed * 1000003ull + index);",
                   "Rng rng((uint64_t)seed * 1000003ull);"),
        TextMutant("variant B is never launched", "      device.launch(v);\n", "      device.launch(0);\n"),
        TextMutant("A is compared with itself", "within(results[0][i], results[1][i]", "within(results[0][i], results[0][i]"),
        TextMutant("inout buffers are not compared", "if (buffers[i].role == IN) continue;", "if (buffers[i].role != OUT) continue;"),
        TextMutant("a mismatch does not fail the check", "        ok = false;\n", ""),
        TextMutant("the verdict is always true", "ok ? \"true\" : \"false\"", "\"true\""),
        TextMutant("the mismatch names the wrong element", "at, at / width);", "at, at);"),
        TextMutant("inputs are uploaded unfilled", "if (buffers[i].role != OUT) inputs[i] = fill(buffers[i], seed, i);",
                   "if (buffers[i].role != OUT) inputs[i] = std::vector<unsigned char>(buffers[i].bytes());"),
        TextMutant("uniform floats are not centred", "store(buf.kind, rng.unit() * 2.0 - 1.0, at)", "store(buf.kind, rng.unit(), at)"),
        TextMutant("fills are not saturated", "return (bits > max_bits ? max_bits : bits) | sign;", "return bits | sign;"),
        TextMutant("integer fills are not clamped", "(v < lo ? lo : (v > hi ? hi : v))", "v"),
    )),
    Target("sandbox", "swzc/native/sandbox.cpp", "prove", ("tests/test_sandbox.py",), text_mutants=(
        TextMutant("the seccomp filter is not installed (but said to be)", "&& install_seccomp(fd))", "&& true)"),
        TextMutant("the seccomp filter allows every call", "s.init(SCMP_ACT_KILL_PROCESS)", "s.init(SCMP_ACT_ALLOW)"),
        TextMutant("the seccomp filter allows execve", '"statx", "sysinfo",\n', '"statx", "sysinfo", "execve",\n'),
        TextMutant("the seccomp filter allows a new process", '"statx", "sysinfo",\n',
                   '"statx", "sysinfo", "fork", "vfork", "clone", "clone3",\n'),
        TextMutant("the seccomp filter allows sockets", '"statx", "sysinfo",\n',
                   '"statx", "sysinfo", "socket", "connect",\n'),
        TextMutant("files may be opened to write (the access mode is not checked)",
                   "const scmp_datum_t writes = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND;",
                   "const scmp_datum_t writes = O_CREAT | O_TRUNC | O_APPEND;"),
        TextMutant("ioctl is allowed with any request", 's.resolve("ioctl"), 1, &tcgets)', 's.resolve("ioctl"), 0, nullptr)'),
        TextMutant("execveat is allowed of any program", 's.resolve("execveat"), 1, &the_program)',
                   's.resolve("execveat"), 0, nullptr)'),
        TextMutant("no rlimits are set (but said to be)", "&& set_limits(memory, cpu))", "&& true)"),
        TextMutant("no memory limit", "{RLIMIT_AS, memory}", "{RLIMIT_AS, RLIM_INFINITY}"),
        TextMutant("no CPU-time limit", "{RLIMIT_CPU, cpu}", "{RLIMIT_CPU, RLIM_INFINITY}"),
        TextMutant("no file-size limit", "{RLIMIT_FSIZE, 0}", "{RLIMIT_FSIZE, RLIM_INFINITY}"),
        TextMutant("no unshare (but said to be)", "&& enter_namespaces())", "&& true)"),
        TextMutant("a user namespace without a network namespace", "unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0",
                   "unshare(CLONE_NEWUSER) == 0"),
        TextMutant("the program gets the launcher's environment", "argv + 4, no_environment,", "argv + 4, environ,"),
    )),
    # the safe subset, in the modules it is split into (swzc/search/llm/restrict*.py)
    Target("restrict", "swzc/search/llm/restrict.py", "safe subset", ALL_TESTS, named=(
        TextMutant("the renamed text is not parsed again", "    if not _reads_as_checked(function_body, source,",
                   "    if False and _reads_as_checked(function_body, source,"),
    )),
    Target("restrict_text", "swzc/search/llm/restrict_text.py", "safe subset", ALL_TESTS, named=(
        TextMutant("trigraphs pass the text check", r'(re.compile(r"\?\?"), "?? is not allowed', r'(re.compile(r"(?!)"), "?? is not allowed'),
        TextMutant("digraphs pass the text check", 're.compile(r"<:|:>|<%|%>|%:")', 're.compile(r"(?!)")'),
        TextMutant("backslash-newline continuations pass the text check", r'(re.compile(r"\\$"), "backslash-newline',
                   r'(re.compile(r"(?!)"), "backslash-newline'),
        TextMutant("a preprocessor directive passes the text check", 're.compile(r"^[ \\t]*#")', 're.compile(r"(?!)")'),
        TextMutant("characters outside printable ASCII pass the text check", 're.compile(r"[^\\x00-\\x7f]")',
                   're.compile(r"(?!)")'),
        TextMutant("control characters pass the text check", r're.compile(r"[\x01-\x08\x0b-\x1f\x7f]")',
                   're.compile(r"(?!)")'),
    )),
    Target("restrict_tree", "swzc/search/llm/restrict_tree.py", "safe subset", ALL_TESTS, named=(
        TextMutant("the whitelist's backstop is off (an unvisited node passes)", "            self._nothing_else(body)\n",
                   "            pass\n"),
        TextMutant("a call of any name passes", "name not in _CALLEES:", "name not in _CALLEES and False:"),
        TextMutant("loops are not counted (any header passes)", "        trips = _trips(value, kind, condition, step)\n",
                   "        trips = 1\n"),
    )),
    Target("restrict_words", "swzc/search/llm/restrict_words.py", "safe subset", ALL_TESTS, named=(
        TextMutant("an unknown token passes the backstop", '"( ) { } ; , . ? : ++ -- if else for return break continue const unsigned long int"',
                   '"( ) { } ; , . ? : ++ -- if else for return break continue const unsigned long int constexpr and or not"'),
    )),
    Target("restrict_numbers", "swzc/search/llm/restrict_numbers.py", "safe subset", ALL_TESTS),
    Target("restrict_violation", "swzc/search/llm/restrict_violation.py", "safe subset", ALL_TESTS),
    Target("config", "swzc/pipeline/config.py", "allow-lists", ALL_TESTS, named=(
        TextMutant("a project may choose the proposer, the LLM server and the model",
                   'PROJECT_KEYS = frozenset({"hw",', 'PROJECT_KEYS = frozenset({"proposer", "base-url", "model", "hw",'),
        TextMutant("a project may ask to run a benchmark command", '"launch-spec", "compile-flag"})',
                   '"launch-spec", "compile-flag", "bench-cmd"})'),
        TextMutant("a project's compile flags are not checked", 'if name == "compile-flag" and allowed is PROJECT_KEYS:',
                   "if False:"),
        TextMutant("a compile flag need only begin with an allowed form", "p.fullmatch(flag)", "p.match(flag)"),
        TextMutant("-I may name a folder starting with a dash (-I-, -I-ccbin)", r'r"-I[^-\s][^\s]*"', r'r"-I[^\s]*"'),
        TextMutant("-I may hold spaces (-I/x -ccbin /y)", r'r"-I[^-\s][^\s]*"', r'r"-I[^-\s].*"'),
        TextMutant("a -D value may hold shell characters", r'(=[A-Za-z0-9_.+\-*/()]*)?', r'(=[^\s]*)?'),
        TextMutant("a compile flag that is not a string reaches the pattern", "not isinstance(flag, str) or ", ""),
        TextMutant("the user's file may be another user's", "info.st_uid != os.geteuid() or ", ""),
        TextMutant("the user's file may be writable by others", " or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):", ":"),
        TextMutant("the search for the project's file goes past the work tree", '        if (candidate / ".git").exists():\n',
                   "        if False:\n"),
    )),
    Target("processes", "swzc/core/processes.py", "allow-lists", ALL_TESTS, functions=("check_arguments",),
           constants=("_SHELL_SPECIAL", "REREAD_BY_A_SHELL"), named=(
        TextMutant("nvcc's arguments are not checked", 'frozenset({"nvcc", "hipcc",', 'frozenset({"hipcc",'),
        TextMutant("hipcc's arguments are not checked", '{"nvcc", "hipcc", "hipcc.pl",', '{"nvcc", "hipcc.pl",'),
        TextMutant("the driver is looked up by its path, not its name (/usr/local/cuda/bin/nvcc is not checked)",
                   "os.path.basename(command[0]) not in REREAD_BY_A_SHELL", "command[0] not in REREAD_BY_A_SHELL"),
        TextMutant("$ passes the check", r"""re.compile(r'[$`"\\""", r"""re.compile(r'[`"\\"""),
        TextMutant("a backquote passes the check", r"""re.compile(r'[$`"\\""", r"""re.compile(r'[$"\\"""),
        TextMutant("a double quote passes the check", r"""re.compile(r'[$`"\\""", r"""re.compile(r'[$`\\"""),
        TextMutant("a backslash passes the check", r"""re.compile(r'[$`"\\\x00""", r"""re.compile(r'[$`"\x00"""),
        TextMutant("control characters pass the check", r"\x00-\x1f\x7f]')", r"\x7f]')"),
        TextMutant("only an argument's first character is checked", "_SHELL_SPECIAL.search(argument)",
                   "_SHELL_SPECIAL.match(argument)"),
    )),
)

GROUPS = ("prove", "pipeline", "edits", "patch", "compile", "hazard detection", "sizes", "harness comparison", "safe subset",
          "allow-lists")

# ---- the mutants ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    id: str
    target: str
    path: str
    function: str  # the enclosing function (Class.method), or <module>
    line: int
    operator: str
    description: str
    start: int  # byte range of the original file that is replaced
    end: int
    replacement: bytes
    cover: tuple[int, int]  # lines whose execution means a test reaches the mutant
    module_level: bool = False  # evaluated at import (a constant, a default): any test of the module reaches it
    named: str = ""
    tests: tuple[str, ...] = ()


_FLIP_COMPARE = {ast.Eq: "!=", ast.NotEq: "==", ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.In: "not in",
                 ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is"}
_COMPARE_TOKEN = {ast.Eq: r"==", ast.NotEq: r"!=", ast.Lt: r"(?<!<)<(?![<=])", ast.LtE: r"<=", ast.Gt: r"(?<![->])>(?![>=])",
                  ast.GtE: r">=", ast.In: r"\bin\b", ast.NotIn: r"\bnot\s+in\b", ast.Is: r"\bis\b", ast.IsNot: r"\bis\s+not\b"}
_BINOP = {ast.Add: (r"(?<![+*/%<>=!-])\+(?!=)", "-"), ast.Sub: (r"(?<![+*/%<>=!-])-(?![=>])", "+"),
          ast.Mult: (r"(?<!\*)\*(?![*=])", "//"), ast.FloorDiv: (r"//(?!=)", "*"), ast.Mod: (r"%(?!=)", "//"),
          ast.LShift: (r"<<(?!=)", ">>"), ast.RShift: (r">>(?!=)", "<<"), ast.BitOr: (r"\|(?!=)", "&"), ast.BitAnd: (r"&(?!=)", "|")}
_AUG = {ast.Add: ("+=", "-="), ast.Sub: ("-=", "+="), ast.Mult: ("*=", "//=")}
_SWAP_CALLS = {"any": "all", "all": "any", "min": "max", "max": "min"}
_SHORT_STRING = re.compile(r"^[\w.:\-+/<>=!]{0,30}$")
_CODEC_CALLS = {"encode", "decode"}


class _Lines:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        for i, b in enumerate(data):
            if b == 0x0A:
                self.starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.data[a:b].decode()

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1


def _docstring(node: ast.AST) -> ast.AST | None:
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].value
    return None


class _Generator:
    """Walks one module's tree and yields mutants of the nodes inside the selected functions and regions."""

    def __init__(self, target: Target, data: bytes) -> None:
        self.target = target
        self.lines = _Lines(data)
        self.tree = ast.parse(data)
        self.out: list[Mutant] = []
        self.seen: dict[tuple[str, str, str, str], int] = {}
        self.regions = self._regions()

    def _regions(self) -> list[tuple[int, int]]:
        text = self.lines.data.decode().splitlines()
        spans = []
        for region in self.target.regions:
            fn = next(n for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef) and n.name == region.function)
            first = next(i + 1 for i in range(fn.lineno - 1, fn.end_lineno) if region.first in text[i])
            last = next(i + 1 for i in range(first - 1, fn.end_lineno) if region.last in text[i])
            end = max(s.end_lineno for s in ast.walk(fn) if isinstance(s, ast.stmt) and first <= s.lineno <= last)
            spans.append((first, end))
        return spans

    def run(self) -> list[Mutant]:
        self._body(self.tree.body, "<module>", selected=self.target.functions is None and not self.target.regions,
                   module_level=True)
        for named in self.target.named:
            mutant = _text_mutant(self.target, self.lines, named)
            first, last = mutant.cover
            in_function = any(n.lineno <= first and last <= n.end_lineno for n in ast.walk(self.tree)
                              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            # module-level text (a constant, a table) runs at import: every test that reaches the module reaches it
            self.out.append(mutant if in_function else replace(mutant, module_level=True))
        return self.out

    # -- traversal

    def _selected_here(self, node: ast.AST, selected: bool) -> bool:
        if selected:
            return True
        if not hasattr(node, "lineno"):
            return False
        return any(lo <= node.lineno and node.end_lineno <= hi for lo, hi in self.regions)

    def _body(self, body: list[ast.stmt], function: str, selected: bool, module_level: bool) -> None:
        assigned: set[str] = set()
        doc = None
        for index, stmt in enumerate(body):
            if index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                doc = stmt
                continue
            self._stmt(stmt, function, selected, module_level, assigned, last=index == len(body) - 1)
        del doc

    def _stmt(self, stmt: ast.stmt, function: str, selected: bool, module_level: bool, assigned: set[str], last: bool,
              sole: bool = False) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assert, ast.Global, ast.Nonlocal, ast.Pass)):
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = stmt.name if function == "<module>" else f"{function}.{stmt.name}"
            chosen = selected or (self.target.functions is not None and function == "<module>" and stmt.name in self.target.functions)
            if self.target.functions is not None and function != "<module>" and not selected:
                chosen = False
            for default in [*stmt.args.defaults, *[d for d in stmt.args.kw_defaults if d is not None]]:
                self._expr(default, stmt, function, chosen, module_level=True)
            self._body(stmt.body, inner, chosen, module_level=False)
            return
        if isinstance(stmt, ast.ClassDef):
            self._body(stmt.body, stmt.name if function == "<module>" else f"{function}.{stmt.name}", selected, module_level)
            return
        here = self._selected_here(stmt, selected) or self._constant(stmt, function)
        # statement-level operators
        if here:
            self._statement_mutants(stmt, function, module_level, assigned, last, sole)
        # expressions in this statement (not in nested bodies)
        for name, value in ast.iter_fields(stmt):
            if name in ("body", "orelse", "finalbody", "handlers", "cases"):
                continue
            if name in ("annotation", "returns", "type_comment"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.expr):
                    self._expr(child, stmt, function, here, module_level)
                elif isinstance(child, ast.withitem):
                    self._expr(child.context_expr, stmt, function, here, module_level)
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                for i, s in enumerate(inner):
                    self._stmt(s, function, selected, module_level, assigned, last=last and i == len(inner) - 1 and name != "finalbody",
                               sole=isinstance(stmt, ast.If) and name == "body" and len(inner) == 1)
        for handler in getattr(stmt, "handlers", []) or []:
            if handler.type is not None:
                self._expr(handler.type, stmt, function, self._selected_here(handler, selected), module_level)
            for i, s in enumerate(handler.body):
                self._stmt(s, function, selected, module_level, assigned, last=False)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        assigned.add(n.id)

    def _constant(self, stmt: ast.stmt, function: str) -> bool:
        """Whether `stmt` is a module-level assignment to one of the target's `constants`."""
        if function != "<module>" or not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return False
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return any(isinstance(t, ast.Name) and t.id in self.target.constants for t in targets)

    def _cover(self, stmt: ast.stmt) -> tuple[int, int]:
        for name in ("body",):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt) and not isinstance(stmt, ast.ClassDef):
                return stmt.lineno, max(stmt.lineno, inner[0].lineno - 1)
        return stmt.lineno, stmt.end_lineno

    def _statement_mutants(self, stmt: ast.stmt, function: str, module_level: bool, assigned: set[str], last: bool,
                           sole: bool) -> None:
        cover = self._cover(stmt)
        if isinstance(stmt, ast.If):
            if not _negation_exists(stmt.test):
                self._add(stmt.test, function, "negate-if", f"not ({self.lines.text(stmt.test)})", cover, module_level)
            first, end = stmt.body[0], stmt.body[-1]
            a, _ = self.lines.span(first)
            _, b = self.lines.span(end)
            self._add_span(a, b, stmt.lineno, function, "delete-if-body", "pass", cover, module_level,
                           shown=f"if {self.lines.text(stmt.test)}: <body deleted>")
            return
        if isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef, ast.Match)):
            return
        delete = False
        if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
            delete = True
        elif isinstance(stmt, (ast.AugAssign, ast.Raise, ast.Continue, ast.Break, ast.Delete)):
            delete = True
        elif isinstance(stmt, ast.Return) and not last:
            delete = True
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and not module_level:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            plain = all(isinstance(t, ast.Name) for t in targets)
            if not plain or all(isinstance(t, ast.Name) and t.id in assigned for t in targets):
                delete = stmt.value is not None
        if delete and not sole:  # the only statement of an if body: delete-if-body is the same mutant
            self._add(stmt, function, "delete-statement", "pass", cover, module_level)
        if isinstance(stmt, ast.Return) and stmt.value is not None and not (
                isinstance(stmt.value, ast.Constant) and stmt.value.value is None):
            if not (isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, bool)):
                self._add(stmt.value, function, "return-none", "None", cover, module_level)
        if isinstance(stmt, ast.AugAssign) and type(stmt.op) in _AUG:
            old, new = _AUG[type(stmt.op)]
            a, _ = self.lines.span(stmt.target)
            _, b = self.lines.span(stmt.value)
            seg = self.lines.data[a:b].decode()
            changed = seg.replace(old, new, 1)
            if changed != seg:
                self._add_span(a, b, stmt.lineno, function, "augmented-op", changed, cover, module_level, shown=changed)

    def _expr(self, node: ast.expr, stmt: ast.stmt, function: str, selected: bool, module_level: bool) -> None:
        cover = self._cover(stmt)
        for child, parent in _walk_with_parent(node):
            if isinstance(child, (ast.JoinedStr, ast.FormattedValue)) or not isinstance(child, ast.expr):
                continue
            if any(isinstance(p, ast.JoinedStr) for p in parent):
                continue
            if not self._selected_here(child, selected):
                continue
            self._expr_mutants(child, parent, function, cover, module_level)

    def _expr_mutants(self, node: ast.expr, parents: list[ast.AST], function: str, cover: tuple[int, int], module_level: bool) -> None:
        lines = self.lines
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                _, a = lines.span(operands[i])
                b, _ = lines.span(operands[i + 1])
                gap = lines.data[a:b].decode()
                new = re.sub(_COMPARE_TOKEN[type(op)], _FLIP_COMPARE[type(op)], gap, count=1)
                if new != gap:
                    self._add_span(a, b, node.lineno, function, "compare", new, cover, module_level,
                                   shown=f"{lines.text(node)}  ->  {_FLIP_COMPARE[type(op)]}")
        elif isinstance(node, ast.BoolOp):
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            a, b = lines.span(node)
            seg = lines.data[a:b].decode()
            pieces, at = [], a
            for value in node.values[1:]:
                start, _ = lines.span(value)
                prev_end = lines.span(node.values[node.values.index(value) - 1])[1]
                gap = lines.data[prev_end:start].decode()
                pieces.append((prev_end, start, re.sub(rf"\b{old}\b", new, gap, count=1)))
            text = bytearray(lines.data[a:b])
            for s, e, g in reversed(pieces):
                text[s - a : e - a] = g.encode()
            if text.decode() != seg:
                self._add_span(a, b, node.lineno, function, "and-or", text.decode(), cover, module_level,
                               shown=f"{seg}  ->  {old} becomes {new}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._add(node, function, "drop-not", f"({lines.text(node.operand)})", cover, module_level)
        elif isinstance(node, ast.IfExp) and not _negation_exists(node.test):
            self._add(node.test, function, "negate-ifexp", f"not ({lines.text(node.test)})", cover, module_level)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
            pattern, new = _BINOP[type(node.op)]
            _, a = lines.span(node.left)
            b, _ = lines.span(node.right)
            gap = lines.data[a:b].decode()
            changed = re.sub(pattern, new, gap, count=1)
            if changed != gap:
                self._add_span(a, b, node.lineno, function, "arithmetic", changed, cover, module_level,
                               shown=f"{lines.text(node)}  ->  {new}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _SWAP_CALLS:
            self._add(node.func, function, "swap-call", _SWAP_CALLS[node.func.id], cover, module_level)
        elif isinstance(node, ast.Constant):
            parent = parents[-1] if parents else None
            if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr in _CODEC_CALLS:
                return
            if isinstance(parent, ast.keyword) and parent.arg in ("encoding", "errors"):
                return
            value = node.value
            if isinstance(value, bool):
                self._add(node, function, "constant", repr(not value), cover, module_level)
            elif isinstance(value, int):
                if _data_table(parents):
                    return
                for new in _numbers(value):
                    self._add(node, function, "constant", repr(new), cover, module_level)
            elif isinstance(value, float) and value in (0.0, 1.0):
                self._add(node, function, "constant", repr(1.0 - value), cover, module_level)
            elif isinstance(value, str) and _SHORT_STRING.match(value) and not _data_table(parents):
                self._add(node, function, "string", repr(value + "_X" if value else "_X"), cover, module_level)

    # -- recording

    def _add(self, node: ast.AST, function: str, operator: str, new: str, cover, module_level: bool) -> None:
        a, b = self.lines.span(node)
        self._add_span(a, b, node.lineno, function, operator, new, cover, module_level)

    def _add_span(self, a: int, b: int, line: int, function: str, operator: str, new: str, cover, module_level: bool,
                  shown: str = "") -> None:
        old = self.lines.data[a:b].decode()
        if old == new:
            return
        key = (function, operator, old, new)
        k = self.seen.get(key, 0)
        self.seen[key] = k + 1
        digest = hashlib.sha1(f"{old}\0{new}\0{k}".encode()).hexdigest()[:8]
        description = shown or f"{_short(old)}  ->  {_short(new)}"
        self.out.append(Mutant(f"{self.target.name}:{function}:{operator}:{digest}", self.target.name, self.target.path,
                               function, line, operator, _short(description, 160), a, b, new.encode(), cover, module_level))


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _numbers(value: int) -> list[int]:
    if value == 0:
        return [1]
    if value == 1:
        return [0, 2]
    if 2 <= value <= 16:
        return [value - 1, value + 1]
    return [value // 2]


def _negation_exists(test: ast.expr) -> bool:
    """Whether negating `test` would repeat another mutant: dropping its `not`, or turning its one comparison
    (==, !=, in, not in, is, is not) round."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
        test.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot))


def _data_table(parents: list[ast.AST]) -> bool:
    """A constant in a literal table of four or more constants (sample sides, names of pure functions): not
    mutated entry by entry."""
    parent = parents[-1] if parents else None
    return isinstance(parent, (ast.Tuple, ast.List, ast.Set)) and len(parent.elts) >= 4 and all(
        isinstance(e, ast.Constant) for e in parent.elts)


def _walk_with_parent(node: ast.AST, parents: list[ast.AST] | None = None):
    parents = parents or []
    yield node, parents
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.expr, ast.keyword, ast.comprehension, ast.arguments, ast.arg)):
            if isinstance(child, ast.Lambda):
                yield from _walk_with_parent(child, [*parents, node])
                continue
            yield from _walk_with_parent(child, [*parents, node])


def _text_mutant(target: Target, lines: _Lines, mutant: TextMutant) -> Mutant:
    data = lines.data
    old = mutant.old.encode()
    if data.count(old) != 1:
        raise SystemExit(f"{target.path}: the text of mutant {mutant.name!r} occurs {data.count(old)} times, not once")
    a = data.index(old)
    first, last = lines.line_of(a), lines.line_of(a + max(len(old) - 1, 0))
    digest = hashlib.sha1(f"{mutant.old}\0{mutant.new}".encode()).hexdigest()[:8]
    return Mutant(f"{target.name}:named:{digest}", target.name, target.path, "", first, "named", _short(mutant.name, 160),
                  a, a + len(old), mutant.new.encode(), (first, last), named=mutant.name, tests=mutant.tests)


def mutants_of(target: Target, root: Path = ROOT) -> list[Mutant]:
    data = (root / target.path).read_bytes()
    if target.text_mutants:
        lines = _Lines(data)
        return [_text_mutant(target, lines, m) for m in target.text_mutants]
    return _Generator(target, data).run()


def traced_ranges(target: Target, root: Path = ROOT) -> list[tuple[int, int]] | None:
    """The line ranges of a target's mutated functions (None: the whole file)."""
    if target.functions is None and not target.regions:
        return None
    tree = ast.parse((root / target.path).read_bytes())
    names = set(target.functions or ()) | {r.function for r in target.regions}
    return [(n.lineno, n.end_lineno) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]


# ---- private copies of the repository -----------------------------------------------------------------------

_SKIP = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", "*.egg-info", "build", "dist",
                               "wheels", "variants")


def make_copy(folder: Path, at: str | None = None) -> Path:
    """A copy of the repository (the working tree, or commit `at` with this driver) that imports its own swzc
    (PYTHONPATH and links for the folders the package maps in), so that a mutant changes only the copy."""
    repo = folder / "repo"
    if at is None:
        shutil.copytree(ROOT, repo, ignore=_SKIP, symlinks=True)
    else:
        repo.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", at], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(repo)], input=archive, check=True)
        shutil.rmtree(repo / "bench" / "mutation", ignore_errors=True)
        shutil.copytree(HERE, repo / "bench" / "mutation", ignore=_SKIP)
    for name in ("passes", "grammars", "hwmodels"):
        link = repo / "swzc" / name
        if not link.exists():
            link.symlink_to(Path("..") / name)
    return repo


class Sandbox:
    """One worker's copy and the private folders its test runs use."""

    def __init__(self, base: Path, index: int, drop: tuple[str, ...] = (), at: str | None = None) -> None:
        self.base = base / f"worker-{index}"
        self.base.mkdir(parents=True)
        self.repo = make_copy(self.base, at)
        for path in drop:
            (self.repo / path).unlink()

    def env(self, scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MUTATION_", "COV_", "SWZC_"))}
        env.pop("PYTHONPATH", None)
        for name in ("home", "tmp", "cache"):
            (scratch / name).mkdir(parents=True, exist_ok=True)
        env.update(HOME=str(scratch / "home"), TMPDIR=str(scratch / "tmp"), XDG_CACHE_HOME=str(scratch / "cache"),
                   PYTHONPATH=os.pathsep.join([str(self.repo), str(self.repo / "bench" / "mutation")]),
                   PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
        env.update(extra or {})
        return env

    def pytest(self, args: list[str], env: dict[str, str], timeout: float) -> tuple[str, int | None, str, float]:
        """('done', exit code, output tail, seconds) or ('timeout', None, tail, seconds)."""
        cmd = [_pytest(), "-p", "mutation_plugin", "-p", "no:cacheprovider", "-q", "--no-header", "-rfE", "--tb=line", *args]
        start = time.perf_counter()
        with subprocess.Popen(cmd, cwd=self.repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True) as proc:
            with _RUNNING_LOCK:
                _RUNNING.add(proc)
            try:
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                out, _ = proc.communicate()
                return "timeout", None, out.decode("utf-8", "replace")[-4000:], time.perf_counter() - start
            except BaseException:
                _kill_group(proc)
                raise
            finally:
                with _RUNNING_LOCK:
                    _RUNNING.discard(proc)
        _kill_group(proc)  # whatever the tests left running
        return "done", proc.returncode, out.decode("utf-8", "replace")[-4000:], time.perf_counter() - start


_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def _kill_running() -> None:
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


def _pytest() -> str:
    script = Path(sys.executable).with_name("pytest")
    return str(script) if script.is_file() else shutil.which("pytest") or "pytest"


# ---- the coverage pass ----------------------------------------------------------------------------------------


def _fingerprint(targets: tuple[Target, ...], drop: tuple[str, ...] = (), root: Path = ROOT) -> str:
    digest = hashlib.sha256(json.dumps(sorted(drop)).encode())
    files = sorted([*root.glob("swzc/**/*.py"), *root.glob("passes/*.py"), *root.glob("tests/**/*.py"),
                    *root.glob("tests/native/*"), *root.glob("swzc/native/*"), *root.glob("bench/mutation/*.py"), *root.glob("bench/mutation/child/*.py"),
                    *root.glob("fixtures/**/*"), root / "pyproject.toml"])
    for path in files:
        if path.is_file() and not path.is_symlink():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    digest.update(json.dumps([t.name for t in targets]).encode())
    return digest.hexdigest()[:16]


def coverage_pass(sandbox: Sandbox, targets: tuple[Target, ...], cache_dir: Path, log, drop: tuple[str, ...] = ()) -> dict:
    """{nodeid: {outcome, seconds, lines: {path in the repository: [line, ...]}}} for the tests the targets read."""
    key = _fingerprint(targets, drop, sandbox.repo)
    cached = cache_dir / f"coverage-{key}.json"
    if cached.is_file():
        log(f"coverage: reusing {cached}")
        return json.loads(cached.read_text())
    files = sorted({t.split("::")[0] for target in targets for t in target.tests if (ROOT / t.split("::")[0]).exists()})
    trace_files = {}
    for target in targets:
        if target.text_mutants:
            continue
        path = os.path.realpath(sandbox.repo / target.path)
        ranges = traced_ranges(target, sandbox.repo)
        trace_files[path] = None if ranges is None or path in trace_files and trace_files[path] is None else \
            [*(trace_files.get(path) or []), *ranges]
    scratch = sandbox.base / "coverage"
    children = scratch / "children"
    children.mkdir(parents=True, exist_ok=True)
    out = scratch / "trace.json"
    env = sandbox.env(scratch, {"MUTATION_TRACE_OUT": str(out), "MUTATION_TRACE_DIR": str(children),
                                "MUTATION_TRACE_FILES": json.dumps(trace_files)})
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(sandbox.repo / "bench" / "mutation" / "child")])
    log(f"coverage: tracing {len(files)} test files (one run of them, slower than usual)")
    status, code, tail, seconds = sandbox.pytest([*files, *_deselect_args()], env, timeout=3600)
    if not out.is_file():
        raise SystemExit(f"the coverage pass wrote nothing ({status}, exit {code}):\n{tail}")
    records = json.loads(out.read_text())
    for child in children.glob("child-*.json"):
        doc = json.loads(child.read_text())
        record = records.setdefault(doc["test"], {"outcome": "passed", "seconds": 0.0, "lines": {}})
        for path, numbers in doc["lines"].items():
            record["lines"][path] = sorted(set(record["lines"].get(path, [])) | set(numbers))
    repo = os.path.realpath(sandbox.repo)
    for record in records.values():
        record["lines"] = {os.path.relpath(p, repo): v for p, v in record["lines"].items() if p.startswith(repo + os.sep)}
    log(f"coverage: {len(records)} tests traced in {seconds:.0f} s")
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(records))
    return records


def baseline_pass(sandbox: Sandbox, coverage: dict, cache_dir: Path, log, drop: tuple[str, ...] = ()) -> dict[str, float]:
    """Every test the mutants may run, on the unchanged copy without tracing: their times (a failing test
    would kill every mutant, so the run stops)."""
    key = _fingerprint(TARGETS, drop, sandbox.repo)
    cached = cache_dir / f"baseline-{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    wanted = sorted(n for n, r in coverage.items() if r["outcome"] != "skipped")
    files = sorted({n.split("::")[0] for n in wanted})
    scratch = sandbox.base / "baseline"
    listing = scratch / "select.json"
    scratch.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps(wanted))
    env = sandbox.env(scratch, {"MUTATION_SELECT": str(listing)})
    log(f"baseline: {len(wanted)} tests on the unchanged copy")
    status, code, tail, seconds = sandbox.pytest([*files, *_deselect_args()], env,
                                                 timeout=3600)
    if status != "done" or code != 0:
        raise SystemExit(f"the tests fail on the unchanged copy ({status}, exit {code}); fix that first:\n{tail}")
    times = {n: coverage[n].get("seconds", 1.0) for n in wanted}
    cached.write_text(json.dumps(times))
    log(f"baseline: passed in {seconds:.0f} s")
    return times


def _deselect_args() -> list[str]:
    return [arg for nodeid in EXCLUDED_TESTS for arg in ("--deselect", nodeid)]


# ---- running the mutants --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, timeout, survived, uncovered, error
    tests_run: int = 0
    killed_by: str = ""
    seconds: float = 0.0
    detail: str = ""


PER_PATH = 2  # tests kept per distinct path through the mutated function, in the first round


def function_spans(root: Path = ROOT) -> dict[str, list[tuple[int, int]]]:
    """Every function's line span, per Python file of the targets."""
    spans = {}
    for target in TARGETS:
        if not target.text_mutants:
            tree = ast.parse((root / target.path).read_bytes())
            spans[target.path] = [(n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return spans


def tests_for(mutant: Mutant, target: Target, coverage: dict, times: dict[str, float],
              spans: dict[str, list[tuple[int, int]]]) -> tuple[list[str], list[str]]:
    """(the first round, every test that reaches the mutant), fastest first.  The first round keeps the
    PER_PATH fastest tests of each distinct set of lines they run in the mutated function (the module, for
    module-level code): tests that take the same path through it differ only in data."""

    def allowed(nodeid: str, prefixes: tuple[str, ...]) -> bool:
        return nodeid in times and not nodeid.startswith(EXCLUDED_TESTS) and any(
            nodeid == p or nodeid.startswith(p + "::") or nodeid.startswith(p + "[") or (p.endswith((".py", "/")) and nodeid.startswith(p))
            for p in prefixes)

    def fastest(nodeids) -> list[str]:
        return sorted(nodeids, key=lambda n: (times.get(n, 1.0), n))

    if mutant.tests or target.text_mutants:  # C++: the tests that compile it
        chosen = fastest(n for n in times if allowed(n, mutant.tests or target.tests))
        return chosen, chosen
    lo, hi = mutant.cover
    if mutant.module_level:  # run at import, which in the test process happens before any test
        chosen = fastest(n for n, r in coverage.items() if allowed(n, target.tests) and r["lines"].get(mutant.path))
        first, last = 1, 1 << 30
    else:
        chosen = fastest(n for n, r in coverage.items() if allowed(n, target.tests)
                         and any(lo <= line <= hi for line in r["lines"].get(mutant.path, ())))
        inside = [(a, b) for a, b in spans.get(mutant.path, ()) if a <= lo <= b]
        first, last = min(inside, key=lambda s: s[1] - s[0]) if inside else (lo, hi)
    kept: dict[tuple[int, ...], int] = {}
    round_one = []
    for nodeid in chosen:
        path = tuple(line for line in coverage[nodeid]["lines"].get(mutant.path, ()) if first <= line <= last)
        if kept.get(path, 0) < PER_PATH:
            kept[path] = kept.get(path, 0) + 1
            round_one.append(nodeid)
    return round_one, chosen


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def run_mutant(sandbox: Sandbox, mutant: Mutant, rounds: list[list[str]], times: dict[str, float], index: int) -> Outcome:
    """Run the rounds of tests in turn until one kills the mutant (a later round leaves out the tests run)."""
    if not rounds or not rounds[-1]:
        return Outcome(mutant, "uncovered", detail="no test reaches this line")
    path = sandbox.repo / mutant.path
    original = path.read_bytes()
    done: set[str] = set()
    total_seconds, run = 0.0, 0
    try:
        path.write_bytes(original[: mutant.start] + mutant.replacement + original[mutant.end :])
        for tests in rounds:
            tests = [n for n in tests if n not in done]
            if not tests:
                continue
            done.update(tests)
            run += len(tests)
            scratch = sandbox.base / f"m{index}"
            try:
                scratch.mkdir(parents=True)
                listing = scratch / "select.json"
                listing.write_text(json.dumps(tests))
                files = sorted({n.split("::")[0] for n in tests})
                limit = min(900.0, 30.0 + 3.0 * sum(times.get(n, 1.0) for n in tests))
                status, code, tail, seconds = sandbox.pytest([*files, "-x", *_deselect_args()],
                                                             sandbox.env(scratch, {"MUTATION_SELECT": str(listing)}), timeout=limit)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            total_seconds += seconds
            if status == "timeout":
                return Outcome(mutant, "timeout", run, seconds=total_seconds, detail=f"past the limit of {limit:.0f} s")
            if code in (1, 2):
                found = _FAILED.search(tail)
                return Outcome(mutant, "killed", run, found.group(1) if found else f"pytest exit {code}", total_seconds,
                               tail.strip().splitlines()[-1] if tail.strip() else "")
            if code not in (0, 5):
                return Outcome(mutant, "killed", run, f"pytest exit {code}", total_seconds, tail.strip()[-300:])
            if code == 5:
                return Outcome(mutant, "error", run, seconds=total_seconds, detail="no test collected")
    finally:
        path.write_bytes(original)
    return Outcome(mutant, "survived", run, seconds=total_seconds)


# ---- results --------------------------------------------------------------------------------------------------


def load_explained() -> dict[str, dict]:
    if not EXPLAINED.is_file():
        return {}
    return tomllib.loads(EXPLAINED.read_text(encoding="utf-8"))


def summarise(outcomes: list[Outcome], explained: dict[str, dict]) -> dict:
    rows = {}
    for target in TARGETS:
        mine = [o for o in outcomes if o.mutant.target == target.name]
        if mine:
            rows[target.name] = _counts(mine, explained) | {"group": target.group, "path": target.path}
    groups = {}
    for group in GROUPS:
        mine = [o for o in outcomes if next(t for t in TARGETS if t.name == o.mutant.target).group == group]
        if mine:
            groups[group] = _counts(mine, explained)
    return {"targets": rows, "groups": groups, "total": _counts(outcomes, explained)}


def _counts(outcomes: list[Outcome], explained: dict[str, dict]) -> dict:
    killed = sum(o.status == "killed" for o in outcomes)
    timeout = sum(o.status == "timeout" for o in outcomes)
    alive = [o for o in outcomes if o.status in ("survived", "uncovered", "error")]
    equivalent = sum(o.mutant.id in explained for o in alive)
    scored = len(outcomes) - equivalent
    return {"mutants": len(outcomes), "killed": killed, "timeout": timeout, "survived": len(alive) - equivalent,
            "equivalent": equivalent, "score": round(100.0 * (killed + timeout) / scored, 1) if scored else 100.0}


def write_results(outcomes: list[Outcome], explained: dict[str, dict], meta: dict, json_path: Path, md_path: Path) -> dict:
    summary = summarise(outcomes, explained)
    doc = {"meta": meta, "summary": summary, "mutants": [
        {"id": o.mutant.id, "target": o.mutant.target, "path": o.mutant.path, "line": o.mutant.line, "function": o.mutant.function,
         "operator": o.mutant.operator, "description": o.mutant.description, "status": o.status,
         "equivalent": o.mutant.id in explained and o.status in ("survived", "uncovered", "error"),
         "explanation": explained.get(o.mutant.id, {}).get("why", ""), "killed_by": o.killed_by, "tests_run": o.tests_run,
         "seconds": round(o.seconds, 2), "detail": o.detail, "named": o.mutant.named}
        for o in sorted(outcomes, key=lambda o: (o.mutant.path, o.mutant.line, o.mutant.id))]}
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    md_path.write_text(_markdown(doc))
    return summary


def _markdown(doc: dict) -> str:
    meta, summary = doc["meta"], doc["summary"]
    out = ["# Mutation testing of swzc's safety-critical code", "",
           f"Recorded {meta['date']} at commit {meta['commit']} on {meta['machine']}, {meta['workers']} worker(s), "
           f"wall time {meta['wall_s'] / 60:.1f} min.", "", "Command:", "", "```", meta["command"], "```", "",
           "How it works, and what the columns mean: bench/mutation/README.md.  Score = (killed + timed out) / "
           "(mutants − equivalent).", ""]
    if meta.get("covered") != "all mutants":
        out += [f"This run covered: {meta['covered']}.", ""]
    out += ["## Per group (the issue's list)", "", "| group | mutants | killed | timed out | survived | equivalent | score |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, c in summary["groups"].items():
        out.append(f"| {name} | {c['mutants']} | {c['killed']} | {c['timeout']} | {c['survived']} | {c['equivalent']} | {c['score']} % |")
    c = summary["total"]
    out.append(f"| **all** | {c['mutants']} | {c['killed']} | {c['timeout']} | {c['survived']} | {c['equivalent']} | **{c['score']} %** |")
    out += ["", "## Per module", "", "| module | file | mutants | killed | timed out | survived | equivalent | score |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, c in summary["targets"].items():
        out.append(f"| {name} | `{c['path']}` | {c['mutants']} | {c['killed']} | {c['timeout']} | {c['survived']} | "
                   f"{c['equivalent']} | {c['score']} % |")
    named = [m for m in doc["mutants"] if m["named"]]
    if named:
        out += ["", "## The named mutants", "", "| mutant | file:line | status | killed by |", "|---|---|---|---|"]
        for m in named:
            out.append(f"| {m['named']} | `{m['path']}:{m['line']}` | {m['status']} | `{m['killed_by'] or '-'}` |")
    alive = [m for m in doc["mutants"] if m["status"] in ("survived", "uncovered", "error")]
    equivalent = [m for m in alive if m["equivalent"]]
    unexplained = [m for m in alive if not m["equivalent"]]
    out += ["", f"## Surviving mutants ({len(alive)}: {len(equivalent)} equivalent, {len(unexplained)} not)", ""]
    if unexplained:
        out += ["Not explained (each is a gap in the tests):", "", "| id | file:line | mutant | status |", "|---|---|---|---|"]
        for m in unexplained:
            out.append(f"| `{m['id']}` | `{m['path']}:{m['line']}` | `{_cell(m['description'])}` | {m['status']} |")
        out.append("")
    if equivalent:
        out += ["Equivalent or accepted (why, from bench/mutation/equivalent.toml):", "", "| file:line | mutant | why |", "|---|---|---|"]
        for m in equivalent:
            out.append(f"| `{m['path']}:{m['line']}` | `{_cell(m['description'])}` | {_cell(m['explanation'])} |")
    timeouts = [m for m in doc["mutants"] if m["status"] == "timeout"]
    if timeouts:
        out += ["", f"## Timed out ({len(timeouts)}; counted as killed)", "", "| file:line | mutant |", "|---|---|"]
        for m in timeouts:
            out.append(f"| `{m['path']}:{m['line']}` | `{_cell(m['description'])}` |")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


# ---- the command ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", action="append", choices=[t.name for t in TARGETS], help="only these modules (repeatable)")
    parser.add_argument("--max-mutants", type=int, default=0, help="at most this many mutants per module (an even spread)")
    parser.add_argument("--only", action="append", default=[], help="only mutants whose id starts with this (repeatable)")
    parser.add_argument("--survivors-of", type=Path, help="only the mutants that survived in this earlier results file")
    parser.add_argument("--no-confirm", dest="confirm", action="store_false",
                        help="do not re-run a survivor with every test that reaches it (faster; survivors may be overcounted)")
    parser.add_argument("--every-test", action="store_true",
                        help="run every test that reaches a mutant at once (no first round of one test per path)")
    parser.add_argument("--at", help="mutate and test this commit (with this driver) instead of the working tree")
    parser.add_argument("--drop", action="append", default=[], help="leave this test file out of the copies (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="parallel workers (at most 2)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--json", type=Path, default=RESULTS / "mutation.json")
    parser.add_argument("--md", type=Path, default=RESULTS / "mutation.md")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "swzc-mutation-cache",
                        help="where the coverage pass is kept between runs (keyed by the sources and tests)")
    args = parser.parse_args(argv)
    targets = tuple(t for t in TARGETS if not args.module or t.name in args.module)

    def chosen_mutants(root: Path) -> list[Mutant]:
        mutants = [m for t in targets for m in _spread(mutants_of(t, root), args.max_mutants)]
        if args.only:
            mutants = [m for m in mutants if m.id.startswith(tuple(args.only))]
        if args.survivors_of:
            alive = {m["id"] for m in json.loads(args.survivors_of.read_text())["mutants"] if m["status"] in ("survived", "uncovered", "error")}
            mutants = [m for m in mutants if m.id in alive or m.named]
        return mutants

    if args.list:
        mutants = chosen_mutants(ROOT)
        for m in mutants:
            print(f"{m.id}\t{m.path}:{m.line}\t{m.description}")
        print(f"{len(mutants)} mutants", file=sys.stderr)
        return 0
    workers = max(1, min(2, args.workers))
    started = time.time()
    lock = threading.Lock()
    stop = threading.Event()

    def log(message: str) -> None:
        with lock:
            print(message, file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, _terminated)
    base = Path(tempfile.mkdtemp(prefix="swzc-mutation-"))
    os.chmod(base, 0o700)
    try:
        drop = tuple(args.drop)
        sandboxes = [Sandbox(base, i, drop, args.at) for i in range(workers)]
        mutants = chosen_mutants(sandboxes[0].repo)
        coverage = coverage_pass(sandboxes[0], TARGETS, args.cache, log, drop)
        failing = sorted(n for n, r in coverage.items() if r["outcome"] == "failed")
        if failing:
            log(f"coverage: {len(failing)} test(s) failed under tracing (their lines may be missing): {', '.join(failing[:5])}")
        times = baseline_pass(sandboxes[0], coverage, args.cache, log, drop)
        by_name = {t.name: t for t in TARGETS}
        spans = function_spans(sandboxes[0].repo)
        queue = []
        for i, m in enumerate(mutants):
            round_one, every = tests_for(m, by_name[m.target], coverage, times, spans)
            queue.append((i, m, [every] if args.every_test else [round_one, every] if args.confirm else [round_one]))
        log(f"{len(queue)} mutants, {workers} worker(s)")
        outcomes: list[Outcome] = []
        free = list(sandboxes)
        done = 0

        def work(item):
            index, mutant, rounds = item
            if stop.is_set():
                return None
            with lock:
                box = free.pop()
            try:
                return run_mutant(box, mutant, rounds, times, index)
            finally:
                with lock:
                    free.append(box)

        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(work, item) for item in queue]
            try:
                finished = concurrent.futures.as_completed(futures)
                for future in finished:
                    outcome = future.result()
                    if outcome is None:
                        continue
                    outcomes.append(outcome)
                    done += 1
                    m = outcome.mutant
                    log(f"[{done}/{len(queue)}] {outcome.status:9} {m.path}:{m.line} {m.description[:90]} "
                        f"({outcome.tests_run} tests, {outcome.seconds:.1f} s){' ' + outcome.killed_by if outcome.killed_by else ''}")
            except BaseException:
                stop.set()
                for future in futures:
                    future.cancel()
                _kill_running()
                raise
    finally:
        shutil.rmtree(base, ignore_errors=True)
    null_ok = stat.S_ISCHR(os.stat("/dev/null").st_mode)
    explained = load_explained()
    covered = "all mutants" if not args.module and not args.max_mutants and not args.only and not args.survivors_of else \
        f"modules {', '.join(t.name for t in targets)}" + (f", at most {args.max_mutants} mutants each" if args.max_mutants else "") \
        + (f", ids starting {', '.join(args.only)}" if args.only else "") \
        + (f", the survivors of {args.survivors_of}" if args.survivors_of else "")
    if args.drop:
        covered += f"; without the tests in {', '.join(args.drop)}"
    if args.at:
        covered += f"; at commit {args.at}"
    if not args.confirm:
        covered += "; survivors not re-run with every test that reaches them (the survivor counts are upper bounds)"
    meta = {"date": datetime.date.today().isoformat(), "commit": _commit(args.at or "HEAD"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "workers": workers, "wall_s": round(time.time() - started), "covered": covered,
            "command": " ".join([".venv/bin/python", "bench/mutation/run.py", *(argv if argv is not None else sys.argv[1:])]),
            "dev_null_is_a_character_device_after_the_run": null_ok}
    summary = write_results(outcomes, explained, meta, args.json, args.md)
    for name, c in summary["groups"].items():
        print(f"{name:20} {c['mutants']:5} mutants  {c['killed']:5} killed  {c['timeout']:3} timed out  "
              f"{c['survived']:4} survived  {c['equivalent']:3} equivalent  {c['score']:5.1f} %")
    c = summary["total"]
    print(f"{'all':20} {c['mutants']:5} mutants  {c['killed']:5} killed  {c['timeout']:3} timed out  "
          f"{c['survived']:4} survived  {c['equivalent']:3} equivalent  {c['score']:5.1f} %")
    print(f"/dev/null is {'still' if null_ok else 'NO LONGER'} a character device; wall time {meta['wall_s'] / 60:.1f} min")
    return 0 if null_ok else 1


def _terminated(signum, frame):
    raise KeyboardInterrupt  # unwinds: the running tests are killed and the copies removed


def _spread(mutants: list[Mutant], limit: int) -> list[Mutant]:
    if not limit or len(mutants) <= limit:
        return mutants
    named = [m for m in mutants if m.named]
    rest = [m for m in mutants if not m.named]
    step = len(rest) / max(1, limit - len(named))
    return named + [rest[int(i * step)] for i in range(max(0, limit - len(named)))]


def _commit(rev: str) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
