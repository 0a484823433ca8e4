"""Footprints of the idioms real kernels use: cooperative strided loads, vector loads through casts,
local pointers, __ldg, atomics, element types behind aliases, tile loops; and the unknown accesses that
stop the ranking."""

import dataclasses
import re
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from support import ROOT, has_gpu

from swzc.model import footprint as fpmod
from swzc.target import hw as hwmodels
from swzc.analysis.kernels import analyze
from swzc.analysis.records import Decode, TileLoop
from swzc.frontend.syntax import walk
from swzc.commands.cli import main
from swzc.model.footprint import Footprint, UnknownAccess, footprint
from swzc.model.rank import Ranking, rank
from swzc.frontend.source import load, load_bytes
from swzc.analysis.context import FileContext

SUITE = ROOT / "bench" / "suite" / "kernels"


def kernel_of(code: str, name: str | None = None):
    src = load_bytes("t.cu", code.encode())
    return src, next(k for k in analyze(FileContext(src)).kernels if name is None or k.name == name)


def fp_of(code: str, name: str | None = None) -> Footprint:
    src, kernel = kernel_of(code, name)
    fp = footprint(FileContext(src), kernel)
    assert not isinstance(fp, str), fp
    return fp


def only(fp: Footprint, array: str, write: bool = False):
    (access,) = [a for a in fp.accesses if a.array == array and a.write == write]
    return access


