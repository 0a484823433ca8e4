"""Proof before compile: the exact swizzle C++ that is spliced in, compiled for the host and run over a grid.

The prover checks that the block mapping is a bijection of the grid onto itself, in bounds, on every
shape it is given: the kernel's concrete grid where the file fixes it, otherwise a spread of shapes that
includes non-divisible ones.  It also says whether the mapping was the identity on every shape.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import math
import os
import re
import shlex
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from swzc.core import cache

from swzc.core import processes
from swzc.core.errors import ExitCode, SwzcError
from swzc.formulas.adapters import Adapter
from swzc.formulas.divide import HOST_INTRINSICS
from swzc.formulas.swizzles import CustomSwizzle, SwizzleSpec, cxx_library

# A grid is (gx, gy, gz) and, for the 1d adapter, the decode divisor n (0 otherwise).
Shape = tuple[int, int, int, int]

MAX_ENUMERATED_BLOCKS = 1 << 26  # past this, prove on the sample shapes instead (and say so)

_SAMPLE_SIDES = (1, 2, 3, 5, 7, 8, 9, 13, 16, 31, 64, 100, 129)

_HOST_PRELUDE = """\
#include <cstdio>
#include <vector>
#define __device__
#define __forceinline__ inline
struct uint3 { unsigned x, y, z; };
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { uint3 r = {x, y, z}; return r; }
""" + HOST_INTRINSICS

_HOST_MAIN = """\
static uint3 apply(int which, unsigned bx, unsigned by, unsigned bz, unsigned gx, unsigned gy, unsigned n) {
  switch (which) {
%s  }
  return make_uint3(~0u, ~0u, ~0u);
}

// A collision, said in full: the earlier block with the same image, and a block that nothing maps to (it
// exists: as many blocks as places, and two share one).  `seen` holds the images of the blocks before `bx`.
static void collision(int which, unsigned bx, unsigned by, unsigned bz, uint3 r, unsigned gx, unsigned gy, unsigned gz,
                      unsigned n, std::vector<unsigned char>& seen) {
  uint3 first = make_uint3(~0u, ~0u, ~0u);
  for (unsigned z = 0; z < gz && first.x == ~0u; ++z)
    for (unsigned y = 0; y < gy && first.x == ~0u; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        const uint3 q = apply(which, x, y, z, gx, gy, n);
        if (q.x == r.x && q.y == r.y && q.z == r.z) { first = make_uint3(x, y, z); break; }
      }
  const unsigned long long start = ((unsigned long long)bz * gy + by) * gx + bx + 1;
  const unsigned long long total = (unsigned long long)gx * gy * gz;
  for (unsigned long long i = start; i < total; ++i) {  // the rest, to find a place no block reaches
    const uint3 q = apply(which, (unsigned)(i %% gx), (unsigned)(i / gx %% gy), (unsigned)(i / gx / gy), gx, gy, n);
    if (q.x < gx && q.y < gy && q.z < gz) seen[((size_t)q.z * gy + q.y) * gx + q.x] = 1;
  }
  unsigned long long missing = 0;
  while (missing < total && seen[missing]) ++missing;
  std::printf("fail blocks (%%u,%%u,%%u) and (%%u,%%u,%%u) both map to (%%u,%%u,%%u)", first.x, first.y, first.z, bx, by, bz, r.x, r.y, r.z);
  if (missing < total)
    std::printf("; nothing maps to (%%u,%%u,%%u)", (unsigned)(missing %% gx), (unsigned)(missing / gx %% gy), (unsigned)(missing / gx / gy));
  std::printf("\\n");
}

