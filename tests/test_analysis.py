"""Analysis records: decodes, hazards, launches, helpers, line endings."""

import pytest

from swzc.analysis.kernels import analyze
from swzc.pipeline.driver import Options, load_hw, parse_swizzle, rewrite_source
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext
from swzc.frontend.build_context import CompileContext


def kernels(code: str, **bindings):
    return {k.name: k for k in analyze(FileContext(load_bytes("t.cu", code.encode())), bindings).kernels}


def test_an_element_grid_stride_loop_is_a_plain_1d_kernel():
    """Permuting blocks leaves a grid-stride loop's work the same: no hazard, and no tile loop either."""
    (k,) = kernels("""
__global__ void k(float* x, int n) {
  const int stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] = 0;
}""").values()
    assert k.hazards == () and k.tile_loop is None and k.adapter == "linear"


def test_plain_loops_are_not_hazards():
    (k,) = kernels("""
__global__ void k(float* x, const float* a, int n) {
  float acc = 0;
  for (int j = 0; j < n; ++j) acc += a[blockIdx.y * n + j];
  while (acc > 1.0f) acc *= 0.5f;
  atomicAdd(&x[blockIdx.x], acc);
}""").values()
    assert k.hazards == ()


@pytest.mark.parametrize("body,reason", [
    ("while (atomicCAS(lock, 0, 1) != 0) { }", "waits on memory"),
    ("while (flag[0] == 0);", "waits on memory"),
    ("unsigned t = atomicInc(counter, 10u); x[t] = 0;", "atomic ticket"),
    ("asm volatile(\"mov.u32 %0, %%ctaid.x;\" : \"=r\"(lock[0]));", "inline assembly"),
    ("__builtin_amdgcn_workgroup_id_x();", "through __builtin_amdgcn_workgroup_id_x"),
])
def test_hazards(body, reason):
    (k,) = kernels(f"""
__global__ void k(float* x, int* lock, int* flag, unsigned* counter) {{
  x[blockIdx.x] = 1;
  {body}
}}""").values()
    assert any(reason in h.reason for h in k.hazards), k.hazards


def test_decode_through_a_copy_and_a_later_local():
    (k,) = kernels("""
#define BN 64
__global__ void k(float* c, int n) {
  const int pid = blockIdx.x;
  const int tiles = (n + BN - 1) / BN;
  c[(pid / tiles) * n + pid % tiles] = 0;
}
int main() { k<<<64 * 100, 256>>>(0, 6400); }""").values()
    assert k.adapter == "1d" and k.decode.divisor == "tiles"
    assert k.decode.splice_text == "(n + BN - 1) / BN"
    assert k.shapes == ((6400, 1, 1, 100),)


def test_launch_grids_follow_set_bindings_and_template_args():
    code = """
template <int T> __global__ void k(float* c, int n) { c[blockIdx.y * n + blockIdx.x] = T; }
int main(int argc, char** argv) {
  int n = atoi(argv[1]);
  k<16><<<dim3(n / 16, n / 16), 256>>>(0, n);
}"""
    assert kernels(code)["k"].launches[0].grid is None
    assert kernels(code, n=4096)["k"].launches[0].grid == (256, 256, 1)


def test_a_launch_in_a_host_function_template_is_read_once_for_each_instantiation_the_file_calls():
    """`template <int kTile> void launch(…) { k<kTile><<<n / kTile, …>>> }`, called as launch<16> and launch<32>
    (and launch<16> again): the launch is read with each distinct kTile, its grid and template argument included; a
    template the file never calls with arguments it fixes is read as it is written."""
    code = """
template <int T> __global__ void k(float* c, int n) { c[blockIdx.y * n + blockIdx.x] = T; }
template <int kTile, typename F> void launch(float* c, int n) {
  constexpr int t = kTile;
  k<t><<<dim3(4096 / t, 4096 / t), dim3(t, t)>>>(c, n);
}
void run(float* c, int which) {
  const int n = 4096;
  constexpr int kBig = 2 * n / 256;  // a name as a template argument parses as a type
  if (which == 16) launch<16, float>(c, n); else launch<kBig, double>(c, n);
  launch<16, int>(c, n);
}"""
    launches = kernels(code)["k"].launches
    assert [(la.grid, dict(la.bindings)["T"]) for la in launches] == [((256, 256, 1), 16), ((128, 128, 1), 32)]
    assert {la.line for la in launches} == {5}
    alone = code.replace("launch<16, float>(c, n); else launch<kBig, double>(c, n);\n  launch<16, int>(c, n);", "(void)c;")
    (unread,) = kernels(alone)["k"].launches
    assert unread.grid is None and "T" not in dict(unread.bindings)
    nested = alone.replace("k<t><<<", "if (kTile > 8) launch<kTile / 2, F>(c, n);\n  k<t><<<")  # kTile unknown there
    assert [la.grid for la in kernels(nested)["k"].launches] == [None]


