"""Runtime grids: what the launch interposers write, read back; kernel names through their mangled
symbols; the CUPTI observer built, cached and driven on the CPU; on a GPU, a real program observed."""

import json
import os
import shutil
import stat
import struct
import subprocess
from pathlib import Path

import pytest
from support import ROOT, has_gpu

from swzc.verify import observe
from swzc.analysis.kernels import analyze
from swzc.model.footprint import Footprint, footprint
from swzc.verify.observe import (
    ObservedLaunch,
    ObservedRun,
    RawLaunch,
    kernel_name,
    match_launches,
    observe_launches,
    observed_launches,
    parse_ncu_csv,
    parse_observer_output,
    parse_rocprof_trace,
)
from swzc.verify.program import ProgramBench
from swzc.frontend.source import load_bytes
from swzc.analysis.context import FileContext

CUPTI = observe.cupti_location() if shutil.which("nvcc") else None
needs_cupti = pytest.mark.skipif(CUPTI is None, reason="nvcc with CUPTI (cupti.h, libcupti.so) is not here")


@pytest.mark.parametrize("symbol,name,args", [
    ("_Z10gemm_tiledPKfS0_Pfiii", "gemm_tiled", None),
    ("_Z4gemmIfLi128EEvPKT_S2_PS0_i", "gemm", ("float", "128")),
    ("_ZN2ns6kernelIdEEvPT_", "kernel", ("double",)),
    ("_Z5scaleI13__nv_bfloat16Li64ELb1EEvPT_", "scale", ("__nv_bfloat16", "64", "true")),
    ("_Z1kILin3ELj4EEvv", "k", ("-3", "4u")),
    ("_Z5scaleIN4cute5tupleIJiEEEEvv", "scale", ("cute::tuple<int>",)),
    ("gemm_naive", "gemm_naive", None),  # extern "C"
    ("void ns::gemm<float, 128>(float const*, float*, int)", "gemm", ("float", "128")),
    ("stencil5(float const*, float*)", "stencil5", None),
])
def test_kernel_names_from_symbols(symbol, name, args):
    if symbol.startswith("_Z") and shutil.which("c++filt") is None:  # no binutils here: the name alone
        args = None
    assert kernel_name(symbol) == (name, args)


def test_without_cplusfilt_a_mangled_symbol_gives_its_name_alone(monkeypatch):
    monkeypatch.setattr(observe.shutil, "which", lambda tool: None)
    assert kernel_name("_Z4gemmIfLi128EEvPKT_S2_PS0_i") == ("gemm", None)
    assert kernel_name("_ZN2ns6kernelIdEEvPT_") == ("kernel", None)
    assert observe.demangled(["_Z4gemmIfLi128EEvPKT_S2_PS0_i"]) == {}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) is not on PATH")
def test_only_mangled_names_reach_cplusfilt_one_line_each():
    # a symbol with a newline (a program's own strings reach here) would shift every answer after it
    names = observe.demangled(["_Z1av", "_Z1bv\n_Z1cv", "_Z1dv; rm -rf /", "_Z1ev"])
    assert set(names) == {"_Z1av", "_Z1ev"} and names["_Z1ev"] == "e()"


OBSERVER_LINES = "\n".join([
    '{"pid": 11, "id": 0, "kernel": "_Z5scalePfif", "grid": [128, 64, 1], "block": [16, 16, 1], "shmem": 0, '
    '"params": [{"offset": 0, "size": 8, "hex": "0010000000007f00"}, {"offset": 8, "size": 4, "hex": "00080000"}, '
    '{"offset": 12, "size": 4, "hex": "0000003f"}]}',
    '{"pid": 11, "id": 1, "kernel": "_Z5scalePfif", "grid": [256, 64, 1], "block": [16, 16, 1], "shmem": 0, "params": []}',
    '{"pid": 12, "id": 0, "kernel": "_Z5scalePfif", "grid": [128, 64, 1], "block": [16, 16, 1], "shmem": 0, '
    '"params": [{"offset": 0, "size": 8, "hex": "0010000000007f00"}, {"offset": 8, "size": 4, "hex": "00080000"}, '
    '{"offset": 12, "size": 4, "hex": "0000003f"}]}',
    '{"pid": 11, "counts": {"0": 3, "1": 1}, "dropped": {"_Z5scalePfif": 2}}',
    '{"pid": 12, "id": 1, "kernel": "_Z4sca',  # a second process that crashed mid-line: no count line either
])


