"""The Python side of the harness's comparison: the plan turned into the program's tables (buffers, roles,
fills, scalars, the launch), buffer sizes and roles from the footprint, and how a run's output is read."""

import json

import numpy as np
import pytest

from swzc.analysis.kernels import analyze
from swzc.core.errors import SwzcError
from swzc.model.footprint import Access, Footprint
from swzc.verify.harness import Buffer, Build, LaunchPlan, Scalar, _buffer_shape, _json_lines, fill_parts, harness_source, plan_launch, run_harness
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext

PLAN = LaunchPlan("k<float, 4>", (64, 32, 2), (16, 8, 1), 1024, (
    Buffer("a", "float4", 100, "in", "range:-5:7"),
    Scalar("n", "int", -3),
    Buffer("c", "__half", 50, "out"),
    Scalar("scale", "float", 0.5),
    Buffer("z", "int", 10, "inout", "arange:3"),
    Scalar("flag", "bool", True),
    Scalar("pair", "half2", (1.5, -2.0)),
    Scalar("whole", "double", 2.0),
    Scalar("count", "unsigned long long", 7.0),
    Buffer("w", "double", 3, "in", "const:0.25"),
), tolerance=1e-3)


def test_the_buffer_table_lists_each_buffer_with_its_kind_size_role_and_fill():
    text = harness_source(PLAN, 1 << 20)
    table = text.split("const std::vector<swzc::Buffer> buffers = {\n", 1)[1].split("  };", 1)[0]
    assert table.splitlines() == [
        '    {"a", swzc::F32, 400ull, swzc::IN, swzc::RANGE, -5.0, 7.0},',
        '    {"c", swzc::F16, 50ull, swzc::OUT, swzc::UNIFORM, 0.0, 0.0},',
        '    {"z", swzc::I32, 10ull, swzc::INOUT, swzc::ARANGE, 3.0, 0.0},',
        '    {"w", swzc::F64, 3ull, swzc::IN, swzc::CONST, 0.25, 0.0},',
    ]


def test_the_arguments_are_in_parameter_order_and_scalars_are_stored_by_kind():
    text = harness_source(PLAN, 1 << 20)
    assert "void* args[] = {&work[0], s_n, &work[1], s_scale, &work[2], s_flag, s_pair, s_whole, s_count, &work[3], nullptr};" in text
    assert "alignas(16) unsigned char s_n[4];\n  swzc::store_int(swzc::I32, 18446744073709551613ull, s_n + 0);" in text
    assert "swzc::store(swzc::F32, 0.5, s_scale + 0);" in text
    assert "swzc::store_int(swzc::BOOL, 1ull, s_flag + 0);" in text
    assert "unsigned char s_pair[4];\n  swzc::store(swzc::F16, 1.5, s_pair + 0); swzc::store(swzc::F16, -2.0, s_pair + 2);" in text
    assert "swzc::store(swzc::F64, 2.0, s_whole + 0);" in text  # a float type keeps a whole value as a float
    assert "swzc::store_int(swzc::U64, 7ull, s_count + 0);" in text  # an integer type stores it exactly


def test_the_launch_the_flush_and_the_tolerance_are_the_plan_s():
    text = harness_source(PLAN, 123 << 20)
    assert "const dim3 grid(64, 32, 2), block(16, 8, 1);" in text
    assert text.count("launchers[v](grid, block, 1024, args)") == 1 and "launch[v](grid, block, 1024, args)" in text
    assert "std::max((size_t)128974848ull, 2 * (size_t)device_l2)" in text
    assert "swzc::check(buffers, gpu, 0.001, stdout);" in text


def test_a_hip_harness_speaks_hip():
    text = harness_source(PLAN, 1 << 20, "hip")
    assert "#include <hip/hip_runtime.h>" in text and "hipMemcpy(" in text and "cuda" not in text.replace("swzc", "")
    assert harness_source(PLAN, 1 << 20) == harness_source(PLAN, 1 << 20, "cuda") != text


# ---- fills ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fill, parts", [
    ("uniform", ("UNIFORM", 0.0, 0.0)),
    ("range:0:128", ("RANGE", 0.0, 128.0)),
    ("range:-4:-3", ("RANGE", -4.0, -3.0)),
    ("arange:2", ("ARANGE", 2.0, 0.0)),
    ("arange:-1", ("ARANGE", -1.0, 0.0)),
    ("const:0.5", ("CONST", 0.5, 0.0)),
    ("const:-3", ("CONST", -3.0, 0.0)),
])
def test_fills_are_read_into_the_header_s_terms(fill, parts):
    assert fill_parts(fill) == parts


@pytest.mark.parametrize("fill", ["uniform:1", "range:5:5", "range:5:4", "range:1", "range:a:b", "range:1.5:4", "arange:",
                                  "arange:0.5", "const:nan", "const:inf", "const:", "zeros", ""])
def test_other_fills_are_refused_naming_the_buffer(fill):
    with pytest.raises(SwzcError) as caught:
        fill_parts(fill, "k.cu:1: k: buffer x")
    assert caught.value.message.startswith(f"k.cu:1: k: buffer x: fill {fill!r} is not one of uniform, range:LO:HI")


