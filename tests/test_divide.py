"""The integer division form of the built-in orders (``ORDER/int``, swzc.formulas.divide): swzc_divide's spliced
text, compiled for the host, is exact; the estimate it rests on is checked for every scaled divisor; an integer form
divides by a run-time value no other way (`/` and `%` by the grid compile to the GPU's floating-point reciprocal
unit, which takes a uniform value off the uniform datapath), computes each quotient once, and puts every block where
the `/` form does."""

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import numpy as np

from swzc.formulas import divide
from swzc.formulas.prove import dispatch_maps, host_compiler, prove, sample_shapes
from swzc.formulas.swizzles import cxx_library, parse_spec

HOST = """\
#include <cstdio>
#define __device__
#define __forceinline__ inline
""" + divide.HOST_INTRINSICS + "".join(divide.helpers("swzc_remainder(a, d)"))

EVERY_SCALED = HOST + """\
// every dn in [2^31, 2^32): 0 < 2^63 - x dn <= 7 dn, x = swzc_reciprocal(dn)
int main() {
  unsigned long long bad = 0;
  for (unsigned long long dn = 1ull << 31; dn < (1ull << 32); ++dn) {
    const unsigned __int128 product = (unsigned __int128)swzc_reciprocal((unsigned)dn) * dn;
    const unsigned __int128 top = (unsigned __int128)1 << 63;
    if (product >= top || top - product > (unsigned __int128)7 * dn) {
      if (bad++ < 3) std::printf("dn %llu\\n", dn);
    }
  }
  std::printf("bad %llu\\n", bad);
  return 0;
}
"""

PAIRS = HOST + """\
// stdin: pairs "a d"; stdout: a / d by swzc_divide, one per line
int main() {
  unsigned a, d;
  while (std::scanf("%u %u", &a, &d) == 2) {
    std::printf("%u %u\\n", swzc_divide(a, d), swzc_remainder(a, d));
  }
  return 0;
}
"""


def build(tmp_path: Path, text: str, name: str) -> Path:
    source, binary = tmp_path / f"{name}.cpp", tmp_path / name
    source.write_text(text)
    subprocess.run([*host_compiler(), "-O2", "-std=c++11", "-o", str(binary), str(source)], check=True)
    return binary


