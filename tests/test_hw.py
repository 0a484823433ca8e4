"""swzc.target.hw: the bundled hardware models and the validation of a model file."""

import json
import dataclasses
import math
from pathlib import Path

import pytest

from swzc.target import hw
from swzc.core.errors import ExitCode, SwzcError

H200_TOML = (Path(__file__).resolve().parents[1] / "hwmodels" / "h200.toml").read_text()


def test_available_lists_the_bundled_models():
    names = hw.available()
    assert {"a100", "h100", "h200", "mi250x", "mi300x"} <= set(names)
    assert names == sorted(names)


def test_h200():
    m = hw.load("h200")
    assert (m.name, m.vendor, m.arch) == ("h200", "nvidia", "sm_90")
    assert m.compute_units == 132
    assert m.chiplets == 1
    assert m.l2_bytes == 60 * 1024 * 1024
    assert m.l2_partitions == 2 and m.l2_line_bytes == 128
    assert m.dispatch == "round-robin-gpc"
    assert m.dram_bytes_per_s == pytest.approx(4.8e12)


def test_mi300x():
    m = hw.load("mi300x")
    assert (m.name, m.vendor, m.arch) == ("mi300x", "amd", "gfx942")
    assert m.compute_units == 304
    assert m.chiplets == 8
    assert m.l2_bytes == 8 * 4 * 1024 * 1024
    assert m.l2_partitions == 8 and m.l2_line_bytes == 128
    assert m.dispatch == "chiplet-round-robin"
    assert m.dram_bytes_per_s == pytest.approx(5.3e12)


@pytest.mark.parametrize("name", ["h200", "mi300x"])
def test_every_bundled_model_names_itself(name):
    assert hw.load(name).name == name


def test_models_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.load("h200").compute_units = 1  # type: ignore[misc]


@pytest.mark.parametrize("name", ["b200", "H200", "", "../h200", "h200.toml"])
def test_unknown_model(name):
    with pytest.raises(SwzcError) as info:
        hw.load(name)
    assert info.value.code == ExitCode.BAD_INPUT
    assert "h200" in info.value.message and "mi300x" in info.value.message


def test_parse_model_accepts_a_good_file():
    m = hw.parse_model(H200_TOML, "my.toml")
    assert m == hw.load("h200")


def _edit(key: str, value: str | None, drop: bool = True) -> str:
    """H200_TOML with top-level `key` set to the raw TOML `value` (removed when value is None)."""
    head, sep, sources = H200_TOML.partition("\n[sources]\n")
    lines = [line for line in head.splitlines() if not (drop and line.startswith(f"{key} ="))]
    if value is not None:
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n\n" + sep + sources