def test_a_launch_is_read_with_what_the_calls_of_its_function_fix_and_only_its_own_calls():
    """run(…, nk) called from main with `int nk = 512;`: the kernel's nk is 512 at that launch.  Not its calls: one in
    a branch the compiler never takes, one that fits an overload of the name too, one that fits only another
    overload; a template parameter the call leaves to its default takes the default."""
    code = """
__global__ void k(float* c, int n, int nk) { for (int i = 0; i < nk; ++i) c[blockIdx.y * n + blockIdx.x + i] = 0; }
template <int kTile, int kDiv = 2> void run(float* c, int nk) {
  k<<<dim3(4096 / kTile / kDiv, 64), dim3(16, 16)>>>(c, 4096, nk);
}
template <int kBytes> void run(float* c) { }
void run(float* c, int a, int b) { }
int main() {
  float* c = 0;
  int nk = 512;
  run<16>(c, nk);
#ifdef NEVER
  run<8>(c, 99);
#endif
  run<128>(c);
  return 0;
}"""
    (launch,) = kernels(code)["k"].launches
    assert launch.grid == (128, 64, 1) and dict(launch.bindings)["nk"] == 512
    both = code.replace("template <int kBytes> void run(float* c) { }", "template <int kOther> void run(float* c, int x) { }")
    (unread,) = kernels(both)["k"].launches  # run<16>(c, nk) fits both templates: which one is not read here
    assert unread.grid is None and "nk" not in dict(unread.bindings)


def test_a_local_defined_in_a_branch_the_compiler_never_takes_is_not_read():
    """`#ifndef SMALL #define kT 8 #else 16`, as locals of the launching function: the taken branch's kT, not the
    one written last; with SMALL defined, the other."""
    code = """
__global__ void k(float* c, int n) { c[blockIdx.y * n + blockIdx.x] = 0; }
void run(float* c) {
#ifndef SMALL
  constexpr int kT = 8;
#else
  constexpr int kT = 16;
#endif
  k<<<dim3(4096 / kT, 4096 / kT), dim3(kT, kT)>>>(c, 4096);
}"""
    assert [la.grid for la in kernels(code)["k"].launches] == [(512, 512, 1)]
    src = load_bytes("t.cu", code.encode())
    (small,) = analyze(FileContext(src, CompileContext(defines=(("SMALL", "1"),)))).kernels
    assert [la.grid for la in small.launches] == [(256, 256, 1)]
    # a function of another tree (a header's) is read whole: the file's branches are other bytes there
    from swzc.frontend.evaluate import expression_of
    from swzc.frontend.scope import _Evaluator, local_scope, prepare
    from swzc.frontend.syntax import functions
    _, scope = prepare(load_bytes("t.cu", b"#if 0\n" + b"int unused;\n" * 40 + b"#endif\n"), {})
    other = load_bytes("h.cuh", b"void f() {\n  const int n = 4096;\n  (void)n;\n}\n")
    ((function, _),) = list(functions(other.tree.root_node))
    assert _Evaluator(local_scope(function, len(other.data) - 2, scope)).value(expression_of("n")) == 4096


def test_a_launch_through_a_kernel_pointer_launches_each_kernel_the_function_points_it_at():
    """`kernel = &a;` / `kernel = b;` in a switch, then `kernel<<<…>>>`: a and b are each launched there, with its
    grid; `auto p = &t<8>;` carries its template argument; a pointer the function is given launches nothing here."""
    code = """
__global__ void a(float* c, int n) { c[blockIdx.y * n + blockIdx.x] = 1; }
__global__ void b(float* c, int n) { c[blockIdx.x * n + blockIdx.y] = 2; }
template <int T> __global__ void t(float* c, int n) { c[blockIdx.y * n + blockIdx.x] = T; }
__global__ void given(float* c, int n) { c[blockIdx.y * n + blockIdx.x] = 3; }
void run(float* c, int which, void (*from)(float*, int)) {
  void (*kernel)(float*, int);
  switch (which) { case 0: kernel = &a; break; default: kernel = b; }
  kernel<<<dim3(64, 32), dim3(16, 16)>>>(c, 4096);
  auto other = &t<8>;
  other<<<dim3(8, 8), dim3(16, 16)>>>(c, 128);
  from<<<dim3(4, 4), dim3(16, 16)>>>(c, 64);
}"""
    found = kernels(code)
    assert [la.grid for la in found["a"].launches] == [la.grid for la in found["b"].launches] == [(64, 32, 1)]
    assert [(la.grid, dict(la.bindings).get("T")) for la in found["t"].launches] == [((8, 8, 1), 8)]
    assert found["given"].launches == ()