def test_observer_lines_merge_processes_and_count():
    raw, dropped = parse_observer_output(OBSERVER_LINES)
    by_grid = {r.grid: r for r in raw}
    assert set(by_grid) == {(128, 64, 1), (256, 64, 1)} and dropped == {"_Z5scalePfif": 2}
    assert by_grid[128, 64, 1].count == 3 + 1  # pid 12 left no count line: at least once
    assert by_grid[128, 64, 1].params == (bytes.fromhex("0010000000007f00"), struct.pack("<i", 2048), struct.pack("<f", 0.5))


NCU_CSV = """==PROF== Connected to process 4242 (/tmp/prog)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","launch__grid_size","launch__shared_mem_per_block_dynamic"
"","","","","","","","","","","","","byte"
"0","4242","prog","127.0.0.1","_Z4gemmIfLi32EEvPKT_S2_PS0_i","1","7","(32, 8, 1)","(128, 128, 1)","0","9.0","16,384","8,192"
ms 12.5 checksum 77
"1","4242","prog","127.0.0.1","_Z4gemmIfLi32EEvPKT_S2_PS0_i","1","7","(32, 8, 1)","(128, 128, 1)","0","9.0","16,384","8,192"
"2","4242","prog","127.0.0.1","_Z6reducePKfPfi","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","4,096","0"
==PROF== Disconnected from process 4242
"""


def test_ncu_raw_page_gives_grids_blocks_and_shared_memory():
    raw = {r.symbol: r for r in parse_ncu_csv(NCU_CSV)}
    gemm = raw["_Z4gemmIfLi32EEvPKT_S2_PS0_i"]
    assert (gemm.grid, gemm.block, gemm.shmem, gemm.count, gemm.params) == ((128, 128, 1), (32, 8, 1), 8192, 2, ())
    assert raw["_Z6reducePKfPfi"].grid == (4096, 1, 1)
    assert parse_ncu_csv("no csv at all\n") == []


ROCPROF_TRACE = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count",'
    '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
    '"KERNEL_DISPATCH","Agent 4",1,1,85,1,10,"void gemm<float, 64>(float const*, float*, int)",1,100,200,4096,0,8,0,16,16,16,1,4096,2048,1\n'
    '"KERNEL_DISPATCH","Agent 4",1,1,85,2,10,"void gemm<float, 64>(float const*, float*, int)",2,300,400,4096,0,8,0,16,16,16,1,4096,2048,1\n'
    '"KERNEL_DISPATCH","Agent 4",1,1,85,3,11,"__amd_rocclr_fillBufferAligned",3,500,600,0,0,8,0,16,256,1,1,65536,1,1\n'
    '"KERNEL_DISPATCH","Agent 4",1,1,85,4,12,"scan(int*)",4,700,800,0,0,8,0,16,64,1,1,100,1,1\n'
)


def test_rocprofv3_trace_grids_are_work_items_divided_by_the_workgroup():
    raw = {r.symbol: r for r in parse_rocprof_trace(ROCPROF_TRACE)}
    gemm = raw["void gemm<float, 64>(float const*, float*, int)"]
    assert (gemm.grid, gemm.block, gemm.count, gemm.shmem) == ((256, 128, 1), (16, 16, 1), 2, 4096)
    assert raw["scan(int*)"].grid == (2, 1, 1)  # a partial workgroup is still a block


KERNELS = b"""#include <cstdlib>
template <typename T, int TILE>
__global__ void tile(T* c, int m, T beta) { c[blockIdx.y * m + blockIdx.x * TILE + threadIdx.x] *= beta; }
__global__ void scale(float* c, int n, float alpha) {
  c[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x] *= alpha;
}
int main(int argc, char** argv) {
  const int n = atoi(argv[1]);
  float* c;
  scale<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(c, n, 0.5f);
}
"""


