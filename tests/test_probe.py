"""swzc probe: parsing the probe's output, the model file written from it, and the probe program's build."""

import random
import subprocess
import tomllib

import pytest
from click.testing import CliRunner
from support import has_gpu, needs_nvcc

from swzc.target import hw
from swzc.target import probe
from swzc.commands.cli import main
from swzc.core.errors import ExitCode, SwzcError

HEADER = """\
swzc-probe 1
# a hand-written probe output: a 4-SM GPU
platform cuda
device Test GPU
date 2026-01-02
cc 9.0
sms 4
l2_bytes 62914560
warp_size 32
max_threads_per_sm 2048
max_blocks_per_sm 2
regs_per_sm 65536
smem_per_sm 233472
clock_khz 1980000
"""

# Three waves of two blocks per SM.  Block 8 starts on SM 0 exactly when block 0 ends there, so at
# most two are resident at once.
DISPATCH = """\
dispatch threads 32 blocks 12 spin_ns 20000 occupancy 2
block 0 sm 0 start 0 end 20000
block 1 sm 2 start 10 end 20010
block 2 sm 1 start 20 end 20020
block 3 sm 3 start 30 end 20030
block 4 sm 0 start 40 end 20040
block 5 sm 2 start 50 end 20050
block 6 sm 1 start 60 end 20060
block 7 sm 3 start 70 end 20070
block 8 sm 0 start 20000 end 40000
block 9 sm 2 start 20010 end 40010
block 10 sm 1 start 20020 end 40020
block 11 sm 3 start 20030 end 40030
"""

# SMs 0 and 2 hit lines 0-3 at ~200 cycles and lines 4-7 at ~300; SMs 1 and 3 the other way round.
BIMODAL = """\
latency lines 8 buffer_bytes 16777216 repeats 256 trials 3 line_bytes 128
lat 0 0 200.0
lat 0 1 201.0
lat 0 2 200.0
lat 0 3 201.0
lat 0 4 300.0
lat 0 5 301.0
lat 0 6 300.0
lat 0 7 301.0
lat 1 0 300.0
lat 1 1 301.0
lat 1 2 300.0
lat 1 3 301.0
lat 1 4 200.0
lat 1 5 201.0
lat 1 6 200.0
lat 1 7 201.0
lat 2 0 200.5
lat 2 1 200.5
lat 2 2 200.5
lat 2 3 200.5
lat 2 4 300.5
lat 2 5 300.5
lat 2 6 300.5
lat 2 7 300.5
lat 3 0 300.5
lat 3 1 300.5
lat 3 2 300.5
lat 3 3 300.5
lat 3 4 200.5
lat 3 5 200.5
lat 3 6 200.5
lat 3 7 200.5
"""

# Every line at 250-252 cycles from every SM: one partition as far as latency can tell.
UNIMODAL = "latency lines 8 buffer_bytes 16777216 repeats 256 trials 3 line_bytes 128\n" + "".join(
    f"lat {sm} {line} {250 + ((sm * 8 + line) % 5) * 0.5}\n" for sm in range(4) for line in range(8))

TWO_PARTITIONS = HEADER + DISPATCH + BIMODAL + "end\n"
ONE_PARTITION = HEADER + DISPATCH + UNIMODAL + "end\n"

# A 4-CU AMD GPU with two XCDs: the CU keys are sparse hardware ids, the XCC of each is given.
HIP = """\
swzc-probe 1
platform hip
device AMD Instinct Test
date 2026-01-03
arch gfx942
sms 4
l2_bytes 33554432
warp_size 64
max_threads_per_sm 2048
max_blocks_per_sm 2
regs_per_sm 131072
smem_per_sm 65536
dispatch threads 64 blocks 8 spin_ns 20000 occupancy 2
block 0 sm 16 start 0 end 20000
block 1 sm 272 start 0 end 20000
block 2 sm 17 start 0 end 20000
block 3 sm 273 start 0 end 20000
block 4 sm 16 start 5 end 20005
block 5 sm 272 start 5 end 20005
block 6 sm 17 start 5 end 20005
block 7 sm 273 start 5 end 20005
part 16 0
part 17 0
part 272 1
part 273 1
end
"""


def test_device_facts():
    r = probe.parse_output(TWO_PARTITIONS)
    assert (r.platform, r.vendor, r.device, r.date, r.arch) == ("cuda", "nvidia", "Test GPU", "2026-01-02", "sm_90")
    assert (r.compute_units, r.l2_bytes, r.warp_size) == (4, 62914560, 32)
    assert (r.max_threads_per_cu, r.max_blocks_per_cu, r.regs_per_cu, r.smem_per_cu) == (2048, 2, 65536, 233472)
    assert r.clock_khz == 1980000