// stdin: lines "p which gx gy gz n" (prove: one line out, "ok <identity 0/1>" or "fail <why>") or
// "d which gx gy gz n" (dump: the mapped (x, y, z) of the blocks in dispatch order, as raw uint32: the
// first `limit` of them, the number given by a line "l limit" before, else all).
int main() {
  char cmd; int which; unsigned gx, gy, gz, n;
  unsigned long long limit = ~0ull;
  while (std::scanf(" %%c", &cmd) == 1) {
    if (cmd == 'l') {
      if (std::scanf("%%llu", &limit) != 1) return 2;
      continue;
    }
    if (std::scanf("%%d %%u %%u %%u %%u", &which, &gx, &gy, &gz, &n) != 5) return 2;
    if (cmd == 'd') {
      std::vector<unsigned> out;
      const unsigned long long total = (unsigned long long)gx * gy * gz;
      out.reserve((size_t)(total < limit ? total : limit) * 3);
      unsigned long long emitted = 0;
      for (unsigned bz = 0; bz < gz && emitted < limit; ++bz)  // the first `limit` only: never the grid's size
        for (unsigned by = 0; by < gy && emitted < limit; ++by)
          for (unsigned bx = 0; bx < gx && emitted < limit; ++bx, ++emitted) {
            const uint3 r = apply(which, bx, by, bz, gx, gy, n);
            out.push_back(r.x);
            out.push_back(r.y);
            out.push_back(r.z);
          }
      std::fwrite(out.data(), sizeof(unsigned), out.size(), stdout);
      std::fflush(stdout);
      continue;
    }
    std::vector<unsigned char> seen((size_t)gx * gy * gz, 0);
    bool identity = true, ok = true;
    for (unsigned bz = 0; ok && bz < gz; ++bz)
      for (unsigned by = 0; ok && by < gy; ++by)
        for (unsigned bx = 0; ok && bx < gx; ++bx) {
          const uint3 r = apply(which, bx, by, bz, gx, gy, n);
          if (r.x >= gx || r.y >= gy || r.z >= gz) {
            std::printf("fail block (%%u,%%u,%%u) maps out of the grid to (%%u,%%u,%%u)\\n", bx, by, bz, r.x, r.y, r.z);
            ok = false;
            break;
          }
          const size_t at = ((size_t)r.z * gy + r.y) * gx + r.x;
          if (seen[at]) {
            collision(which, bx, by, bz, r, gx, gy, gz, n, seen);
            ok = false;
            break;
          }
          seen[at] = 1;
          identity = identity && r.x == bx && r.y == by && r.z == bz;
        }
    if (ok) std::printf("ok %%d\\n", identity ? 1 : 0);
    std::fflush(stdout);
  }
  return 0;
}
"""

@dataclass(frozen=True)
class Proof:
    spec: str
    adapter: str
    shapes: tuple[Shape, ...]
    sampled: bool  # True when the grid was not known and sample shapes stood in for it
    identity: bool  # the mapping left every block where it was, on every shape
    failure: str | None = None  # the first counterexample, if any
    sandbox: tuple[str, ...] = ()  # the sandbox layers the prover ran under
    why_sampled: str = ""  # when sampled: the grid is not fixed, or too large to go through block by block

    @property
    def ok(self) -> bool:
        return self.failure is None


def host_program(uses: list[tuple[SwizzleSpec, str]]) -> str:
    cases = "".join(
        f"    case {i}: return {Adapter(adapter).prover_call(spec.function_name(adapter))};\n"
        for i, (spec, adapter) in enumerate(uses)
    )
    return _HOST_PRELUDE + cxx_library(uses) + _HOST_MAIN % cases


def host_compiler() -> list[str]:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(shlex.split(candidate)[0]):
            return shlex.split(candidate)
    raise SwzcError("no host C++ compiler to prove the swizzle with (set CXX)", ExitCode.CHECK_FAILED)


# ---- the prover binary: built once per distinct program, kept in a private cache ------------------------
#
# The cache is `$XDG_CACHE_HOME/swzc` (else ~/.cache/swzc), used only when it is a folder of this user's;
# it is made 0700, so no one else may write to it.  An entry is the binary `prover-<key>` and `prover-<key>.sha256`, which
# names the key and the binary's hash; both must be this user's own, single-linked files, and the bytes
# must hash to what was stored, or the entry is rebuilt.  The binary runs from the descriptor whose bytes
# were hashed (/proc/self/fd), so a file swapped in after the check is never run.  Without a usable cache
# folder, the prover is built in a private temporary folder removed when swzc exits: never in a shared
# folder where another user could plant a file under a name swzc would run.
#
# The prover is built from text that may come from outside (an LLM's body), so it is built to stop at
# undefined behaviour (a shift by the width or more, a division by zero, a signed overflow: what the host
# and the GPU may compute differently) and it runs in a sandbox (native/sandbox.cpp, built and cached the
# same way): limits on memory, CPU time, files and processes; no network; a system-call filter that leaves
# reading its requests, computing and answering.  SANDBOX_LAYERS are the layers asked for; each run says
# which were in force.

_PROVER_FLAGS = ("-O2", "-std=c++11", "-fsanitize=undefined", "-fno-sanitize-recover=all")
# Where the sanitizer's run-time library is missing: the same checks, each a trap (SIGILL) instead of a report.
_PROVER_TRAP_FLAGS = ("-O2", "-std=c++11", "-fsanitize=undefined", "-fsanitize-undefined-trap-on-error")
_SANDBOX_FLAGS = ("-O2", "-std=c++11")
_SANDBOX_LIBS = ("-ldl",)
_BUILD_TIMEOUT_S = 300
_BY_DESCRIPTOR = os.path.isdir("/proc/self/fd")
SANDBOX_LAYERS = ("rlimits", "namespaces", "seccomp")

RUN_TIMEOUT_S = 120
RUN_CPU_S = 110  # CPU seconds, below the wall-clock timeout so that a busy loop is named as such
RUN_MEMORY_BYTES = 4 << 30  # the proof of the largest enumerated grid needs 64 MiB of marks; the rest is slack


@dataclass(frozen=True)
class Binary:
    """A verified binary of swzc's own building, held open for as long as it is used."""

    fd: int
    where: str  # its path, for messages (and to run it where there is no /proc/self/fd)

    def __post_init__(self) -> None:
        weakref.finalize(self, os.close, self.fd)

    @property
    def path(self) -> str:
        return f"/proc/self/fd/{self.fd}" if _BY_DESCRIPTOR else self.where