def test_launches_matched_by_name_with_scalar_arguments_decoded():
    src = load_bytes("k.cu", KERNELS)
    raw = [RawLaunch("_Z5scalePfif", (128, 128, 1), (16, 16, 1), 0, 5, (bytes(8), struct.pack("<i", 2048), struct.pack("<f", 0.5))),
           RawLaunch("_Z5scalePfif", (64, 64, 1), (16, 16, 1), 0, 9, (bytes(8), struct.pack("<i", 1024), struct.pack("<f", 0.5))),
           RawLaunch("_Z4tileIdLi64EEvPT_iS0_", (7, 5, 3), (32, 4, 1), 128, 1, (bytes(8), struct.pack("<i", 77), struct.pack("<d", -2.0))),
           RawLaunch("_Z5otherv", (1, 1, 1), (1, 1, 1), 0, 1)]
    found = match_launches(FileContext(src), raw, {"scale", "tile"})
    assert set(found) == {"scale", "tile"}
    assert found["scale"] == (ObservedLaunch((64, 64, 1), (16, 16, 1), 0, 9, (), (("n", 1024), ("alpha", 0.5))),
                              ObservedLaunch((128, 128, 1), (16, 16, 1), 0, 5, (), (("n", 2048), ("alpha", 0.5))))
    (tile,) = found["tile"]  # T = double from the symbol: beta is read as 8 bytes
    assert tile.template == ("double", "64") and tile.args == (("m", 77), ("beta", -2.0))


def test_observed_launches_feed_the_footprint():
    """N read from argv: the file fixes no grid, the observed launch does."""
    src = load_bytes("k.cu", KERNELS)
    analysis = analyze(FileContext(src))
    scale = next(k for k in analysis.kernels if k.name == "scale")
    assert scale.launches[0].grid is None
    run = ObservedRun("cupti", {"scale": (ObservedLaunch((128, 128, 1), (16, 16, 1), 0, 3, (), (("n", 2048), ("alpha", 0.5))),)})
    (launch,) = observed_launches(FileContext(src), scale, run)
    assert launch.grid == (128, 128, 1) and launch.block == (16, 16, 1) and dict(launch.bindings)["n"] == 2048
    from dataclasses import replace

    fp = footprint(FileContext(src), replace(scale, launches=(launch,)), 0)
    assert isinstance(fp, Footprint) and not fp.unknown
    assert observed_launches(FileContext(src), scale, ObservedRun("", {})) == ()


DECODED = b"""__global__ void tiles(float* c, int n) {
  const int row = blockIdx.x / (n / 32), col = blockIdx.x % (n / 32);
  c[(row * 32 + threadIdx.y) * n + col * 32 + threadIdx.x] = 1.0f;
}
int main(int argc, char** argv) { int n = argc; tiles<<<(n / 32) * (n / 32), dim3(32, 32)>>>(0, n); }
"""


def test_observed_launches_evaluate_the_tile_decode():
    src = load_bytes("d.cu", DECODED)
    (kernel,) = analyze(FileContext(src)).kernels
    run = ObservedRun("cupti", {"tiles": (ObservedLaunch((4096, 1, 1), (32, 32, 1), 0, 1, (), (("n", 2048),)),)})
    (launch,) = observed_launches(FileContext(src), kernel, run)
    assert launch.divisor == 64


# ---- observe_launches with stand-in tools --------------------------------------------------------------

FAKE_NCU = """#!/usr/bin/env python3
# Stands in for ncu: checks it was asked for the raw page, runs the program, prints a canned CSV.
import subprocess, sys
args = sys.argv[1:]
assert "--csv" in args and args[args.index("--page") + 1] == "raw", args
program = args[args.index("/bin/sh"):]
subprocess.run(program, check=True)
sys.stdout.write(open(__file__ + ".csv").read())
"""

FAKE_ROCPROFV3 = """#!/usr/bin/env python3
# Stands in for rocprofv3: runs the program, writes a kernel trace where rocprofv3 would.
import pathlib, subprocess, sys
args = sys.argv[1:]
assert "--kernel-trace" in args and args[args.index("--output-format") + 1] == "csv", args
subprocess.run(args[args.index("--") + 1:], check=True)
out = pathlib.Path(args[args.index("-d") + 1]) / "host" / "4242"
out.mkdir(parents=True)
(out / "swzc_kernel_trace.csv").write_text(open(__file__ + ".csv").read())
"""


def _stand_in(tmp_path, monkeypatch, name, script, output):
    tool = tmp_path / "bin" / name
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(script)
    tool.chmod(0o755)
    Path(str(tool) + ".csv").write_text(output)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")


