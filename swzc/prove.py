"""Proof before compile: the exact swizzle C++ that is spliced in, compiled for the host and run over a grid.

The prover checks that the block mapping is a bijection of the grid onto itself, in bounds, on every
shape it is given: the kernel's concrete grid where the file fixes it, otherwise a spread of shapes that
includes non-divisible ones.  It also says whether the mapping was the identity on every shape.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
            std::printf("fail block (%%u,%%u,%%u) maps to (%%u,%%u,%%u), which another block already has\\n", bx, by, bz, r.x, r.y, r.z);
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


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "swzc"
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path
    except OSError:
        return Path(tempfile.gettempdir())


def host_compiler() -> list[str]:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(shlex.split(candidate)[0]):
            return shlex.split(candidate)
    raise SwzcError("no host C++ compiler to prove the swizzle with (set CXX)", ExitCode.CHECK_FAILED)


@functools.lru_cache(maxsize=32)
def build_prover(uses: tuple[tuple[SwizzleSpec, str], ...]) -> Path:
    """Compile the prover for these swizzles, once per distinct program (cached on disk by its hash)."""
    program = host_program(list(uses))
    digest = hashlib.sha256(program.encode()).hexdigest()[:16]
    binary = _cache_dir() / f"prover-{digest}"
    if binary.exists():
        return binary
    with tempfile.TemporaryDirectory(prefix="swzc-prove-") as tmp:
        source = Path(tmp) / "prove.cpp"
        source.write_text(program)
        built = Path(tmp) / "prove"
        cmd = [*host_compiler(), "-O2", "-std=c++11", "-o", str(built), str(source)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise SwzcError(
                f"the swizzle prover does not compile: {shlex.join(cmd)}\n{run.stderr.strip()}", ExitCode.CHECK_FAILED
            )
        partial = binary.with_suffix(f".{os.getpid()}.tmp")
        shutil.copy2(built, partial)
        os.replace(partial, binary)
    return binary


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
    binary = build_prover(distinct)
    jobs: list[tuple[SwizzleSpec, str, tuple[Shape, ...], bool]] = []
    lines: list[str] = []
    for spec, adapter, shapes in uses:
        sampled = shapes is None or any(gx * gy * gz > MAX_ENUMERATED_BLOCKS for gx, gy, gz, _ in shapes)
        chosen = sample_shapes(adapter) if sampled else shapes
        assert chosen is not None
        jobs.append((spec, adapter, chosen, sampled))
        which = distinct.index((spec, adapter))
        lines += [f"p {which} {gx} {gy} {gz} {n}" for gx, gy, gz, n in chosen]
    run = subprocess.run([str(binary)], input="\n".join(lines) + "\n", capture_output=True, text=True)
    answers = run.stdout.splitlines()
    if run.returncode != 0 or len(answers) != len(lines):
        raise SwzcError(f"the swizzle prover {binary} failed: {run.stderr.strip()}", ExitCode.CHECK_FAILED)
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
    binary = build_prover(distinct)
    gx, gy, gz, n = shape
    blocks = gx * gy * gz if limit is None else min(limit, gx * gy * gz)
    request = (f"l {blocks}\n" if limit is not None else "") + "".join(f"d {distinct.index(use)} {gx} {gy} {gz} {n}\n" for use in uses)
    run = subprocess.run([str(binary)], input=request.encode(), capture_output=True)
    data = np.frombuffer(run.stdout, dtype=np.uint32)
    if run.returncode != 0 or data.size != 3 * blocks * len(uses):
        raise SwzcError(f"the swizzle prover {binary} failed to list block orders", ExitCode.CHECK_FAILED)
    return [chunk.reshape(blocks, 3) for chunk in np.split(data, len(uses))] if uses else []
