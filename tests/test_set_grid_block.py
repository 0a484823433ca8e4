"""--set, --grid and --block as the library reads them: what each accepts, and CUDA's limits."""

import pytest

from swzc.analysis.records import LaunchFact
from swzc.core.errors import SwzcError
from swzc.pipeline.driver import parse_bindings, parse_launch_facts


def test_set_reads_integers_in_any_base_floats_and_type_names():
    assert parse_bindings([" N = 4096 ", "M=0x200", "K=0o17", "B=0b101", "S=0.5", "E=1e3", "T=unsigned  int",
                           "U=std::vector<float>"]) == {
        "N": 4096, "M": 512, "K": 15, "B": 5, "S": 0.5, "E": 1000.0, "T": "unsigned int", "U": "std::vector<float>"}
    assert [type(v) for v in parse_bindings(["N=4096", "M=0x200", "E=1e3"]).values()] == [int, int, float]


@pytest.mark.parametrize("pair, message", [
    ("N", "expected NAME=VALUE"),
    ("=4", "expected NAME=VALUE"),
    ("2N=4", "expected NAME=VALUE"),
    ("N=nan", "must be a finite number"),
    ("N=inf", "must be a finite number"),
    ("N=-Infinity", "must be a finite number"),
    ("N=1e999", "must be a finite number"),
    ("N=4 4", "must be a number or a type name"),
    ("N=(4)", "must be a number or a type name"),
    ("Size.width=wide", "a field (Size.width) takes a number"),
    ("p->n=inf", "must be a finite number"),
    ("p.=4", "expected NAME=VALUE"),
    ("dims.x=float", "a field (dims.x) takes an integer"),
])
def test_set_refuses_what_is_neither_a_number_nor_a_type(pair, message):
    with pytest.raises(SwzcError) as caught:
        parse_bindings([pair])
    assert message in caught.value.message and repr(pair) in caught.value.message


def test_set_gives_the_fields_of_a_dim3_or_vector_the_reasons_name(tmp_path):
    """`dims.x is not known` is answered with --set dims.x=…: the fields given, the others 1; and it ranks."""
    assert parse_bindings(["dims.x=4096", "dims.y=0x800", "N=3"]) == {"dims": (4096, 2048, 1), "N": 3}
    with pytest.raises(SwzcError, match="both given"):
        parse_bindings(["dims=4", "dims.x=4096"])
    from click.testing import CliRunner

    from swzc.commands.cli import main

    path = tmp_path / "conv.cu"
    path.write_text("__global__ void conv(const float* in, float* out, uint2 dims) {\n"
                    "  const unsigned x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;\n"
                    "  out[y * dims.x + x] = in[x * dims.x + y];\n}\n")
    said = CliRunner().invoke(main, ["suggest", "-v", str(path), "--grid", "conv=256,256", "--block", "conv=16,16"]).stdout
    assert "dims.x" in said and "unranked" in said
    given = CliRunner().invoke(main, ["suggest", "-v", str(path), "--grid", "conv=256,256", "--block", "conv=16,16",
                                      "--set", "dims.x=4096"]).stdout
    assert "unranked" not in given and "kernel conv:" in given


