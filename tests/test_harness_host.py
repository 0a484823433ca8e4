"""The harness's host code on the CPU: fills, poisoning and the output comparison are the same C++ the GPU
harness runs (swzc/native/harness_host.h), compiled here with the host compiler and driven through a
stand-in device (tests/native/harness_host_driver.cpp).  Float formats are decoded here in Python, apart
from the header's own decoder."""

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import ROOT, needs_nvcc

from swzc.verify.harness import KIND_BYTES, native_dir

CXX = shutil.which("c++") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no host C++ compiler")

N = 1000  # elements per buffer in the driver


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    binary = tmp_path_factory.mktemp("host") / "driver"
    subprocess.run([CXX, "-std=c++17", "-O1", "-pthread", "-I", native_dir(), "-o", str(binary),
                    str(ROOT / "tests" / "native" / "harness_host_driver.cpp")], check=True)
    return binary


def check(driver: Path, scenario: str, tolerance: float = 0.0) -> tuple[bool, list[dict]]:
    run = subprocess.run([str(driver), "check", scenario, repr(tolerance)], capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert "correct" in lines[-1]
    return lines[-1]["correct"], lines[:-1]


def fill(driver: Path, kind: str, elements: int, seed: int, how: str = "UNIFORM", a: float = 0.0, b: float = 0.0) -> bytes:
    return subprocess.run([str(driver), "fill", kind, str(elements), str(seed), how, repr(a), repr(b)],
                          capture_output=True, check=True).stdout


# ---- decoders written here, not taken from the header -------------------------------------------------

def minifloat(byte: int, exponent_bits: int, mantissa_bits: int, ieee: bool) -> float:
    """One 8-bit float: e5m2 is IEEE-like (all-ones exponent: inf/NaN); e4m3 has no infinity and one NaN
    mantissa (all ones) at the top exponent."""
    bias = 2 ** (exponent_bits - 1) - 1
    sign = -1.0 if byte & 0x80 else 1.0
    exponent = (byte >> mantissa_bits) & (2 ** exponent_bits - 1)
    mantissa = byte & (2 ** mantissa_bits - 1)
    top = 2 ** exponent_bits - 1
    if exponent == top and (ieee or mantissa == 2 ** mantissa_bits - 1):
        return math.nan if (mantissa or not ieee) else sign * math.inf
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + mantissa / 2 ** mantissa_bits) * 2.0 ** (exponent - bias)


def decode(kind: str, raw: bytes) -> np.ndarray:
    if kind == "F32":
        return np.frombuffer(raw, np.float32).astype(np.float64)
    if kind == "F64":
        return np.frombuffer(raw, np.float64)
    if kind == "F16":
        return np.frombuffer(raw, np.float16).astype(np.float64)
    if kind == "BF16":
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "E4M3":
        return np.array([minifloat(b, 4, 3, False) for b in raw])
    if kind == "E5M2":
        return np.array([minifloat(b, 5, 2, True) for b in raw])
    ints = {"I8": np.int8, "U8": np.uint8, "I16": np.int16, "U16": np.uint16, "I32": np.int32, "U32": np.uint32,
            "I64": np.int64, "U64": np.uint64, "BOOL": np.uint8}
    return np.frombuffer(raw, ints[kind]).astype(np.float64)


def test_the_decoders_here_read_known_values():
    assert minifloat(0x38, 4, 3, False) == 1.0 and minifloat(0x7E, 4, 3, False) == 448.0
    assert math.isnan(minifloat(0x7F, 4, 3, False)) and minifloat(0x01, 4, 3, False) == 2.0 ** -9
    assert minifloat(0x3C, 5, 2, True) == 1.0 and minifloat(0x7B, 5, 2, True) == 57344.0
    assert minifloat(0x7C, 5, 2, True) == math.inf and math.isnan(minifloat(0x7D, 5, 2, True))
    assert decode("BF16", bytes([0x80, 0x3F])).tolist() == [1.0]


# ---- the comparison and poisoning -----------------------------------------------------------------------

def test_identical_outputs_compare_equal(driver):
    correct, mismatches = check(driver, "same")
    assert correct and mismatches == []


