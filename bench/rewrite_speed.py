"""Benchmark: analyse + rewrite of a generated 2,000-line file with 20 kernels, on one core.

    taskset -c 0 python bench/rewrite_speed.py            # prints a table, writes bench/results/rewrite_speed.json

Times the library call `rewrite_file` (parse, analyse, propose, prove, splice, re-parse, patch; no nvcc
compile check), cold (empty prover cache: the host compiler runs once) and warm (median of repeats).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELS = {
    "naive": """\
__global__ void naive_{i}(const float* A, const float* B, float* C, int n) {{
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  if (row >= n || col >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) {{
    acc += A[row * n + k] * B[k * n + col];
  }}
  C[row * n + col] = acc;
}}
""",
    "decoded": """\
__global__ void decoded_{i}(const float* A, float* C, int n, int tiles_n) {{
  const int tile_m = blockIdx.x / tiles_n;
  const int tile_n = blockIdx.x % tiles_n;
  for (int r = threadIdx.y; r < TILE; r += blockDim.y) {{
    const int row = tile_m * TILE + r;
    const int col = tile_n * TILE + threadIdx.x;
    C[row * n + col] = A[row * n + col] * 2.0f;
  }}
}}
""",
    "helper": """\
static __device__ int row_of_{i}() {{ return blockIdx.y * TILE + threadIdx.y; }}
__global__ void helper_{i}(float* C, int n) {{
  const int col = blockIdx.x * TILE + threadIdx.x;
  C[row_of_{i}() * n + col] += 1.0f;
}}
""",
    "refused": """\
__global__ void ticket_{i}(float* out, unsigned* counter) {{
  const unsigned t = atomicAdd(counter, 1u);
  out[blockIdx.x * blockDim.x + threadIdx.x] = (float)t;
}}
""",
}
FILLER = """\
// Host-side helper {i}: reference check of a result, kept to give the file realistic bulk.
static int check_{i}(const float* a, const float* b, int n) {{
  int bad = 0;
  for (int i = 0; i < n; ++i) {{
    const float d = a[i] - b[i];
    if (d > 1e-3f || d < -1e-3f) {{
      ++bad;
    }}
  }}
  return bad;
}}
"""


def generate(lines: int = 2000, kernels: int = 20) -> str:
    kinds = list(KERNELS)
    parts = ["#include <cuda_runtime.h>\n#define TILE 16\n#define N 8192\n"]
    launches = []
    for i in range(kernels):
        kind = kinds[i % len(kinds)]
        parts.append(KERNELS[kind].format(i=i))
        name = {"naive": "naive", "decoded": "decoded", "helper": "helper", "refused": "ticket"}[kind]
        args = {"naive": "A, B, C, N", "decoded": "A, C, N, N / TILE", "helper": "C, N", "refused": "C, counter"}[kind]
        grid = "dim3(N / TILE * (N / TILE))" if kind == "decoded" else "dim3(N / TILE, N / TILE)"
        launches.append(f"  {name}_{i}<<<{grid}, dim3(TILE, TILE)>>>({args});\n")
    i = 0
    body = "".join(parts)
    main = "int main() {\n  float *A = 0, *B = 0, *C = 0;\n  unsigned* counter = 0;\n" + "".join(launches) + "  return 0;\n}\n"
    while body.count("\n") + main.count("\n") < lines:
        body += FILLER.format(i=i)
        i += 1
    return body + main


def time_rewrite(path: str, repeats: int) -> list[float]:
    from swzc.pipeline.driver import Options, load_hw, parse_swizzle, rewrite_file

    options = Options(hw=load_hw("h200"), swizzle=parse_swizzle("grouped:8"), compile=False)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = rewrite_file(path, options)
        times.append(time.perf_counter() - start)
    assert result.changed and sum(o.status == "rewritten" for o in result.outcomes) == 15
    return times


def main() -> None:
    out = Path(__file__).parent / "results" / "rewrite_speed.json"
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "twenty_kernels.cu"
        source.write_text(generate())
        n_lines = source.read_text().count("\n")
        if "--child" in sys.argv:
            print(json.dumps(time_rewrite(str(source), int(sys.argv[-1]))))
            return
        runs = {}
        for label, repeats in (("cold", 1), ("warm", 21)):
            env = dict(os.environ)
            if label == "cold":
                env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")  # empty: the prover is compiled in the run
            child = subprocess.run([sys.executable, __file__, "--child", str(repeats)], env=env, capture_output=True, text=True, check=True)
            runs[label] = json.loads(child.stdout.strip().splitlines()[-1])
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    doc = {
        "command": "taskset -c 0 python bench/rewrite_speed.py",
        "file": {"lines": n_lines, "kernels": 20},
        "cpus_allowed": affinity,
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cold_s": round(runs["cold"][0], 4),
        "warm_median_s": round(statistics.median(runs["warm"][1:]), 4),
        "warm_max_s": round(max(runs["warm"][1:]), 4),
        "target_s": 1.0,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"{n_lines}-line file, 20 kernels, cpus allowed: {affinity}")
    print(f"  cold (prover compiled in the run): {doc['cold_s']:.3f} s")
    print(f"  warm median of 20: {doc['warm_median_s']:.3f} s (max {doc['warm_max_s']:.3f} s); target {doc['target_s']} s")


if __name__ == "__main__":
    main()