def test_dispatch_order_and_residency():
    r = probe.parse_output(TWO_PARTITIONS)
    assert r.block_to_cu == (0, 2, 1, 3, 0, 2, 1, 3)  # the first 2 x sms blocks, in block order
    assert (r.dispatch_blocks, r.dispatch_threads) == (12, 32)
    assert r.resident_blocks == 2


def test_residency_counts_overlap():
    text = HEADER + "block 0 sm 1 start 0 end 100\nblock 1 sm 1 start 10 end 90\nblock 2 sm 1 start 20 end 30\n" \
                    "block 3 sm 0 start 0 end 100\nend\n"
    assert probe.parse_output(text).resident_blocks == 3


def test_bimodal_latency_gives_partitions():
    r = probe.parse_output(TWO_PARTITIONS)
    assert r.cu_partition == (0, 1, 0, 1)
    assert r.partition_method == "l2-latency"
    assert r.l2_partitions == 2
    assert r.l2_bimodal
    assert r.l2_near_cycles == pytest.approx(200.5)
    assert r.l2_far_cycles == pytest.approx(300.5)
    assert r.l2_far_extra_cycles == pytest.approx(100.0)
    assert (r.latency_lines, r.latency_cus) == (8, 4)


def test_unimodal_latency_gives_one_partition():
    r = probe.parse_output(ONE_PARTITION)
    assert r.cu_partition == ()
    assert r.l2_partitions == 1
    assert not r.l2_bimodal and r.l2_far_extra_cycles == 0
    assert 250 <= r.l2_near_cycles <= 252
    assert any("not bimodal" in note for note in r.notes)


def test_bimodal_but_the_same_for_every_sm_is_no_partition_map():
    table = "".join(f"lat {sm} {line} {200 if line < 4 else 300}\n" for sm in range(4) for line in range(8))
    r = probe.parse_output(HEADER + table + "end\n")
    assert r.cu_partition == ()
    assert any("same lines near" in note for note in r.notes)


def test_overlapping_near_lines_are_no_partition_map():
    """Three groups of SMs whose near lines overlap: a latency gradient, not partitions that own lines."""
    near = {0: range(0, 4), 1: range(0, 4), 2: range(2, 6), 3: range(2, 6), 4: range(4, 8), 5: range(4, 8)}
    table = "".join(f"lat {sm} {line} {200 if line in near[sm] else 300}\n" for sm in range(6) for line in range(8))
    r = probe.parse_output(HEADER.replace("sms 4", "sms 6") + table + "end\n")
    assert r.cu_partition == ()
    assert any("do not own disjoint lines" in note for note in r.notes)


