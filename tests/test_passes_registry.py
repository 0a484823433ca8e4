"""The registry of passes (swzc.passes.PASSES): every kernel is rewritten by exactly one registered pass, and
the driver reaches the passes only through the registry, so a pass registered there is the one that runs."""

from dataclasses import dataclass

import pytest

from swzc import passes
from swzc.analysis.context import FileContext
from swzc.analysis.kernels import analyze
from swzc.frontend.source import load_bytes
from swzc.passes.block_index import BlockIndexPass
from swzc.passes.tile_loop import TileLoopPass
from swzc.pipeline.driver import Options, load_hw, parse_swizzle, rewrite_source
from swzc.rewrite.edits import Edit

BLOCKS = ("__global__ void blocks(float* c, int n) {\n"
          "  c[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] = 1.0f;\n}\n")
TILES = ("__global__ void tiles(float* o, int T) {\n"
         "  for (int t = blockIdx.x; t < T; t += gridDim.x) {\n    o[t] = 1.0f;\n  }\n}\n")
CODE = BLOCKS + TILES


def rewritten(code: str, swizzle: str = "xcd:8"):
    src = load_bytes("k.cu", code.encode())
    ctx = FileContext(src)
    return rewrite_source(ctx, analyze(ctx), Options(hw=load_hw("mi300x"), swizzle=parse_swizzle(swizzle), compile=False))


def test_each_kernel_has_exactly_one_pass():
    analysis = analyze(FileContext(load_bytes("k.cu", CODE.encode())))
    chosen = {k.name: [type(p) for p in passes.PASSES if p.applies(k)] for k in analysis.kernels}
    assert chosen == {"blocks": [BlockIndexPass], "tiles": [TileLoopPass]}
    assert [p.name for p in passes.PASSES] == ["tile_loop", "block_index"]  # the names a registry lookup uses
    assert [type(passes.for_kernel(k)) for k in analysis.kernels] == [BlockIndexPass, TileLoopPass]


def test_the_passes_rewrite_their_own_kernels():
    result = rewritten(CODE)
    assert {o.name: o.status for o in result.outcomes} == {"blocks": "rewritten", "tiles": "rewritten"}
    text = result.new.decode()
    assert "const uint3 swzc_block = swzc_xcd8_2d(blockIdx.x" in text  # the block-index pass
    assert "const int swzc_tile = swzc_xcd8_linear(t, 0u, 0u, (unsigned)(T)).x;" in text  # the tile-loop pass


@dataclass
class Marking:
    """A pass that takes every kernel and leaves a comment after its `__global__` (the library of
    swizzle functions goes where it begins)."""

    name: str = "marking"

    def applies(self, kernel):
        return True

    def refusal(self, kernel, index):
        return None

    def edits(self, analysis, kernel, proposal, names):
        return [Edit.insert(kernel.library_at + len("__global__"), f"/* marked {kernel.name} with {proposal.spec.name} */")], {}


def test_the_driver_runs_what_the_registry_holds(monkeypatch):
    monkeypatch.setattr(passes, "PASSES", (Marking(), *passes.PASSES))
    text = rewritten(CODE).new.decode()
    assert "/* marked blocks with xcd:8 */" in text and "/* marked tiles with xcd:8 */" in text
    assert "swzc_block =" not in text and "swzc_tile =" not in text  # the registered passes did not run


@pytest.mark.parametrize("removed", [TileLoopPass, BlockIndexPass])
def test_a_kernel_whose_pass_is_not_registered_is_not_rewritten_by_another(monkeypatch, removed):
    monkeypatch.setattr(passes, "PASSES", tuple(p for p in passes.PASSES if not isinstance(p, removed)))
    with pytest.raises(StopIteration):
        rewritten(CODE)