# ---- sizes and roles from the footprint ----------------------------------------------------------------

def _access(array: str, write: bool, last_sector: int, block_bytes=(0, 0, 0)) -> Access:
    return Access(array, write, 4, block_bytes, np.array([0, last_sector]), 1)


def _footprint(*accesses: Access, tiles=(1, 1, 1)) -> Footprint:
    return Footprint("k", (1, 1, 1), (32, 1, 1), tiles, accesses, (), 32)


def test_a_buffer_is_as_long_as_the_furthest_byte_any_block_touches():
    fp = _footprint(_access("a", False, 9), _access("a", False, 3, (64, 8, 0)), tiles=(4, 5, 1))
    # the first access ends at sector 9 (320 bytes); the second at 128 bytes plus 3 more rows of 64 and 4 columns of 8
    assert _buffer_shape(fp, "a", 4) == (88, "in")
    assert _buffer_shape(fp, "a", 8) == (44, "in")
    assert _buffer_shape(_footprint(_access("a", False, 0, (-64, 8, 0)), tiles=(4, 5, 1)), "a", 4) == (16, "in")  # a step back adds nothing


def test_a_buffer_s_role_follows_its_reads_and_writes():
    fp = _footprint(_access("r", False, 0), _access("w", True, 0), _access("rw", False, 0), _access("rw", True, 1))
    assert [_buffer_shape(fp, name, 4)[1] for name in ("r", "w", "rw")] == ["in", "out", "inout"]
    assert _buffer_shape(fp, "rw", 4)[0] == 16


def test_a_buffer_the_footprint_does_not_know_is_inout_of_unknown_size():
    fp = _footprint(_access("a", False, 0))
    assert _buffer_shape(fp, "b", 4) == (None, "inout")
    assert _buffer_shape("no launch", "a", 4) == (None, "inout")


def test_plan_launch_sizes_and_roles_from_the_kernel():
    src = load_bytes("k.cu", b"""
__global__ void k(const float* in, float* out, double* acc, int n) {
  const int i = blockIdx.x * 256 + threadIdx.x;
  out[i] = in[i] + in[i + 1];
  acc[i] += in[i];
}
int main() { k<<<16, 256>>>(0, 0, 0, 4096); }""")
    plan = plan_launch(FileContext(src), analyze(FileContext(src)).kernels[0])
    assert plan.params == (Buffer("in", "float", 4104, "in"), Buffer("out", "float", 4096, "out"),
                           Buffer("acc", "double", 4096, "inout"), Scalar("n", "int", 4096))


# ---- reading a run ----------------------------------------------------------------------------------------

def _harness(folder, script: str) -> Build:
    folder.mkdir(parents=True, exist_ok=True)
    harness = folder / "harness"
    harness.write_text("#!/bin/sh\necho \"$@\" >> " + str(folder / "calls") + "\n" + script)
    harness.chmod(0o755)
    return Build(folder, harness, folder / "a.so", folder / "b.so")


TIMES = '{"a": [2.0, 2.0], "b": [1.0, 1.5], "a2": [2.0, 2.1]}'


def test_a_run_checks_then_times_the_two_libraries(tmp_path):
    built = _harness(tmp_path, f'if [ "$3" = check ]; then echo \'{{"correct": true}}\'; else echo \'{TIMES}\'; fi\n')
    result = run_harness(built, rounds=7)
    assert result.correct and not result.failed and result.detail == ""
    assert (result.timing.a, result.timing.b, result.timing.a2) == ((2.0, 2.0), (1.0, 1.5), (2.0, 2.1))
    a, b = built.a, built.b
    assert (tmp_path / "calls").read_text().splitlines() == [f"{a} {b} check", f"{a} {b} time 7"]
    run_harness(built)
    assert (tmp_path / "calls").read_text().splitlines()[-1] == f"{a} {b} time 30"


def test_a_wrong_result_is_never_timed(tmp_path):
    built = _harness(tmp_path, 'echo \'{"seed": 1, "match": false, "buffer": "y", "byte": 4, "element": 1}\'\necho \'{"correct": false}\'\n')
    result = run_harness(built, rounds=3)
    assert not result.correct and result.timing is None and not result.failed
    assert result.detail == "buffer y differs from the original's at byte 4 (element 1, seed 1)"
    assert (tmp_path / "calls").read_text().splitlines() == [f"{built.a} {built.b} check"]


def test_the_last_verdict_and_the_last_timing_are_the_ones_read(tmp_path):
    built = _harness(tmp_path, 'if [ "$3" = check ]; then echo \'{"correct": false}\'; echo \'{"correct": true}\';\n'
                               f'else echo \'{{"a": [9.0], "b": [9.0], "a2": [9.0]}}\'; echo \'{TIMES}\'; fi\n')
    result = run_harness(built, rounds=3)
    assert result.correct and result.timing.b == (1.0, 1.5)


def test_json_lines_are_the_objects_a_run_printed():
    output = '\n'.join(['note: warming up', '{"correct": true}', '{not json', '{"a": [1]} trailing', '  {"indented": 1}',
                        '{"x": 1}', '["a list"]'])
    assert _json_lines(output) == [{"correct": True}, {"x": 1}]
    assert json.dumps(_json_lines("")) == "[]"