def test_noisy_full_size_latency_table():
    """132 SMs, 128 lines, noise and a few slow outliers: the two halves are still recovered."""
    rng = random.Random(7)
    sms, lines = 132, 128
    home = [rng.randrange(2) for _ in range(lines)]
    side = [(sm // 2) % 2 for sm in range(sms)]  # TPC pairs alternate between the partitions
    rows = []
    for sm in range(sms):
        for line in range(lines):
            cycles = rng.gauss(240, 3) + (110 if home[line] != side[sm] else 0)
            if rng.random() < 0.01:
                cycles += 150  # a load that queued behind another SM's
            rows.append(f"lat {sm} {line} {cycles:.1f}\n")
    text = HEADER.replace("sms 4", f"sms {sms}") + "".join(rows) + "end\n"
    r = probe.parse_output(text)
    assert r.l2_partitions == 2
    expected = tuple(s if side[0] == 0 else 1 - s for s in side)
    assert r.cu_partition == expected
    assert 100 < r.l2_far_extra_cycles < 120


def test_sparse_sm_ids_are_renumbered():
    text = HEADER + "block 0 sm 10 start 0 end 5\nblock 1 sm 30 start 0 end 5\nblock 2 sm 20 start 0 end 5\nend\n"
    r = probe.parse_output(text)
    assert r.block_to_cu == (0, 2, 1)
    assert any("renumbered" in note for note in r.notes)


def test_hip_output_partitions_by_xcc():
    r = probe.parse_output(HIP)
    assert (r.platform, r.vendor, r.arch) == ("hip", "amd", "gfx942")
    assert r.block_to_cu == (0, 2, 1, 3, 0, 2, 1, 3)
    assert r.cu_partition == (0, 0, 1, 1)
    assert (r.partition_method, r.chiplets, r.l2_partitions) == ("xcc-register", 2, 2)


def _model(text, base="h200", **kw):
    return hw.parse_model(probe.to_toml(hw.load(base), probe.parse_output(text), "swzc probe --arch sm_90", "2026-01-02", **kw),
                          "test")


def test_to_toml_round_trip():
    base = hw.load("h200")
    m = _model(TWO_PARTITIONS)
    assert (m.name, m.vendor, m.arch, m.compute_units, m.l2_bytes) == ("h200", "nvidia", "sm_90", 4, 62914560)
    assert m.max_blocks_per_cu == 2
    assert m.block_to_cu == (0, 2, 1, 3, 0, 2, 1, 3)
    assert m.cu_partition == (0, 1, 0, 1) and m.l2_partitions == 2
    assert m.l2_far_extra_cycles == pytest.approx(100.0)
    measured = ("arch", "compute_units", "l2_bytes", "warp_size", "max_threads_per_cu", "max_blocks_per_cu", "regs_per_cu",
                "smem_per_cu", "block_to_cu", "cu_partition", "l2_partitions", "l2_far_extra_cycles")
    for figure in measured:
        assert m.source(figure).startswith("measured on Test GPU, 2026-01-02: swzc probe --arch sm_90 ("), figure
    for figure in ("vendor", "l2_line_bytes", "l2_sector_bytes", "l2_ways", "chiplets", "dispatch", "dram_bytes_per_s"):
        assert getattr(m, figure) == getattr(base, figure)
        assert m.source(figure) == base.source(figure)


def test_to_toml_is_plain_toml_with_a_header():
    text = probe.to_toml(hw.load("h200"), probe.parse_output(TWO_PARTITIONS), "swzc probe --arch sm_90", "2026-01-02",
                         name="test-gpu")
    assert text.startswith("# Test GPU (sm_90): a hardware model written by `swzc probe`")
    raw = tomllib.loads(text)
    assert raw["name"] == "test-gpu"
    assert set(raw["sources"]) >= {"compute_units", "cu_partition", "block_to_cu"}


def test_to_toml_unimodal_keeps_the_base_partitions():
    base = hw.load("h200")
    m = _model(ONE_PARTITION)
    assert m.cu_partition == () and m.l2_far_extra_cycles == 0
    assert m.l2_partitions == base.l2_partitions and m.source("l2_partitions") == base.source("l2_partitions")
    text = probe.to_toml(base, probe.parse_output(ONE_PARTITION), "swzc probe", "2026-01-02")
    assert "# probe: L2 hit latency is not bimodal" in text


def test_to_toml_amd():
    m = hw.parse_model(probe.to_toml(hw.load("mi300x"), probe.parse_output(HIP), "swzc probe --hip --arch gfx942",
                                     "2026-01-03"), "test")
    assert (m.vendor, m.arch, m.compute_units, m.warp_size) == ("amd", "gfx942", 4, 64)
    assert (m.chiplets, m.l2_partitions, m.cu_partition) == (2, 2, (0, 0, 1, 1))
    assert m.dispatch == "chiplet-round-robin"
    assert m.source("dispatch").startswith("measured on AMD Instinct Test, 2026-01-03")


def test_to_toml_refuses_a_base_of_another_vendor():
    with pytest.raises(SwzcError, match="nvidia"):
        probe.to_toml(hw.load("mi300x"), probe.parse_output(TWO_PARTITIONS), "swzc probe", "2026-01-02")


def test_to_toml_refuses_figures_that_make_no_model():
    odd = TWO_PARTITIONS.replace("l2_bytes 62914560", "l2_bytes 1000")  # not whole sets of 16 x 128-byte lines
    with pytest.raises(SwzcError) as err:
        probe.to_toml(hw.load("h200"), probe.parse_output(odd), "swzc probe", "2026-01-02")
    assert err.value.code == ExitCode.CHECK_FAILED
    assert "not a valid hardware model" in err.value.message or "do not make a valid" in err.value.message


GARBAGE = {
    "empty": ("", "empty"),
    "not-probe": ("hello world\n", "not the output of the swzc probe"),
    "version": ("swzc-probe 7\nend\n", "format"),
    "no-end": (HEADER + DISPATCH, "incomplete"),
    "after-end": (TWO_PARTITIONS + "sms 5\n", "after 'end'"),
    "missing-fact": (TWO_PARTITIONS.replace("warp_size 32\n", ""), "missing 'warp_size'"),
    "bad-int": (TWO_PARTITIONS.replace("sms 4", "sms four"), "whole number"),
    "zero": (TWO_PARTITIONS.replace("sms 4", "sms 0"), "positive"),
    "bad-block": (TWO_PARTITIONS.replace("block 3 sm 3", "block 3 cu 3"), "expected 'block"),
    "backwards-block": (TWO_PARTITIONS.replace("block 0 sm 0 start 0 end 20000", "block 0 sm 0 start 9 end 1"), "ends before"),
    "gap-in-blocks": (TWO_PARTITIONS.replace("block 11 ", "block 12 "), "do not cover"),
    "bad-lat": (TWO_PARTITIONS.replace("lat 0 0 200.0", "lat 0 0 fast"), "number"),
    "too-many-sms": (HEADER + "".join(f"block {i} sm {i * 9} start 0 end 1\n" for i in range(5)) + "end\n", "distinct SM ids"),
    "bad-cc": (TWO_PARTITIONS.replace("cc 9.0", "cc hopper"), "cc must"),
    "bad-platform": (TWO_PARTITIONS.replace("platform cuda", "platform opencl"), "platform"),
}


@pytest.mark.parametrize("case", GARBAGE)
def test_garbage_output_is_an_error(case):
    text, message = GARBAGE[case]
    with pytest.raises(SwzcError, match=message) as err:
        probe.parse_output(text, "probe.txt")
    assert err.value.message.startswith("probe.txt")
    assert err.value.code == ExitCode.BAD_INPUT


def test_parse_error_code_can_be_chosen():
    with pytest.raises(SwzcError) as err:
        probe.parse_output("nonsense", code=ExitCode.CHECK_FAILED)
    assert err.value.code == ExitCode.CHECK_FAILED


def test_cli_from_output_writes_a_model(tmp_path):
    saved = tmp_path / "probe.txt"
    saved.write_text(TWO_PARTITIONS)
    out = tmp_path / "test.toml"
    keep = tmp_path / "copy.txt"
    result = CliRunner().invoke(main, ["probe", "--from-output", str(saved), "--output", str(out), "--name", "testgpu",
                                       "--save-output", str(keep)])
    assert result.exit_code == 0, result.output
    assert "Test GPU (sm_90): 4 SMs" in result.output
    m = hw.load(str(out))
    assert m.name == "testgpu" and m.cu_partition == (0, 1, 0, 1)
    assert m.source("compute_units").startswith("measured on Test GPU, 2026-01-02: swzc probe --from-output probe.txt (")
    assert keep.read_text() == TWO_PARTITIONS


def test_cli_from_output_prints_the_model(tmp_path):
    saved = tmp_path / "probe.txt"
    saved.write_text(ONE_PARTITION)
    result = CliRunner().invoke(main, ["probe", "--from-output", str(saved)])
    assert result.exit_code == 0, result.output
    start = result.stdout.index("# Test GPU")
    assert hw.parse_model(result.stdout[start:], "stdout").compute_units == 4
    assert "not bimodal" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--from-output", "{garbage}"], "not the output of the swzc probe"),
    (["--from-output", "{missing}"], "cannot read"),
    (["--from-output", "{good}", "--base", "mi300x"], "pick a base model"),
    (["--from-output", "{good}", "--hip"], "do not go with --from-output"),
    (["--base", "nosuch"], "unknown hardware model"),
    (["--hip"], "--hip needs an AMD base model"),
])
def test_cli_errors_are_messages(tmp_path, args, message):
    (tmp_path / "garbage.txt").write_text("garbage\n")
    (tmp_path / "good.txt").write_text(TWO_PARTITIONS)
    paths = {"garbage": tmp_path / "garbage.txt", "missing": tmp_path / "missing.txt", "good": tmp_path / "good.txt"}
    result = CliRunner().invoke(main, ["probe", *[a.format(**paths) for a in args]])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_probe_sources_are_package_data():
    assert b"%%smid" in probe.source_text(hip=False)
    assert b"__builtin_amdgcn_s_getreg" in probe.source_text(hip=True)


@needs_nvcc
def test_probe_cu_compiles_for_sm_90(tmp_path):
    (tmp_path / "probe.cu").write_bytes(probe.source_text())
    cmd = probe.build_command("probe.cu", "swzc-probe", "sm_90")
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "swzc-probe").is_file()




@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_probe_on_the_gpu(tmp_path):
    out, raw = tmp_path / "probed.toml", tmp_path / "probe.txt"
    result = CliRunner().invoke(main, ["probe", "--output", str(out), "--save-output", str(raw)])
    assert result.exit_code == 0, result.output
    print(result.output)
    m = hw.load(str(out))
    r = probe.parse_output(raw.read_text())
    assert m.compute_units == r.compute_units
    assert len(m.block_to_cu) == 2 * m.compute_units
    assert r.resident_blocks >= 1
    assert r.latency_cus == m.compute_units
