"""Benchmark: input that nests deep or runs wide, at full size, through the command line.

    taskset -c 0 .venv/bin/python bench/deep_input.py            # prints a table, writes bench/results/deep_input.md
    taskset -c 0 .venv/bin/python bench/deep_input.py --compile  # 10,000 kernels also with nvcc (resources, check)

Each file is generated in a private temporary folder and each command runs `python -m swzc` in a child
process (the package the interpreter imports: PYTHONPATH chooses another build, to measure an older one).
A row gives the exit code, the wall time, and the CPU time of swzc itself and of what it ran (the prover,
nvcc): the CPU time does not grow when other work shares the core.  Targets (one core): 10,000 kernels in
60 s for `analyze` and for `rewrite` (dry run and -o); any grid in 5 s; a file nested past the limit
refused at once with exit 2 and its place; the others in time linear in their size.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "deep_input.md"
TIMEOUT_S = 600.0

GEMM = """\
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  OPEN C[row * n + col] = acc; CLOSE
}
"""
LAUNCH = "void run(const float* A, const float* B, float* C) { gemm<<<GRID, dim3(TILE, TILE)>>>(A, B, C, 4096); }\n"


def gemm(around: str = "", close: str = "", grid: str = "dim3(256, 256)") -> str:
    return "#define TILE 16\n" + GEMM.replace("OPEN", around).replace("CLOSE", close) + LAUNCH.replace("GRID", grid)


def kernels(n: int) -> str:
    """n copies of one kernel under distinct names, each launched with a grid the L2 model ranks."""
    one = GEMM.replace("OPEN ", "").replace(" CLOSE", "") + LAUNCH.replace("GRID", "dim3(256, 256)")
    return "#define TILE 16\n" + "".join(one.replace("gemm", f"gemm{i}").replace("void run(", f"void run{i}(") for i in range(n))


def helpers(n: int) -> str:
    """A kernel reading the block index through a chain of n helpers, defined callers first."""
    chain = "".join(f"static __device__ int h{i}(int v);\n" for i in range(n))
    chain += "".join(f"static __device__ int h{i}(int v) {{ return h{i + 1}(v); }}\n" for i in range(n - 1))
    chain += f"static __device__ int h{n - 1}(int v) {{ return blockIdx.y * 16 + v; }}\n"
    return chain + gemm().replace("blockIdx.y * TILE + threadIdx.y", "h0(threadIdx.y)")


CASES: list[tuple[str, Callable[[], str], tuple[tuple[str, ...], ...], float | None]] = [
    # (name, the file, commands (each after `swzc` and before the file), target in s)
    ("10,000 kernels", lambda: kernels(10_000), (("analyze", "--no-compile"), ("rewrite", "--no-compile"),
                                                  ("rewrite", "--no-compile", "-o", "{out}", "--patch", "{out}.patch")), 60.0),
    ("grid 2147483647 x 65535 x 65535", lambda: gemm(grid="dim3(2147483647, 65535, 65535)"),
     (("analyze", "--no-compile"), ("rewrite", "--no-compile"), ("rewrite", "--no-compile", "--swizzle", "grouped:8")), 5.0),
    ("10,000 nested if", lambda: gemm("if (n > 0) {\n" * 10_000, "}\n" * 10_000), (("analyze", "--no-compile"),), 5.0),
    ("5,000 nested namespaces", lambda: "".join(f"namespace n{i} {{\n" for i in range(5_000)) + gemm() + "}\n" * 5_000,
     (("analyze", "--no-compile"),), 5.0),
    ("10,000 nested #if", lambda: "#if 1\n" * 10_000 + gemm() + "#endif\n" * 10_000, (("analyze", "--no-compile"),), 5.0),
    ("10,000-branch #elif chain", lambda: "#define X 3\n#if X == 0\nint v0;\n" + "".join(
        f"#elif X == {i}\nint v{i};\n" for i in range(1, 10_000)) + "#endif\n" + gemm(), (("analyze", "--no-compile"),), 5.0),
    ("100,000-term sum", lambda: gemm().replace("C[row * n + col]", "C[row * n + col" + " + 0" * 100_000 + "]"),
     (("analyze", "--no-compile"),), 5.0),
    ("495 nested if (within the limit)", lambda: gemm("if (n > 0) {\n" * 495, "}\n" * 495), (("rewrite", "--no-compile"),), None),
    ("495-branch else-if chain (within)", lambda: gemm("if (n == 0) C[0] = 0;\n" + "".join(
        f"else if (n == {i}) C[row * n + col] = {i};\n" for i in range(1, 495)) + "else "), (("rewrite", "--no-compile"),), None),
    ("10,000 launches of one kernel", lambda: gemm().replace("{ gemm<<<dim3(256, 256), dim3(TILE, TILE)>>>(A, B, C, 4096); }",
                                                             "{\n" + "  gemm<<<dim3(256, 256), dim3(TILE, TILE)>>>(A, B, C, 4096);\n"
                                                             * 10_000 + "}"), (("rewrite", "--no-compile"),), None),
    ("10,000 helpers in a call chain", lambda: helpers(10_000), (("analyze", "--no-compile"),), None),
    ("10,000 macros defined through macros", lambda: "".join(f"#define M{i} M{i + 1}\n" for i in range(10_000))
     + "#define M10000 (row * n + col)\n" + gemm().replace("C[row * n + col]", "C[M0]"), (("rewrite", "--no-compile"),), None),
    ("a 10 MB line", lambda: gemm().replace("\n", " ").replace("#define TILE 16 ", "#define TILE 16\n") + " int x"
     + "x" * 10_000_000 + ";\n", (("rewrite", "--no-compile"),), None),
]


def run(file: Path, command: tuple[str, ...]) -> dict:
    """One command in a child process: exit code, wall time, CPU time (swzc's and its children's), what it said."""
    args = [a.replace("{out}", str(file.with_suffix(".out.cu"))) for a in command]
    argv = [sys.executable, "-c", CHILD, args[0], str(file), *args[1:]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=file.parent)
    try:
        stdout, stderr = child.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.terminate()  # swzc ends what it started (nvcc, the prover) on SIGTERM; a kill would leave them running
        try:
            child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
        return {"code": "stopped", "wall_s": TIMEOUT_S, "cpu_s": None, "said": f"stopped after {TIMEOUT_S:g} s"}
    done = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = next((float(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("swzc-cpu ")), None)
    total = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip() and not line.startswith("swzc-cpu ")]
    said = next((line for line in lines if "error" in line or "(line " in line), lines[0] if lines else "")
    said = said.replace(f"{file.parent}{os.sep}", "")
    return {"code": done.returncode, "wall_s": wall, "cpu_s": own, "cpu_children_s": None if own is None else total - own,
            "said": said if len(said) <= 240 else f"{said[:110]} … {said[-120:]}"}


# The child: swzc's command line, then its own CPU time on stderr (the parent's RUSAGE_CHILDREN adds the
# grandchildren: the prover, nvcc).
CHILD = """\
import atexit, os, resource, sys
sys.argv = ["swzc", *sys.argv[1:]]
atexit.register(lambda: os.write(2, ("\\nswzc-cpu %.2f\\n" % sum(resource.getrusage(resource.RUSAGE_SELF)[:2])).encode()))
from swzc.commands.main import main
main()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true", help="also run 10,000 kernels with the compiler: its resource report "
                        "for the L2 model, and the rewrite's compile check (nvcc's time is in `+ children`)")
    parser.add_argument("--only", action="append", default=[], help="run only the cases whose name contains this")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the table (markdown)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a command may run before it is stopped")
    options = parser.parse_args()
    global TIMEOUT_S
    TIMEOUT_S = options.timeout
    cases = [c for c in CASES if not options.only or any(o in c[0] for o in options.only)]
    if options.compile:
        cases = [(name, make, (*commands, ("analyze",), ("rewrite",)) if name == "10,000 kernels" else commands, target)
                 for name, make, commands, target in cases]
    import swzc

    rows = []
    with tempfile.TemporaryDirectory(prefix="swzc-deep-") as tmp:
        for index, (name, make, commands, target) in enumerate(cases):
            file = Path(tmp) / f"case{index}.cu"
            file.write_text(make())
            for command in commands:
                row = {"case": name, "bytes": file.stat().st_size, "command": "swzc " + " ".join(
                    (command[0], "FILE", *(a.replace("{out}", "OUT") for a in command[1:]))), "target_s": target, **run(file, command)}
                rows.append(row)
                print(f"{name:38} {row['command']:58} exit {row['code']!s:7} wall {row['wall_s']:7.1f} s  cpu "
                      f"{'-' if row['cpu_s'] is None else format(row['cpu_s'], '.1f'):>6} s  {row['said'][:70]}", flush=True)
    write(options.out, rows, swzc.__file__)


def write(out: Path, rows: list[dict], package: str) -> None:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    command = "taskset -c 0 .venv/bin/python " + shlex.join(["bench/deep_input.py", *sys.argv[1:]])
    lines = [
        "# Deep and wide input, at full size",
        "",
        f"`{command}` on {time.strftime('%Y-%m-%d')}: {affinity} CPU allowed, {platform.machine()}, Python "
        f"{platform.python_version()}, swzc from `{Path(package).parent}`.",
        "",
        "CPU is swzc's own (user + system); `+ children` is what it ran (the prover, nvcc).  Wall time counts",
        "whatever else shared the core.",
        "",
        "| case | bytes | command | exit | wall s | CPU s | + children s | target s | what it said |",
        "|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        cpu = "" if r["cpu_s"] is None else f"{r['cpu_s']:.1f}"
        children = "" if r.get("cpu_children_s") is None else f"{r['cpu_children_s']:.1f}"
        said = r["said"].replace("|", "\\|")
        lines.append(f"| {r['case']} | {r['bytes']:,} | `{r['command']}` | {r['code']} | {r['wall_s']:.1f} | {cpu} | {children} | "
                     f"{r['target_s'] or ''} | {said} |")
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