def test_hip_launch_and_helper_reads():
    code = """
#include <hip/hip_runtime.h>
__device__ int row() { return hipBlockIdx_y * 16 + hipThreadIdx_y; }
__global__ void k(float* c, int n) { c[row() * n + hipBlockIdx_x] = 0; }
int main() { hipLaunchKernelGGL(HIP_KERNEL_NAME(k), dim3(8, 9), dim3(16, 16), 0, 0, nullptr, 8); }"""
    analysis = analyze(FileContext(load_bytes("t.hip", code.encode())))
    (k,) = analysis.kernels
    assert analysis.dialect == "hip" and k.helpers == ("row",) and k.spelling == "hip"
    assert k.launches[0].api == "hipLaunchKernelGGL" and k.launches[0].grid == (8, 9, 1)


def test_crlf_files_stay_crlf():
    code = "__global__ void k(float* c) {\r\n  c[blockIdx.y * 64 + blockIdx.x] = 0;\r\n}\r\n"
    src = load_bytes("t.cu", code.encode())
    result = rewrite_source(FileContext(src), analyze(FileContext(src)), Options(hw=load_hw("h200"), swizzle=parse_swizzle("grouped:8"), compile=False))
    assert result.changed
    assert result.new.count(b"\n") == result.new.count(b"\r\n")


def test_spinning_on_an_atomic_load_is_a_hazard():
    (k,) = kernels("""
#include <cuda/atomic>
__global__ void k(float* x, cuda::atomic<int>* ready) {
  while (ready->load() == 0) { }
  x[blockIdx.x] = 1;
}""").values()
    assert any("waits on memory" in h.reason for h in k.hazards)


def test_template_types_deduced_from_the_arguments_at_the_launch():
    code = b"""\
typedef double real;
template <typename T, int R>
__global__ void blur(const T* in, T* out, int n) {
  out[blockIdx.y * n + blockIdx.x] = in[blockIdx.y * n + blockIdx.x + R];
}
int main() {
  real *d_in = 0, *d_out = 0;
  blur<real, 1><<<dim3(64, 64), 32>>>(d_in, d_out, 64);
  const float* f_in = 0; float* f_out = 0;
  blur<float, 2><<<dim3(64, 64), 32>>>(f_in, f_out, 64);
  unsigned char* u = 0;
  blur<decltype(u), 3><<<1, 1>>>(0, 0, 1);
  return 0;
}
"""
    src = load_bytes("t.cu", code)
    (kernel,) = analyze(FileContext(src)).kernels
    assert [dict(la.type_args).get("T") for la in kernel.launches][:2] == ["real", "float"]


def test_template_types_left_out_at_the_launch_are_deduced():
    code = b"""\
template <typename T>
__global__ void scale(const T* in, T* out, int n) { out[blockIdx.x * n] = in[blockIdx.x * n] * 2; }
int main() { double* a = 0; double* b = 0; scale<<<64, 32>>>(a, b, 8); return 0; }
"""
    (kernel,) = analyze(FileContext(load_bytes("t.cu", code))).kernels
    assert dict(kernel.launches[0].type_args) == {"T": "double"}


BRACED = """\
__global__ void tile2d(const float* a, float* b, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  b[row * n + col] = a[row * n + col];
}
void run(const float* a, float* b, cudaStream_t s) {
  const int T = 16;
  tile2d<<<{256, 128}, {T, T, 1}, 0, s>>>(a, b, 4096);
  tile2d<<<{64}, dim3(T, T), 0, s>>>(a, b, 4096);
  if (a) { tile2d<<<dim3(8, 8), 256>>>(a, b, 4096); }
}
"""


def test_braced_launch_sizes_are_read_as_dim3():
    """nvcc takes `<<<grid, {x, y, z}>>>`; the grammar does not.  The parser is given the braces as
    parentheses, and the analysis reads the sizes from the file, where they are braces: not the comma
    expression's last value.  A brace after the launch (the `if` block) is left alone."""
    src = load_bytes("k.cu", BRACED.encode())
    assert src.errors == ()
    (kernel,) = analyze(FileContext(src)).kernels
    launches = [(la.grid_text, la.grid, la.block_text, la.block) for la in kernel.launches]
    assert launches == [("{256, 128}", (256, 128, 1), "{T, T, 1}", (16, 16, 1)),
                        ("{64}", (64, 1, 1), "dim3(T, T)", (16, 16, 1)),
                        ("dim3(8, 8)", (8, 8, 1), "256", (256, 1, 1))]
    # parentheses the file writes itself stay a comma expression: no size
    (kernel,) = analyze(FileContext(load_bytes("k.cu", BRACED.replace("{T, T, 1}", "(T, T, 1)").encode()))).kernels
    assert kernel.launches[0].block is None