def _program(tmp_path, scratch_inside=True):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "k.cu").write_bytes(KERNELS)
    (folder / "run.sh").write_text("echo ran > ran.txt\n")
    return folder / "k.cu"


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Temporary folders go here, so that a test can see none is left behind."""
    import tempfile

    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_observe_through_ncu(tmp_path, monkeypatch, scratch):
    _stand_in(tmp_path, monkeypatch, "ncu", FAKE_NCU, NCU_CSV.replace("_Z4gemmIfLi32EEvPKT_S2_PS0_i", "_Z5scalePfif"))
    path = _program(tmp_path)
    run = observe_launches(FileContext(load_bytes(str(path), path.read_bytes())), ProgramBench("sh run.sh"), {"scale"}, tool="ncu")
    assert run.ok and run.tool == "ncu" and "no argument values" in run.note
    assert run.launches["scale"] == (ObservedLaunch((128, 128, 1), (32, 8, 1), 8192, 2),)
    assert list(scratch.iterdir()) == [] and not (path.parent / "ran.txt").exists()  # it ran in a private copy


def test_observe_through_rocprofv3(tmp_path, monkeypatch, scratch):
    _stand_in(tmp_path, monkeypatch, "rocprofv3", FAKE_ROCPROFV3, ROCPROF_TRACE.replace("gemm<float, 64>", "scale"))
    path = _program(tmp_path)
    run = observe_launches(FileContext(load_bytes(str(path), path.read_bytes())), ProgramBench("sh run.sh"), {"scale"}, tool="rocprofv3")
    assert run.tool == "rocprofv3" and run.launches["scale"][0].grid == (256, 128, 1) and run.launches["scale"][0].count == 2
    assert list(scratch.iterdir()) == []


def test_a_failing_build_or_program_is_a_note_not_an_error(tmp_path, monkeypatch, scratch):
    _stand_in(tmp_path, monkeypatch, "ncu", FAKE_NCU, "")
    path = _program(tmp_path)
    built = observe_launches(FileContext(load_bytes(str(path), path.read_bytes())), ProgramBench("sh run.sh", "echo no compiler >&2; exit 2"), {"scale"},
                             tool="ncu")
    assert not built.ok and "build command exited with status 2" in built.note and "no compiler" in built.note
    ran = observe_launches(FileContext(load_bytes(str(path), path.read_bytes())), ProgramBench("echo oops >&2; exit 5"), {"scale"}, tool="ncu")
    assert not ran.ok and "exited with status" in ran.note and ran.launches == {}
    assert list(scratch.iterdir()) == []


def test_no_interposer_is_said(monkeypatch):
    monkeypatch.setattr(observe, "cupti_location", lambda root=None: None)
    monkeypatch.setattr(observe.shutil, "which", lambda name: None)
    run = observe_launches(FileContext(load_bytes("k.cu", b"")), ProgramBench("true"), {"k"})
    assert not run.ok and "neither CUPTI" in run.note


# ---- the CUPTI observer, built and driven without a GPU ------------------------------------------------

@pytest.fixture(scope="module")
def observer_cache(tmp_path_factory) -> Path:
    """One cache for the tests that build the observer, so that it is built once."""
    return tmp_path_factory.mktemp("observer-cache")


@needs_cupti
def test_observer_builds_and_is_reused_from_a_private_cache(observer_cache, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(observer_cache))
    with observe.observer_library() as first:
        assert first.is_file()
        symbols = subprocess.run(["nm", "-D", str(first)], capture_output=True, text=True).stdout
        assert " T InitializeInjection" in symbols
        built = first.read_bytes()
    assert not first.exists()  # the program loads a private copy, removed afterwards
    cache = observer_cache / "swzc"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    (cached,) = cache.glob("observer-*.so")
    assert cached.read_bytes() == built
    builds = []
    real_run = observe.processes.run
    monkeypatch.setattr(observe.processes, "run", lambda cmd, *a, **k: (builds.append(cmd), real_run(cmd, *a, **k))[1])
    with observe.observer_library() as second:
        assert second != cached and second.read_bytes() == built
    assert not any("-shared" in c for c in builds)  # taken from the cache
    cached.write_bytes(cached.read_bytes() + b"tampered")
    with observe.observer_library() as third:
        assert b"tampered" not in third.read_bytes()
    assert any("-shared" in c for c in builds)  # its hash no longer matched: built again
    assert b"tampered" not in cached.read_bytes()


@needs_cupti
def test_a_cache_others_can_write_is_not_used(tmp_path, monkeypatch):
    """A cache folder of another user's making is not trusted (the prover's cache rules, swzc.core.cache)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "swzc"
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    planted = cache / "observer-planted.so"
    planted.write_bytes(b"not a library")
    with observe.observer_library() as library:
        assert library.is_file() and cache not in library.parents
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700  # taken back to the user's own mode before use
    assert planted.read_bytes() == b"not a library"