def test_set_gives_a_structs_fields_as_the_file_reads_them_and_a_sweep_binds_them(tmp_path):
    """`p.n`, `args->dims.m` (spaces left out) are fields a file reads through names: --set gives each one, and a
    kernel that takes its sizes in a struct passed whole is swept over them as one taking ints is, to the same
    figures; a field read through a pointer is asked for quoted, since `->` is a shell's redirection."""
    assert parse_bindings(["p.n=4096", "args -> dims.m = 0x10", "dims.w=4", "s.scale=0.5"]) == {
        "p.n": 4096, "args->dims.m": 16, "dims.w": 4, "s.scale": 0.5}
    from click.testing import CliRunner

    from swzc.commands.cli import main

    body = ("  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;\n"
            "  float acc = 0.0f;\n  for (int i = 0; i < K; ++i) acc += A[row * K + i] * B[i * N + col];\n"
            "  C[row * N + col] = acc;\n}\n")
    (tmp_path / "ints.cu").write_text("__global__ void gemm(const float* A, const float* B, float* C, int N, int K) {\n" + body +
                                      "void run(const float* A, const float* B, float* C, int n, int k) {\n"
                                      "  gemm<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(A, B, C, n, k);\n}\n")
    (tmp_path / "fields.cu").write_text("struct Shape { int n, k; };\n"
                                        "__global__ void gemm(const float* A, const float* B, float* C, Shape p) {\n" +
                                        body.replace("K", "p.k").replace("N", "p.n") +
                                        "void run(const float* A, const float* B, float* C, const Shape* q) {\n"
                                        "  Shape p = *q;\n  gemm<<<dim3(p.n / 16, p.n / 16), dim3(16, 16)>>>(A, B, C, p);\n}\n")
    ints = CliRunner().invoke(main, ["suggest", str(tmp_path / "ints.cu")]).stdout
    fields = CliRunner().invoke(main, ["suggest", str(tmp_path / "fields.cu")]).stdout
    assert "at p.n = p.k = 8192, the largest size swept" in fields
    assert fields.split(": kernel gemm: ")[1].split(" (at")[0] == ints.split(": kernel gemm: ")[1].split(" (at")[0]
    # a float field and one read as an array are no sizes: by the struct's definition, or, without one, by their use
    mixed = (tmp_path / "fields.cu").read_text().replace("struct Shape { int n, k; };", "struct Shape { float f; int n, k; long* idx; };")
    mixed = mixed.replace("acc += ", "acc += p.f * p.idx[0] + ")
    # an integer vector's fields are sizes too (a uint2 passed whole, read as d.x), a float4's are not
    (tmp_path / "vec.cu").write_text("__global__ void gemm(const float* A, const float* B, float* C, uint2 d, float4 w) {\n" +
                                     body.replace("K", "d.x").replace("N", "d.y").replace("acc = 0.0f", "acc = w.x") +
                                     "void run(const float* A, const float* B, float* C, uint2 d, float4 w) {\n"
                                     "  gemm<<<dim3(d.y / 16, d.y / 16), dim3(16, 16)>>>(A, B, C, d, w);\n}\n")
    vec = CliRunner().invoke(main, ["suggest", str(tmp_path / "vec.cu")]).stdout
    assert "at d.y = d.x = 8192, the largest size swept" in vec, vec
    # (without the definition, a float field read as a value cannot be told from an integer one)
    for text, names in ((mixed, "p.n = p.k"), (mixed.replace("struct Shape { float f; int n, k; long* idx; };", '#include "shape.h"'),
                                              "p.n = p.k = p.f")):
        (tmp_path / "mixed.cu").write_text(text)
        said = CliRunner().invoke(main, ["suggest", "-v", str(tmp_path / "mixed.cu")]).stdout
        assert f"at {names} = 768: the model cannot follow 1 global read(s): line 5: p.idx[0]: a pointer held in a struct" in said
    (tmp_path / "pointer.cu").write_text("struct Shape { int n, k; };\n"
                                         "__global__ void gemm(const float* A, const float* B, float* C, const Shape* p) {\n" +
                                         body.replace("K", "p->k").replace("N", "p->n") +
                                         "void run(const float* A, const float* B, float* C, const Shape* q) {\n"
                                         "  gemm<<<dim3(256, 256), dim3(16, 16)>>>(A, B, C, q);\n}\n")
    said = CliRunner().invoke(main, ["suggest", "-v", str(tmp_path / "pointer.cu")]).stdout
    assert "--set 'p->k=VALUE'" in said and "--set p->" not in said