@dataclass(frozen=True)
class Ran:
    """A prover run: how it ended, its output, and the sandbox layers that were in force."""

    finished: processes.Finished
    stdout: bytes
    stderr: str  # the prover's own, without the sandbox's line
    layers: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.finished.returncode == 0


@dataclass(frozen=True)
class Prover:
    """A verified prover binary and the sandbox it runs in."""

    binary: Binary
    sandbox: Binary | None  # None where the platform cannot build or run it: only limits then
    bodies: tuple[tuple[str, int, int], ...] = ()  # where outside bodies are in its program (body_lines)

    @property
    def where(self) -> str:
        return self.binary.where

    def run(self, request: bytes) -> Ran:
        """Run it in its sandbox on `request`.  Past RUN_TIMEOUT_S the run is a failure (a body from outside the
        family, bounded as it is, must still not tie swzc up)."""
        layers = SANDBOX_LAYERS
        if self.sandbox is not None:
            command = [self.sandbox.path, str(self.binary.fd), str(RUN_MEMORY_BYTES), str(RUN_CPU_S), ",".join(layers)]
            fds: tuple[int, ...] = (self.sandbox.fd, self.binary.fd)
        else:  # no launcher: the shell sets the limits before it becomes the prover
            limits = (f"ulimit -v {RUN_MEMORY_BYTES // 1024} && ulimit -t {RUN_CPU_S} && ulimit -f 0 && ulimit -c 0"
                      if "rlimits" in layers else "true")
            command = ["/bin/sh", "-c", f'{limits} && echo "swzc-sandbox: {"rlimits" if "rlimits" in layers else "none"}" >&2 && exec "$0"',
                       self.binary.path]
            fds = (self.binary.fd,) if _BY_DESCRIPTOR else ()
        finished = processes.run(command, RUN_TIMEOUT_S, cwd=_private_folder(), env={}, input=request, pass_fds=fds)
        if finished.timed_out:
            raise SwzcError(f"the swizzle prover did not finish in {RUN_TIMEOUT_S} s", ExitCode.CHECK_FAILED)
        err = bytes(finished.stderr).decode("utf-8", "replace")
        first, _, rest = err.partition("\n")
        in_force: tuple[str, ...] = ()
        if first.startswith("swzc-sandbox: "):
            in_force = tuple(x for x in first.removeprefix("swzc-sandbox: ").split(",") if x and x != "none")
            err = rest
        return Ran(finished, bytes(finished.stdout), err, in_force)