def test_every_scaled_divisor(tmp_path):
    """The reciprocal estimate is below 2^63 / dn by at most 7 units for every one of the 2^31 scaled divisors:
    what the quotient's two corrections need (swzc.formulas.divide)."""
    out = subprocess.run([str(build(tmp_path, EVERY_SCALED, "every"))], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0
    assert out.stdout.strip().splitlines()[-1] == "bad 0", out.stdout


def pairs() -> list[tuple[int, int]]:
    """Edges (0, 1, powers of two and their neighbours, the largest values) against each other, every small
    divisor, and random pairs with operands of every bit length."""
    edges = sorted({v for k in range(33) for v in ((1 << k) - 1, 1 << k, (1 << k) + 1) if 0 <= v < 1 << 32}
                   | {3, 5, 7, 12, 96, 12 * 64, 0xFFFFFFFE, 3_000_000_000})
    out = [(a, d) for a in edges for d in edges if d]
    rng = random.Random(1234)
    out += [(rng.getrandbits(32), d) for d in range(1, 4097) for _ in range(4)]
    out += [(rng.getrandbits(rng.randint(1, 32)), rng.getrandbits(rng.randint(1, 32)) or 1) for _ in range(100_000)]
    out += [((1 << 32) - 1 - rng.getrandbits(8), d) for d in range(1, 2049)]  # the largest quotients' errors
    return out


def test_swzc_divide_is_exact(tmp_path):
    cases = pairs()
    binary = build(tmp_path, PAIRS, "pairs")
    out = subprocess.run([str(binary)], input="".join(f"{a} {d}\n" for a, d in cases), capture_output=True,
                         text=True, timeout=120, check=True)
    got = [tuple(int(v) for v in line.split()) for line in out.stdout.splitlines()]
    assert len(got) == len(cases)
    wrong = [(a, d, q) for (a, d), q in zip(cases, got) if q != (a // d, a % d)]
    assert not wrong, f"{len(wrong)} wrong, e.g. {wrong[:5]}"


SPECS = ("colmajor", "grouped:8", "serpentine:4", "hilbert:4", "morton:8", "xcd:8", "xcd:8:4",
         "xcd:8+grouped:8@1024", "grouped:12@4096")


def test_an_integer_form_divides_by_the_grid_only_through_swzc_divide():
    """Every `/` and `%` in the integer forms' text is by a constant (a parameter or a literal); the grid is
    divided by swzc_divide only.  A run-time divisor is any name but the step's parameter."""
    specs = [parse_spec(s + "/int") for s in SPECS]
    uses = [(s, a) for s in specs for a in ("2d", "1d", "linear") if not (a == "linear" and s.needs_tiles)]
    text = cxx_library(uses)
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    assert divide.NAME + "(" in code and "DIV" not in code and "MOD" not in code
    divisors = set(re.findall(r"[/%]\s*\(?\s*([A-Za-z_][A-Za-z_0-9]*|\d+u?)", code))
    # chiplets and chunk: an xcd step's parameters, k a panel's side: literals where the step is called
    assert divisors <= {"chiplets", "chunk", "round", "k", "2u"}, divisors


def test_the_two_forms_are_two_spellings_of_one_text():
    """The `/` form's text is the integer form's with each swzc_divide(a, d) written a / d, each remainder
    a % d, and the names without _int: one marked text, two spellings (so a step changed in one changes in both)."""
    for spec in SPECS:
        plain, integer = parse_spec(spec), parse_spec(spec + "/int")
        for adapter in ("2d", "1d"):
            if "xcd" in spec and adapter == "1d":
                continue
            back = cxx_library([(integer, adapter)])
            back = "".join(back.partition("static __device__ __forceinline__ unsigned swzc_")[1:]) if "swzc_divide(" in back else back
            back = re.sub(r"swzc_(divide|remainder)\((\w+), (\w+|\([^()]*\))\)",
                          lambda m: f"{m[2]} {'/' if m[1] == 'divide' else '%'} {m[3]}", back)
            back = back[back.index("// ", 1) if back.startswith("static") else 0:]
            back = back.replace("_int(", "(").replace("_int_", "_").replace("/int ", " ").replace(
                ", dividing in integer instructions", "")
            assert back.endswith(cxx_library([(plain, adapter)])), (spec, adapter)
    # where nothing divides by the grid (a chiplet step over a 1D grid), the two forms are one: the loop tries one
    assert parse_spec("xcd:8").divides("2d") and not parse_spec("xcd:8").divides("linear")
    assert cxx_library([(parse_spec("xcd:8/int"), "linear")]).replace("_int", "").replace("/int", "").replace(
        ", dividing in integer instructions", "") == cxx_library([(parse_spec("xcd:8"), "linear")])
    assert parse_spec("grouped:8@1024/int").name == "grouped:8@1024/int"
    assert parse_spec("grouped:8@1024/int").ungated == parse_spec("grouped:8")
    assert parse_spec("grouped:8/int").gated(1024) == parse_spec("grouped:8@1024/int")
    for bad in ("identity/int", "grouped:8/int/int", "grouped:8/float", "grouped:8/", "/int"):
        with pytest.raises(ValueError):
            parse_spec(bad)
    with pytest.raises(ValueError, match="/int comes last, after any gate"):
        parse_spec("grouped:8/int@1024")


@pytest.mark.parametrize("spec", ["grouped:8", "serpentine:3@12", "hilbert:4", "morton:2", "colmajor", "xcd:8+grouped:4"])
@pytest.mark.parametrize("adapter", ["2d", "1d"])
def test_an_integer_form_puts_every_block_where_the_slash_form_does(spec, adapter):
    """On grids of every shape the prover samples (ragged, prime, single-row), the integer form's dispatch map is
    the `/` form's, and it is proven a permutation."""
    if "xcd" in spec and adapter == "1d":
        pytest.skip("a chiplet step over the 1d adapter: the same as over 2d")
    plain, integer = parse_spec(spec), parse_spec(spec + "/int")
    for shape in sample_shapes(adapter)[:24]:
        a, b = dispatch_maps([(plain, adapter), (integer, adapter)], shape)
        assert np.array_equal(a, b), (spec, adapter, shape)
    (proof,) = prove([(integer, adapter, None)])
    assert proof.ok, proof.failure


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("spec", ["grouped:8@1024", "serpentine:8", "hilbert:8", "colmajor"])
@pytest.mark.parametrize("adapter", ["2d", "1d"])
def test_the_integer_forms_device_code_has_no_division_instruction(tmp_path, spec, adapter):
    """Compiled by nvcc, a kernel that only writes its swizzled block index holds no div/rem instruction in
    its PTX in the integer form (the `/` form's does), and fewer 32-bit high multiplies than a division more than
    its distinct quotients would take (nine each): a remainder beside its quotient costs none.  No warning."""
    quotients = {"grouped:8@1024": 2, "serpentine:8": 2, "hilbert:8": 3, "colmajor": 1}[spec] + 1  # + the adapter's
    for formula in (parse_spec(spec), parse_spec(spec + "/int")):
        call = (f"{formula.function_name(adapter)}(blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, "
                + ("gridDim.y)" if adapter == "2d" else "n)"))
        source = tmp_path / "k.cu"
        source.write_text(cxx_library([(formula, adapter)])
                          + f"__global__ void k(uint3* out, unsigned n) {{ const uint3 b = {call};\n"
                          "  if (threadIdx.x == 0) out[blockIdx.x + gridDim.x * blockIdx.y] = b; }\n")
        ptx = tmp_path / "k.ptx"
        done = subprocess.run(["nvcc", "-ptx", "-O3", "-arch=sm_80", "-o", str(ptx), str(source)], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
        text = ptx.read_text()
        divisions = re.findall(r"^\s*(?:@%p\d+\s+)?(div|rem)\.", text, flags=re.MULTILINE)
        if formula.integer:
            assert not divisions, f"{spec} over {adapter}: {len(divisions)} div/rem instructions"
            assert 0 < len(re.findall(r"\bmul\.hi\.u32\b", text)) < 9 * (quotients + 1), (spec, adapter)
        else:
            assert divisions
