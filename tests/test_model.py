"""Footprints from the AST, the L2 model on cases computed by hand, and the ranking contract."""

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from support import ROOT

from swzc import hw as hwmodels
from swzc.analysis import analyze
from swzc.cli import main
from swzc.footprint import footprint
from swzc.l2model import L2Model
from swzc.prove import dispatch_maps
from swzc.source import load, load_bytes
from swzc.swizzles import parse_spec

KERNELS = ROOT / "bench" / "l2" / "kernels"


def fp_of(path_or_code, name=None):
    src = load(str(path_or_code)) if not isinstance(path_or_code, str) else load_bytes("t.cu", path_or_code.encode())
    kernels = analyze(src).kernels
    kernel = next(k for k in kernels if name is None or k.name == name)
    return footprint(src, kernel), kernel


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


def predict(code, order, hw):
    fp, kernel = fp_of(code)
    (mapping,) = dispatch_maps([(parse_spec(order), kernel.adapter)], (*fp.grid, 0))
    return L2Model(fp, hw, effective=1.0, softness=0.25).predict(order, mapping, kernel.adapter)


def test_model_on_a_case_computed_by_hand():
    """Four blocks of 8 threads: each reads the same 32-byte unit of `a` and writes its own unit of `out`.

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
    assert {"identity", "colmajor", "grouped:8", "hilbert:8"} <= set(names)
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
