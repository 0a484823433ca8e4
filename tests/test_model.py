"""Footprints from the AST, the L2 model on cases computed by hand, and the ranking contract."""

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from support import NAIVE_GEMM, ROOT

from swzc.target import hw as hwmodels
from swzc.analysis.kernels import analyze
from swzc.commands.cli import main
from swzc.model.footprint import footprint
from swzc.model.l2model import L2Model
from swzc.formulas.prove import dispatch_maps
from swzc.frontend.source import load, load_bytes
from swzc.formulas.swizzles import parse_spec
from swzc.analysis.context import FileContext

KERNELS = ROOT / "bench" / "l2" / "kernels"


def fp_of(path_or_code, name=None):
    src = load(str(path_or_code)) if not isinstance(path_or_code, str) else load_bytes("t.cu", path_or_code.encode())
    kernels = analyze(FileContext(src)).kernels
    kernel = next(k for k in kernels if name is None or k.name == name)
    return footprint(FileContext(src), kernel), kernel


def test_naive_gemm_footprint():
    fp, _ = fp_of(KERNELS / "naive_gemm.cu")
    a, b, c = sorted(fp.accesses, key=lambda x: (x.write, x.array))
    # A: 16 rows of the block's row strip, all 4096 columns; the strip moves 16 rows per tile row
    assert (a.array, a.write, a.block_bytes, a.sectors.size) == ("A", False, (16 * 4096 * 4, 0, 0), 16 * 4096 * 4 // 32)
    # B: all 4096 rows of a 16-column (64-byte, two-sector) strip that moves 64 bytes per tile column
    assert (b.array, b.block_bytes, b.sectors.size) == ("B", (0, 64, 0), 4096 * 2)
    assert (c.array, c.write, c.sectors.size) == ("C", True, 16 * 2)
    assert fp.tiles == (256, 256, 1) and fp.threads == 256 and fp.unknown == ()


def test_stencil_footprint_has_a_halo():
    fp, _ = fp_of(KERNELS / "stencil2d.cu")
    (read,) = [a for a in fp.accesses if not a.write]
    rows = np.unique(read.sectors * 32 // (8192 * 4))
    assert rows.size == 10  # 8 rows of the block and one above and below


def test_wmma_fragments_are_tiles():
    fp, _ = fp_of(KERNELS / "wmma_gemm.cu")
    a = next(x for x in fp.accesses if x.array == "A")
    assert a.elem_bytes == 2 and a.block_bytes == (64 * 8192 * 2, 0, 0)
    assert a.sectors.size == 64 * 8192 * 2 // 32  # 64 rows x all of K, in halves


def test_unknown_accesses_are_reported_not_guessed():
    fp, _ = fp_of("""
__global__ void gather(const float* x, const int* idx, float* y, int n) {
  int i = blockIdx.x * 256 + threadIdx.x;
  y[i] = x[idx[i]];
}
int main() { gather<<<64, 256>>>(0, 0, 0, 16384); }""")
    assert [a.array for a in fp.accesses if not a.write] == ["idx"]
    assert any(u.array == "x" and "read from memory" in u.why for u in fp.unknown)


def tiny_gpu(l2_bytes: int, partitions: int = 1):
    """An AMD-like GPU (no far-partition lookups) with a tiny L2 of 32-byte units."""
    base = hwmodels.load("mi250x")
    return dataclasses.replace(base, l2_bytes=l2_bytes, l2_sector_bytes=32, l2_line_bytes=32, l2_ways=1,
                               l2_partitions=partitions, chiplets=1)


SHARED = """
__global__ void k(const float* a, float* out) {
  out[blockIdx.x * 8 + threadIdx.x] = a[threadIdx.x];
}
int main() { k<<<4, 8>>>(0, 0); }"""


def predict(code, order, hw, resident=1, in_step=0.7, merged=0.0, **options):
    fp, kernel = fp_of(code)
    (mapping,) = dispatch_maps([(parse_spec(order), kernel.adapter)], (*fp.grid, 0))
    model = L2Model(fp, hw, resident, effective=1.0, softness=0.25, in_step=in_step, merged=merged, **options)
    return model.predict(order, mapping, kernel.adapter)


def test_model_on_a_case_computed_by_hand():
    """Four blocks of 8 threads, one at a time: each reads the same 32-byte unit of `a` and writes its own
    unit of `out`.

    Requests: 4 reads + 4 writes = 8.  The first read misses.  Each later read comes one block after the
    last one; in between, L2 saw 1 unit read + 1 unit written = 2 units.  With room for 1,024 units they
    hit: 1 miss of 8 (87.5 %).  With room for a single unit (2 > 1 x 1.25, past the soft edge) every read
    misses: 4 of 8 (50 %).  DRAM: the missed reads and the 4 written units."""
    p = predict(SHARED, "identity", tiny_gpu(32 * 1024))
    assert (p.requests, p.read_misses, p.l2_hit_rate) == (8, 1, 87.5)
    assert p.dram_bytes == (1 + 4) * 32
    p = predict(SHARED, "identity", tiny_gpu(32))
    assert (p.requests, p.read_misses, p.l2_hit_rate) == (8, 4, 50.0)
    assert p.dram_bytes == (4 + 4) * 32


def test_co_resident_blocks_in_step_share_what_lru_would_lose():
    """The same four blocks with a one-unit L2, where LRU alone loses every reuse.

    The steady state, where blocks start as others end (the first wave not told apart): four running at
    once (resident 4) and all in step (share 1.0): each later read follows the block before it, 1 position
    back, so a share 1 * (1 - 1/4)^2 = 0.5625 hits: 1 + 3 x 0.4375 = 2.3125 misses of 8 requests
    (71.09 %).  Two at a time: (1 - 1/2)^2 = 0.25 hits: 1 + 3 x 0.75 = 3.25 misses (59.375 %).  Half of
    them in step, two at a time: 0.125 hits: 1 + 3 x 0.875 = 3.625 misses (54.69 %)."""
    small = tiny_gpu(32)
    steady = {"crisp_first_wave": False}
    assert predict(SHARED, "identity", small, resident=4, in_step=1.0, **steady).l2_hit_rate == 71.09
    assert predict(SHARED, "identity", small, resident=2, in_step=1.0, **steady).l2_hit_rate == 59.38
    assert predict(SHARED, "identity", small, resident=2, in_step=0.5, **steady).l2_hit_rate == 54.69
    assert predict(SHARED, "identity", small, resident=2, in_step=0.0, **steady).l2_hit_rate == 50.0


def test_the_first_wave_starts_at_once():
    """The same blocks and L2, the first `resident` blocks starting together: every reuse among them hits,
    whatever the share in step.  Resident 4: the whole grid is the first wave, 1 miss of 8 (87.5 %).
    Resident 2: block 1 hits; blocks 2 and 3 as in the steady state, 0.25 hits each: 1 + 2 x 0.75 = 2.5
    misses (68.75 %); with none of the later ones in step, 1 + 2 = 3 misses (62.5 %)."""
    small = tiny_gpu(32)
    assert predict(SHARED, "identity", small, resident=4, in_step=0.0).l2_hit_rate == 87.5
    assert predict(SHARED, "identity", small, resident=2, in_step=1.0).l2_hit_rate == 68.75
    assert predict(SHARED, "identity", small, resident=2, in_step=0.0).l2_hit_rate == 62.5


def test_every_wave_starts_at_once_when_asked():
    """The same blocks and L2 with `crisp_waves`: waves {0, 1} and {2, 3} each start together.  Block 1 reuses
    from block 0 of its own wave (hit); block 2 from block 1, a wave earlier, which LRU has lost with one unit
    of room (miss), whatever the share in step; block 3 from block 2 of its own wave (hit): 2 misses of 8
    (75 %).  Resident 1, a wave per block: nothing in step, 4 misses (50 %).  Room for 1,024 units: only
    the first read misses (87.5 %)."""
    small = tiny_gpu(32)
    assert predict(SHARED, "identity", small, resident=2, in_step=1.0, crisp_waves=True).l2_hit_rate == 75.0
    assert predict(SHARED, "identity", small, resident=2, in_step=0.0, crisp_waves=True).l2_hit_rate == 75.0
    assert predict(SHARED, "identity", small, resident=1, in_step=1.0, crisp_waves=True).l2_hit_rate == 50.0
    assert predict(SHARED, "identity", tiny_gpu(32 * 1024), resident=2, crisp_waves=True).l2_hit_rate == 87.5


SHARED_STAGED = """
__global__ void k(const float* a, float* out) {
  __shared__ float tile[8];
  float acc = 0.0f;
  for (int pass = 0; pass < 1; ++pass) {
    tile[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    acc += tile[0];
    __syncthreads();
  }
  out[blockIdx.x * 8 + threadIdx.x] = acc;
}
int main() { k<<<4, 8>>>(0, 0); }"""


def test_a_request_coalescer_takes_merged_reads_out_of_the_lookups():
    """SHARED's reads staged through shared memory behind a barrier.  The four blocks in step as above (resident 4, share 1.0: 2.3125 misses), on a GPU whose L2 request
    coalescer merges half of the in-step reuses: 0.5 x 3 x 0.5625 = 0.84375 reads never reach L2, so
    8 - 0.84375 = 7.15625 requests with the same 2.3125 misses (67.69 %), and the same DRAM traffic.  With
    half in step: 0.5 x 0.5 x 3 x 0.5625 = 0.421875 merged, 1 + 3 x (1 - 0.28125) = 3.15625 misses of
    7.578125 requests (58.35 %).  A GPU without a coalescer, or a kernel that reads global memory straight
    (SHARED), ignores the share."""
    small = tiny_gpu(32)
    merging = dataclasses.replace(small, l2_request_coalescer=True,
                                  sources=(*small.sources, ("l2_request_coalescer", "a test")))
    steady = {"crisp_first_wave": False}
    plain = predict(SHARED_STAGED, "identity", small, resident=4, in_step=1.0, merged=0.5, **steady)
    merged = predict(SHARED_STAGED, "identity", merging, resident=4, in_step=1.0, merged=0.5, **steady)
    assert (plain.l2_hit_rate, plain.requests) == (71.09, 8)
    assert (merged.l2_hit_rate, merged.requests) == (67.69, 7)
    assert merged.dram_bytes == plain.dram_bytes
    assert predict(SHARED_STAGED, "identity", merging, resident=4, in_step=0.5, merged=0.5, **steady).l2_hit_rate == 58.35
    assert predict(SHARED_STAGED, "identity", merging, resident=4, in_step=1.0, merged=0.0, **steady).l2_hit_rate == 71.09
    assert predict(SHARED, "identity", merging, resident=4, in_step=1.0, merged=0.5, **steady).l2_hit_rate == 71.09
    # the first wave, all four blocks here, is in step whatever the share: half of its 3 reuses merge, 1.5
    # reads never reach L2, and the 1 miss is of 6.5 requests (84.62 %)
    assert predict(SHARED_STAGED, "identity", merging, resident=4, in_step=0.0, merged=0.5).l2_hit_rate == 84.62


def test_only_a_reader_on_the_same_side_leaves_a_near_partition_copy():
    """Eight blocks one after another read the same unit and write their own, on a GPU of two L2 partitions
    with room for everything: at home only the first read misses.  Half the reads are homed far and look the
    near partition up first.  Block j finds a near copy if one of the j blocks before it ran on its side:
    the last (1/2), the one before (1/4), the one before that (1/8), or any further back (the 1/8 left, for
    NEAR_READERS = 4).  Near misses: 1 + 1/2 + 1/4 + 1/8 = 1.875; far-homed misses 0.9375; requests 8 reads
    + 0.9375 + 8 writes x 1.5 = 20.9375; hit rate 1 - 1.9375 / 20.9375 = 90.75 %; sent across, the far
    near-misses and the far writes: 0.5 x (1.875 + 8) = 4.9375.  If the last reader left the copy wherever
    it ran (NEAR_READERS = 1): 1 near miss, 1.5 of 20.5 (92.68 %), 4.5 sent across."""
    from swzc.model import l2model

    code = SHARED.replace("k<<<4, 8>>>", "k<<<8, 8>>>")
    h200 = hwmodels.load("h200")
    roomy = dataclasses.replace(h200, l2_bytes=32 * 1024 * 1024, l2_partitions=2, chiplets=1, l2_request_coalescer=False)
    assert l2model.NEAR_READERS == 4
    p = predict(code, "identity", roomy, resident=8, in_step=1.0)
    assert (p.read_misses, p.l2_hit_rate, p.fabric) == (1, 90.75, 5)
    assert p.requests == round(20.9375)
    p = predict(code, "identity", roomy, resident=8, in_step=1.0, near_readers=1)
    assert (p.read_misses, p.l2_hit_rate) == (1, 92.68)
    assert p.fabric == round(4.5)


def test_co_resident_reuse_depends_on_the_blocks_that_run_at_once():
    """The naive GEMM's B strip is shared by blocks a tile row (256 positions) apart: when 1,056 blocks run
    at once (8 per SM) part of that reuse is in step; when 132 do (1 per SM) none of it is."""
    fp, kernel = fp_of(KERNELS / "naive_gemm.cu")
    (mapping,) = dispatch_maps([(parse_spec("identity"), kernel.adapter)], (*fp.grid, 0))
    h200 = hwmodels.load("h200")
    eight, one = (L2Model(fp, h200, r).predict("identity", mapping, kernel.adapter) for r in (1056, 132))
    assert eight.l2_hit_rate > one.l2_hit_rate + 10 and eight.dram_bytes < one.dram_bytes


def test_model_grouping_beats_rows_on_the_naive_gemm():
    fp, kernel = fp_of(KERNELS / "naive_gemm.cu")
    names = ["identity", "grouped:8", "grouped:64"]
    maps = dispatch_maps([(parse_spec(n), kernel.adapter) for n in names], (*fp.grid, 0))
    model = L2Model(fp, hwmodels.load("h200"))
    hits = [model.predict(n, m, kernel.adapter).l2_hit_rate for n, m in zip(names, maps)]
    assert hits[0] < hits[1] < hits[2]


def test_far_partition_lookups_on_a_stream_that_never_hits():
    """Every read misses: with two partitions, a far-homed read costs two lookups and two misses and a
    write two lookups and no miss, so the hit rate is (0.5 R + 1.5 W) ... = 50 % for R = W."""
    fp, kernel = fp_of(KERNELS / "transpose.cu")
    (mapping,) = dispatch_maps([(parse_spec("identity"), kernel.adapter)], (*fp.grid, 0))
    p = L2Model(fp, hwmodels.load("h200")).predict("identity", mapping, kernel.adapter)
    assert p.l2_hit_rate == pytest.approx(50.0, abs=0.5)


def test_analyze_json_contract():
    result = CliRunner().invoke(main, ["analyze", str(KERNELS / "smem_gemm.cu"), "--hw", "h200", "--json"])
    (kernel,) = json.loads(result.stdout)["kernels"]
    assert {"name", "status", "reason", "grid", "candidates", "chosen"} <= kernel.keys()
    assert kernel["grid"] == [128, 128, 1]
    names = [c["name"] for c in kernel["candidates"]]
    assert {"identity", "colmajor", "grouped:8", "hilbert:8", "serpentine:8", "morton:8", "grouped:12", "hilbert:16"} <= set(names)
    assert all(parse_spec(n).name == n for n in names)  # spelled as --swizzle takes them
    assert all(0.0 <= c["predicted_l2_hit_rate"] <= 100.0 and c["predicted_dram_bytes"] > 0 for c in kernel["candidates"])
    assert kernel["chosen"] == names[0] != "identity"


def test_rewrite_declines_with_numbers_when_nothing_helps(tmp_path):
    out = tmp_path / "s.cu"
    result = CliRunner().invoke(main, ["rewrite", str(KERNELS / "stencil2d.cu"), "-o", str(out), "--no-compile", "--json"])
    assert result.exit_code == 1
    (kernel,) = json.loads(result.stdout)["kernels"]
    assert kernel["status"] == "declined" and "identity" in kernel["reason"] and "%" in kernel["reason"]
    assert kernel["candidates"]


def test_mi300x_stencil_gains_from_the_chiplet_remap():
    """SwizzlePerf reports +69.9 L2 points for a 2D stencil on MI300X; the model gives the same direction."""
    fp, kernel = fp_of(KERNELS / "stencil2d.cu")
    names = ["identity", "xcd:8"]
    maps = dispatch_maps([(parse_spec(n), kernel.adapter) for n in names], (*fp.grid, 0))
    model = L2Model(fp, hwmodels.load("mi300x"))
    base, remap = (model.predict(n, m, kernel.adapter).l2_hit_rate for n, m in zip(names, maps))
    assert remap - base > 30


def test_the_ranking_runs_the_model_with_the_kernels_residency():
    """The naive GEMM as it is (8 blocks per SM: 256 threads) and with 40 KB of static shared memory a block
    (5 per SM): with fewer blocks at once, fewer of identity's B reuses (256 positions apart) are in step."""
    from swzc.model.rank import rank

    text = (KERNELS / "naive_gemm.cu").read_text()
    heavy = text.replace("  float acc = 0.0f;", "  __shared__ float pad[10240];\n  if (n < 0) pad[threadIdx.x] = 0.0f;\n  float acc = 0.0f;", 1)
    assert heavy != text
    h200 = hwmodels.load("h200")
    got = []
    for code in (text, heavy):
        src = load_bytes("g.cu", code.encode())
        (kernel,) = analyze(FileContext(src)).kernels
        got.append(rank(FileContext(src), kernel, h200))
    plain, fewer = got
    assert (plain.residency.blocks_per_cu, fewer.residency.blocks_per_cu) == (8, 5)
    assert fewer.residency.limit == "shared memory" and "compiler not used" in fewer.residency.source
    assert fewer.identity.l2_hit_rate < plain.identity.l2_hit_rate - 2


def test_the_stencil_s_halo_comes_from_the_neighbour_that_read_it():
    """The 5-point stencil reads a row above and below its 8: those halo rows are the neighbours' rows,
    read one tile row (256 positions) earlier, still in L2.  Measured by ncu on the H200: 64.2 %
    (bench/results/l2_ncu_h200.json).  Without the halo term more units would miss."""
    fp, kernel = fp_of(KERNELS / "stencil2d.cu")
    (mapping,) = dispatch_maps([(parse_spec("identity"), kernel.adapter)], (*fp.grid, 0), 1 << 16)
    model = L2Model(fp, hwmodels.load("h200"), 132 * 8)
    with_halo = model.predict("identity", mapping, kernel.adapter)
    assert with_halo.l2_hit_rate == pytest.approx(64.2, abs=1.0)
    model.reads = [dataclasses.replace(s, neighbours=()) for s in model.reads]
    without = model.predict("identity", mapping, kernel.adapter)
    assert without.read_misses > with_halo.read_misses * 1.05


def test_a_key_per_block_is_told_from_keys_that_repeat():
    """The shortcut for streams where every block has its own key (no sort needed) must not take a stream
    whose keys repeat: row 1 column 0 of a 64-column grid with offsets (2048, 64) is row 0 column 32."""
    from swzc.model.l2model import _one_block_each

    assert _one_block_each((8192, 4, 0), (256, 1024, 1))  # 4 x 1023 < 8192: rows never meet
    assert _one_block_each((0, 4, 0), (1, 1024, 1))  # a single row
    assert not _one_block_each((2048, 64, 0), (8, 64, 1))
    assert not _one_block_each((4, 4, 0), (2, 2, 1))
    assert not _one_block_each((1, 0, 0), (4, 4, 1))  # the columns share the row's key
    assert _one_block_each((0, 0, 0), (1, 1, 1))  # one block


STAGING = """
#define T 16
HELPERS
__global__ void k(const float* a, const float* b, float* out, int n) {
  __shared__ float tile[T][T];
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += T) {
    BODY
  }
  out[(blockIdx.y * T + threadIdx.y) * n + blockIdx.x * T + threadIdx.x] = acc;
}
int main() { k<<<dim3(64, 64), dim3(16, 16)>>>(0, 0, 0, 1024); }"""


@pytest.mark.parametrize("body, staged", [
    # a tile copied from global memory, then a barrier: staged
    ("tile[threadIdx.y][threadIdx.x] = a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x];"
     " __syncthreads(); acc += tile[threadIdx.y][0]; __syncthreads();", True),
    # through a pointer into the tile
    ("float* row = &tile[threadIdx.y][0]; row[threadIdx.x] = a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x];"
     " __syncthreads(); acc += tile[threadIdx.y][0]; __syncthreads();", True),
    # an asynchronous copy to shared memory, then a barrier
    ("__pipeline_memcpy_async(&tile[threadIdx.y][threadIdx.x], &a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x], 4);"
     " __pipeline_commit(); __pipeline_wait_prior(0); __syncthreads(); acc += tile[threadIdx.y][0]; __syncthreads();", True),
    # the copy without a barrier in the loop: the block's warps do not wait for one another
    ("tile[threadIdx.y][threadIdx.x] = a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x];"
     " acc += tile[threadIdx.y][threadIdx.x];", False),
    # a barrier, but shared memory only combines values the block computed (a reduction step)
    ("acc += a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x]; tile[threadIdx.y][threadIdx.x] = acc;"
     " __syncthreads(); acc += tile[threadIdx.y][0]; __syncthreads();", False),
    # straight from global memory
    ("acc += a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x] * b[(k0 + threadIdx.y) * n + blockIdx.x * T + threadIdx.x];",
     False),
])
def test_a_kernel_that_copies_tiles_to_shared_memory_behind_a_barrier_is_staged(body, staged):
    fp, _ = fp_of(STAGING.replace("HELPERS", "").replace("BODY", body))
    assert fp.staged is staged


LOAD = "a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x]"
USE = " __syncthreads(); acc += tile[threadIdx.y][0]; __syncthreads();"


@pytest.mark.parametrize("helpers, body, staged", [
    # through a local loaded from global memory
    ("", f"float v = {LOAD}; tile[threadIdx.y][threadIdx.x] = v;" + USE, True),
    ("", f"float v; v = {LOAD}; float w = v; tile[threadIdx.y][threadIdx.x] = w;" + USE, True),
    # a store written through a function-like macro
    ("#define TILE(i, j) tile[i][j]", f"TILE(threadIdx.y, threadIdx.x) = {LOAD};" + USE, True),
    # a helper handed the tile copies into it from a pointer it is also handed
    ("__device__ void load(const float* src, float* dst, int i) { dst[i] = src[i]; }",
     "load(a + k0, &tile[0][0], threadIdx.y * T + threadIdx.x);" + USE, True),
    # a helper handed the tile and a value read from global memory (st(&tile[i], ld(a + i)))
    ("__device__ void st(float* dst, float v) { *dst = v; }",
     f"st(&tile[threadIdx.y][threadIdx.x], {LOAD});" + USE, True),
    # a helper handed the tile starts an asynchronous copy into it
    ("__device__ void load(const float* src, float* dst) { __pipeline_memcpy_async(dst, src, 4); __pipeline_commit(); }",
     f"load(&{LOAD}, &tile[threadIdx.y][threadIdx.x]); __pipeline_wait_prior(0);" + USE, True),
    # inline PTX: cp.async into shared memory and bar.sync
    ("", 'asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(0), "l"(a)); asm volatile("bar.sync 0;");'
         " acc += tile[threadIdx.y][0];", True),
    # a helper handed the tile that only reads it
    ("__device__ float first(const float* t) { return t[0]; }", f"acc += first(&tile[0][0]) + {LOAD};" + USE, False),
])
def test_staging_through_locals_macros_helpers_and_asm(helpers, body, staged):
    fp, _ = fp_of(STAGING.replace("HELPERS", helpers).replace("BODY", body))
    assert fp.staged is staged


def test_the_bench_kernels_that_stage_their_tiles():
    assert fp_of(KERNELS / "smem_gemm.cu")[0].staged
    assert not fp_of(KERNELS / "naive_gemm.cu")[0].staged
    assert not fp_of(KERNELS / "transpose.cu")[0].staged  # one copy through shared memory, in no loop
    async_copies, _ = fp_of(KERNELS / "async_gemm.cu")  # __pipeline_memcpy_async, double-buffered
    assert async_copies.staged and not async_copies.unknown
    assert sorted(a.array for a in async_copies.accesses) == ["A", "B", "C"]


def test_a_file_scope_shared_buffer_stages_too():
    code = STAGING.replace("HELPERS", "").replace("  __shared__ float tile[T][T];\n", "").replace("#define T 16\n", "#define T 16\n__shared__ float tile[T][T];\n")
    body = ("tile[threadIdx.y][threadIdx.x] = a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x];"
            " __syncthreads(); acc += tile[threadIdx.y][0]; __syncthreads();")
    assert fp_of(code.replace("BODY", body))[0].staged


TWINS = """
#define T 16
__global__ void direct(const float* a, float* out, int n) {
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += T) acc += a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x];
  out[(blockIdx.y * T + threadIdx.y) * n + blockIdx.x * T + threadIdx.x] = acc;
}
__global__ void staged(const float* a, float* out, int n) {
  __shared__ float tile[T][T];
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += T) {
    tile[threadIdx.y][threadIdx.x] = a[(blockIdx.y * T + threadIdx.y) * n + k0 + threadIdx.x];
    __syncthreads();
    acc += tile[threadIdx.y][threadIdx.x];
    __syncthreads();
  }
  out[(blockIdx.y * T + threadIdx.y) * n + blockIdx.x * T + threadIdx.x] = acc;
}
int main() {
  direct<<<dim3(256, 256), dim3(T, T)>>>(0, 0, 4096);
  staged<<<dim3(256, 256), dim3(T, T)>>>(0, 0, 4096);
}"""


def test_kernels_of_one_shape_rank_apart_when_only_one_stages_its_reads():
    """The two kernels read and write the same footprints; only `staged` copies through shared memory behind
    a barrier, so on the H200 only its in-step reuses are merged: a ranking kept for one shape must not stand
    for the other."""
    from swzc.model.rank import rank

    src = load_bytes("twins.cu", TWINS.encode())
    direct, staged = analyze(FileContext(src)).kernels
    h200 = hwmodels.load("h200")
    first, second = rank(FileContext(src), direct, h200), rank(FileContext(src), staged, h200)
    assert not first.footprint.staged and second.footprint.staged
    assert first.identity.merged == 0 < second.identity.merged
    assert second.identity.l2_hit_rate < first.identity.l2_hit_rate


def test_a_grid_modelled_over_its_first_blocks_reports_reads_and_merges_for_all_of_it():
    """512 x 512 blocks are modelled over the first 65,536 positions and scaled to the whole grid: the reads
    are every block's footprint, and the merged reads grow with them."""
    from swzc.model.rank import rank

    src = load_bytes("big.cu", TWINS.replace("dim3(256, 256)", "dim3(512, 512)").replace("4096", "8192").encode())
    staged = analyze(FileContext(src)).kernels[1]
    ranking = rank(FileContext(src), staged, hwmodels.load("h200"))
    per_block = sum(a.sectors.size for a in ranking.footprint.accesses if not a.write)
    assert ranking.identity.reads == per_block * 512 * 512
    assert 0 < ranking.identity.merged < ranking.identity.reads


def _predicted(*rates):
    from swzc.model.l2model import Prediction

    return [Prediction(name, rate, 1e6, 100, 10) for name, rate in rates]


def test_a_gpu_times_the_best_then_the_best_of_each_other_kind_the_model_rates_as_a_tie():
    """Within TIE_POINTS (3) of the best, each kind not yet taken comes forward in rank order (the xcd
    composition is a kind of its own); below the tie, and for kinds already taken, the ranking stands."""
    from swzc.model.rank import TIE_POINTS, measuring_order

    assert TIE_POINTS == 3.0
    ranked = _predicted(("serpentine:8", 86.2), ("hilbert:16", 85.7), ("serpentine:16", 85.6), ("grouped:8", 85.3),
                        ("xcd:8+grouped:8", 85.2), ("hilbert:8", 85.1), ("morton:8", 83.3), ("colmajor", 83.1),
                        ("grouped:4", 80.0), ("identity", 51.7))
    order = [p.candidate for p in measuring_order(ranked)]
    assert order == ["serpentine:8", "hilbert:16", "grouped:8", "xcd:8+grouped:8", "morton:8",
                     "serpentine:16", "hilbert:8", "colmajor", "grouped:4", "identity"]
    assert measuring_order([]) == ()
    alone = _predicted(("grouped:8", 90.0), ("grouped:16", 89.0), ("identity", 60.0))
    assert measuring_order(alone) == tuple(alone)


def test_the_built_in_proposer_offers_candidates_in_the_order_a_gpu_should_time_them():
    from swzc.search.proposers import BuiltinProposer, KernelTask
    from swzc.model.rank import Ranking, rank

    src = load(str(ROOT / "bench" / "suite" / "kernels" / "gemm_bf16_wmma.cu"))
    analysis = analyze(FileContext(src))
    hw = hwmodels.load("h200")
    ranking = rank(FileContext(src), analysis.kernels[0], hw)
    assert isinstance(ranking, Ranking)
    offered = [spec.name for spec, _ in BuiltinProposer().candidates(KernelTask(FileContext(src), analysis, 0, hw, ranking, measured=True))]
    expected = [p.candidate for p in ranking.to_measure if p.candidate != "identity" and p.l2_hit_rate > ranking.identity.l2_hit_rate]
    assert offered == expected
    by_rate = [p.candidate for p in ranking.predictions if p.candidate in offered]
    assert offered[0] == by_rate[0] and offered != by_rate  # the best first; kinds the model ties with it next


def test_gaps_back_to_the_kth_earlier_block_with_the_same_key_in_dispatch_order():
    """Keys 5, 7, 5, 5, 7, 9, 5 at positions 0 to 6: key 5 at 0, 2, 3 and 6, key 7 at 1 and 4."""
    from swzc.model.l2model import _occurrences

    occ = _occurrences(np.array([5, 7, 5, 5, 7, 9, 5]), np.arange(7))
    back = occ.gaps_back(4)
    assert back.tolist() == [[0, 0, 2, 1, 3, 0, 3], [0, 0, 0, 3, 0, 0, 4], [0, 0, 0, 0, 0, 0, 6], [0] * 7]
    assert (back[0] == occ.gap).all()


OVERLAPPING = """
__global__ void k(const float* a, float* out) {
  out[blockIdx.x * 8 + threadIdx.x] = a[blockIdx.x * 8 + threadIdx.x] + a[blockIdx.x * 8 + threadIdx.x + 8];
}
int main() { k<<<4, 8>>>(0, 0); }"""


def test_the_first_wave_shares_halos_too():
    """Block b reads units b and b + 1 (the second its neighbour's first) and writes its own: no block repeats
    another's footprint, so all sharing is the halo.  A one-unit L2, the four blocks starting together: each
    block after the first finds the unit its neighbour brought in, 2 + 3 x 1 = 5 misses of 8 reads and 4
    writes (58.33 %).  Started one by one and never in step, every read misses (33.33 %)."""
    small = tiny_gpu(32)
    assert predict(OVERLAPPING, "identity", small, resident=4, in_step=0.0).l2_hit_rate == 58.33
    assert predict(OVERLAPPING, "identity", small, resident=4, in_step=0.0, crisp_first_wave=False).l2_hit_rate == 33.33


# ---- no order that moves more bytes from DRAM ----------------------------------------------------------------


def _ranked_with(monkeypatch, tmp_path, numbers):
    """The ranking of the naive GEMM with the model's numbers (hit %, DRAM MB) given per order; the rest at identity's."""
    from swzc.model import rank as ranking
    from swzc.model.l2model import Prediction

    class Model:
        def __init__(self, *args, **kwargs):
            pass

        def predict(self, name, order, adapter, divisor=0):
            hit, mb = numbers.get(name, numbers["identity"])
            return Prediction(name, hit, mb * 1e6, 1000, 100)

    monkeypatch.setattr(ranking, "L2Model", Model)
    (tmp_path / "g.cu").write_text(NAIVE_GEMM)
    ctx = FileContext(load(str(tmp_path / "g.cu")))
    return ctx, ranking.rank(ctx, analyze(ctx).kernels[0], hwmodels.load("h200"))


def test_the_order_chosen_never_moves_more_bytes_from_dram_than_the_original(monkeypatch, tmp_path):
    ctx, got = _ranked_with(monkeypatch, tmp_path, {"identity": (50.0, 100), "serpentine:64": (90.0, 150),
                                                    "grouped:8": (80.0, 90)})
    assert got.predictions[0].candidate == "serpentine:64" and got.chosen.name == "grouped:8"
    # nor is it measured under --bench
    from swzc.search.proposers import BuiltinProposer, KernelTask

    offered = [s.name for s, _ in BuiltinProposer().candidates(KernelTask(ctx, analyze(ctx), 0, hwmodels.load("h200"), got,
                                                                          measured=True))]
    assert "grouped:8" in offered and "serpentine:64" not in offered


def test_where_every_order_that_gains_moves_more_bytes_the_kernel_is_declined_and_says_why(monkeypatch, tmp_path):
    _, got = _ranked_with(monkeypatch, tmp_path, {"identity": (50.0, 100), "serpentine:64": (90.0, 150),
                                                  "grouped:8": (52.0, 90)})
    assert got.chosen is None
    assert got.reason.startswith("no candidate that moves no more bytes from DRAM than identity (100 MB) raises")
    assert "serpentine:64 would reach 90.0 % against 50.0 %, but with 150 MB from DRAM" in got.reason


# ---- the DRAM floor ------------------------------------------------------------------------------------------


def test_the_dram_floor_of_a_gemm_is_each_matrix_once(monkeypatch, tmp_path):
    from swzc.model.floor import compulsory
    from swzc.model import rank as ranking

    (tmp_path / "g.cu").write_text(NAIVE_GEMM)
    ctx = FileContext(load(str(tmp_path / "g.cu")))
    got = ranking.rank(ctx, analyze(ctx).kernels[0], hwmodels.load("h200"))
    floor = compulsory(got.footprint)
    assert floor.exact and floor.bytes == 3 * 4096 * 4096 * 4  # A and B read once, C written once
    assert floor.times(got.identity.dram_bytes) > floor.times(got.prediction(got.chosen.name).dram_bytes) >= 1.0


def test_the_dram_floor_counts_each_sector_once_and_says_where_it_is_a_bound():
    from swzc.model.floor import compulsory
    from swzc.model.footprint import Footprint
    from swzc.model.footprint.sites import Access

    def access(array, write, sectors, block_bytes):
        return Access(array, write, 4, block_bytes, np.array(sectors, dtype=np.int64), 1)

    # 4 x 4 tiles, each block reading two sectors 64 bytes apart and its row's neighbour overlapping it
    reads = access("a", False, [0, 2], (256, 64, 0))
    again = access("a", False, [1], (256, 64, 0))  # the sector between: the array is read whole, once
    writes = access("c", True, [0], (128, 32, 0))
    fp = Footprint("k", (4, 4, 1), (32, 1, 1), (4, 4, 1), (reads, again, writes), (), 32, "2d")
    floor = compulsory(fp)
    # a: rows 0..3 x 256 B + cols 0..3 x 64 B + sectors 0..2 -> bytes [0, 3 * 256 + 3 * 64 + 96): one run
    assert floor.exact and floor.bytes == 3 * 256 + 3 * 64 + 96 + 16 * 32
    # a block touching more than the enumeration budget allows, moved over a wide grid: its span, marked a bound
    wide = access("a", False, list(range(0, 1 << 21, 2)), (1 << 40, 1 << 30, 0))
    bound = compulsory(Footprint("k", (4096, 4096, 1), (32, 1, 1), (4096, 4096, 1), (wide,), (), 32, "2d"))
    assert not bound.exact and bound.bytes > 0


def test_a_gemm_s_io_bound_is_the_pebbling_bound_for_its_sizes_and_the_fast_memory(tmp_path):
    import math
    from swzc.model import rank as ranking
    from swzc.model.floor import compulsory, fast_memory

    (tmp_path / "g.cu").write_text(NAIVE_GEMM)
    ctx = FileContext(load(str(tmp_path / "g.cu")))
    hw = hwmodels.load("h200")
    got = ranking.rank(ctx, analyze(ctx).kernels[0], hw)
    # the L2 and 132 SMs' registers, shared memory and an L1 allowance: 137 MB, which a 4096^3 GEMM's operands fit
    assert fast_memory(hw) == hw.l2_bytes + 132 * (65536 * 4 + 233472 + 65536) and got.fast_bytes == fast_memory(hw)
    assert got.floor.product is None and got.floor.bytes == 3 * 4096 * 4096 * 4
    small = compulsory(got.footprint, 1 << 20)  # a fast memory of 1 MiB: 2mnk / sqrt(S) - 2S elements, S = 2^18
    p = small.product
    assert (p.m, p.n, p.k, p.batch, p.arrays) == (4096, 4096, 4096, 1, ("A", "B", "C"))
    assert p.bytes == int((2 * 4096 ** 3 / math.sqrt(1 << 18) - 2 * (1 << 18)) * 4)
    assert small.over_bound(got.identity.dram_bytes) == got.identity.dram_bytes / p.bytes
    assert compulsory(got.footprint).product is None  # no fast memory given
    two = compulsory(got.footprint, 1 << 20, domains=2).product  # two chiplets, each its own S: 2S each off the bound
    assert p.bytes - two.bytes == 2 * (1 << 18) * 4


def _panel(rows, row_bytes, stride):
    """The sectors of `rows` rows of `row_bytes` bytes, `stride` bytes apart."""
    return np.unique(np.concatenate([np.arange(i * stride, i * stride + row_bytes, 32) // 32 for i in range(rows)]))


def _product_of(*accesses, tiles=(8, 8, 1), scalar=None, elems=None, fast=1 << 14):
    from swzc.model.floor import compulsory
    from swzc.model.footprint import Footprint
    from swzc.model.footprint.sites import Access

    flags = scalar or (True,) * len(accesses)
    sizes = elems or (4,) * len(accesses)
    made = tuple(Access(name, write, size, offsets, sectors, 1, False, flag)
                 for (name, write, offsets, sectors), flag, size in zip(accesses, flags, sizes))
    return compulsory(Footprint("k", (tiles[1], tiles[0], tiles[2]), (16, 16, 1), tiles, made, (), 256, "2d"), fast).product


def test_only_the_shape_of_a_matrix_product_gets_an_io_bound():
    import math

    # C (128 x 128) = A (128 x 1024) B (1024 x 128), floats, row-major, 8 x 8 tiles of 16 x 16, a 16 KiB L2
    a = ("A", False, (16 * 4096, 0, 0), _panel(16, 4096, 4096))  # each tile row's 16 rows of A
    b = ("B", False, (0, 64, 0), _panel(1024, 64, 512))  # each tile column's 16 columns of B
    c = ("C", True, (16 * 512, 64, 0), _panel(16, 64, 512))
    got = _product_of(a, b, c)
    assert (got.m, got.n, got.k, got.batch) == (128, 128, 1024, 1)
    assert got.bytes == int((2 * 128 * 128 * 1024 / 64 - 2 * 4096) * 4)  # S = 16 KiB / 4 B = 4096 elements
    wide = [(n, w, o, sec) for n, w, o, sec in (a, b, c)]
    rect = _product_of(a, ("B", False, (0, 128, 0), _panel(1024, 128, 1024)), ("C", True, (16 * 1024, 128, 0), _panel(16, 128, 1024)))
    assert (rect.m, rect.n, rect.k) == (128, 256, 1024)  # 32-column tiles: C is 128 x 256
    assert _product_of(*wide, scalar=(False, True, True)) is None  # A declared float4: its count is not m k
    assert _product_of(*wide, scalar=(True, True, False)) is None
    half = _product_of(("A", False, (16 * 2048, 0, 0), _panel(16, 2048, 2048)), b, c, elems=(2, 4, 4),
                       fast=1 << 12)  # A in halves: elements of the smaller size, 2 bytes, S = 2048 of them
    assert (half.m, half.n, half.k) == (128, 128, 1024) and half.bytes == int((2 * 128 * 128 * 1024 / math.sqrt(2048) - 2 * 2048) * 2)
    outer = _product_of(("A", False, (64, 0, 0), _panel(1, 64, 64)), ("B", False, (0, 64, 0), _panel(1, 64, 64)), c)
    assert outer is None  # C = a b^T (k = 1): the operands fit, 2mnk / sqrt(S) - 2S is below zero
    assert _product_of(a, b, c, ("C", False, c[2], c[3])) == got  # C = A B + C reads its result too
    assert _product_of(a, c) is None  # no column panel
    assert _product_of(a, b, c, ("alpha", False, (0, 0, 0), np.arange(1))) == got  # a scalar every block reads
    assert _product_of(a, b, c, ("bias", False, (0, 64, 0), np.arange(2))) is None  # a second column-panel array
    assert _product_of(a, b, c, ("mask", False, (16 * 512, 64, 0), c[3])) is None  # another array read tile by tile
    assert _product_of(a, b, c, ("A", False, (16 * 4096, 64, 0), np.arange(1))) is None  # A read a second way too
    assert _product_of(("A", False, (16 * 4096, 64, 0), a[3]), b, c) is None  # A moves with both axes: not a panel
    assert _product_of(a, b, c, ("D", True, c[2], c[3])) is None  # two results
    z = 1 << 30
    batched = [(n, w, (o[0], o[1], z), sec) for n, w, o, sec in (a, b, c)]
    got4 = _product_of(*batched, tiles=(8, 8, 4))
    assert (got4.m, got4.n, got4.k, got4.batch) == (128, 128, 1024, 4) and got4.bytes == 4 * got.bytes
    assert _product_of(batched[0], b, batched[2], tiles=(8, 8, 4)) is None  # every slice reads one B: not independent


def test_an_order_from_outside_predicted_to_move_more_bytes_is_rejected_before_it_is_chosen_or_measured(monkeypatch, tmp_path):
    from swzc.formulas.swizzles import CustomSwizzle
    from swzc.model.l2model import Prediction
    from swzc.search.proposers import KernelTask, Proposed, vet
    from support import GROUPED_8_BODY

    ctx, got = _ranked_with(monkeypatch, tmp_path, {"identity": (50.0, 100), "serpentine:64": (90.0, 90)})
    from swzc.search.llm.restrict import check_body

    body = CustomSwizzle("g8", check_body(GROUPED_8_BODY).body, GROUPED_8_BODY)
    # the LLM's order is predicted by the stand-in model to move half as much again as identity
    monkeypatch.setattr("swzc.search.proposers._prediction",
                        lambda task, formula: Prediction(formula.name, 95.0, 150e6, 1000, 100))
    tried = vet(KernelTask(ctx, analyze(ctx), 0, hwmodels.load("h200"), got, measured=True), Proposed("llm", body))
    assert tried.status == "rejected" and tried.detail.startswith("predicted to move more bytes from DRAM than the original "
                                                                 "(150 MB against 100 MB, at 95.0 % L2 hits)")
