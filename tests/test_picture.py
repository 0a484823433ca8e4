"""`swzc show` and swzc.report.picture: waves and places worked out by hand, the files it draws, the CLI's refusals."""

import sys
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from support import SIZED

from swzc.target import hw as hwmodels
from swzc.commands.cli import main  # before swzc.commands.show: swzc.commands.cli registers the command
from swzc.report import picture
from swzc.verify.bench import Attempt, KernelBench
from swzc.core.errors import SwzcError
from swzc.model.l2model import Prediction
from swzc.analysis.kernels import analyze
from swzc.formulas.prove import dispatch_maps
from swzc.frontend.source import load_bytes
from swzc.formulas.swizzles import parse_spec
from swzc.analysis.context import FileContext

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

GEMM = b"""\
__global__ void gemm(const float* A, const float* B, float* C, int n) {
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
  C[row * n + col] = acc;
}

void run(const float* A, const float* B, float* C) {
  gemm<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, 4096);
}
"""

# The same kernel with no launch: the model cannot rank it.
UNLAUNCHED = GEMM.split(b"void run")[0]

H200 = hwmodels.load("h200")
MI300X = hwmodels.load("mi300x")


def identity_order(gx, gy, gz=1):
    """What dispatch_maps gives for identity on a 2D grid: position p runs block (p % gx, p // gx % gy, …)."""
    p = np.arange(gx * gy * gz)
    return np.stack([p % gx, p // gx % gy, p // (gx * gy)], axis=1).astype(np.uint32)


def order_of(spec, adapter, shape):
    return dispatch_maps([(parse_spec(spec), adapter)], shape)[0]


# ---- positions, waves and places, by hand ---------------------------------------------------------------------


def test_identity_rows_are_waves_when_a_row_fills_the_gpu():
    positions = picture.order_grid(identity_order(4, 4), "2d", (4, 4, 1))
    assert positions.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert picture.waves(positions, 4).tolist() == [[r] * 4 for r in range(4)]


def test_identity_from_the_prover_matches_the_hand_order():
    assert np.array_equal(order_of("identity", "2d", (4, 4, 1, 0)), identity_order(4, 4))


def test_grouped_2_puts_each_wave_in_a_2x2_square():
    positions = picture.order_grid(order_of("grouped:2", "2d", (4, 4, 1, 0)), "2d", (4, 4, 1))
    # two tile rows per group, walked column by column inside it
    assert positions.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]
    assert picture.waves(positions, 4).tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]


def test_a_1d_decoded_grid_draws_as_its_tiles():
    # blockIdx.x decoded as (x / 4, x % 4): 16 blocks are 4 x 4 tiles, as the 2D grid above
    positions = picture.order_grid(order_of("grouped:2", "1d", (16, 1, 1, 4)), "1d", (16, 1, 1), 4)
    assert positions.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]


def test_a_linear_grid_is_folded_into_rows():
    shape = picture.tile_shape("linear", (10, 1, 1))
    assert (shape.rows, shape.cols, shape.fold) == (3, 4, 4)
    positions = picture.order_grid(order_of("identity", "linear", (10, 1, 1, 0)), "linear", (10, 1, 1))
    assert positions.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, -1, -1]]


def test_only_the_first_z_slice_is_drawn():
    positions = picture.order_grid(identity_order(2, 2, 3), "2d", (2, 2, 3))
    assert positions.tolist() == [[0, 1], [2, 3]]


def test_a_large_grid_is_cut_to_its_top_left_corner_and_unlisted_tiles_are_marked():
    gx = gy = 300
    full = picture.order_grid(identity_order(gx, gy), "2d", (gx, gy, 1))
    assert full.shape == (picture.MAX_SIDE, picture.MAX_SIDE)
    assert full[0, 255] == 255 and full[1, 0] == 300 and full[255, 255] == 255 * 300 + 255
    listed = picture.order_grid(identity_order(gx, gy)[:600], "2d", (gx, gy, 1))  # two rows listed
    assert (listed[:2] >= 0).all() and (listed[2:] == picture.NOT_LISTED).all()
    assert (picture.waves(listed, 7)[2:] == picture.NOT_LISTED).all()


