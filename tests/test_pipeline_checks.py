"""The pipeline's own checks, each seen to fail when the check is switched off: a proof that fails stops the
rewrite, a helper shared by kernels that are not rewritten alike is left alone, and the spliced names never
collide with the file's."""

from dataclasses import replace
from types import MappingProxyType

import pytest
from click.testing import CliRunner

from swzc.formulas import prove as prover
from swzc.formulas import steps, swizzles
from swzc.analysis.kernels import analyze
from swzc.commands.cli import main
from swzc.core.errors import ExitCode, SwzcError
from swzc.pipeline.driver import Options, load_hw, parse_swizzle, rewrite_file, rewrite_source
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext

# 100 blocks on 8 chiplets: the naive remap x * (T / N) + r is not a permutation there.
ROW_SUM = """\
__global__ void row_sum(const float* in, float* out) {
  const int b = blockIdx.x;
  float s = 0.0f;
  for (int i = threadIdx.x; i < 256; i += blockDim.x) s += in[b * 256 + i];
  out[b] = s;
}
int main() { row_sum<<<100, 256>>>(0, 0); }
"""

NAIVE_XCD = """\
static __device__ __forceinline__ unsigned swzc_xcd(unsigned p, unsigned m, unsigned n, unsigned chiplets) {
  const unsigned total = m * n;
  return (p % chiplets) * (total / chiplets) + p / chiplets;
}
"""


def rewritten(code: str, swizzle: str | None = "grouped:8", hw: str = "h200"):
    src = load_bytes("k.cu", code.encode())
    return rewrite_source(FileContext(src), analyze(FileContext(src)), Options(hw=load_hw(hw), swizzle=parse_swizzle(swizzle), compile=False))


@pytest.fixture
def naive_chiplet_remap(tmp_path, monkeypatch):
    """The chiplet remap replaced by its naive form, in the prover and the splice alike (one definition)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(steps, "KINDS", MappingProxyType({**steps.KINDS, "xcd": replace(steps.KINDS["xcd"], cxx=NAIVE_XCD)}))
    prover.build_prover.cache_clear()
    yield
    prover.build_prover.cache_clear()


def test_a_failed_proof_stops_the_rewrite(tmp_path, naive_chiplet_remap):
    path = tmp_path / "k.cu"
    path.write_text(ROW_SUM)
    with pytest.raises(SwzcError) as caught:
        rewrite_file(str(path), Options(hw=load_hw("mi300x"), swizzle=parse_swizzle("xcd:8"), compile=False))
    assert caught.value.code == ExitCode.CHECK_FAILED
    assert "row_sum: xcd:8 is not a permutation of the grid: grid 100x1x1" in caught.value.message
    assert "nothing written" in caught.value.message


def test_a_failed_proof_is_exit_3_and_writes_nothing(tmp_path, monkeypatch, naive_chiplet_remap):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text(ROW_SUM)
    result = CliRunner().invoke(main, ["rewrite", "k.cu", "--hw", "mi300x", "--swizzle", "xcd:8", "--no-compile",
                                       "-o", "out.cu", "--patch", "p.diff"])
    assert result.exit_code == ExitCode.CHECK_FAILED and "is not a permutation" in result.stderr
    assert not (tmp_path / "out.cu").exists() and not (tmp_path / "p.diff").exists()


def test_the_sound_chiplet_remap_of_the_same_grid_is_proven(tmp_path, monkeypatch):
    """The control: the shipped formula passes where the naive one fails."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (outcome,) = rewritten(ROW_SUM, "xcd:8", "mi300x").outcomes
    assert outcome.status == "rewritten" and outcome.proof == "bijection on grid 100x1x1"


# ---- a helper shared by kernels: rewritten only if every kernel that reaches it is rewritten alike ------

SHARED_HELPER = """\
#include <cooperative_groups.h>
static __device__ int tile_row() { return blockIdx.y * 16 + threadIdx.y; }

__global__ void plain(float* c, int ld) {
  c[tile_row() * ld + blockIdx.x * 16 + threadIdx.x] = 1.0f;
}

__global__ void synced(float* c, int ld) {
  cooperative_groups::this_grid().sync();
  c[tile_row() * ld + blockIdx.x * 16 + threadIdx.x] += 1.0f;
}

int main() {
  plain<<<dim3(64, 64), dim3(16, 16)>>>(0, 4096);
  synced<<<dim3(64, 64), dim3(16, 16)>>>(0, 4096);
}
"""


def test_a_helper_shared_with_a_refused_kernel_keeps_the_other_kernel_unrewritten():
    """Rewriting `plain` would rewrite tile_row, which `synced` (refused) reads too: both stay as they are."""
    result = rewritten(SHARED_HELPER)
    outcomes = {o.name: o for o in result.outcomes}
    assert outcomes["synced"].status == "refused" and "grid-wide synchronisation" in outcomes["synced"].reason
    assert outcomes["plain"].status == "refused"
    assert outcomes["plain"].reason == ("shares helper tile_row (which reads the block index) with kernel synced, "
                                        "which is not rewritten the same way")
    assert result.new == result.old and result.patch == ""


def test_kernels_sharing_a_helper_are_rewritten_together_when_alike():
    """The control: without the hazard, both kernels take the same swizzle and the helper is rewritten."""
    code = SHARED_HELPER.replace("  cooperative_groups::this_grid().sync();\n", "")
    result = rewritten(code)
    assert {o.name: o.status for o in result.outcomes} == {"plain": "rewritten", "synced": "rewritten"}
    assert b"static __device__ int tile_row() { return swzc_grouped8_2d(" in result.new


# ---- the spliced names ----------------------------------------------------------------------------------

TAKEN = """\
__global__ void k(float* c, int ld) {
  const int swzc_block = 7;
  c[(blockIdx.y * 16 + threadIdx.y) * ld + blockIdx.x * 16 + threadIdx.x] = swzc_block;
}
int main() { k<<<dim3(64, 64), dim3(16, 16)>>>(0, 4096); }
"""


def test_the_swizzled_index_never_takes_a_name_the_file_uses():
    result = rewritten(TAKEN)
    assert b"const uint3 swzc_block_1 = swzc_grouped8_2d(" in result.new
    assert b"(swzc_block_1.y * 16 + threadIdx.y) * ld + swzc_block_1.x * 16" in result.new
    assert b"= swzc_block;" in result.new  # the file's own variable, untouched
    again = rewritten(TAKEN.replace("swzc_block", "swzc_block_1").replace("const int swzc_block_1 = 7;",
                                                                           "const int swzc_block = 7, swzc_block_1 = 8;"))
    assert b"const uint3 swzc_block_2 = " in again.new