@needs_cupti
def test_observer_records_launches_as_cupti_hands_them(tmp_path):
    cuda_include, cupti_include, cupti_lib = CUPTI
    binary = tmp_path / "driver"
    subprocess.run(["c++", "-std=c++17", "-I", observe.native_dir(), "-I", str(cuda_include), "-I", str(cupti_include),
                    "-o", str(binary), str(ROOT / "tests" / "native" / "launch_observer_driver.cpp"), "-L", str(cupti_lib),
                    "-lcupti", "-ldl", f"-Wl,-rpath,{cupti_lib}"], check=True)
    out = tmp_path / "launches.jsonl"
    subprocess.run([str(binary), str(out)], check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(line["pid"] == lines[0]["pid"] for line in lines)
    raw, dropped = parse_observer_output(out.read_text())
    assert dropped == {"_Z5scalePfif": 2}  # a third configuration, past the cap of two, launched twice
    assert len(raw) == 5
    by_grid = {r.grid: r for r in raw}
    first = by_grid[128, 64, 1]
    assert (first.symbol, first.block, first.shmem, first.count) == ("_Z5scalePfif", (16, 16, 1), 0, 4)
    assert first.params[1:] == (struct.pack("<i", 2048), struct.pack("<f", 0.5))
    assert struct.unpack("<i", by_grid[256, 64, 1].params[1])[0] == 4096
    packed = by_grid[7, 5, 3]  # cuLaunchKernelEx, parameters in one buffer, a library kernel's layout
    assert (packed.block, packed.shmem) == ((32, 4, 1), 49152)
    assert packed.params[1:] == (struct.pack("<i", 77), struct.pack("<f", -2.0))
    chevrons = by_grid[9, 1, 1]  # a runtime launch the driver did not report: the runtime's own parameters
    assert (chevrons.block, chevrons.shmem, chevrons.params[1:]) == ((64, 1, 1), 1024, (struct.pack("<i", 5), struct.pack("<f", 3.0)))
    stub = by_grid[11, 1, 1]  # cudaLaunchKernel gives a host stub only: no parameters
    assert (stub.block, stub.params, stub.count) == ((32, 1, 1), (), 1)


FAKE_INJECTED = """import json, os, sys
# Stands in for a CUDA program under the observer: the driver would load the library and the library
# write these lines; here the program checks it was given both and writes them itself.
assert os.path.isfile(os.environ["CUDA_INJECTION64_PATH"]), os.environ["CUDA_INJECTION64_PATH"]
n = int(sys.argv[1])
with open(os.environ["SWZC_OBSERVE_OUT"], "a") as out:
    params = [{"offset": 0, "size": 8, "hex": "00" * 8}, {"offset": 8, "size": 4, "hex": n.to_bytes(4, "little").hex()},
              {"offset": 12, "size": 4, "hex": "0000003f"}]
    out.write(json.dumps({"pid": os.getpid(), "id": 0, "kernel": "_Z5scalePfif", "grid": [n // 16, n // 16, 1],
                          "block": [16, 16, 1], "shmem": 0, "params": params}) + "\\n")
    out.write(json.dumps({"pid": os.getpid(), "counts": {"0": 2}, "dropped": {}}) + "\\n")
"""


@needs_cupti
def test_observe_through_cupti_passes_the_library_and_reads_its_lines(tmp_path, monkeypatch, scratch, observer_cache):
    monkeypatch.setenv("XDG_CACHE_HOME", str(observer_cache))
    path = _program(tmp_path)
    (path.parent / "fake.py").write_text(FAKE_INJECTED)
    run = observe_launches(FileContext(load_bytes(str(path), path.read_bytes())), ProgramBench("python3 fake.py 2048"), {"scale"}, tool="cupti")
    assert run.ok and run.note == ""
    assert run.launches["scale"] == (ObservedLaunch((128, 128, 1), (16, 16, 1), 0, 2, (), (("n", 2048), ("alpha", 0.5))),)
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("planted", ["mkfifo \"$SWZC_OBSERVE_OUT\"", "ln -s /dev/zero \"$SWZC_OBSERVE_OUT\"",
                                     "head -c 70000000 /dev/zero | tr '\\0' x > \"$SWZC_OBSERVE_OUT\""])
def test_what_the_program_leaves_where_the_observer_writes_is_read_within_bounds(tmp_path, monkeypatch, scratch, planted):
    """The program under observation may leave a FIFO, a device or a huge file where the launches are written:
    the run ends with a note saying why no launch was read, without waiting on a writer or reading without end."""
    from contextlib import contextmanager

    @contextmanager
    def stand_in_library():
        library = tmp_path / "observer.so"
        library.write_bytes(b"")
        yield library

    monkeypatch.setattr(observe, "observer_library", stand_in_library)
    path = _program(tmp_path)
    run = observe_launches(FileContext(load_bytes(str(path), path.read_bytes())), ProgramBench(planted), {"scale"}, tool="cupti")
    assert not run.ok and "launches.jsonl" in run.note
    assert any(words in run.note for words in ("a FIFO", "a character device", "more than the limit"))
    assert list(scratch.iterdir()) == []


# ---- on a GPU: a real program ---------------------------------------------------------------------------



GPU_PROGRAM = b"""#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

template <typename T, int TILE>
__global__ void tiled_copy(const T* in, T* out, int n) {
  const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  if (row < n && col < n) out[row * n + col] = in[row * n + col];
}

__global__ void scale(float* c, int n, float alpha) {
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row < n && col < n) c[row * n + col] *= alpha;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 256;
  float *a, *b;
  cudaMalloc(&a, sizeof(float) * n * n);
  cudaMalloc(&b, sizeof(float) * n * n);
  for (int i = 0; i < 3; ++i) scale<<<dim3(n / 16, n / 16), dim3(16, 16)>>>(a, n, 0.5f);
  tiled_copy<float, 32><<<dim3(n / 32, n / 32), dim3(32, 32)>>>(a, b, n);
  cudaDeviceSynchronize();
  printf("done %s\\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
"""


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="no CUDA GPU here")
def test_observe_a_real_program_on_the_gpu(tmp_path):
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "prog.cu").write_bytes(GPU_PROGRAM)
    bench = ProgramBench("./prog 1024", "nvcc -O2 -arch=sm_90 -o prog {file}")
    run = observe_launches(FileContext(load_bytes(str(folder / "prog.cu"), GPU_PROGRAM)), bench, {"scale", "tiled_copy"})
    assert run.ok, run.note
    (scale,) = run.launches["scale"]
    assert (scale.grid, scale.block, scale.count) == ((64, 64, 1), (16, 16, 1), 3)
    if run.tool == "cupti":
        assert dict(scale.args) == {"n": 1024, "alpha": 0.5}
    (copy,) = run.launches["tiled_copy"]
    assert copy.grid == (32, 32, 1) and copy.block == (32, 32, 1) and copy.template == ("float", "32")


def test_runs_at_several_sizes_merge_into_every_distinct_launch():
    from swzc.verify.observe import ObservedLaunch, ObservedRun, merged
    small = ObservedLaunch((32, 128, 1), (32, 8, 1), 0, 2, (), (("n", 1024),))
    large = ObservedLaunch((256, 1024, 1), (32, 8, 1), 0, 1, (), (("n", 8192),))
    runs = [ObservedRun("cupti", {"gemm": (small,)}), ObservedRun("cupti", {"gemm": (large, small)}),
            ObservedRun("", {}, "the third size failed")]
    got = merged(runs)
    assert got.ok and got.launches["gemm"] == (small.__class__(**{**small.__dict__, "count": 4}), large)
    assert got.note == "the third size failed"
    assert not merged([ObservedRun("", {}, "no ncu or CUPTI here")]).ok