def test_grid_and_block_fill_the_missing_axes_with_one():
    facts = parse_launch_facts(["gemm=256", " copy =8,4"], ["gemm=16,16", "copy=32,4,2"])
    assert facts == {"gemm": (LaunchFact("gemm", (256, 1, 1), (16, 16, 1)),),
                     "copy": (LaunchFact("copy", (8, 4, 1), (32, 4, 2)),)}
    assert parse_launch_facts(["only=2,3,4"], []) == {"only": (LaunchFact("only", (2, 3, 4), None),)}
    assert parse_launch_facts([], ["only=64"]) == {"only": (LaunchFact("only", None, (64, 1, 1)),)}


@pytest.mark.parametrize("grid", ["k=2147483647", "k=1,65535", "k=1,1,65535"])
def test_the_largest_grids_cuda_allows_are_accepted(grid):
    assert parse_launch_facts([grid], [])


@pytest.mark.parametrize("block", ["k=1024", "k=1,1024", "k=1,1,64"])
def test_the_largest_blocks_cuda_allows_are_accepted(block):
    assert parse_launch_facts([], [block])


@pytest.mark.parametrize("option, value, message", [
    ("grid", "k=2147483648", "outside CUDA's limits for a grid"),
    ("grid", "k=1,65536", "outside CUDA's limits for a grid"),
    ("grid", "k=1,1,65536", "outside CUDA's limits for a grid"),
    ("grid", "k=0", "outside CUDA's limits for a grid"),
    ("grid", "k=4,0", "outside CUDA's limits for a grid"),
    ("block", "k=1025", "outside CUDA's limits for a block"),
    ("block", "k=1,1025", "outside CUDA's limits for a block"),
    ("block", "k=1,1,65", "outside CUDA's limits for a block"),
    ("grid", "k", "expected KERNEL=X[,Y[,Z]]"),
    ("grid", "k=", "expected KERNEL=X[,Y[,Z]]"),
    ("grid", "k=1,2,3,4", "expected KERNEL=X[,Y[,Z]]"),
    ("grid", "k=1,x", "expected KERNEL=X[,Y[,Z]]"),
    ("grid", "k=-1", "expected KERNEL=X[,Y[,Z]]"),
    ("grid", "2k=4", "expected KERNEL=X[,Y[,Z]]"),
    ("block", "k=a,1", "expected KERNEL=X[,Y[,Z]]"),
])
def test_grid_and_block_refuse_bad_or_out_of_range_sizes(option, value, message):
    grids, blocks = ([value], []) if option == "grid" else ([], [value])
    with pytest.raises(SwzcError) as caught:
        parse_launch_facts(grids, blocks)
    assert caught.value.message.startswith(f"--{option} {value!r}: {message}")


def test_grid_or_block_given_twice_for_a_kernel_is_refused():
    with pytest.raises(SwzcError, match="--grid is given twice for kernel k"):
        parse_launch_facts(["k=4", " k=8"], [])
    with pytest.raises(SwzcError, match="--block is given twice for kernel k"):
        parse_launch_facts([], ["k=4", "k=8"])
    assert parse_launch_facts(["k=4"], ["k=8"])  # once each is fine


def test_a_size_not_known_is_named_with_the_option_that_gives_it(tmp_path):
    """The reason names what is missing: the grid or the block, the launch's own text, and the option."""
    import json

    from click.testing import CliRunner

    from swzc.commands.cli import main

    kernel = ("__global__ void tr(const float* in, float* out) {\n"
              "  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;\n"
              "  out[x * 4096 + y] = in[y * 4096 + x];\n}\n")
    path = tmp_path / "k.cu"
    path.write_text(kernel)

    def reason(*args):
        result = CliRunner().invoke(main, ["analyze", str(path), "--no-compile", "--json", *args])
        return json.loads(result.stdout)["kernels"][0]["reason"]

    assert "the block size of tr is not known: the file does not fix it; give it with --block tr=X,Y" in reason("--grid", "tr=128,128")
    path.write_text(kernel + "int pick(int);\nvoid run(const float* a, float* b, int n) { tr<<<dim3(pick(n), pick(n)), dim3(32, 32)>>>(a, b); }\n")
    said = reason()  # a function declared, not defined here: named, with the options that give the grid
    assert "its launch at line 6 calls pick(), whose body is in neither this file nor a header" in said
    assert "give the grid with --grid tr=X,Y" in said
    path.write_text(kernel + "void run(const float* a, float* b, int n) { tr<<<dim3(n, n), dim3(32, 32)>>>(a, b); }\n")
    assert "n swept from" in reason()  # a size it names is ranged over (swzc.model.sweep)
    path.write_text(kernel + "void run(const float* a, float* b, int n) { tr<<<dim3(128, 128), dim3(n, n)>>>(a, b); }\n")
    said = reason()
    assert "the launch at line 5: its block (dim3(n, n)) is not fixed by the file" in said and "--block tr=X,Y" in said
    assert "grid" not in said.split("(use --set")[0]  # the grid is fixed


