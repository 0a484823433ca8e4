"""What the compiler would see: directives in order, local headers, -I/-D, compile_commands.json, type
macros, --grid/--block, and a work limit on macro evaluation."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from support import needs_nvcc

from swzc.analysis.context import FileContext
from swzc.commands.cli import main
from swzc.frontend.evaluate import Evaluator, expression_of
from swzc.frontend.preprocess import CompileContext, context_from_flags, preprocess
from swzc.frontend.source import load_bytes

KERNEL = """\
__global__ void stencil(const DATA_TYPE* a, DATA_TYPE* b, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  b[row * n + col] = a[row * n + col] + a[(row + 1) * n + col];
}
"""

LAUNCH = """\
int main() {
  DATA_TYPE *a = 0, *b = 0;
  stencil<<<dim3(NI / 16, NJ / 16), dim3(16, 16)>>>(a, b, NJ);
  return 0;
}
"""

DATASETS = """\
#if !defined(MINI_DATASET) && !defined(LARGE_DATASET)
# define STANDARD_DATASET
#endif
#ifdef MINI_DATASET
# define NI 64
# define NJ 64
#endif
#ifdef STANDARD_DATASET
# define NI 4096
# define NJ 2048
#endif
#ifdef LARGE_DATASET
# define NI 8192
# define NJ 8192
#endif
#ifndef DATA_TYPE
# define DATA_TYPE float
#endif
"""


def value(src, name, context=None):
    return Evaluator(FileContext(src, context or CompileContext()).scope()).value(expression_of(name))


def grid(tmp_path, text, *args, name="k.cu"):
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(main, ["analyze", str(path), "--json", *args])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    return doc, {k["name"]: k["grid"] for k in doc["kernels"]}


def test_dataset_selection_and_defaults_follow_the_directives():
    src = load_bytes("k.cu", (DATASETS + KERNEL + LAUNCH).encode())
    assert value(src, "NI") == 4096 and value(src, "NJ") == 2048
    assert FileContext(src).scope().resolve_type("DATA_TYPE") == "float"


def test_defines_choose_another_branch():
    src = load_bytes("k2.cu", (DATASETS + KERNEL + LAUNCH).encode())
    context = CompileContext(defines=(("LARGE_DATASET", "1"), ("DATA_TYPE", "double")))
    assert value(src, "NI", context=context) == 8192
    assert FileContext(src, context).scope().resolve_type("DATA_TYPE") == "double"


def test_directives_spelled_with_spaces_after_the_hash():
    src = load_bytes("k.cu", b"# ifndef N\n#  define N 64\n# endif\n#  ifdef N\n# define M 2\n# endif\n# undef K\n# define K 3\n")
    assert value(src, "M") == 2 and value(src, "N") == 64


def test_a_condition_it_cannot_decide_joins_the_branches():
    src = load_bytes("k.cu", b"#ifdef __CUDA_ARCH__\n#define W 32\n#else\n#define W 16\n#endif\n#define SAME 4\n")
    assert value(src, "W") is None and value(src, "SAME") == 4


def test_include_guards_of_any_name_are_followed(tmp_path):
    (tmp_path / "params.h").write_text("#ifndef _PARAMS_H_\n#define _PARAMS_H_\n#define TILES 64\n#endif\n")
    (tmp_path / "cuda_sizes.h").write_text("#ifndef CUDA_SIZES_H\n#define CUDA_SIZES_H\n#define ROWS 32\n#endif\n")
    src = load_bytes(str(tmp_path / "k.cu"), b'#include "params.h"\n#include "params.h"\n#include "cuda_sizes.h"\n')
    assert value(src, "TILES") == 64 and value(src, "ROWS") == 32
    assert value(load_bytes("k.cu", b"#ifdef _OPENMP\n#define T 1\n#else\n#define T 2\n#endif\n"), "T") == 2


def test_undefined_user_names_are_zero_in_if_but_system_names_are_unknown():
    src = load_bytes("k.cu", b"#if USE_BIG\n#define N 8\n#else\n#define N 4\n#endif\n"
                            b"#if CUDART_VERSION >= 11000\n#define M 8\n#else\n#define M 4\n#endif\n")
    assert value(src, "N") == 4 and value(src, "M") is None


def test_redefinition_without_undef_is_ambiguous_but_undef_then_define_is_not():
    src = load_bytes("k.cu", b"#define A 1\n#define A 2\n#define B 1\n#undef B\n#define B 2\n")
    assert value(src, "A") is None and value(src, "B") == 2


def test_declarations_in_branches_never_taken_are_not_read():
    src = load_bytes("k.cu", b"#if 0\nconst int T = 3;\ntypedef double real;\n#else\nconst int T = 5;\ntypedef float real;\n#endif\n")
    assert value(src, "T") == 5 and FileContext(src).scope().resolve_type("real") == "float"


def test_kernels_in_branches_never_taken_are_left_out(tmp_path):
    text = "#if 0\n__global__ void old(float* a) { a[blockIdx.x] = 0; }\n#endif\n" + DATASETS + KERNEL + LAUNCH
    doc, grids = grid(tmp_path, text)
    assert set(grids) == {"stencil"}


def test_sizes_and_types_from_a_local_header(tmp_path):
    (tmp_path / "sizes.cuh").write_text("#pragma once\n" + DATASETS)
    doc, grids = grid(tmp_path, '#include "sizes.cuh"\n' + KERNEL + LAUNCH)
    assert grids["stencil"] == [256, 128, 1]
    assert doc["kernels"][0]["candidates"], "the footprint needs DATA_TYPE's size: float from the header"


def test_include_dirs_and_defines_from_the_command_line(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "sizes.cuh").write_text(DATASETS)
    _, grids = grid(tmp_path, '#include "sizes.cuh"\n' + KERNEL + LAUNCH, "-I", str(tmp_path / "inc"), "-D", "MINI_DATASET")
    assert grids["stencil"] == [4, 4, 1]


def test_compile_commands_json_found_upwards(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "sizes.cuh").write_text(DATASETS)
    (tmp_path / "src" / "k.cu").write_text('#include "sizes.cuh"\n' + KERNEL + LAUNCH)
    (tmp_path / "compile_commands.json").write_text(json.dumps([
        {"directory": str(tmp_path), "file": "src/other.cu", "arguments": ["nvcc", "-DMINI_DATASET", "-c", "src/other.cu"]},
        {"directory": str(tmp_path), "file": "src/k.cu", "command": "nvcc -Iinclude -D LARGE_DATASET -O3 -c src/k.cu"},
    ]))
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "src" / "k.cu"), "--json"])
    assert {k["name"]: k["grid"] for k in json.loads(result.stdout)["kernels"]}["stencil"] == [512, 512, 1]


def test_build_path_names_the_database_and_a_bad_one_is_a_note(tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "compile_commands.json").write_text("{not json")
    (tmp_path / "k.cu").write_text(DATASETS + KERNEL + LAUNCH)
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "k.cu"), "-p", str(tmp_path / "build"), "--json"])
    assert result.exit_code in (0, 1), result.output
    assert any("not valid JSON" in n for n in json.loads(result.stdout)["notes"])
    missing = CliRunner().invoke(main, ["analyze", str(tmp_path / "k.cu"), "-p", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "compile_commands.json" in missing.stderr


def test_an_angled_project_header_not_found_is_a_note_and_a_system_one_is_not(tmp_path):
    """`#include <helper_cuda.h>` that no -I folder holds is the project's own header missing: a note that says -I
    adds it.  The C and C++ libraries' and the toolkits' headers are never read, and never said."""
    text = ("#include <stdio.h>\n#include <vector>\n#include <cuda_runtime.h>\n#include <cublas_v2.h>\n"
            "#include <thrust/device_vector.h>\n#include <sys/time.h>\n#include <hip/hip_runtime.h>\n"
            "#include <immintrin.h>\n#include <helper_cuda.h>\n#include <project/util.cuh>\n"
            "#define NI 256\n#define NJ 256\n#define DATA_TYPE float\n") + KERNEL + LAUNCH
    doc, grids = grid(tmp_path, text)
    assert grids["stencil"] == [16, 16, 1]
    missing = [n for n in doc["notes"] if "not found" in n]
    assert len(missing) == 2, missing
    assert "<helper_cuda.h>" in missing[0] and "(none given)" in missing[0] and "-I adds its folder" in missing[0]
    assert "<project/util.cuh>" in missing[1]
    (tmp_path / "inc" / "project").mkdir(parents=True)
    (tmp_path / "inc" / "helper_cuda.h").write_text("#define FROM_HELPER 1\n")
    (tmp_path / "inc" / "project" / "util.cuh").write_text("#define FROM_UTIL 1\n")
    found, _ = grid(tmp_path, text, "-I", str(tmp_path / "inc"))
    assert not [n for n in found["notes"] if "not found" in n]


def test_flags_are_read_in_every_spelling():
    context = context_from_flags(["nvcc", "-Ia", "-I", "b", "--include-path=c", "-isystem", "d", "-DX", "-D", "Y=2",
                                  "--define-macro=Z=3", "-UW", "-o", "out.o", "-include", "forced.h"], "/base")
    assert context.include_dirs == ("/base/a", "/base/b", "/base/c", "/base/d")
    assert context.defines == (("X", "1"), ("Y", "2"), ("Z", "3"), ("W", None))
    assert context.compile_flags() == ("-I/base/a", "-I/base/b", "-I/base/c", "-I/base/d", "-DX", "-DY=2", "-DZ=3", "-UW")


def test_missing_header_and_include_cycle_are_notes(tmp_path):
    (tmp_path / "a.cuh").write_text('#include "b.cuh"\n#define FROM_A 1\n')
    (tmp_path / "b.cuh").write_text('#include "a.cuh"\n#define NI 256\n#define NJ 256\n#define DATA_TYPE float\n')
    doc, grids = grid(tmp_path, '#include "a.cuh"\n#include "gone.cuh"\n' + KERNEL + LAUNCH)
    assert grids["stencil"] == [16, 16, 1]
    notes = " ".join(doc["notes"])
    assert "gone.cuh" in notes and "not found" in notes and "includes itself" in notes


def test_a_pragma_once_header_is_read_once_however_often_it_is_included(tmp_path):
    """150 headers that each include one `#pragma once` header: 151 headers, under the limit of 256 walks only
    because the shared one is not walked again, as the compiler does not open it again; its sizes are known and no
    header is left out.  The same header without the pragma is walked at each include, and the limit is reached."""
    for guard in ("#pragma once\n", ""):
        (tmp_path / "sizes.cuh").write_text(guard + "#define NI 256\n#define NJ 256\n#define DATA_TYPE float\n")
        for i in range(150):
            (tmp_path / f"h{i}.cuh").write_text(f'#pragma once\n#include "sizes.cuh"\n#define H{i} {i}\n')
        doc, grids = grid(tmp_path, "".join(f'#include "h{i}.cuh"\n' for i in range(150)) + KERNEL + LAUNCH)
        limited = any("not followed: more than" in n for n in doc["notes"])
        assert limited == (guard == ""), doc["notes"][:3]
        if guard:
            assert grids["stencil"] == [16, 16, 1] and not doc["notes"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_header_that_is_a_fifo_never_blocks(tmp_path):
    os.mkfifo(tmp_path / "pipe.cuh")
    src = load_bytes(str(tmp_path / "k.cu"), b'#include "pipe.cuh"\nint x;\n')
    pre = preprocess(src)
    assert any("not a regular file" in n for n in pre.notes)


def test_set_binds_a_type_macro(tmp_path):
    text = KERNEL + "#define NI 512\n#define NJ 512\n" + LAUNCH
    doc, _ = grid(tmp_path, text, "--set", "DATA_TYPE=float")
    assert doc["kernels"][0]["candidates"], doc["kernels"][0]["model"]


def test_set_that_contradicts_the_file_is_an_input_error(tmp_path):
    (tmp_path / "k.cu").write_text(DATASETS + KERNEL + LAUNCH)
    for binding, fixed in (("NI=1024", "4096"), ("DATA_TYPE=double", "float")):
        result = CliRunner().invoke(main, ["analyze", str(tmp_path / "k.cu"), "--set", binding])
        assert result.exit_code == 2 and binding in result.stderr and fixed in result.stderr, result.output
        assert "it is a macro: -D " + binding in result.stderr  # the option that sets a macro


RUNTIME = """\
#include <cstdlib>
#define DATA_TYPE float
__global__ void stencil(const DATA_TYPE* a, DATA_TYPE* b, int n) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  b[row * n + col] = a[row * n + col] + a[(row + 1) * n + col];
}
int main(int argc, char** argv) {
  int n = atoi(argv[1]);
  float *a = 0, *b = 0;
  stencil<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(a, b, n);
  return 0;
}
"""


def test_grid_given_by_hand_fills_a_runtime_size(tmp_path):
    doc, grids = grid(tmp_path, RUNTIME, "--grid", "stencil=256,256", "--set", "n=4096")
    assert grids["stencil"] == [256, 256, 1]
    assert doc["kernels"][0]["candidates"]


def test_grid_that_contradicts_the_file_names_both(tmp_path):
    (tmp_path / "k.cu").write_text(DATASETS + KERNEL + LAUNCH)
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "k.cu"), "--grid", "stencil=64,64"])
    assert result.exit_code == 2 and "64,64,1" in result.stderr and "256,128,1" in result.stderr
    unknown = CliRunner().invoke(main, ["analyze", str(tmp_path / "k.cu"), "--grid", "nope=4"])
    assert unknown.exit_code == 2 and "nope" in unknown.stderr
    bad = CliRunner().invoke(main, ["analyze", str(tmp_path / "k.cu"), "--grid", "stencil=0"])
    assert bad.exit_code == 2


def test_nested_macros_cannot_make_the_analysis_hang(tmp_path):
    """Ten arguments, twelve levels, used in a grid: memoised and bounded, it ends in a moment."""
    args = ",".join("abcdefghij")
    lines = [f"#define L0({args}) (a+b+c+d+e+f+g+h+i+j)"]
    for level in range(1, 13):
        call = f"L{level - 1}({args})"
        lines.append(f"#define L{level}({args}) ({' + '.join([call] * 10)})")
    text = "\n".join(lines) + "\n" + KERNEL.replace("DATA_TYPE", "float") + textwrap.dedent("""\
        int main() { stencil<<<L12(1,1,1,1,1,1,1,1,1,1), 16>>>(0, 0, 1); return 0; }
        """)
    (tmp_path / "bomb.cu").write_text(text)
    run = subprocess.run([sys.executable, "-P", "-c", "import sys; from swzc.commands.cli import main; sys.argv = ['swzc', 'analyze', sys.argv[1], '--json']; main()",
                          str(tmp_path / "bomb.cu")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr
    assert "Traceback" not in run.stderr


def test_evaluation_budget_runs_out_to_unknown():
    src = load_bytes("k.cu", b"#define A (1+1+1+1+1+1+1+1)\n#define B (A*A*A*A)\n")
    scope = FileContext(src).scope()
    scope.budget.left = 3
    assert Evaluator(scope).value(expression_of("B")) is None and scope.budget.exhausted


@needs_nvcc
def test_compile_check_gets_the_build_flags(tmp_path):
    text = "#ifndef NI\n#error the build defines NI\n#endif\n#define NJ NI\n#define DATA_TYPE float\n" + KERNEL + LAUNCH
    (tmp_path / "k.cu").write_text(text)
    result = CliRunner().invoke(main, ["rewrite", str(tmp_path / "k.cu"), "-D", "NI=4096", "--swizzle", "grouped:8", "--json"])
    doc = json.loads(result.stdout)
    assert doc["compile"]["status"] == "ok", doc["compile"]
    assert "-DNI=4096" in doc["compile"]["command"]


def test_grid_for_a_tile_loop_kernel_launched_elsewhere_gets_its_tile_count(tmp_path):
    text = """\
__global__ void persistent(const float* in, float* out, int tiles_m, int tiles_n) {
  for (int tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
    const int tm = tile / tiles_n, tn = tile % tiles_n;
    out[(tm * 16 + threadIdx.y) * tiles_n * 16 + tn * 16 + threadIdx.x] = in[(tm * 16 + threadIdx.y) * tiles_n * 16 + tn * 16 + threadIdx.x];
  }
}
"""
    (tmp_path / "k.cu").write_text(text)
    from swzc.pipeline.driver import analyze_file, parse_bindings, parse_launch_facts

    _, analysis = analyze_file(str(tmp_path / "k.cu"), parse_bindings(["tiles_m=64", "tiles_n=32"]),
                               facts=parse_launch_facts(["persistent=132"], ["persistent=16,16"]))
    (launch,) = analysis.kernels[0].launches
    assert (launch.grid, launch.tiles, launch.divisor) == ((132, 1, 1), 2048, 32)