@pytest.mark.parametrize("scenario,byte", [("first", 0), ("middle", 4 * N // 2 + 1), ("last", 4 * N - 1)])
def test_one_differing_byte_is_caught_with_its_offset(driver, scenario, byte):
    correct, mismatches = check(driver, scenario)
    assert not correct
    assert [(m["seed"], m["buffer"], m["byte"], m["element"]) for m in mismatches] == \
        [(1, "y", byte, byte // 4), (2, "y", byte, byte // 4)]


def test_an_element_left_unwritten_is_caught_by_the_poison(driver):
    """B skips the last element; both variants share the buffers, so without poisoning B would show A's value."""
    correct, mismatches = check(driver, "skip-last")
    assert not correct and {m["element"] for m in mismatches} == {N - 1} and {m["buffer"] for m in mismatches} == {"y"}


def test_an_inout_buffer_is_compared(driver):
    correct, mismatches = check(driver, "inout")
    assert not correct and {(m["buffer"], m["byte"]) for m in mismatches} == {("z", 2000)}


def test_poisoning_writes_0xff_everywhere(driver):
    image = subprocess.run([str(driver), "poison", "4097"], capture_output=True, check=True).stdout
    assert image == b"\xff" * 4097


def test_tolerance_accepts_within_and_rejects_outside_and_nan(driver):
    assert not check(driver, "close")[0]  # bit for bit by default
    assert check(driver, "close", 1e-4)[0]
    assert not check(driver, "far", 1e-4)[0]
    correct, mismatches = check(driver, "nan", 1e9)
    assert not correct and {m["element"] for m in mismatches} == {7}


# ---- fills ----------------------------------------------------------------------------------------------

KINDS = ["F32", "F64", "F16", "BF16", "E4M3", "E5M2", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL"]


@pytest.mark.parametrize("kind", KINDS)
def test_fills_are_deterministic_differ_by_seed_and_are_finite(driver, kind):
    one, again, two = fill(driver, kind, 4096, 1), fill(driver, kind, 4096, 1), fill(driver, kind, 4096, 2)
    assert one == again and one != two and len(one) == 4096 * KIND_BYTES[kind]  # the header's sizes are swzc.verify.harness's
    values = decode(kind, one)
    assert values.size == 4096 and np.isfinite(values).all()
    if kind in ("F32", "F64", "F16", "BF16", "E4M3", "E5M2"):
        assert values.min() >= -1.0 and values.max() <= 1.0 and values.min() < -0.5 and values.max() > 0.5
        assert np.unique(values).size > (40 if kind.startswith("E") else 1000)  # not a constant or a handful of values
    elif kind == "BOOL":
        assert set(values.tolist()) == {0.0, 1.0}
    else:
        assert values.min() >= 0 and values.max() < (100 if kind in ("I8", "U8") else 1000) and values.max() > 50


@pytest.mark.parametrize("kind,big", [("E4M3", 448.0), ("E5M2", 57344.0), ("F16", 65504.0), ("BF16", 3.3895313892515355e38)])
def test_out_of_range_fills_saturate_to_the_largest_finite_value(driver, kind, big):
    assert decode(kind, fill(driver, kind, 4, 1, "CONST", 1e300)).tolist() == [big] * 4
    assert decode(kind, fill(driver, kind, 4, 1, "CONST", -1e300)).tolist() == [-big] * 4


def test_range_arange_and_const_fills(driver):
    values = decode("I32", fill(driver, "I32", 5000, 3, "RANGE", 10, 20))
    assert values.min() == 10 and values.max() == 19
    assert decode("U16", fill(driver, "U16", 5, 1, "ARANGE", 3)).tolist() == [0, 3, 6, 9, 12]
    assert decode("F16", fill(driver, "F16", 3, 1, "CONST", 0.5)).tolist() == [0.5] * 3
    assert decode("I8", fill(driver, "I8", 2, 1, "CONST", 1000)).tolist() == [127, 127]  # clamped to the type


CROSS_CHECK = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdio>
#include "harness_host.h"
// The header's encoders against CUDA's own conversions, on the host.
int main() {
  swzc::Rng rng(7);
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    float v = (float)(rng.unit() * 2.0 - 1.0);
    if (i % 4 == 1) v *= 1e-4f;  // subnormal halves and fp8s
    if (i % 4 == 2) v *= 600.0f;  // past e4m3's range: CUDA saturates too (SATFINITE)
    swzc::Format f;
    swzc::float_format(swzc::F16, &f);
    const unsigned short h = ((__half_raw)__float2half_rn(v)).x;
    swzc::float_format(swzc::BF16, &f);
    const unsigned short b = ((__nv_bfloat16_raw)__float2bfloat16_rn(v)).x;
    const unsigned char e4 = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    const unsigned char e5 = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
    swzc::Format f16, bf16, f8a, f8b;
    swzc::float_format(swzc::F16, &f16); swzc::float_format(swzc::BF16, &bf16);
    swzc::float_format(swzc::E4M3, &f8a); swzc::float_format(swzc::E5M2, &f8b);
    if (swzc::encode(v, f16) != h || swzc::encode(v, bf16) != b || swzc::encode(v, f8a) != e4 || swzc::encode(v, f8b) != e5) {
      if (bad++ < 5) std::printf("%.9g: %04x/%04x %04x/%04x %02x/%02x %02x/%02x\n", v, swzc::encode(v, f16), h,
                                 swzc::encode(v, bf16), b, swzc::encode(v, f8a), e4, swzc::encode(v, f8b), e5);
    }
  }
  std::printf("mismatches %d\n", bad);
  return bad != 0;
}
"""


@needs_nvcc
def test_encoders_agree_with_cuda_s_conversions(tmp_path):
    """Round to nearest even and saturation, value for value, against cuda_fp16.h, cuda_bf16.h and cuda_fp8.h."""
    source = tmp_path / "cross.cu"
    source.write_text(CROSS_CHECK)
    subprocess.run(["nvcc", "-std=c++17", "-I", native_dir(), "-o", str(tmp_path / "cross"), str(source)], check=True)
    run = subprocess.run([str(tmp_path / "cross")], capture_output=True, text=True)
    assert run.returncode == 0 and "mismatches 0" in run.stdout, run.stdout


# ---- the comparison's edges -----------------------------------------------------------------------------

def test_an_overflow_to_infinity_fails_however_wide_the_tolerance(driver):
    """|inf - 1| is within inf * tol: only the finiteness test tells the values apart."""
    for tolerance in (1e-4, 1e9):
        correct, mismatches = check(driver, "inf", tolerance)
        assert not correct and {m["element"] for m in mismatches} == {9}


def test_a_download_of_the_wrong_size_is_a_mismatch_at_its_end(driver):
    for tolerance in (0.0, 1e-4):
        correct, mismatches = check(driver, "short", tolerance)
        assert not correct and {(m["buffer"], m["byte"]) for m in mismatches} == {("y", 4 * N - 1)}


def test_the_tolerance_is_relative_to_the_original_value(driver):
    """Values near 1000 that differ by a millionth of themselves: within 1e-4 relative to their size, not absolutely."""
    assert check(driver, "close-big", 1e-4)[0]
    assert not check(driver, "close-big", 1e-7)[0] and not check(driver, "close-big")[0]


def test_the_tolerance_checks_the_last_element_too(driver):
    correct, mismatches = check(driver, "far-last", 1e-4)
    assert not correct and {m["element"] for m in mismatches} == {N - 1}


def test_integers_are_compared_byte_for_byte_even_with_a_tolerance(driver):
    """B adds 256 more to one int: only its second byte differs, and that byte is the one named."""
    for tolerance in (0.0, 1e-4):
        correct, mismatches = check(driver, "inout-256", tolerance)
        assert not correct and {(m["buffer"], m["byte"], m["element"]) for m in mismatches} == {("z", 2001, 500)}


def test_inputs_are_random_so_a_result_that_is_right_only_for_zeros_is_caught(driver):
    correct, mismatches = check(driver, "scaled")
    assert not correct and {(m["seed"], m["buffer"]) for m in mismatches} == {(1, "y"), (2, "y")}


def test_each_buffer_gets_its_own_fill(driver):
    def fill_at(index: int) -> bytes:
        return subprocess.run([str(driver), "fill", "F32", "256", "1", "UNIFORM", "0.0", "0.0", str(index)],
                              capture_output=True, check=True).stdout

    assert fill_at(0) == fill(driver, "F32", 256, 1) and fill_at(0) != fill_at(1) != fill_at(2)


def test_a_buffer_of_many_chunks_is_filled_the_same_each_time_with_a_stream_per_chunk(driver):
    """Large inputs are filled on several threads, a chunk of 2^20 elements each, each from its own stream:
    the bytes do not depend on which thread took which chunk."""
    elements = (1 << 20) * 3 + 5
    one, again = fill(driver, "F32", elements, 1), fill(driver, "F32", elements, 1)
    assert one == again and len(one) == elements * 4
    chunk = (1 << 20) * 4
    first, second = one[:chunk], one[chunk:2 * chunk]
    assert first != second and first[:64] != second[:64]  # not one stream restarted
    values = decode("F32", one)
    assert np.isfinite(values).all() and values.min() >= -1.0 and values.max() <= 1.0