BAD_MODELS = {
    "bad-toml": (H200_TOML + "name = \n", "not valid TOML"),
    "duplicate-key": (_edit("name", '"again"', drop=False), "not valid TOML"),
    "empty": ("", "missing"),
    "missing-key": (_edit("arch", None), "missing arch"),
    "unknown-key": (_edit("tensor_cores", "528"), "unknown key(s) tensor_cores"),
    "no-source": (H200_TOML.replace('\nl2_ways = "assumed', '\nl2_way = "assumed'), "no source given for l2_ways"),
    "bad-block-to-cu": (H200_TOML.replace("block_to_cu = [", "block_to_cu = [132, "), "block_to_cu names a compute unit"),
    "short-cu-partition": (_edit("cu_partition", "[0, 1]"), "cu_partition must give a partition"),
    "unknown-table": (H200_TOML + "[extra]\nx = 1\n", "unknown key(s) extra"),
    "negative-count": (_edit("compute_units", "-4"), "compute_units must be a positive integer"),
    "zero-chiplets": (_edit("chiplets", "0"), "chiplets must be a positive integer"),
    "float-count": (_edit("l2_bytes", "6.0e7"), "l2_bytes must be a positive integer"),
    "bool-count": (_edit("l2_partitions", "true"), "l2_partitions must be a positive integer"),
    "string-count": (_edit("l2_line_bytes", '"128"'), "l2_line_bytes must be a positive integer"),
    "bad-vendor": (_edit("vendor", '"intel"'), "vendor must be 'nvidia' or 'amd'"),
    "bad-dispatch": (_edit("dispatch", '"random"'), "dispatch must be one of"),
    "non-string-name": (_edit("name", "5"), "name must be a string"),
    "non-string-arch": (_edit("arch", "90"), "arch must be a string"),
    "negative-dram": (_edit("dram_bytes_per_s", "-1.0"), "dram_bytes_per_s must be a positive number"),
    "string-dram": (_edit("dram_bytes_per_s", '"fast"'), "dram_bytes_per_s must be a positive number"),
    "chiplets-70000": (_edit("chiplets", "70000"), "chiplets = 70000 is more than any GPU"),
    "chiplets-2^32": (_edit("chiplets", str(2**32)), "at most 64"),
    "compute-units": (_edit("compute_units", "4097"), "compute_units = 4097 is more than any GPU"),
    "huge-l2": (_edit("l2_bytes", str(2**40)), "l2_bytes"),
    "huge-memory-cache": (_edit("memory_cache_bytes", str(2**40)), "memory_cache_bytes"),
    "huge-dram": (_edit("dram_bytes_per_s", "1e18"), "dram_bytes_per_s"),
    "far-cycles-string": (_edit("l2_far_extra_cycles", '"slow"'), "l2_far_extra_cycles must be a number"),
    "far-cycles-negative": (_edit("l2_far_extra_cycles", "-1.0"), "l2_far_extra_cycles must be a number"),
    "coalescer-string": (_edit("l2_request_coalescer", '"yes"'), "l2_request_coalescer must be true or false"),
    "coalescer-int": (_edit("l2_request_coalescer", "1"), "l2_request_coalescer must be true or false"),
    "coalescer-no-source": (H200_TOML.replace('\nl2_request_coalescer = "measured', '\nl2_request_coalescr = "measured'),
                            "no source given for l2_request_coalescer"),
    "deep-arrays": ("x = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply"),
    "deep-tables": ("x = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n", "nested too deeply"),
}


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_parse_model_errors_name_the_file(case):
    text, why = BAD_MODELS[case]
    with pytest.raises(SwzcError) as info:
        hw.parse_model(text, "models/my_gpu.toml")
    assert info.value.code == ExitCode.BAD_INPUT
    assert info.value.message.startswith("models/my_gpu.toml: ")
    assert why in info.value.message


def test_missing_keys_are_all_listed():
    with pytest.raises(SwzcError) as info:
        hw.parse_model(_edit("arch", None).replace("\nchiplets = 1\n", "\n"), "x.toml")
    assert "missing arch, chiplets" in info.value.message


@pytest.mark.parametrize("raw", ["nan", "inf", "true"])
def test_dram_bandwidth_must_be_a_finite_positive_number(raw):
    try:
        model = hw.parse_model(_edit("dram_bytes_per_s", raw), "x.toml")
    except SwzcError as exc:
        assert exc.message.startswith("x.toml: ")
        return
    raise AssertionError(f"accepted dram_bytes_per_s = {raw}: {model.dram_bytes_per_s!r}")


def test_dispatch_policies():
    assert set(hw.DISPATCH_POLICIES) == {"round-robin-gpc", "chiplet-round-robin", "linear"}
    for policy in hw.DISPATCH_POLICIES:
        assert hw.parse_model(_edit("dispatch", f'"{policy}"'), "x.toml").dispatch == policy


def test_integer_dram_bandwidth_is_accepted():
    m = hw.parse_model(_edit("dram_bytes_per_s", "4800000000000"), "x.toml")
    assert math.isclose(m.dram_bytes_per_s, 4.8e12)


def test_hardware_model_validates_directly():
    good = dataclasses.asdict(hw.load("mi300x"))
    with pytest.raises(ValueError, match="chiplets"):
        hw.HardwareModel(**{**good, "chiplets": -8})
    with pytest.raises(ValueError, match="vendor"):
        hw.HardwareModel(**{**good, "vendor": "AMD"})


def test_every_figure_names_its_source():
    for name in hw.available():
        model = hw.load(name)
        assert all(text.strip() for _, text in model.sources)
        assert "compute_units" in dict(model.sources) and "l2_bytes" in dict(model.sources)


def test_load_a_model_file_by_path(tmp_path):
    path = tmp_path / "my_gpu.toml"
    path.write_text(_edit("name", '"my_gpu"'))
    assert hw.load(str(path)).name == "my_gpu"


