"""Proof before compile: the exact swizzle C++ that is spliced in, compiled for the host and run over a grid.

The prover checks that the block mapping is a bijection of the grid onto itself, in bounds, on every
shape it is given: the kernel's concrete grid where the file fixes it, otherwise a spread of shapes that
includes non-divisible ones.  It also says whether the mapping was the identity on every shape.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swzc import cache, processes
from swzc.errors import ExitCode, SwzcError
from swzc.swizzles import SwizzleSpec, cxx_library

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
"""

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
      for (unsigned bz = 0; bz < gz; ++bz)
        for (unsigned by = 0; by < gy; ++by)
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

_CALL = {
    "2d": "{fn}(bx, by, bz, gx, gy)",
    "1d": "{fn}(bx, by, bz, gx, n)",
    "linear": "{fn}(bx, by, bz, gx)",
}


@dataclass(frozen=True)
class Proof:
    spec: str
    adapter: str
    shapes: tuple[Shape, ...]
    sampled: bool  # True when the grid was not known and sample shapes stood in for it
    identity: bool  # the mapping left every block where it was, on every shape
    failure: str | None = None  # the first counterexample, if any

    @property
    def ok(self) -> bool:
        return self.failure is None


def host_program(uses: list[tuple[SwizzleSpec, str]]) -> str:
    cases = "".join(
        f"    case {i}: return {_CALL[adapter].format(fn=spec.function_name(adapter))};\n"
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

_PROVER_FLAGS = ("-O2", "-std=c++11")
_BUILD_TIMEOUT_S = 300
_BY_DESCRIPTOR = os.path.isdir("/proc/self/fd")


@dataclass(frozen=True)
class Prover:
    """A verified prover binary, held open for as long as it is used."""

    fd: int
    where: str  # its path, for messages (and to run it where there is no /proc/self/fd)

    def __post_init__(self) -> None:
        weakref.finalize(self, os.close, self.fd)

    def run(self, request: bytes) -> subprocess.CompletedProcess:
        """Run it on `request`; a run past RUN_TIMEOUT_S or RUN_MEMORY_BYTES is a failure (a body from outside
        the family, bounded as it is, must still not tie swzc up)."""
        command = _limited([f"/proc/self/fd/{self.fd}"] if _BY_DESCRIPTOR else [self.where])
        try:
            return subprocess.run(command, input=request, capture_output=True, pass_fds=(self.fd,) if _BY_DESCRIPTOR else (),
                                  timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SwzcError(f"the swizzle prover did not finish in {RUN_TIMEOUT_S} s", ExitCode.CHECK_FAILED) from None


RUN_TIMEOUT_S = 120
RUN_MEMORY_BYTES = 4 << 30  # the proof of the largest enumerated grid needs 64 MiB of marks; the rest is slack


def _limited(command: list[str]) -> list[str]:
    """The command with its address space capped by the shell's ulimit before it starts (no Python runs in
    the child between fork and exec, which is not safe in a process with threads)."""
    if not os.path.exists("/bin/sh"):
        return command
    return ["/bin/sh", "-c", f'ulimit -v {RUN_MEMORY_BYTES // 1024} && exec "$0"', *command]


@functools.cache
def _private_folder() -> Path:
    """A folder of this process only, removed when it exits."""
    folder = Path(tempfile.mkdtemp(prefix="swzc-prove-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _compile_prover(program: str, compiler: list[str], key: str) -> Path:
    source = _private_folder() / f"prover-{key}.cpp"
    source.write_text(program)
    built = _private_folder() / f"prover-{key}"
    cmd = [*compiler, *_PROVER_FLAGS, "-o", str(built), str(source)]
    run = processes.run(cmd, _BUILD_TIMEOUT_S, env={**os.environ, "TMPDIR": str(_private_folder())})
    if run.timed_out:
        raise SwzcError(f"the swizzle prover did not compile in {_BUILD_TIMEOUT_S} s: {shlex.join(cmd)}", ExitCode.CHECK_FAILED)
    if run.returncode != 0:
        raise SwzcError(f"the swizzle prover does not compile: {shlex.join(cmd)}\n{run.stderr.strip()}", ExitCode.CHECK_FAILED)
    built.chmod(0o700)  # runnable whatever the umask left of its mode
    return built


def prover_key(program: str, compiler: list[str]) -> str:
    """The cache key of a prover: its program and the command that compiles it."""
    return hashlib.sha256("\0".join([*compiler, *_PROVER_FLAGS, program]).encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=32)
def build_prover(uses: tuple[tuple[SwizzleSpec, str], ...]) -> Prover:
    """The prover for these swizzles: from swzc's private cache when an intact one is there (swzc.cache),
    else compiled (and cached)."""
    program = host_program(list(uses))
    compiler = host_compiler()
    key = prover_key(program, compiler)
    with cache.folder() as folder:
        if folder is not None:
            entry = cache.lookup(folder[0], f"prover-{key}")
            if entry is not None:
                return Prover(entry[0], os.path.join(folder[1], f"prover-{key}"))
        built = _compile_prover(program, compiler, key)
        fd = os.open(built, os.O_RDONLY | os.O_CLOEXEC)
        if folder is not None:
            cache.store(folder[0], f"prover-{key}", built.read_bytes())
        return Prover(fd, str(built))


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


def prove(uses: list[tuple[SwizzleSpec, str, tuple[Shape, ...] | None]]) -> list[Proof]:
    """Prove each (spec, adapter, shapes) — shapes None meaning 'unknown grid: use samples'."""
    distinct = tuple(dict.fromkeys((spec, adapter) for spec, adapter, _ in uses))
    if not distinct:
        return []
    prover = build_prover(distinct)
    jobs: list[tuple[SwizzleSpec, str, tuple[Shape, ...], bool]] = []
    lines: list[str] = []
    for spec, adapter, shapes in uses:
        sampled = shapes is None or any(gx * gy * gz > MAX_ENUMERATED_BLOCKS for gx, gy, gz, _ in shapes)
        chosen = sample_shapes(adapter) if sampled else shapes
        assert chosen is not None
        jobs.append((spec, adapter, chosen, sampled))
        which = distinct.index((spec, adapter))
        lines += [f"p {which} {gx} {gy} {gz} {n}" for gx, gy, gz, n in chosen]
    run = prover.run(("\n".join(lines) + "\n").encode())
    answers = run.stdout.decode("utf-8", "replace").splitlines()
    if run.returncode != 0 or len(answers) != len(lines):
        raise SwzcError(f"the swizzle prover {prover.where} failed: {run.stderr.decode('utf-8', 'replace').strip()}",
                        ExitCode.CHECK_FAILED)
    proofs = []
    at = 0
    for spec, adapter, shapes, sampled in jobs:
        mine = answers[at : at + len(shapes)]
        at += len(shapes)
        failure = next(
            (f"grid {s[0]}x{s[1]}x{s[2]}{f' n={s[3]}' if s[3] else ''}: {a[5:]}" for s, a in zip(shapes, mine) if not a.startswith("ok")),
            None,
        )
        identity = failure is None and all(a == "ok 1" for a in mine)
        proofs.append(Proof(spec.name, adapter, shapes, sampled, identity, failure))
    return proofs


def dispatch_maps(uses: list[tuple[SwizzleSpec, str]], shape: Shape, limit: int | None = None) -> list[np.ndarray]:
    """For each (spec, adapter): the block each dispatch position runs, as an array of (x, y, z) rows (the
    first `limit` positions, where given).

    Computed by the same compiled C++ the prover runs, so the model ranks exactly what is spliced in."""
    distinct = tuple(dict.fromkeys(uses))
    prover = build_prover(distinct)
    gx, gy, gz, n = shape
    blocks = gx * gy * gz if limit is None else min(limit, gx * gy * gz)
    request = (f"l {blocks}\n" if limit is not None else "") + "".join(f"d {distinct.index(use)} {gx} {gy} {gz} {n}\n" for use in uses)
    run = prover.run(request.encode())
    data = np.frombuffer(run.stdout, dtype=np.uint32)
    if run.returncode != 0 or data.size != 3 * blocks * len(uses):
        raise SwzcError(f"the swizzle prover {prover.where} failed to list block orders", ExitCode.CHECK_FAILED)
    return [chunk.reshape(blocks, 3) for chunk in np.split(data, len(uses))] if uses else []