def sectors(byte_offsets, width: int) -> list[int]:
    """The 32-byte sectors `width` bytes at each offset cover, computed the slow way."""
    return sorted({b // 32 for o in byte_offsets for b in range(o, o + width)})


def one_kernel(body: str, params: str = "const float* A, float* C", launch: str = "1, 8", prelude: str = "") -> str:
    return f"""{prelude}
__global__ void k({params}) {{
{body}
}}
int main() {{ k<<<{launch}>>>({", ".join("0" for _ in params.split(","))}); }}
"""


# ---- cooperative strided loads ------------------------------------------------------------------------


COOPERATIVE = """
#define BM 4
#define BK 16
#define K 128
#define KT 64
__global__ void coop(const __nv_bfloat16* A, float* C) {
  __shared__ alignas(16) __nv_bfloat16 As[BM][BK];
  const int bm = blockIdx.x;
  for (int k0 = 0; k0 < KT; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
      int r = i / 2;
      int c = i % 2;
      *(int4*)&As[r][c * 8] = *(const int4*)&A[(bm * BM + r) * K + k0 + c * 8];
    }
  }
  C[bm * 4 + threadIdx.x] = 0.0f;
}
int main() { coop<<<16, 4>>>(0, 0); }
"""


def test_cooperative_strided_tile_load_is_the_union_over_threads_and_iterations():
    fp = fp_of(COOPERATIVE)
    a = only(fp, "A")
    # 4 rows of 256 bytes; the loads cover the first 64 elements (128 bytes, 4 sectors) of each row
    offsets = [((r * 128) + k0 + c * 8) * 2 for r in range(4) for k0 in range(0, 64, 16) for c in range(2)]
    assert a.sectors.tolist() == sectors(offsets, 16) == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
    assert a.block_bytes == (0, 4 * 128 * 2, 0) and a.elem_bytes == 2 and not a.approximate
    assert fp.unknown == ()


def test_cooperative_loop_whose_stride_leaves_gaps():
    """Threads 0..3 start at 0, 1, 2, 3 and step by 8: values 0-3, 8-11, ... (not all of [0, 32))."""
    fp = fp_of(one_kernel("for (int i = threadIdx.x; i < 32; i += 8) C[i * 8] = A[i * 8];", launch="1, 4"))
    expected = sectors([i * 8 * 4 for i in range(32) if i % 8 < 4], 4)
    assert only(fp, "A").sectors.tolist() == expected
    assert only(fp, "C", write=True).sectors.tolist() == expected


def test_warp_and_lane_digits_stay_exact():
    """tx = 32 * (tx / 32) + tx % 32: the digits are independent, and tx itself is still their sum."""
    fp = fp_of(one_kernel("C[0] = A[(threadIdx.x / 32) * 1000 + (threadIdx.x % 32) * 3 + threadIdx.x * 5];", launch="1, 128"))
    expected = sectors([((t // 32) * 1000 + (t % 32) * 3 + t * 5) * 4 for t in range(128)], 4)
    assert only(fp, "A").sectors.tolist() == expected


def test_nonlinear_per_block_index():
    body = "C[0] = A[min((int)threadIdx.x, 5) * 64 + (threadIdx.x < 4 ? 0 : 1000) + ((threadIdx.x >> 1) & 3) * 16];"
    fp = fp_of(one_kernel(body, launch="1, 16"))
    expected = sectors([(min(t, 5) * 64 + (0 if t < 4 else 1000) + ((t >> 1) & 3) * 16) * 4 for t in range(16)], 4)
    assert only(fp, "A").sectors.tolist() == expected


def test_loop_bound_that_depends_on_the_thread():
    fp = fp_of(one_kernel("for (int j = 0; j < threadIdx.x; ++j) C[0] += A[j * 16 + threadIdx.x * 128];", launch="1, 8"))
    expected = sectors([(j * 16 + t * 128) * 4 for t in range(8) for j in range(t)], 4)
    assert only(fp, "A").sectors.tolist() == expected


def test_cooperative_loop_with_a_ragged_end():
    """Threads 0..3 step by 4 below 10: the last round stops at 9, not at 11."""
    fp = fp_of(one_kernel("for (int i = threadIdx.x; i < 10; i += blockDim.x) C[i] = A[i * 8];", launch="1, 4"))
    assert only(fp, "A").sectors.tolist() == list(range(10))


@pytest.mark.parametrize("cond", ["o + 3 <= 12", "3 + o < 13", "(o + 3) <= 12", "12 >= o + 3", "o - 2 < 7",
                                  "o + threadIdx.x < 12"])
def test_a_loop_whose_condition_moves_its_counter_by_a_step(cond):
    """`offset + stride <= BM` is `offset <= BM - stride`: the counter's bound, whatever side the step is on."""
    fp = fp_of(one_kernel(f"for (int o = 0; {cond}; o += 3) C[0] += A[(o + threadIdx.x) * 8];", launch="1, 2"))
    holds = [(o, t) for t in range(2) for o in range(0, 30, 3) if eval(cond.replace("threadIdx.x", "t"), {"o": o, "t": t})]
    assert only(fp, "A").sectors.tolist() == sectors([(o + t) * 8 * 4 for o, t in holds], 4) and fp.unknown == ()


def test_decreasing_loop():
    fp = fp_of(one_kernel("for (int j = 31; j >= 8; j -= 8) C[0] += A[j * 8];"))
    assert only(fp, "A").sectors.tolist() == sectors([j * 8 * 4 for j in (31, 23, 15)], 4)


# ---- addresses: casts, local pointers, __ldg, atomics, compound assignment ---------------------------------

CAST_FORMS = {
    "int4 through &A[i]": ("int4 v = *(const int4*)&A[threadIdx.x * 4];", 0, 16),
    "reinterpret_cast on A + off": ("float4 v = reinterpret_cast<const float4*>(A + 64)[threadIdx.x];", 256, 16),
    "C cast of the array": ("float4 v = ((float4*)A)[threadIdx.x + 8];", 128, 16),
    "local pointer with a cast": ("const float4* p = reinterpret_cast<const float4*>(A + 32);\n  float4 v = p[threadIdx.x];", 128, 16),
    "static_cast": ("const float2* p = static_cast<const float2*>((const void*)A);\n  float2 v = p[threadIdx.x];", 0, 8),
    "__ldg of a pointer sum": ("float4 v = __ldg((const float4*)A + threadIdx.x);", 0, 16),
    "__ldg of an address": ("float v = __ldg(&A[threadIdx.x * 8]);", 0, -4),
    "__ldcs of a cast": ("float2 v = __ldcs(reinterpret_cast<const float2*>(A) + threadIdx.x);", 0, 8),
    "auto pointer": ("auto p = A + 16;\n  float v = p[threadIdx.x];", 64, 4),
    "a macro of the address of its argument": ("\n#define F4(value) (reinterpret_cast<const float4 *>(&(value))[0])\n"
                                               "  float4 v = F4(A[threadIdx.x * 4]);", 0, 16),
}


@pytest.mark.parametrize("case", CAST_FORMS)
def test_vector_loads_through_casts(case):
    line, start, width = CAST_FORMS[case]
    fp = fp_of(one_kernel(line))
    a = only(fp, "A")
    step = abs(width) if width > 0 else 32  # __ldg(&A[8 t]) reads 4 bytes every 32
    assert a.sectors.tolist() == sectors([start + t * step for t in range(8)], abs(width))
    assert fp.unknown == () and not any(x.write for x in fp.accesses if x.array == "A")


def test_bf162_pairs_through_a_cast_of_a_pointer_sum():
    """The idiom that was dropped silently: a cast of `k + h*S*D + s*D`, then a subscript."""
    code = """
#define S 64
#define D 32
__global__ void attn(const __nv_bfloat16* k, float* out) {
  const int h = blockIdx.x;
  float acc = 0.0f;
  for (int s = 0; s < S; ++s) {
    const __nv_bfloat162* kr = (const __nv_bfloat162*)(k + h * S * D + s * D);
    acc += __low2float(kr[threadIdx.x]);
  }
  out[h * 16 + threadIdx.x] = acc;
}
int main() { attn<<<4, 16>>>(0, 0); }
"""
    fp = fp_of(code)
    k = only(fp, "k")
    assert k.block_bytes == (0, 64 * 32 * 2, 0)
    assert k.sectors.tolist() == list(range(64 * 32 * 2 // 32))  # 16 pairs = the whole 64-byte row, every row
    assert fp.unknown == ()


def test_writes_through_casts_compound_assignment_and_atomics():
    body = """
  const int i = blockIdx.x * 8 + threadIdx.x;
  *(float4*)&C[i * 4] = make_float4(0, 0, 0, 0);
  D[i] += A[i];
  E[i]++;
  atomicAdd(&F[i], 1.0f);
  atomicMax(G + i, 3);"""
    fp = fp_of(one_kernel(body, "const float* A, float* C, float* D, int* E, float* F, int* G", launch="4, 8"))
    modes = {(a.array, a.write) for a in fp.accesses}
    assert modes == {("A", False), ("C", True), ("D", False), ("D", True), ("E", False), ("E", True),
                     ("F", False), ("F", True), ("G", False), ("G", True)}
    assert only(fp, "C", write=True).block_bytes == (0, 8 * 16, 0)
    assert only(fp, "C", write=True).sectors.tolist() == [0, 1, 2, 3]
    assert only(fp, "F").sectors.tolist() == only(fp, "F", write=True).sectors.tolist() == [0]


def test_a_macro_that_takes_its_argument_s_address_stands_for_the_access_and_the_argument_is_not_read():
    body = """
#define F4(value) (reinterpret_cast<float4 *>(&(value))[0])
#define SQR(x) ((x) * (x))
  const int i = blockIdx.x * 8 + threadIdx.x;
  F4(C[i * 4]) = F4(A[i * 4]);
  D[i] = SQR(B[i]) + F4((E[idx[i] * 4])).x;"""
    fp = fp_of(one_kernel(body, "float* A, const float* B, float* C, float* D, float* E, const int* idx", launch="4, 8"))
    found = sorted((a.array, a.write, a.sectors.tolist()) for a in fp.accesses if a.array != "E")
    assert found == [("A", False, [0, 1, 2, 3]), ("B", False, [0]), ("C", True, [0, 1, 2, 3]), ("D", True, [0]),
                     ("idx", False, [0])]  # the index read inside the macro's argument stays
    assert [(u.array, u.mode) for u in fp.unknown] == [("E", "read")]  # where idx points: not followed, and said


def test_an_access_says_whether_its_array_holds_one_number_per_element():
    body = """
  const int i = blockIdx.x * 8 + threadIdx.x;
  C[i] = make_float4(A[i], B[i].x, H[i].x, T[i]);"""
    fp = fp_of("typedef float real;\n" + one_kernel(body, "const real* A, const float2* B, const __half2* H, const __nv_bfloat16* T, float4* C",
                                                     launch="4, 8"))
    assert {(a.array, a.scalar) for a in fp.accesses} == {("A", True), ("B", False), ("H", False), ("T", True), ("C", False)}


def test_the_address_inside_ldg_is_not_a_second_access():
    fp = fp_of(one_kernel("float v = __ldg(&A[threadIdx.x]) + __ldg(A + 100);"))
    (a,) = fp.accesses
    assert a.sectors.tolist() == [0, 12]


def test_a_pointer_that_moves_by_a_step_each_iteration():
    code = """
#define BM 4
#define BK 8
#define N 64
__global__ void mm(const float* A, const float* B, float* C) {
  A += blockIdx.y * BM * N;
  B += blockIdx.x * 8;
  const float* a = A + threadIdx.y * N;
  float acc = 0.0f;
  for (int bk = 0; bk < N; bk += BK) {
    acc += a[threadIdx.x] * B[threadIdx.x * N];
    a += BK;
    B += BK * N;
  }
  C[(blockIdx.y * BM + threadIdx.y) * N + blockIdx.x * 8 + threadIdx.x] = acc;
}
int main() { mm<<<dim3(8, 16), dim3(8, 4)>>>(0, 0, 0); }
"""
    fp = fp_of(code)
    a, b = only(fp, "A"), only(fp, "B")
    assert a.block_bytes == (4 * 64 * 4, 0, 0) and a.sectors.tolist() == list(range(4 * 64 * 4 // 32))  # 4 whole rows
    assert b.block_bytes == (0, 32, 0)
    assert b.sectors.tolist() == sectors([(bk * 64 + t * 64) * 4 for bk in range(0, 64, 8) for t in range(8)], 4)
    assert fp.unknown == ()


TWO_COUNTERS = """
#define BS 16
#define W 256
__global__ void mm(float* C, const float* A, const float* B) {
  int tx = threadIdx.x, ty = threadIdx.y;
  int aBegin = W * BS * blockIdx.y, aEnd = aBegin + W - 1;
  float acc = 0.f;
  __shared__ float As[BS][BS], Bs[BS][BS];
  LOOP
  C[(blockIdx.y * BS + ty) * W + blockIdx.x * BS + tx] = acc;
}
int main() { mm<<<dim3(W / BS, W / BS), dim3(BS, BS)>>>(0, 0, 0); }
"""
BODY = """{
    As[ty][tx] = A[a + W * ty + tx];
    Bs[ty][tx] = B[b + W * ty + tx];
    __syncthreads();
    for (int k = 0; k < BS; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }"""


@pytest.mark.parametrize("loop", [
    "for (int a = aBegin, b = BS * blockIdx.x; a <= aEnd; a += BS, b += BS * W) " + BODY,  # the CUDA samples' matrixMul
    "int a, b;\n  for (a = aBegin, b = BS * blockIdx.x; a <= aEnd; b += BS * W, a += BS) " + BODY,
])
def test_a_loop_that_moves_a_second_variable_with_its_counter(loop):
    one = "for (int i = 0; i < W / BS; ++i) { int a = aBegin + i * BS, b = BS * blockIdx.x + i * BS * W; " + BODY[1:] + " }"
    want, got = fp_of(TWO_COUNTERS.replace("LOOP", one)), fp_of(TWO_COUNTERS.replace("LOOP", loop))
    assert got.unknown == () and want.unknown == ()
    for array in ("A", "B"):
        assert only(got, array).sectors.tolist() == only(want, array).sectors.tolist(), array
        assert only(got, array).block_bytes == only(want, array).block_bytes


@pytest.mark.parametrize("loop, why", [
    ("for (int a = aBegin, b = 0; a <= aEnd; a += BS, b += BS * W, b += 1) " + BODY, "b"),  # moved twice
    ("for (int a = aBegin, b = 0; a <= aEnd; a += BS) " + BODY.replace("B[b + W * ty + tx]", "B[b + W * ty + tx + b++]"), "b"),
])
def test_a_second_variable_moved_in_ways_the_analysis_cannot_count_is_unknown(loop, why):
    fp = fp_of(TWO_COUNTERS.replace("LOOP", loop))
    assert any(u.array.startswith("B") for u in fp.unknown), fp.unknown


VECTOR_INDEX = """
#define N 256
__global__ void mm(const float* A, const float* B, float* C) {
  MAKE
  float s = 0.f;
  for (int k = 0; k < N; ++k) s += A[Y * N + k] * B[k * N + X];
  C[Y * N + X] = s;
}
int main() { mm<<<dim3(N / 16, N / 16), dim3(16, 16)>>>(0, 0, 0); }
"""


def test_the_parts_of_a_vector_made_from_block_indices_are_followed():
    """`int2 p = make_int2(col, row)`, read as p.x and p.y: the same footprint as two ints."""
    make = "int2 p = make_int2(blockIdx.x * 16 + threadIdx.x, blockIdx.y * 16 + threadIdx.y);"
    plain = "int px = blockIdx.x * 16 + threadIdx.x, py = blockIdx.y * 16 + threadIdx.y;"
    got = fp_of(VECTOR_INDEX.replace("MAKE", make).replace("Y", "p.y").replace("X", "p.x"))
    want = fp_of(VECTOR_INDEX.replace("MAKE", plain).replace("Y", "py").replace("X", "px"))
    assert got.unknown == ()
    for array in ("A", "B"):
        assert only(got, array).sectors.tolist() == only(want, array).sectors.tolist(), array


@pytest.mark.parametrize("change", ["p.x += 1;", "int* q = &p.x;", "p.y++;", "if (threadIdx.x) p.x = 3;"])
def test_a_vector_whose_parts_change_after_it_is_made_is_not_followed(change):
    make = "int2 p = make_int2(blockIdx.x * 16 + threadIdx.x, blockIdx.y * 16 + threadIdx.y);\n  " + change
    fp = fp_of(VECTOR_INDEX.replace("MAKE", make).replace("Y", "p.y").replace("X", "p.x"))
    assert fp.unknown and all("change after it is made" in u.why for u in fp.unknown), fp.unknown


@pytest.mark.parametrize("body, why", [
    ("const float* p = A;\n  if (threadIdx.x) p += 4;\n  C[0] = p[0];", "under a condition"),
    ("const float* p = A;\n  for (int i = 0; i < 4; ++i)\n    for (int j = 0; j < 4; ++j) p += 1;\n  C[0] = p[0];", "before this use"),
    ("const float* p = A;\n  for (int i = 0; i < 4; ++i) { C[i] = p[0]; p += i; }", "changes in the loop"),
    ("const float* p = threadIdx.x ? A : C;\n  C[1] = p[0];", "chosen at run time"),
])
def test_pointers_the_analysis_cannot_follow_are_unknown(body, why):
    fp = fp_of(one_kernel(body))
    assert any(u.array in ("p", "A") and u.reads and why in u.why for u in fp.unknown), fp.unknown


def test_local_and_shared_memory_are_not_global_accesses():
    body = """
  __shared__ float tile[8][9];
  extern __shared__ float dyn[];
  float regs[4];
  float4 v;
  float* s = &tile[threadIdx.x][0];
  s[1] = 1.0f;
  dyn[threadIdx.x] = regs[threadIdx.x % 4];
  ((float*)&v)[threadIdx.x % 4] = tile[0][threadIdx.x];
  C[threadIdx.x] = dyn[threadIdx.x] + coef[threadIdx.x];"""
    fp = fp_of(one_kernel(body, prelude="#ifndef GUARD\n#define GUARD\nstatic __constant__ float coef[8];\n#endif"))
    assert [(a.array, a.write) for a in fp.accesses] == [("C", True)] and fp.unknown == ()


def test_a_pointer_in_a_local_struct_is_unknown_and_an_array_in_one_is_local():
    """`Mat a = A; a.data[i]` may read global memory: never dropped as local.  `acc.v[i]` (an array field) is
    the struct's own storage, local or shared."""
    prelude = "struct Mat { int n; const float* data; };\nstruct Acc { float v[4]; int n; };"
    body = """
  Mat a = m;
  Acc acc;
  __shared__ Acc sh;
  acc.v[threadIdx.x % 4] = sh.v[threadIdx.x % 4];
  C[threadIdx.x] = a.data[threadIdx.x] + acc.v[0];"""
    fp = fp_of(one_kernel(body, params="Mat m, float* C", prelude=prelude))
    assert [(a.array, a.write) for a in fp.accesses] == [("C", True)]
    assert [(u.array, u.reads, u.why) for u in fp.unknown] == [
        ("a.data[threadIdx.x]", True, "a pointer held in a local struct: a.data")], fp.unknown
    # a type from a header swzc does not read: its fields are unknown, but for a WMMA fragment's elements
    body = """
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc;
  Opaque o;
  for (int i = 0; i < acc.num_elements; i++) acc.x[i] = 0.f;
  C[threadIdx.x] = acc.x[0] + o.x[threadIdx.x];"""
    fp = fp_of(one_kernel(body, params="const float* A, float* C"))
    assert [(a.array, a.write) for a in fp.accesses] == [("C", True)]
    assert [u.array for u in fp.unknown] == ["o.x[threadIdx.x]"], fp.unknown


def test_an_element_type_swzc_cannot_see_is_named_with_the_set_that_gives_it():
    fp = fp_of(one_kernel("C[threadIdx.x] = A[threadIdx.x].x;", params="const cufftComplex* A, float* C"))
    assert [u.why for u in fp.unknown] == [
        "the size of cufftComplex is not known (a type swzc cannot see: give it with --set cufftComplex=TYPE, e.g. float2)"]
    src, kernel = kernel_of(one_kernel("C[threadIdx.x] = A[threadIdx.x].x;", params="const cufftComplex* A, float* C"))
    given = footprint(FileContext(src), kernel, user={"cufftComplex": "float2"})
    assert given.unknown == () and only(given, "A").sectors.tolist() == [0, 1]  # 8 threads, 8 bytes each


def test_a_device_array_at_file_scope_is_a_stream():
    fp = fp_of(one_kernel("C[threadIdx.x] = table[threadIdx.x * 2];", prelude="__device__ float table[64];"))
    assert only(fp, "table").sectors.tolist() == [0, 1]


# ---- element types behind aliases -----------------------------------------------------------------------


@pytest.mark.parametrize("prelude, ctype, size", [
    ("#define DATA_TYPE double", "DATA_TYPE", 8),
    ("typedef double real;", "real", 8),
    ("using scalar_t = __half;", "scalar_t", 2),
    ("typedef __nv_bfloat16 bf16_t;\ntypedef bf16_t elem_t;", "elem_t", 2),
])
def test_element_types_behind_macros_and_typedefs(prelude, ctype, size):
    fp = fp_of(one_kernel("C[threadIdx.x] = (float)X[threadIdx.x];", f"const {ctype}* X, float* C", "1, 64", prelude))
    x = only(fp, "X")
    assert x.elem_bytes == size and x.sectors.size == 64 * size // 32


@pytest.mark.parametrize("ctype, size", [
    ("__nv_fp8_e4m3", 1), ("__nv_fp8_e5m2", 1), ("int8_t", 1), ("uint8_t", 1), ("char", 1),
    ("__nv_bfloat16", 2), ("__half", 2), ("half", 2), ("hip_bfloat16", 2), ("bf16", 2),
    ("half2", 4), ("__nv_bfloat162", 4), ("float2", 8), ("int2", 8), ("float4", 16), ("int4", 16),
    ("uint4", 16), ("double2", 16),
])
def test_element_sizes(ctype, size):
    fp = fp_of(one_kernel("C[blockIdx.x] = 0; X2[threadIdx.x] = X[threadIdx.x];", f"const {ctype}* X, {ctype}* X2, float* C", "2, 64"))
    assert only(fp, "X").elem_bytes == size
    assert only(fp, "X").sectors.tolist() == sectors([t * size for t in range(64)], size)


def test_struct_elements_in_c_layout():
    prelude = """
struct Particle { float4 pos; float3 vel; int id; };
typedef struct { float x[3]; double w; float y; } Rec;
"""
    fp = fp_of(one_kernel("int i = blockIdx.x * 64 + threadIdx.x;\n  C[i] = P[i].pos.x + R[i].w;",
                          "const Particle* P, const Rec* R, float* C", "16, 64", prelude))
    assert only(fp, "P").elem_bytes == 32 and only(fp, "P").block_bytes == (0, 64 * 32, 0)
    assert only(fp, "R").elem_bytes == 32 and only(fp, "R").sectors.size == 64 * 32 // 32  # 12, 4 of padding, 8, 4, 4


def test_cooperative_group_ranks():
    code = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void rows(const float* inp, float* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  float s = 0.0f;
  for (int i = warp.thread_rank(); i < 768; i += warp.size()) s += inp[row * 768 + i];
  out[row * 32 + lane_of(warp)] = s + inp[block.thread_rank() + warpSize];
}
int main() { rows<<<64, 128>>>(0, 0); }
"""
    code = code.replace("__global__", "__device__ int lane_of(const cg::thread_block_tile<32>& w) { return w.thread_rank(); }\n__global__", 1)
    fp = fp_of(code)
    rows = [a for a in fp.accesses if a.array == "inp" and a.block_bytes == (0, 4 * 768 * 4, 0)]
    assert len(rows) == 1 and rows[0].sectors.tolist() == list(range(4 * 768 * 4 // 32))
    assert only(fp, "out", write=True).block_bytes == (0, 4 * 32 * 4, 0)
    fixed = [a for a in fp.accesses if a.array == "inp" and a.block_bytes == (0, 0, 0)]
    assert fixed[0].sectors.tolist() == sectors([(t + 32) * 4 for t in range(128)], 4)
    assert fp.unknown == ()


def test_template_type_fixed_at_the_launch():
    code = """
template <typename T>
__global__ void copy(const T* x, T* y) { y[blockIdx.x * 64 + threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x]; }
int main() { copy<double><<<4, 64>>>(0, 0); }
"""
    fp = fp_of(code)
    assert only(fp, "x").elem_bytes == 8 and only(fp, "x").block_bytes == (0, 512, 0)


def test_template_type_the_launch_does_not_fix_is_unknown():
    code = """
template <typename T>
__global__ void copy(const T* x, T* y) { y[threadIdx.x] = x[threadIdx.x]; }
void* buffer(int which);
void launch() { copy<<<4, 64>>>(buffer(0), buffer(1)); }
"""
    fp = fp_of(code)
    assert {u.array for u in fp.unknown} == {"x", "y"} and all("size of" in u.why for u in fp.unknown)


def test_template_type_deduced_from_a_cast_argument():
    code = """
template <typename T>
__global__ void copy(const T* x, T* y) { y[threadIdx.x] = x[threadIdx.x]; }
void launch(const void* x, void* y) { copy<<<4, 64>>>((const double*)x, (double*)y); }
"""
    fp = fp_of(code)
    assert fp.unknown == () and {a.elem_bytes for a in fp.accesses} == {8}


# ---- inline asm, helpers and macros -----------------------------------------------------------------------

ASYNC = """
#define IDX(r, c) ((r) * 256 + (c))
#define AT(p, r, c) (p)[IDX(r, c)]
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"(s), "l"(gmem));
}
__device__ float first(const float p[IDX(1, 0)], int i) { return p[i]; }
__global__ void stage(const float* A, const float* B, const float* D, float* C) {
  __shared__ alignas(16) float sm[64 * 4];
  const float* src = A + blockIdx.x * 1024;
  cp_async16(&sm[threadIdx.x * 4], src + threadIdx.x * 4);
  float4 v;
  asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(B + threadIdx.x * 32));
  AT(C, blockIdx.x, threadIdx.x) = first(D, IDX(blockIdx.x, 8));
}
int main() { stage<<<16, 64>>>(0, 0, 0, 0); }
"""


def test_cp_async_ld_global_macros_and_helpers():
    fp = fp_of(ASYNC)
    a, b, d, c = only(fp, "A"), only(fp, "B"), only(fp, "D"), only(fp, "C", write=True)
    assert a.block_bytes == (0, 4096, 0) and a.sectors.tolist() == list(range(64 * 16 // 32))
    assert b.sectors.tolist() == [4 * t for t in range(64)]  # 16 bytes every 128
    assert d.block_bytes == (0, 1024, 0) and d.sectors.tolist() == [1]
    assert c.block_bytes == (0, 1024, 0) and c.sectors.tolist() == list(range(8))
    assert a.line == 12 and d.line == 15  # lines of the calls in the kernel
    assert fp.unknown == ()


def test_async_copies_and_dynamic_shared_memory():
    code = """
template <class T> struct SharedMemory {
  __device__ inline operator T*() { extern __shared__ int smem_[]; return (T*)smem_; }
};
__global__ void copy(const float* A, float* C) {
  float* sdata = SharedMemory<float>();
  __shared__ alignas(16) float stage[128 * 4];
  __pipeline_memcpy_async(&stage[threadIdx.x * 4], A + 4096 + threadIdx.x * 4, 16);
  asm volatile("cp.async.cg.shared.global [%0], [%1], %2;\\n" :: "r"(0), "l"(A + 8192 + threadIdx.x * 8), "n"(8));
  cuda::memcpy_async(block, stage, A + 16384, sizeof(float) * 256, barrier);
  sdata[threadIdx.x] = stage[threadIdx.x];
  C[blockIdx.x * 128 + threadIdx.x] = sdata[threadIdx.x ^ 1];
}
int main() { copy<<<16, 128>>>(0, 0); }
"""
    fp = fp_of(code)
    a = only(fp, "A")
    expected = sectors([16384 + t * 16 for t in range(128)], 16) + sectors([32768 + t * 32 for t in range(128)], 8)
    assert a.sectors.tolist() == sorted(set(expected + sectors([65536], 1024)))
    assert [(x.array, x.write) for x in fp.accesses] == [("A", False), ("C", True)] and fp.unknown == ()


def test_helper_locals_and_loops_are_read_at_each_call():
    code = """
__device__ void load_row(const float* src, float* dst, int n) {
  const float* p = src + threadIdx.x;
  for (int i = 0; i < n; i += 8) dst[i] = p[i];
}
__global__ void k(const float* A, const float* B, float* C) {
  __shared__ float s[64];
  load_row(A + blockIdx.x * 256, s, 64);
  load_row(B + blockIdx.x * 512, s, 16);
  C[blockIdx.x * 8 + threadIdx.x] = s[threadIdx.x];
}
int main() { k<<<16, 8>>>(0, 0, 0); }
"""
    fp = fp_of(code)
    assert only(fp, "A").block_bytes == (0, 1024, 0) and only(fp, "A").sectors.tolist() == list(range(8))
    assert only(fp, "B").block_bytes == (0, 2048, 0) and only(fp, "B").sectors.tolist() == [0, 1]
    assert fp.unknown == ()


@pytest.mark.parametrize("body, why", [
    ('asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global [%0], [%1, {%2, %3}];" :: "r"(0), "l"(A), "r"(0), "r"(0));', "bulk"),
    ("consume(A + threadIdx.x);", "consume"),
    ("C[0] = A[idx[threadIdx.x]];", "read from memory"),
    ("C[0] = A[threadIdx.x * n];", "launch does not fix"),
    ("C[0] = p->x;", "member"),
    ("C[0] = tex1Dfetch<float>(t, threadIdx.x);", "texture"),
])
def test_reads_the_analysis_cannot_follow_are_listed_with_their_line(body, why):
    code = one_kernel(body, "const float* A, float* C, const int* idx, int n, const float2* p, cudaTextureObject_t t",
                      prelude="__device__ void consume(const float* q);")
    code = code.replace("k<<<1, 8>>>(0, 0, 0, 0, 0, 0)", "k<<<1, 8>>>(0, 0, 0, n_unknown, 0, 0)")
    fp = fp_of(code)
    (u,) = [u for u in fp.unknown if u.reads]
    assert u.line == 3 and why in u.why, u
    assert str(u).startswith("line 3: ")


def test_definitions_that_name_themselves_are_unknown_not_a_crash():
    """Code that parses but does not compile must still give a footprint, never a traceback."""
    fp = fp_of(one_kernel("auto w = w;\n  C[1] = w.thread_rank();\n  int i = i + 1;\n  C[i] = A[i];\n"
                          "  auto p = p + 1;\n  C[2] = p[0];"))
    assert {(u.line, u.mode) for u in fp.unknown} >= {(6, "write"), (6, "read"), (8, "read")}
    assert all(u.line in (6, 8) for u in fp.unknown)


# ---- block dependence ------------------------------------------------------------------------------------


def test_decoded_block_index():
    code = """
#define TN 8
__global__ void k(const float* A, float* C) {
  const int tn = 8;
  const int r = blockIdx.x / tn, c = blockIdx.x % tn;
  C[blockIdx.x * 64 + threadIdx.x] = A[(r * 16) * 512 + c * 64 + threadIdx.x];
}
int main() { k<<<64, 64>>>(0, 0); }
"""
    fp = fp_of(code)
    assert fp.adapter == "1d" and fp.divisor == 8 and fp.tiles == (8, 8, 1)
    assert only(fp, "A").block_bytes == (16 * 512 * 4, 256, 0)
    assert only(fp, "C", write=True).block_bytes == (8 * 256, 256, 0)


@pytest.mark.parametrize("index, ok", [
    ("(blockIdx.x * 64 + threadIdx.x) / 32", True),  # the block's coefficient is a multiple of 32
    ("(blockIdx.x * 16 + threadIdx.x) / 32", False),  # it is not: blocks share quotients unevenly
    ("(blockIdx.x * 64 + threadIdx.x) % 32", True),
    ("(blockIdx.x * 64 + threadIdx.x) >> 5", True),
    ("(blockIdx.x * 64 + threadIdx.x) & 31", True),
    ("blockIdx.x * threadIdx.x", False),
    ("min((int)blockIdx.x, 3)", False),
])
def test_division_of_the_block_part(index, ok):
    fp = fp_of(one_kernel(f"C[0] = A[{index}];", launch="8, 64"))
    assert (not fp.unknown) == ok, fp.unknown


def test_grid_stride_loop_counts_the_first_blocks_iterations():
    code = one_kernel("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 4096; i += blockDim.x * gridDim.x)\n"
                      "    C[i] = A[i];", launch="4, 64")
    a = only(fp_of(code), "A")
    assert a.block_bytes == (0, 256, 0) and a.approximate
    assert a.sectors.tolist() == sectors([(i * 256 + t) * 4 for i in range(16) for t in range(64)], 4)


def test_over_budget_falls_back_to_a_contiguous_superset(monkeypatch):
    code = one_kernel("C[0] = A[(threadIdx.x * 7) % 64 * 16];", launch="1, 64")
    exact = only(fp_of(code), "A")
    monkeypatch.setattr("swzc.model.footprint.sets.MAX_POINTS", 8)
    rough = only(fp_of(code), "A")
    assert not exact.approximate and rough.approximate
    assert set(exact.sectors.tolist()) < set(rough.sectors.tolist())
    assert rough.sectors.tolist() == list(range(rough.sectors[0], rough.sectors[-1] + 1))


# ---- ranking: not ranked, no data to share ---------------------------------------------------------------------


H200 = hwmodels.load("h200")


def test_an_unknown_read_stops_the_ranking_and_names_its_line():
    src, kernel = kernel_of("""
__global__ void gather(const float* x, const int* idx, float* y) {
  int i = blockIdx.y * 4096 + blockIdx.x * 64 + threadIdx.x;
  y[i] = x[idx[i]];
}
int main() { gather<<<dim3(64, 64), 64>>>(0, 0, 0); }""")
    reason = rank(FileContext(src), kernel, H200)
    assert isinstance(reason, str) and "cannot follow" in reason and "line 4: x:" in reason


def test_a_kernel_that_only_writes_has_no_data_to_share():
    src, kernel = kernel_of("""
__global__ void fill(float* y) { y[(blockIdx.y * 64 + blockIdx.x) * 64 + threadIdx.x] = 1.0f; }
int main() { fill<<<dim3(64, 64), 64>>>(0); }""")
    reason = rank(FileContext(src), kernel, H200)
    assert isinstance(reason, str) and reason.startswith("no data to share")


def test_an_unknown_write_does_not_stop_the_ranking():
    src, kernel = kernel_of("""
#define N 2048
__global__ void scatter(const float* x, const int* idx, float* y) {
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  float s = 0.0f;
  for (int k = 0; k < N; ++k) s += x[r * N + k] * x[k * N + c];
  y[idx[r * N + c]] = s;
}
int main() { scatter<<<dim3(128, 128), dim3(16, 16)>>>(0, 0, 0); }""")
    ranking = rank(FileContext(src), kernel, H200)
    assert isinstance(ranking, Ranking) and "writes not modelled: line 7: y:" in ranking.reason
    assert ranking.footprint.unknown == (UnknownAccess(7, "y", "write", ranking.footprint.unknown[0].why),)


def test_kernels_of_one_shape_each_name_their_own_unknown_writes():
    """Two kernels whose reads have one shape share the model's numbers, not the reason that names a write's line."""
    src = load_bytes("t.cu", b"""#define N 2048
__global__ void first(const float* x, const int* idx, float* y) {
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  float s = 0.0f;
  for (int k = 0; k < N; ++k) s += x[r * N + k] * x[k * N + c];
  y[idx[r * N + c]] = s;
}
__global__ void second(const float* x, const int* idx, float* y) {
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  float s = 0.0f;
  for (int k = 0; k < N; ++k) s += x[r * N + k] * x[k * N + c];
  float t = s * 2.0f;
  y[idx[r * N + c]] = t;
}
int main() { first<<<dim3(128, 128), dim3(16, 16)>>>(0, 0, 0); second<<<dim3(128, 128), dim3(16, 16)>>>(0, 0, 0); }""")
    ctx = FileContext(src)
    one, two = (rank(ctx, k, H200) for k in analyze(ctx).kernels)
    assert "writes not modelled: line 6: y:" in one.reason and "writes not modelled: line 13: y:" in two.reason
    assert [p.l2_hit_rate for p in one.predictions] == [p.l2_hit_rate for p in two.predictions]


# ---- tile loops ---------------------------------------------------------------------------------------------------

PERSISTENT = """
#define TM 8
#define TN 4
#define N 256
__global__ void persistent(const float* A, const float* B, float* C, int tiles) {
  float bias = B[threadIdx.x];
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int tm = tile / TN;
    const int tn = tile % TN;
    C[(tm * 32 + threadIdx.y) * N + tn * 64 + threadIdx.x] = A[(tm * 32 + threadIdx.y) * N + tn * 64 + threadIdx.x] + bias;
  }
}
int main() { persistent<<<8, dim3(64, 32)>>>(0, 0, 0, TM * TN); }
"""


def with_tile_loop(code: str, tiles: int, divisor: int | None):
    """The KernelInfo and launch the analysis gives once it finds the tile loop (built here by hand)."""
    src, kernel = kernel_of(code)
    loop = next(n for n in walk(src.tree.root_node) if n.type == "for_statement" and b"tile" in n.text.split(b";")[0])
    body = loop.child_by_field_name("body")
    decode = Decode("TN", "TN", (8, 9)) if divisor else None
    tile_loop = TileLoop("tile", loop.start_point.row + 1, loop.start_byte, loop.end_byte, body.start_byte, body.end_byte,
                         "tiles", "tiles", decode)
    launch = dataclasses.replace(kernel.launches[0], tiles=tiles, divisor=divisor)
    return src, dataclasses.replace(kernel, tile_loop=tile_loop, launches=(launch,))


def test_without_the_tile_loop_the_decode_of_the_loop_variable_is_unknown():
    src, kernel = kernel_of(PERSISTENT)
    fp = footprint(FileContext(src), dataclasses.replace(kernel, tile_loop=None))
    assert {(u.array, u.mode) for u in fp.unknown} == {("A", "read"), ("C", "write")}


def test_the_analysis_finds_the_tile_loop_the_footprint_models():
    src, kernel = kernel_of(PERSISTENT)
    assert kernel.tile_loop is not None and kernel.launches[0].tiles == 32 and kernel.launches[0].divisor == 4
    src_by_hand, kernel_by_hand = with_tile_loop(PERSISTENT, 32, 4)
    by_hand = footprint(FileContext(src_by_hand), kernel_by_hand)
    found = footprint(FileContext(src), kernel)
    assert (found.grid, found.tiles, found.adapter, found.divisor) == (by_hand.grid, by_hand.tiles, by_hand.adapter, by_hand.divisor)
    assert [(a.array, a.block_bytes, a.sectors.tolist()) for a in found.accesses] == \
        [(a.array, a.block_bytes, a.sectors.tolist()) for a in by_hand.accesses]


def test_a_tile_loop_footprint_is_one_tile():
    src, kernel = with_tile_loop(PERSISTENT, 32, 4)
    fp = footprint(FileContext(src), kernel)
    assert not isinstance(fp, str)
    assert (fp.grid, fp.tiles, fp.adapter, fp.divisor) == ((32, 1, 1), (8, 4, 1), "1d", 4)
    a = only(fp, "A")
    assert a.block_bytes == (32 * 256 * 4, 64 * 4, 0)
    assert a.sectors.tolist() == sectors([(y * 256 + x) * 4 for y in range(32) for x in range(64)], 4)
    assert [x.array for x in fp.accesses if not x.write] == ["A"]  # B is read once per block, before the loop
    assert fp.unknown == ()
    ranking = rank(FileContext(src), kernel, H200)
    assert isinstance(ranking, Ranking) and len(ranking.predictions) > 1


def test_a_tile_loop_without_a_decode_is_linear():
    src, kernel = with_tile_loop(PERSISTENT.replace("tile / TN", "0").replace("tile % TN", "tile"), 32, None)
    fp = footprint(FileContext(src), kernel)
    assert (fp.grid, fp.tiles, fp.adapter) == ((32, 1, 1), (1, 32, 1), "linear")
    assert only(fp, "A").block_bytes == (0, 256, 0)


def test_a_tile_loop_whose_tile_count_is_unknown():
    src, kernel = with_tile_loop(PERSISTENT, 32, 4)
    kernel = dataclasses.replace(kernel, launches=(dataclasses.replace(kernel.launches[0], tiles=None),))
    assert "tile count" in footprint(FileContext(src), kernel)


def test_block_index_inside_a_tile_loop_is_unknown():
    src, kernel = with_tile_loop(PERSISTENT.replace("tn * 64 + threadIdx.x] + bias", "tn * 64 + blockIdx.y] + bias"), 32, 4)
    fp = footprint(FileContext(src), kernel)
    assert any(u.array == "A" and "block index inside the tile loop" in u.why for u in fp.unknown)


# ---- the suite's new kernels --------------------------------------------------------------------------------------


def test_bf16_wmma_gemm_is_followed_and_ranked():
    src = load(str(SUITE / "gemm_bf16_wmma.cu"))
    (kernel,) = analyze(FileContext(src)).kernels
    ranking = rank(FileContext(src), kernel, H200)
    assert isinstance(ranking, Ranking) and ranking.footprint.unknown == ()
    fp = ranking.footprint
    a, b, c = only(fp, "A"), only(fp, "B"), only(fp, "C", write=True)
    assert a.block_bytes == (128 * 8192 * 2, 0, 0) and a.sectors.size == 128 * 8192 * 2 // 32
    assert b.block_bytes == (0, 128 * 2, 0) and b.sectors.size == 8192 * 128 * 2 // 32
    assert c.block_bytes == (128 * 8192 * 4, 128 * 4, 0) and c.sectors.size == 128 * 128 * 4 // 32
    assert ranking.chosen is not None and ranking.chosen != "identity"


def test_attention_decode_follows_k_and_v():
    src = load(str(SUITE / "attention_decode.cu"))
    (kernel,) = analyze(FileContext(src)).kernels
    ranking = rank(FileContext(src), kernel, H200)
    assert isinstance(ranking, Ranking) and ranking.footprint.unknown == ()
    for name in ("k", "v"):
        access = only(ranking.footprint, name)
        assert access.block_bytes == (0, 16384 * 128 * 2, 0)  # per head, the same for every sequence of the batch
        assert access.sectors.size == 16384 * 128 * 2 // 32
    # all 256 blocks are one wave and start at once, so every order shares K and V among the blocks of a head
    # in step; what misses is each side of the chip fetching its own near copies (about 78 %)
    rates = {p.l2_hit_rate for p in ranking.predictions}
    assert len(rates) == 1 and 75 < ranking.identity.l2_hit_rate == rates.pop() < 80


def test_unknown_records_read_as_lines():
    u = UnknownAccess(12, "x", "read-write", "an index read from memory: idx[i]")
    assert str(u) == "line 12: x: an index read from memory: idx[i]" and u.reads
    assert not UnknownAccess(1, "y", "write", "").reads


def test_intervals_become_the_sectors_they_cover():
    starts = np.array([0, 40, 100, 33], dtype=np.int64)
    ends = starts + np.array([8, 30, 1, 2])
    assert fpmod._sectors(*fpmod._merge(starts, ends)).tolist() == [0, 1, 2, 3]
    assert fpmod._sectors(np.array([64, 200]), np.array([65, 300])).tolist() == [2, 6, 7, 8, 9]


def test_a_pointer_moved_before_its_use_in_the_same_iteration():
    fp = fp_of(one_kernel("const float* p = A;\n  for (int i = 0; i < 4; ++i) { p += 16; C[i] = p[threadIdx.x]; }"))
    assert only(fp, "A").sectors.tolist() == [2, 4, 6, 8]


# ---- on a GPU: the new suite programs run, check themselves, and keep their checksum when swizzled -----------




@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
# the attention kernel's 256 blocks are one wave, so the model sees no order gain: its order is given
@pytest.mark.parametrize("name, order", [("gemm_bf16_wmma", ()), ("attention_decode", ("--swizzle", "colmajor"))])
def test_suite_program_runs_and_its_swizzled_rewrite_keeps_the_checksum(name, order, tmp_path):
    source = SUITE / f"{name}.cu"
    patched = tmp_path / f"{name}.swizzled.cu"
    result = CliRunner().invoke(main, ["rewrite", str(source), "-o", str(patched), "--no-compile", "--no-bench", *order])
    assert result.exit_code == 0, result.output
    sums = []
    for program in (source, patched):
        binary = tmp_path / program.stem
        subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90", "-o", str(binary), str(program)], check=True)
        run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        line = re.fullmatch(rf"kernel {name} ms ([0-9.]+) checksum ([0-9a-f]{{16}})\n", run.stdout)
        assert line is not None, run.stdout
        sums.append(line.group(2))
    assert sums[0] == sums[1]


def test_a_decoded_1d_grid_keeps_y_and_z_as_slices():
    """With a 1D tile decode, blockIdx.y (or blockIdx.z) is a slice (a batch), counted as z * gridDim.y + y,
    as the model orders them; never mixed up with the decoded row."""
    code = """
__global__ void batched(const float* A, float* C, int tiles_n) {
  const int tm = blockIdx.x / tiles_n, tn = blockIdx.x % tiles_n;
  const size_t base = (size_t)(SLICE) * (1 << 20);
  C[base + tm * 4096 + tn * 16 + threadIdx.x] = A[base + tm * 4096 + tn * 16 + threadIdx.x];
}
int main() { batched<<<dim3(64 * 16, GY, GZ), 16>>>(0, 0, 16); }
"""
    for slice_, gy, gz in (("blockIdx.y", 8, 1), ("blockIdx.z", 1, 8)):
        fp = fp_of(code.replace("SLICE", slice_).replace("GY", str(gy)).replace("GZ", str(gz)))
        assert fp.tiles == (64, 16, 8)
        assert only(fp, "A").block_bytes == (4096 * 4, 16 * 4, (1 << 20) * 4)  # row, col, and one slice per z * gy + y
    both = fp_of(code.replace("SLICE", "blockIdx.z * 8 + blockIdx.y").replace("GY", "8").replace("GZ", "2"))
    assert {u.array for u in both.unknown} == {"A", "C"}  # not affine in z * gridDim.y + y: not modelled