def test_l2_per_domain():
    assert hw.load("mi300x").l2_bytes_per_domain == 4 * 1024 * 1024
    assert hw.load("h200").l2_bytes_per_domain == 60 * 1024 * 1024


def test_h200_model_carries_the_probe_measurement():
    model = hw.load("h200")
    assert model.block_to_cu[:8] == (124, 125, 126, 127, 128, 129, 130, 131)
    assert "measured on NVIDIA H200" in model.source("compute_units")


def test_flush_covers_l2_and_a_memory_side_cache():
    assert hw.load("h200").flush_bytes == 2 * 60 * 1024 * 1024
    mi300x = hw.load("mi300x")
    assert mi300x.memory_cache_bytes == 256 * 1024 * 1024
    assert mi300x.flush_bytes == 2 * (32 + 256) * 1024 * 1024
    good = dataclasses.asdict(mi300x)
    with pytest.raises(ValueError, match="memory_cache_bytes"):
        hw.HardwareModel(**{**good, "memory_cache_bytes": -1})


@pytest.mark.parametrize("name", list(hw.LIMITS))
def test_every_bounded_figure_refuses_one_more_than_its_limit(name):
    good = dataclasses.asdict(hw.load("mi300x"))
    with pytest.raises(ValueError, match=f"{name} = {hw.LIMITS[name] + 1} is more than"):
        hw.HardwareModel(**{**good, name: hw.LIMITS[name] + 1})


@pytest.mark.parametrize("name", ["compute_units", "chiplets", "l2_partitions", "memory_cache_bytes", "warp_size"])
def test_a_figure_at_its_limit_is_accepted(name):
    good = dataclasses.asdict(hw.load("mi300x"))
    assert getattr(hw.HardwareModel(**{**good, name: hw.LIMITS[name]}), name) == hw.LIMITS[name]


def test_bounds_keep_the_prover_in_32_bits():
    assert all(limit <= 2**32 for limit in hw.LIMITS.values())
    assert hw.LIMITS["chiplets"] <= 64 and hw.LIMITS["compute_units"] <= 4096


def test_model_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "gpu.toml"
    path.write_bytes(H200_TOML.encode().replace(b'name = "h200"', b'name = "h\xff200"'))
    with pytest.raises(SwzcError) as info:
        hw.load(str(path))
    assert info.value.code == ExitCode.BAD_INPUT and info.value.message.startswith(f"{path}: not UTF-8")


@pytest.mark.parametrize("kind", ["directory", "fifo", "missing", "too-big"])
def test_model_file_that_cannot_be_read(tmp_path, kind):
    import os

    path = tmp_path / "gpu.toml"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "too-big":
        path.write_text(H200_TOML + "#" * hw.MAX_MODEL_FILE_BYTES)
    with pytest.raises(SwzcError) as info:
        hw.load(str(path))
    assert info.value.code == ExitCode.BAD_INPUT and info.value.message.startswith(f"{path}: ")


@pytest.mark.parametrize("arch", ["sm_90 -ccbin /tmp/evil", "sm_90$(id)", "--compiler-bindir=/x", "sm_90\n", "gfx942 -Xclang", ""])
def test_the_arch_is_a_target_name_and_nothing_else(arch):
    """It goes onto the compiler's command line (-arch=, --offload-arch=), and a model file may come with a project."""
    with pytest.raises(SwzcError) as info:
        hw.parse_model(_edit("arch", f'"{arch}"'.replace("\n", "\\n")), "x.toml")
    assert info.value.code == ExitCode.BAD_INPUT and "not a GPU target" in info.value.message


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100", "gfx942", "gfx90a", "gfx90a:sramecc+:xnack-"])
def test_real_target_names_are_accepted(arch):
    assert hw.parse_model(_edit("arch", f'"{arch}"'), "x.toml").arch == arch


@pytest.mark.parametrize("name", ["h200\n```suggestion\nevil", "a" * 41, "", "x y", "<details>", "@someone", "h\u202e00"])
def test_the_name_is_a_short_plain_word(name):
    """It is printed in summaries, reports and review comments, and a model file may come with a project."""
    with pytest.raises(SwzcError) as info:
        hw.parse_model(_edit("name", json.dumps(name)), "x.toml")
    assert info.value.code == ExitCode.BAD_INPUT and "must be 1-40 letters" in info.value.message