def test_resident_blocks_count_threads_only():
    assert picture.resident_blocks(H200, 256) == 132 * 8  # 2048 threads per SM / 256
    assert picture.resident_blocks(H200, 1024) == 132 * 2
    assert picture.resident_blocks(H200, 32) == 132 * 32  # the block limit
    assert picture.resident_blocks(H200, None) == 132 * 32


def test_places_on_a_chiplet_gpu_are_xcds_dealt_round_robin():
    positions = np.arange(16).reshape(4, 4)
    assert picture.places(positions, MI300X).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7]]
    # a tile loop of 6 blocks: tile p runs on block p % 6
    assert picture.places(positions, MI300X, launched=6)[1].tolist() == [4, 5, 0, 1]


def test_places_without_a_measured_dispatch_are_sm_groups_round_robin():
    gpu = replace(H200, compute_units=16, block_to_cu=(), cu_partition=())
    positions = np.arange(32).reshape(2, 16)
    # SM = p mod 16; 8 groups of 2 SMs
    assert picture.places(positions, gpu).tolist() == [[s // 2 for s in range(16)]] * 2


def test_places_follow_the_measured_dispatch():
    gpu = replace(H200, compute_units=16, block_to_cu=(15, 0, 7, 8), cu_partition=())
    positions = np.array([[0, 1, 2, 3, 4, 5, -1]])
    assert picture.places(positions, gpu).tolist() == [[7, 0, 3, 4, 7, 0, -1]]
    # the bundled h200 model: its first measured blocks land on SMs 124..131, then 0, 1
    first = picture.places(np.arange(10).reshape(1, 10), H200)[0].tolist()
    assert first == [124 * 8 // 132] * 8 + [0, 0]


def test_place_labels_name_each_group():
    name, labels = picture.place_labels(H200)
    assert name == "SM group" and len(labels) == 8 and labels[0] == "SMs 0–16" and labels[-1] == "SMs 116–131"
    assert picture.place_labels(MI300X) == ("XCD", tuple(f"XCD {d}" for d in range(8)))


# ---- the drawing ----------------------------------------------------------------------------------------------


def small_picture(hw=H200, hit_rates=(40.0, 98.5)):
    orders = [(parse_spec("identity"), hit_rates[0]), (parse_spec("grouped:2"), hit_rates[1])]
    return picture.picture("k.cu: kernel k on h200", (8, 8, 1, 0), "2d", orders, hw, threads=256)


def test_picture_of_small_grid_has_titled_panels_and_a_caption():
    pic = small_picture()
    assert [p.title for p in pic.panels] == ["identity — 40.0 % L2 hits (predicted)", "grouped:2 — 98.5 % L2 hits (predicted)"]
    assert "registers and shared memory are not counted" in pic.caption
    assert "1,056 blocks resident at once" in pic.caption
    assert (pic.panels[0].wave == 0).all()  # 64 tiles, all in the first wave
    # what to look for, what a wave and a dispatch position are, and what each order does
    assert pic.caption.startswith("What to look for: blocks resident at once form a wave; a block's dispatch position")
    assert "Orders: identity: the hardware's own order; grouped:2: 2 tile rows per group, walked column by column" in pic.caption
    assert "Neighbouring tiles on different groups are expected" in pic.caption


def test_each_kind_of_order_is_said_with_its_parameters():
    said = picture.orders_said([parse_spec("hilbert:16@4096"), parse_spec("xcd:8+serpentine:4")])
    assert said == ("Orders: hilbert:16@4096: bands of 16 rows cut into 16 x 16 panels, a full panel walked along a Hilbert "
                    "curve (the hardware's order under 4,096 tiles); xcd:8+serpentine:4: each of 8 chiplets runs one "
                    "contiguous range of ids, then grouped:4 with every odd-numbered group walking its columns right to left.")
    assert "chunks of 4 consecutive ids" in picture.orders_said([parse_spec("xcd:8:4")])


def test_render_writes_png_and_svg():
    pic = small_picture(MI300X, (None, 50.0))
    png = picture.render(pic, "png")
    assert png.startswith(PNG_MAGIC)
    svg = picture.render(pic, "svg")
    assert svg.lstrip().startswith(b"<?xml") and b"<svg" in svg and svg.rstrip().endswith(b"</svg>")
    assert pic.panels[0].title == "identity — L2 hits not predicted"


@pytest.mark.parametrize("fmt", picture.FORMATS)
def test_render_is_deterministic(fmt):
    assert picture.render(small_picture(), fmt) == picture.render(small_picture(), fmt)


def test_draw_takes_its_format_from_the_suffix(tmp_path):
    picture.draw(small_picture(), str(tmp_path / "order.PNG"))
    assert (tmp_path / "order.PNG").read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(SwzcError, match=r"\.png or \.svg"):
        picture.draw(small_picture(), str(tmp_path / "order.pdf"))
    assert not (tmp_path / "order.pdf").exists()


def test_outline_of_a_rectangle_is_four_segments():
    mask = np.zeros((4, 4), dtype=bool)
    mask[:2, 1:3] = True
    assert sorted(picture.outline(mask)) == sorted([((0.5, -0.5), (2.5, -0.5)), ((0.5, 1.5), (2.5, 1.5)),
                                                    ((0.5, -0.5), (0.5, 1.5)), ((2.5, -0.5), (2.5, 1.5))])
    checkerboard = np.indices((64, 64)).sum(axis=0) % 2 == 0
    assert picture.outline(checkerboard, most=100) == []


def test_html_page_escapes_every_name():
    hostile = '<script>alert("k")</script>'
    attempt = Attempt(hostile, 90.0, True, True, 1.2, 1.1, 0.01, 2.0, 1.66, 95.0, 1e6, "ok", 1.0, "accepted")
    bench = KernelBench(hostile, 3, (attempt,), hostile, f"chose {hostile}")
    page = picture.html_page(picture.render(small_picture(), "png"), "png", f"kernel {hostile}",
                             [Prediction(hostile, 50.0, 1e6, 1, 1)], [hostile], bench)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "data:image/png;base64," in page and "1.200x" in page


# ---- the command line -------------------------------------------------------------------------------------------


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gemm.cu").write_bytes(GEMM)
    return tmp_path


def test_show_draws_identity_beside_the_models_choice(work):
    result = invoke("show", "gemm.cu", "-o", "order.png")
    assert result.exit_code == 0, result.output
    assert (work / "order.png").read_bytes().startswith(PNG_MAGIC)
    assert "identity — 62.0 % L2 hits (predicted)" in result.stdout
    assert "serpentine:64 — 98.2 % L2 hits (predicted)" in result.stdout
    assert (work / "gemm.cu").read_bytes() == GEMM


def test_show_svg_with_html_page(work):
    result = invoke("show", "gemm.cu", "-o", "order.svg", "--html", "order.html", "--swizzle", "hilbert:8", "--runner-up")
    assert result.exit_code == 0, result.output
    page = (work / "order.html").read_text()
    assert "<svg" in page and "<?xml" not in page
    assert 'class="shown"><td>hilbert:8' in page and 'class="shown"><td>serpentine:64' in page
    # the DRAM floor beside the predictions: 3 matrices of 4096 x 4096 floats, and each order as a multiple of it
    assert "DRAM floor: 201 MB, each sector the grid reads or writes moved once." in page
    assert "<th>× floor</th>" in page and "<td>serpentine:64</td><td>98.2 %</td><td>384 MB</td><td>1.90x</td>" in page
    assert "I/O bound" not in page  # a 4096^3 GEMM's operands fit the H200's fast memory: no bound above the floor


def test_the_page_gives_a_matrix_product_s_io_bound_beside_the_floor():
    from swzc.model.floor import Floor, Product
    from swzc.model.l2model import Prediction
    from swzc.report.picture import html_section

    floor = Floor(3 * 2 ** 30, True, Product(16384, 16384, 16384, 1, 5 * 2 ** 30, ("A", "B", "C")))
    page = html_section(b"<svg></svg>", "svg", "gemm", [Prediction("grouped:8", 90.0, 10 * 2 ** 30, 1, 1)], (), None, floor)
    assert "<th>× floor</th><th>× I/O bound</th>" in page and "<td>3.33x</td><td>2.00x</td>" in page
    assert "I/O bound: 5,369 MB, the least DRAM traffic any order of a matrix product C = A B, 16384 x 16384 x 16384 can" in page


def test_show_html_escapes_a_hostile_file_name(work):
    name = 'a<img src=x onerror=alert(1)>&.cu'  # a kernel's own name is an identifier; its file's name is not
    (work / name).write_bytes(GEMM)
    result = invoke("show", name, "-o", "order.png", "--html", "page.html")
    assert result.exit_code == 0, result.output
    page = (work / "page.html").read_text()
    assert "<img src=x" not in page and "a&lt;img src=x onerror=alert(1)&gt;&amp;.cu" in page


@pytest.mark.parametrize("out", ["order.pdf", "order", "order.png.txt"])
def test_show_refuses_a_suffix_other_than_png_or_svg(work, out):
    result = invoke("show", "gemm.cu", "-o", out)
    assert result.exit_code == 2
    assert ".png or .svg" in result.stderr
    assert not (work / out).exists()


def test_show_never_writes_over_its_input(work):
    result = invoke("show", "gemm.cu", "-o", "order.png", "--html", "gemm.cu")
    assert result.exit_code == 2
    assert "is the input file; swzc overwrites its input only with `swzc rewrite --in-place`" in result.stderr
    assert (work / "gemm.cu").read_bytes() == GEMM and not (work / "order.png").exists()


def test_show_unknown_kernel_names_the_known_ones(work):
    result = invoke("show", "gemm.cu", "-o", "order.png", "--kernel", "nope")
    assert result.exit_code == 2
    assert "no such kernel" in result.stderr and "gemm" in result.stderr


def test_show_says_why_the_model_cannot_rank(work):
    (work / "unlaunched.cu").write_bytes(UNLAUNCHED)
    result = invoke("show", "unlaunched.cu", "-o", "order.png")
    assert result.exit_code == 2
    assert "no launch in this file fixes the grid" in result.stderr and "--swizzle" in result.stderr
    drawn = invoke("show", "unlaunched.cu", "-o", "order.png", "--swizzle", "grouped:8", "--grid", "gemm=64,64",
                   "--block", "gemm=16,16")
    assert drawn.exit_code == 0, drawn.output
    assert (work / "order.png").read_bytes().startswith(PNG_MAGIC)


def test_show_gives_the_reasons_of_three_kernels_and_counts_the_rest(work):
    kernels = "".join(f"__global__ void k{i}(float* x) {{ x[blockIdx.x * 256 + threadIdx.x] = {i}; }}\n" for i in range(6))
    (work / "many.cu").write_text(kernels)
    result = invoke("show", "many.cu", "-o", "order.png")
    assert result.exit_code == 2 and all(f"k{i}:" in result.stderr for i in range(3)) and "k3:" not in result.stderr
    assert "and 3 more kernel(s): `swzc analyze many.cu` says why for each" in " ".join(result.stderr.split())


def test_show_bad_swizzle_is_bad_input(work):
    result = invoke("show", "gemm.cu", "-o", "order.png", "--swizzle", "spiral:3")
    assert result.exit_code == 2 and "spiral:3" in result.stderr


def test_show_help_has_an_example():
    result = invoke("show", "--help")
    assert result.exit_code == 0 and "swzc show gemm.cu -o order.png" in result.stdout


def test_the_waves_follow_the_kernels_residency_where_the_ranking_has_one(work):
    """A kernel whose static shared memory (40 KB a block) holds it to 5 blocks per SM: its waves are
    5 x 132 = 660 blocks, not the 1,056 its 256 threads would allow, and the caption says why."""
    heavy = GEMM.replace(b"{\n", b"{\n  __shared__ float pad[10240];\n  if (n < 0) pad[threadIdx.x] = 0.0f;\n", 1)
    assert heavy != GEMM
    (work / "heavy.cu").write_bytes(heavy)
    result = invoke("show", "heavy.cu", "-o", "order.png")
    assert result.exit_code == 0, result.output
    src = load_bytes("heavy.cu", heavy)
    drawn = picture.kernel_picture(FileContext(src), analyze(FileContext(src)), H200, {})
    assert "660 blocks resident at once (132 SMs × 5 blocks, bound by shared memory: default:" in drawn.picture.caption


def test_without_matplotlib_show_names_the_extra_and_a_report_keeps_its_tables(work, monkeypatch):
    # an install without the `show` extra: matplotlib cannot be imported
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = invoke("show", "gemm.cu", "-o", "order.png")
    assert result.exit_code == 2 and "pip install 'swzc[show]'" in result.stderr
    assert not (work / "order.png").exists()
    rows = tuple(Attempt("grouped:8", 90.0, True, True, s, s - 0.01, 0.005, 1.0, 1.0 / s, None, None, "", 1.0, "accepted",
                         size=n) for n, s in ((1024, 1.0), (4096, 1.1)))
    parts = picture.measured_html(KernelBench("gemm", 1, rows[1:], "grouped:8", "chose grouped:8", by_size=rows))
    page = "\n".join(parts)
    assert "Measured by size" in page and "1.100x" in page and "not drawn: pictures are drawn with matplotlib" in page


def test_show_draws_the_first_kernel_the_model_would_swizzle_not_the_first_it_declines(work):
    declined = b"""
__global__ void scale2d(float* C, int n) {
  C[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] *= 2.0f;
}
void run_scale(float* C) { scale2d<<<dim3(256, 256), dim3(16, 16)>>>(C, 4096); }
"""
    (work / "two.cu").write_bytes(declined + GEMM)
    result = invoke("show", "two.cu", "-o", "order.png")
    assert result.exit_code == 0, result.output
    assert ": kernel gemm:" in result.stdout and "serpentine:64" in result.stdout


def test_a_gated_order_of_a_runtime_sized_kernel_is_drawn_with_its_prediction():
    """At the sweep's largest size, past its gate, the gated order is its order ungated: the panel carries that
    prediction, as suggest gives it, not "L2 hits not predicted"."""
    src = load_bytes("rt.cu", SIZED)
    drawn = picture.kernel_picture(FileContext(src), analyze(FileContext(src)), H200, {})
    (identity, gated) = drawn.picture.panels
    assert "@" in gated.name and gated.hit_rate is not None and gated.hit_rate > identity.hit_rate


def test_a_kernel_launched_nowhere_is_drawn_with_the_grid_the_error_asks_for(work):
    """Where no launch fixes the grid, the error asks for --grid as well as --swizzle; given both, it draws."""
    (work / "open.cu").write_bytes(UNLAUNCHED)
    said = invoke("show", "open.cu", "-o", "o.png")
    assert said.exit_code == 2 and "give the order to draw with --swizzle SPEC, and a grid with --grid" in said.output
    drawn = invoke("show", "open.cu", "-o", "o.png", "--swizzle", "grouped:8", "--grid", "gemm=256,256", "--block", "gemm=16,16")
    assert drawn.exit_code == 0, drawn.output
