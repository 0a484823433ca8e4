"""One instrumented run of a kernel's original order, before the loop measures candidates: what the L2 model
takes from it (swzc.model.calibration).

- **The timeline.** A copy of the file, built only for this run and never written anywhere else, in which
  thread 0 of each block of the kernel stores the GPU's global timer and its SM's number when the block
  reaches the top of the kernel's body, and lane 0 of each warp raises the block's end time as it leaves
  the body (a local object's destructor: every `return` counts).  The harness launches it once untimed and
  once after flushing the L2, as it times a candidate, and writes the second launch's stamps to a file in the
  loop's own folder.  NVIDIA only: the stamps read `%globaltimer` and `%smid`.
- **The coalescer's share.** Where the GPU has an L2 request coalescer and the kernel stages its reads, ncu's
  `lrc__` counters of one launch of the original: the read sectors merged against those delivered.  The same
  ncu run gives the original's L2 hit rate and DRAM bytes, which the report shows beside each candidate's.

A build that fails, a run that does not end, or stamps that do not cover the grid leave the model's defaults,
with the reason in the report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swzc.analysis.records import KernelInfo
from swzc.core import processes
from swzc.core.errors import ExitCode, SwzcError
from swzc.core.inputs import read_regular
from swzc.model.calibration import later_wave_spread, most_at_once
from swzc.rewrite.edits import Edit, apply_edits
from swzc.verify.harness import RUN_TIMEOUT_S, Build

# ncu's counters of the coalescer: read sectors it merged, and read sectors it delivered to the SMs
LRC_MERGED = "lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum"
LRC_DELIVERED = "lrc__xbar2gpc_sectors_op_read.sum"
COVERED = 0.99  # the share of the stamped blocks that must have stamped a start and an end
MAX_STAMPED = 1 << 21  # blocks stamped at most (the first ones in dispatch order): a timeline of at most 40 MiB
BOM = b"\xef\xbb\xbf"

# At the top of the file (the global namespace): the stamps' buffers, the object whose constructor and
# destructor stamp a block, and the two functions the harness calls.  Names start with swzc_tl_.
PRELUDE = r"""/* swzc calibration: each block's start, end and SM (this copy is built for one measured run only) */
#include <cstdio>
__device__ unsigned long long* swzc_tl_start = 0;
__device__ unsigned long long* swzc_tl_end = 0;
__device__ unsigned int* swzc_tl_sm = 0;
__device__ unsigned long long swzc_tl_blocks = 0;
static __device__ __forceinline__ unsigned long long swzc_tl_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
static __device__ __forceinline__ unsigned long long swzc_tl_block() {
  return blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
}
struct swzc_tl_stamp {
  __device__ swzc_tl_stamp() {
    if (swzc_tl_start && threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0 && swzc_tl_block() < swzc_tl_blocks) {
      unsigned int sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      swzc_tl_sm[swzc_tl_block()] = sm;
      swzc_tl_start[swzc_tl_block()] = swzc_tl_now();
    }
  }
  __device__ ~swzc_tl_stamp() {
    const unsigned int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (swzc_tl_end && thread % 32 == 0 && swzc_tl_block() < swzc_tl_blocks)
      atomicMax(&swzc_tl_end[swzc_tl_block()], swzc_tl_now());
  }
};
static unsigned long long swzc_tl_count = 0;
static unsigned long long* swzc_tl_starts = 0;
static unsigned long long* swzc_tl_ends = 0;
static unsigned int* swzc_tl_sms = 0;
extern "C" int swzc_timeline_arm(unsigned long long blocks) {
  if (blocks != swzc_tl_count) {
    if (cudaMalloc(&swzc_tl_starts, blocks * 8) != cudaSuccess || cudaMalloc(&swzc_tl_ends, blocks * 8) != cudaSuccess ||
        cudaMalloc(&swzc_tl_sms, blocks * 4) != cudaSuccess) return 1;
    swzc_tl_count = blocks;
  }
  if (cudaMemset(swzc_tl_starts, 0, blocks * 8) != cudaSuccess || cudaMemset(swzc_tl_ends, 0, blocks * 8) != cudaSuccess ||
      cudaMemset(swzc_tl_sms, 0, blocks * 4) != cudaSuccess) return 1;
  if (cudaMemcpyToSymbol(swzc_tl_start, &swzc_tl_starts, sizeof swzc_tl_starts) != cudaSuccess ||
      cudaMemcpyToSymbol(swzc_tl_end, &swzc_tl_ends, sizeof swzc_tl_ends) != cudaSuccess ||
      cudaMemcpyToSymbol(swzc_tl_sm, &swzc_tl_sms, sizeof swzc_tl_sms) != cudaSuccess ||
      cudaMemcpyToSymbol(swzc_tl_blocks, &blocks, sizeof blocks) != cudaSuccess) return 1;
  return 0;
}
extern "C" int swzc_timeline_save(const char* path) {
  const unsigned long long n = swzc_tl_count;
  unsigned long long* host = (unsigned long long*)malloc(n * 20 + 8);
  if (!host) return 1;
  host[0] = n;
  if (cudaMemcpy(host + 1, swzc_tl_starts, n * 8, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(host + 1 + n, swzc_tl_ends, n * 8, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(host + 1 + 2 * n, swzc_tl_sms, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) { free(host); return 1; }
  FILE* f = fopen(path, "wb");
  const int bad = !f || fwrite(host, 1, n * 20 + 8, f) != n * 20 + 8;
  if (f) fclose(f);
  free(host);
  return bad;
}
"""
STAMP = "swzc_tl_stamp swzc_tl_here;"  # at the top of the body, before its first statement that reads the block index


@dataclass(frozen=True)
class Observed:
    """What the original's instrumented run and its ncu run measured (None: not measured; `notes` say why)."""

    spread: float | None = None  # the later waves' spread in block lifetimes
    merged_share: float | None = None  # read sectors the coalescer merged, of those delivered
    hit_rate: float | None = None  # the original's L2 hit rate, in percent
    dram_bytes: float | None = None
    notes: tuple[str, ...] = ()
    running: int | None = None  # the most blocks that ran at once


def instrumented(data: bytes, kernel: KernelInfo) -> bytes:
    """The file with `kernel`'s blocks stamped (see the module's docstring)."""
    if kernel.insert_at is None:
        raise SwzcError(f"{kernel.name} has no statement that reads the block index to stamp before", ExitCode.CHECK_FAILED)
    stamp = f"{STAMP} " if kernel.inline else f"{kernel.indent}{STAMP}\n"
    top = len(BOM) if data.startswith(BOM) else 0  # after a byte-order mark, which must stay first
    return apply_edits(data, [Edit.insert(top, PRELUDE), Edit.insert(kernel.insert_at, stamp)])


def timeline(built: Build, blocks: int) -> tuple[np.ndarray, np.ndarray] | str:
    """Each stamped block's start and end (ns, in dispatch order) of one launch of `built.b` (the instrumented
    copy) after an untimed one, of the grid's first MAX_STAMPED blocks; why not, as a string."""
    stamped = min(blocks, MAX_STAMPED)
    path = built.folder / "timeline.bin"
    path.unlink(missing_ok=True)
    run = processes.run([str(built.harness), str(built.a), str(built.b), "timeline", str(path), str(stamped)], RUN_TIMEOUT_S)
    if not run.ok:
        return f"the instrumented run failed ({run.status()})"
    try:
        raw = read_regular(str(path), 8 + 20 * stamped)
    except SwzcError as exc:
        return f"the instrumented run wrote no timeline ({exc.message})"
    if len(raw) != 8 + 20 * stamped or int(np.frombuffer(raw, np.uint64, 1, 0)[0]) != stamped:
        return "the instrumented run's timeline does not cover the grid"
    start = np.frombuffer(raw, np.uint64, stamped, 8).astype(np.int64)
    end = np.frombuffer(raw, np.uint64, stamped, 8 + 8 * stamped).astype(np.int64)
    kept = (start > 0) & (end > start)  # a block whose thread 0 left before the stamp has no start
    if kept.mean() < COVERED:
        return f"only {kept.mean():.0%} of the blocks were stamped (some leave before the stamp)"
    return start[kept], end[kept]


def wave_spread(built: Build, blocks: int) -> tuple[float | None, int | None, str]:
    """The later waves' spread of the original order and the most blocks that ran at once (None and why,
    where not measured)."""
    got = timeline(built, blocks)
    if isinstance(got, str):
        return None, None, got
    start, end = got
    running = most_at_once(start, end)
    spread = later_wave_spread(start, end, running)
    return spread, running, "" if spread is not None else "the grid ran in one wave: no later wave to measure"


def merged_share(counters: dict[str, float]) -> float | None:
    merged, delivered = counters.get(LRC_MERGED), counters.get(LRC_DELIVERED)
    return merged / delivered if merged is not None and delivered else None


def probe_failed(exc: SwzcError) -> str:
    return f"the instrumented copy did not build: {exc.message.splitlines()[0][:200]}"


def observed(spread: float | None, running: int | None, spread_note: str, counters: dict[str, float] | None,
             coalescer: bool, hit_rate: float | None, dram_bytes: float | None, profiler: str) -> Observed:
    """What the runs measured: the timeline's spread (or why not), and the original's profiler counters (None:
    the profiler gave none; `profiler` is why, where it is absent); the coalescer's share is looked for where it
    applies (`coalescer`)."""
    notes = [spread_note] if spread_note else []
    share = None
    if coalescer:
        share = merged_share(counters) if counters is not None else None
        if share is None:
            why = ("ncu gave no lrc__ counters" if counters is not None else
                   "ncu ran and gave no counters (profiling not permitted, or it failed)" if profiler == "ncu" else
                   f"profiler {profiler}")
            notes.append(f"the coalescer's share was not measured: {why}")
    return Observed(spread, share, hit_rate, dram_bytes, tuple(notes), running)


def unmeasured(why: str) -> Observed:
    return Observed(notes=(why,))