def test_set_binds_only_what_the_file_leaves_open_where_a_launch_is(tmp_path):
    """A launching function's parameter that it sets itself before the launch (`bs = 16;`) runs with the file's
    value there, whatever --set says; --set still gives it where the file leaves it open."""
    import json

    from click.testing import CliRunner

    from swzc.commands.cli import main

    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(const float* A, float* C, int n) {\n"
                    "  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;\n"
                    "  float s = 0.0f;\n"
                    "  for (int i = 0; i < n; ++i) s += A[r * n + i] * A[i * n + c];\n"
                    "  C[r * n + c] = s;\n}\n"
                    "void fixed(const float* A, float* C, int n, int bs) {\n  bs = 16;\n"
                    "  k<<<dim3(n / bs, n / bs), dim3(bs, bs)>>>(A, C, n);\n}\n"
                    "void open(const float* A, float* C, int n, int bs) {\n"
                    "  k<<<dim3(n / bs, n / bs), dim3(bs, bs)>>>(A, C, 1024);\n}\n")
    result = CliRunner().invoke(main, ["analyze", str(path), "--no-compile", "--json", "--set", "n=4096", "--set", "bs=32"])
    launches = json.loads(result.stdout)["kernels"][0]["launches"]
    assert [launch["grid_value"] for launch in launches] == [[256, 256, 1], [128, 128, 1]]


def test_an_included_launch_is_taken_only_where_the_kernels_own_file_launches_it_nowhere(tmp_path):
    """A launch from a file that includes the kernel's (origin "included") is the kernel's launch where its own file
    has none, with the types and values it gives; where its own file launches it, that launch stands, unchanged and
    with no contradiction (a --grid that disagrees with it is one)."""
    from swzc.pipeline.driver import analyze_file

    kernel = ("template <typename T>\n__global__ void k(T* a, int n) {\n"
              "  const int i = blockIdx.x * 64 + threadIdx.x;\n  if (i < n) a[i] += 1;\n}\n")
    fact = LaunchFact("k", (32, 1, 1), (64, 1, 1), (("n", 2048),), "included", types=(("T", "float"),), where="run.cu:9")
    (tmp_path / "bare.cuh").write_text(kernel)
    _, bare = analyze_file(str(tmp_path / "bare.cuh"), facts={"k": (fact,)}, facts_elsewhere=True)
    (launch,) = bare.kernels[0].launches
    assert (launch.grid, launch.block, launch.at, launch.bindings, launch.type_args) == \
        ((32, 1, 1), (64, 1, 1), "run.cu:9", (("n", 2048),), (("T", "float"),))
    (tmp_path / "own.cuh").write_text(kernel + "void go(float* a) { k<float><<<8, 64>>>(a, 512); }\n")
    _, own = analyze_file(str(tmp_path / "own.cuh"), facts={"k": (fact,)}, facts_elsewhere=True)
    (launch,) = own.kernels[0].launches
    assert (launch.grid, launch.line, launch.bindings) == ((8, 1, 1), 6, (("n", 512),))
    with pytest.raises(SwzcError, match="contradicts the launch"):
        analyze_file(str(tmp_path / "own.cuh"), facts={"k": (LaunchFact("k", (32, 1, 1), None),)}, facts_elsewhere=True)