@functools.cache
def _private_folder() -> Path:
    """A folder of this process only, removed when it exits."""
    folder = Path(tempfile.mkdtemp(prefix="swzc-prove-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _compile(program: str, compiler: list[str], flags: tuple[str, ...], stem: str, libs: tuple[str, ...] = ()) -> Path:
    source = _private_folder() / f"{stem}.cpp"
    source.write_text(program)
    built = _private_folder() / stem
    cmd = [*compiler, *flags, "-o", str(built), str(source), *libs]
    run = processes.run(cmd, _BUILD_TIMEOUT_S, env={**os.environ, "TMPDIR": str(_private_folder())})
    if run.timed_out:
        raise SwzcError(f"the swizzle prover did not compile in {_BUILD_TIMEOUT_S} s: {shlex.join(cmd)}", ExitCode.CHECK_FAILED)
    if run.returncode != 0:
        raise SwzcError(f"the swizzle prover does not compile: {shlex.join(cmd)}\n{run.stderr.strip()}", ExitCode.CHECK_FAILED)
    built.chmod(0o700)  # runnable whatever the umask left of its mode
    return built


def _compile_prover(program: str, compiler: list[str], key: str) -> Path:
    return _compile(program, compiler, _PROVER_FLAGS, f"prover-{key}")


def prover_key(program: str, compiler: list[str], flags: tuple[str, ...] | None = None) -> str:
    """The cache key of a binary: its program and the command that compiles it (the prover's flags unless
    others are given)."""
    return hashlib.sha256("\0".join([*compiler, *(_PROVER_FLAGS if flags is None else flags), program]).encode()).hexdigest()[:32]


def _cached(name: str, build: Callable[[], Path]) -> Binary:
    """Entry `name` of swzc's private cache when an intact one is there (swzc.core.cache), else built (and cached)."""
    with cache.folder() as folder:
        if folder is not None:
            entry = cache.lookup(folder[0], name)
            if entry is not None:
                return Binary(entry[0], os.path.join(folder[1], name))
        built = build()
        fd = os.open(built, os.O_RDONLY | os.O_CLOEXEC)
        if folder is not None:
            cache.store(folder[0], name, built.read_bytes())
        return Binary(fd, str(built))


def _sandbox(compiler: list[str]) -> Binary | None:
    """The sandbox launcher, where the platform runs programs from a descriptor and the compiler builds it."""
    if not _BY_DESCRIPTOR:
        return None
    program = resources.files("swzc.native").joinpath("sandbox.cpp").read_text(encoding="utf-8")
    key = prover_key(program, compiler, _SANDBOX_FLAGS + _SANDBOX_LIBS)
    try:
        return _cached(f"sandbox-{key}", lambda: _compile(program, compiler, _SANDBOX_FLAGS, f"sandbox-{key}", _SANDBOX_LIBS))
    except SwzcError:
        return None  # not Linux: the limits alone, set by the shell


@functools.lru_cache(maxsize=32)
def build_prover(uses: tuple[tuple[SwizzleSpec, str], ...]) -> Prover:
    """The prover for these swizzles, with its sandbox."""
    program = host_program(list(uses))
    compiler = host_compiler()
    key = prover_key(program, compiler)
    try:
        binary = _cached(f"prover-{key}", lambda: _compile_prover(program, compiler, key))
    except SwzcError as exc:
        if "ubsan" not in exc.message.lower():
            raise
        key = prover_key(program, compiler, _PROVER_TRAP_FLAGS)
        binary = _cached(f"prover-{key}", lambda: _compile(program, compiler, _PROVER_TRAP_FLAGS, f"prover-{key}"))
    return Prover(binary, _sandbox(compiler), body_lines(program, uses))


# ---- why a run failed, in words that may go to the user and back to the LLM -------------------------------

# The sanitizer's reports that are repeated; anything else it says is summarised (the prover's output is
# outside text too, and a message goes back to the LLM).
_UB_REPORT = re.compile(r"\.cpp:(\d+):\d+: runtime error: ((?:shift exponent|left shift of|division by zero|division of"
                        r"|signed integer overflow|negation of|load of value|index -?\d+ out of bounds)[ -~]{0,160})")
_SIGNALS = {
    "SIGSYS": "it made a system call outside the sandbox (the body reached past integer arithmetic)",
    "SIGXCPU": f"it ran past its {RUN_CPU_S} s of CPU time",
    "SIGKILL": f"it ran past its limits ({RUN_CPU_S} s of CPU time, {RUN_MEMORY_BYTES >> 30} GiB of memory)",
    "SIGABRT": f"it aborted (out of its {RUN_MEMORY_BYTES >> 30} GiB of memory, or a failed check)",
    "SIGFPE": "an arithmetic fault (a division by zero or an overflowing division)",
    "SIGSEGV": "it read or wrote outside its memory",
    "SIGBUS": "it read or wrote outside its memory",
    "SIGILL": ("it reached a trap: undefined behaviour (a shift by the width or more, a division by zero or a signed "
               "overflow; this compiler has no sanitizer report to say which)"),
    "SIGXFSZ": "it tried to write a file",
}


def _where_in(bodies: tuple[tuple[str, int, int], ...], line: int) -> str:
    """Which outside body a line of the prover's program falls in, said as its name and the line within it."""
    for name, first, last in bodies:
        if first <= line <= last:
            return f" in {name}, line {line - first + 1} of its body"
    return ""


def body_lines(program: str, uses: tuple[tuple[SwizzleSpec, str], ...]) -> tuple[tuple[str, int, int], ...]:
    """(name, first line, last line) in `program` of each body from outside the family (CustomSwizzle)."""
    found = []
    for spec, _ in uses:
        if isinstance(spec, CustomSwizzle) and spec.name not in (name for name, _, _ in found):
            head = program.index(spec.definition()) + spec.definition().index("{\n") + 2
            first = program.count("\n", 0, head) + 1
            found.append((spec.name, first, first + spec.body.count("\n")))
    return tuple(found)


def why_failed(ran: Ran, bodies: tuple[tuple[str, int, int], ...], request: str) -> str:
    """Why a run failed: the sanitizer's report, the signal, or the exit status; and on which request."""
    finished = ran.finished
    asked = [line for line in request.splitlines() if line[:1] == "p"]  # proofs answer a line each ('d': raw data)
    answered = len(ran.stdout.decode("ascii", "replace").splitlines()) if asked else 0
    on = ""
    if answered < len(asked):
        _, _, gx, gy, gz, n = asked[answered].split()
        on = f" on grid {gx}x{gy}x{gz}" + (f" n={n}" if n != "0" else "")
    report = _UB_REPORT.search(ran.stderr)
    if report is not None:
        what = f"undefined behaviour{_where_in(bodies, int(report[1]))}: {report[2].strip()}"
    elif "runtime error:" in ran.stderr:
        what = "undefined behaviour (the sanitizer stopped it)"
    elif finished.returncode is not None and finished.returncode < 0:
        status = finished.status().removeprefix("was killed by ")
        what = f"killed by {status}: {_SIGNALS.get(status, 'a signal')}"
    elif finished.returncode == 0:
        what, on = "it gave too few or too many answers", ""
    else:
        what = finished.status()
    layers = ", ".join(ran.layers) or "none"
    return f"{what}{on} (sandbox: {layers})"


def sample_shapes(adapter: str) -> tuple[Shape, ...]:
    """Stand-in shapes for a grid the file does not fix: small, odd, prime and non-divisible sides."""
    sides = _SAMPLE_SIDES
    if adapter == "2d":
        return tuple((x, y, z, 0) for x in sides for y in sides for z in (1, 2))
    if adapter == "1d":
        shapes = [(m * n, 1, 1, n) for m in sides for n in sides]
        shapes += [(m * n + 1, 1, 1, n) for m in sides for n in sides if n > 1]  # not a tiling: must stay put
        return tuple(shapes)
    return tuple((x, 1, 1, 0) for x in (*sides, 1000, 1021, 4096, 65537))


def gate_shapes(gate: int, adapter: str) -> tuple[Shape, ...]:
    """Grids on both sides of a gate of `gate` tiles and on it: one tile short, the gate, one tile past, as a
    row, a column and near-square tile grids (non-divisible ones among them), with a second z slice; for a
    decoded 1D grid, the tilings of several column counts around it and a grid that is not a tiling."""
    counts = [t for t in (gate - 1, gate, gate + 1) if t >= 1]
    if adapter == "2d":
        shapes = []
        for t in counts:
            side = max(1, math.isqrt(t))
            shapes += [(t, 1, 1, 0), (1, t, 1, 0), (-(-t // side), side, 1, 0), (side, -(-t // side), 2, 0), (t // side, side, 1, 0)]
        return tuple(dict.fromkeys(s for s in shapes if s[0] * s[1] >= 1))
    if adapter == "1d":
        shapes = []
        for n in (1, 2, 7, 64, max(1, math.isqrt(gate))):
            rows = -(-gate // n)
            shapes += [(m * n, 1, 1, n) for m in (rows - 1, rows, rows + 1) if m >= 1]
            shapes.append((rows * n + 1, 1, 1, n) if n > 1 else (rows * n, 1, 1, n))
        return tuple(dict.fromkeys(shapes))
    return tuple((t, 1, 1, 0) for t in counts)


def prove(uses: list[tuple[SwizzleSpec, str, tuple[Shape, ...] | None]]) -> list[Proof]:
    """Prove each (spec, adapter, shapes) — shapes None meaning 'unknown grid: use samples'.  A gated order is
    proven on the grids at its gate too (`gate_shapes`)."""
    distinct = tuple(dict.fromkeys((spec, adapter) for spec, adapter, _ in uses))
    if not distinct:
        return []
    prover = build_prover(distinct)
    jobs: list[tuple[SwizzleSpec, str, tuple[Shape, ...], str]] = []
    lines: list[str] = []
    for spec, adapter, shapes in uses:
        large = next((f"{gx}x{gy}x{gz}" for gx, gy, gz, _ in shapes or () if gx * gy * gz > MAX_ENUMERATED_BLOCKS), None)
        why_sampled = ("the file does not fix this kernel's grid; --grid gives it" if shapes is None else
                       f"grid {large} has more than 2^26 blocks to go through one by one" if large else "")
        chosen = sample_shapes(adapter) if why_sampled else shapes
        assert chosen is not None
        if isinstance(spec, SwizzleSpec) and spec.gate:  # both sides of the gate, and small odd grids below it
            chosen = tuple(dict.fromkeys((*chosen, *gate_shapes(spec.gate, adapter), *sample_shapes(adapter))))
        jobs.append((spec, adapter, chosen, why_sampled))
        which = distinct.index((spec, adapter))
        lines += [f"p {which} {gx} {gy} {gz} {n}" for gx, gy, gz, n in chosen]
    asked = list(dict.fromkeys(lines))  # kernels of one file share orders and sample grids: each asked once
    request = "\n".join(asked) + "\n"
    run = prover.run(request.encode())
    answered = run.stdout.decode("utf-8", "replace").splitlines()
    if not run.ok or len(answered) != len(asked):
        raise SwzcError(f"the swizzle prover failed: {why_failed(run, prover.bodies, request)}", ExitCode.CHECK_FAILED)
    by_line = dict(zip(asked, answered))
    answers = [by_line[line] for line in lines]
    proofs = []
    at = 0
    for spec, adapter, shapes, why_sampled in jobs:
        mine = answers[at : at + len(shapes)]
        at += len(shapes)
        failure = next(
            (f"grid {s[0]}x{s[1]}x{s[2]}{f' n={s[3]}' if s[3] else ''}: {a[5:]}" for s, a in zip(shapes, mine) if not a.startswith("ok")),
            None,
        )
        if failure is None and why_sampled and isinstance(spec, CustomSwizzle):
            # The family's formulas are bijections on every grid, and the samples only confirm it; a body from
            # outside could single out the very grid it runs at, so only that grid, block by block, proves it.
            failure = (f"proven only on sample grids ({why_sampled}); an order from outside the built-in family is "
                       "accepted only where every block of the grid it runs at is checked")
        identity = failure is None and all(a == "ok 1" for a in mine)
        proofs.append(Proof(spec.name, adapter, shapes, bool(why_sampled), identity, failure, run.layers, why_sampled))
    return proofs


def dispatch_maps(uses: list[tuple[SwizzleSpec, str]], shape: Shape, limit: int | None = None) -> list[np.ndarray]:
    """For each (spec, adapter): the block each dispatch position runs, as an array of (x, y, z) rows (the
    first `limit` positions, where given).

    Computed by the same compiled C++ the prover runs, so the model ranks exactly what is spliced in."""
    return dispatch_maps_at([(uses, shape)], limit)[0]


def dispatch_maps_at(asks: Sequence[tuple[Sequence[tuple[SwizzleSpec, str]], Shape]], limit: int | None = None
                     ) -> list[list[np.ndarray]]:
    """`dispatch_maps` for several shapes (a sweep's sizes), each with its own (spec, adapter) pairs, from one run
    of the prover."""
    distinct = tuple(dict.fromkeys(use for uses, _ in asks for use in uses))
    if not distinct:
        return [[] for _ in asks]
    prover = build_prover(distinct)
    lines: list[str] = []
    counts: list[int] = []
    for uses, (gx, gy, gz, n) in asks:
        blocks = gx * gy * gz if limit is None else min(limit, gx * gy * gz)
        for use in uses:
            lines.append(f"d {distinct.index(use)} {gx} {gy} {gz} {n}\n")
            counts.append(blocks)
    request = (f"l {limit}\n" if limit is not None else "") + "".join(lines)
    run = prover.run(request.encode())
    data = np.frombuffer(run.stdout, dtype=np.uint32)
    if not run.ok or data.size != 3 * sum(counts):
        raise SwzcError(f"the swizzle prover failed to list block orders: {why_failed(run, prover.bodies, request)}",
                        ExitCode.CHECK_FAILED)
    maps = iter(np.split(data, np.cumsum([3 * c for c in counts])[:-1]) if counts else [])
    return [[next(maps).reshape(-1, 3) for _ in uses] for uses, _ in asks]
