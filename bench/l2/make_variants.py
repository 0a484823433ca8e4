#!/usr/bin/env python3
"""Write one source file per (kernel, block order) for the L2 measurement in bench/l2/.

Runs where swzc is installed (not on the GPU machine). For each kernel in bench/l2/kernels/ and each
candidate swizzle it calls `swzc rewrite KERNEL --swizzle SPEC --no-compile -o VARIANT --json`; the
identity candidate is a plain copy of the original. Candidates that swzc refuses or declines are
skipped and listed, with swzc's reason, in the manifest. Output: bench/l2/variants/<kernel>__<cand>.cu
and bench/l2/variants/manifest.json, which bench/l2/run_ncu.sh reads on the GPU machine.

    python3 bench/l2/make_variants.py [--swzc PATH] [--kernels a,b] [--candidates x,y] [--compile-check]
    python3 bench/l2/make_variants.py --family [--hw h200] [--skip-measured RESULTS.json,...]

--family takes, for each kernel, every order swzc ranks on that GPU (swzc.model.rank.candidates on the kernel's
tile grid) besides CANDIDATES; --skip-measured leaves out the (kernel, order) pairs a results file holds
already, except identity, which is measured again as the run's control.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KERNELS_DIR = HERE / "kernels"
VARIANTS_DIR = HERE / "variants"
# Kernels measured here whose program is another's: (its file, text replacements), written to VARIANTS_DIR.
DERIVED = {
    "gemm_bf16_wmma": (REPO / "bench" / "suite" / "kernels" / "gemm_bf16_wmma.cu", ()),
    "naive_gemm_8192": (KERNELS_DIR / "naive_gemm.cu", (  # applied in order
        ("naive_gemm", "naive_gemm_8192"), ("#define N 4096", "#define N 8192"),
        ("// 3 x 64 MB of data against a 60 MB L2.",
         "// 3 x 256 MB of data against a 60 MB L2 (the same kernel as naive_gemm.cu at N = 8192)."))),
}

KERNELS = ["naive_gemm", "smem_gemm", "wmma_gemm", "stencil2d", "transpose", "naive_gemm_8192", "gemm_bf16_wmma", "attention_decode",
           "tiled_gemm", "async_gemm", "naive_gemm_32x8", "decoded_sgemm", "bf16_gemm_2d", "naive_gemm_rect", "smem_gemm_bf16"]
CANDIDATES = [
    "identity",
    "colmajor",
    "grouped:2",
    "grouped:4",
    "grouped:8",
    "grouped:16",
    "grouped:32",
    "grouped:64",
    "hilbert:4",
    "hilbert:8",
    "xcd:8",
    "xcd:8+grouped:8",
]


def slug(candidate: str) -> str:
    return candidate.replace(":", "_").replace("+", "-")


def rel(path: Path) -> str:
    return path.resolve().relative_to(REPO).as_posix()


def find_swzc(explicit: str | None) -> str:
    for cand in (explicit, os.environ.get("SWZC"), shutil.which("swzc"), "/tmp/tsv/bin/swzc"):
        if cand and (Path(cand).is_file() or shutil.which(cand)):
            return cand
    sys.exit("make_variants: swzc not found (pass --swzc PATH or set SWZC)")


def run_json(cmd: list[str]) -> tuple[int, dict | None, str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    return proc.returncode, doc, proc.stderr.strip()


def kernel_source(kernel: str) -> tuple[Path, str]:
    """Where a kernel's program is, and its text: bench/l2/kernels/KERNEL.cu, or one derived from another's."""
    if kernel not in DERIVED:
        path = KERNELS_DIR / f"{kernel}.cu"
        return path, path.read_text() if path.is_file() else ""
    base, replacements = DERIVED[kernel]
    text = base.read_text()
    for old, new in replacements:
        text = text.replace(old, new)
    return (base if not replacements else VARIANTS_DIR / f"{kernel}.cu"), text


def family(kernel: str, hw_name: str) -> list[str]:
    """Every order swzc ranks for KERNEL on HW_NAME, by name (needs swzc importable)."""
    from swzc.target import hw as hwmodels
    from swzc.frontend import source
    from swzc.analysis.kernels import analyze as analyze_file
    from swzc.model.rank import _footprint, candidates
    from swzc.analysis.context import FileContext

    path, text = kernel_source(kernel)
    src = source.load_bytes(str(path), text.encode())
    ctx = FileContext(src)
    (info,) = [k for k in analyze_file(ctx).kernels if k.name == kernel]
    index = next(i for i, launch in enumerate(info.launches) if launch.grid is not None)
    fp = _footprint(ctx, info, index, None)
    if isinstance(fp, str):
        sys.exit(f"make_variants: no footprint for {kernel}: {fp}")
    return [spec.name for spec in candidates(fp.adapter, fp.tiles, hwmodels.load(hw_name))]


def measured(paths: list[str]) -> set[tuple[str, str]]:
    """The (kernel, candidate) pairs the results files hold with a hit rate."""
    pairs = set()
    for path in paths:
        doc = json.loads(Path(path).read_text())
        rows = doc["results"] if isinstance(doc, dict) else doc
        pairs |= {(r["kernel"], r["candidate"]) for r in rows if r.get("l2_hit_pct") is not None}
    return pairs


def analyze(swzc: str, src: Path) -> dict:
    """The one __global__ kernel of SRC as swzc sees it: name, status, grid."""
    rc, doc, err = run_json([swzc, "analyze", rel(src), "--json"])
    if doc is None:
        sys.exit(f"make_variants: swzc analyze {rel(src)} failed (exit {rc}): {err}")
    kernels = doc.get("kernels", [])
    if len(kernels) != 1:
        sys.exit(f"make_variants: expected one kernel in {rel(src)}, swzc found {len(kernels)}")
    return kernels[0]


def make_one(swzc: str, kernel: str, candidate: str, src: Path, out: Path) -> dict:
    """Write OUT for one candidate; return a record with status 'ok' or the reason it was skipped."""
    rec = {"kernel": kernel, "candidate": candidate, "file": rel(out)}
    if candidate == "identity":
        shutil.copyfile(src, out)
        rec.update(status="ok", swzc_status="copy", detail="the original file, unchanged")
        return rec
    tmp = out.with_suffix(".tmp.cu")
    cmd = [swzc, "rewrite", rel(src), "--swizzle", candidate, "--no-compile", "-o", rel(tmp), "--json"]
    rc, doc, err = run_json(cmd)
    kstat = (doc or {}).get("kernels") or [{}]
    k0 = kstat[0]
    rec.update(swzc_exit=rc, swzc_status=k0.get("status"), detail=k0.get("reason") or err,
               proof=k0.get("proof"), grids=k0.get("grids"))
    if rc == 0 and k0.get("status") == "rewritten" and tmp.exists():
        tmp.replace(out)
        rec["status"] = "ok"
    else:
        tmp.unlink(missing_ok=True)
        out.unlink(missing_ok=True)  # never leave a stale variant from an earlier run
        rec["status"] = "skipped"
        if rc not in (0, 1):
            rec["detail"] = f"swzc exit {rc}: {err or rec.get('detail')}"
    return rec


def compile_check(files: list[str], jobs: int) -> list[tuple[str, str]]:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        print("compile check: nvcc not on PATH, skipped")
        return []
    objdir = Path(os.environ.get("TMPDIR", "/tmp")) / "l2_variant_objs"
    objdir.mkdir(parents=True, exist_ok=True)

    def one(f: str) -> tuple[str, str] | None:
        obj = objdir / (Path(f).stem + ".o")
        p = subprocess.run([nvcc, "-O3", "-arch=sm_90", "-c", f, "-o", str(obj)],
                           capture_output=True, text=True, cwd=REPO)
        return None if p.returncode == 0 else (f, p.stderr.strip())

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        failures = [r for r in pool.map(one, files) if r]
    print(f"compile check (nvcc -O3 -arch=sm_90 -c): {len(files) - len(failures)}/{len(files)} ok")
    for f, e in failures:
        print(f"  FAILED {f}:\n{e}")
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--swzc", help="swzc executable (default: $SWZC, swzc on PATH, /tmp/tsv/bin/swzc)")
    ap.add_argument("--kernels", help="comma-separated subset of " + ",".join(KERNELS))
    ap.add_argument("--candidates", help="comma-separated candidates (default: the full list)")
    ap.add_argument("--compile-check", action="store_true", help="compile every variant with nvcc -c")
    ap.add_argument("--family", action="store_true", help="also every order swzc ranks for each kernel on --hw")
    ap.add_argument("--hw", default="h200", help="the GPU model whose family --family takes (default h200)")
    ap.add_argument("--manifest", default="manifest.json", help="the manifest's name in bench/l2/variants/")
    ap.add_argument("--skip-measured", help="comma-separated results files: leave out the pairs they hold (not identity)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 4)
    args = ap.parse_args()

    swzc = find_swzc(args.swzc)
    kernels = args.kernels.split(",") if args.kernels else KERNELS
    candidates = args.candidates.split(",") if args.candidates else CANDIDATES
    VARIANTS_DIR.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([swzc, "--version"], capture_output=True, text=True).stdout.strip()

    done = measured(args.skip_measured.split(",")) if args.skip_measured else set()
    variants, skipped = [], []
    for kernel in kernels:
        src, text = kernel_source(kernel)
        if not text:
            sys.exit(f"make_variants: no such kernel file {rel(src) if src.parent.exists() else src}")
        if not src.is_file() or src.read_text() != text:  # a derived program, written beside its variants
            src.write_text(text)
        info = analyze(swzc, src)
        grid = (info.get("grid") or None)
        mine = list(dict.fromkeys(candidates + (family(kernel, args.hw) if args.family else [])))
        mine = [c for c in mine if c == "identity" or (kernel, c) not in done]
        jobs = [(c, VARIANTS_DIR / f"{kernel}__{slug(c)}.cu") for c in mine]
        with concurrent.futures.ThreadPoolExecutor(min(args.jobs, len(jobs))) as pool:
            recs = list(pool.map(lambda j: make_one(swzc, kernel, j[0], src, j[1]), jobs))
        for rec in recs:
            rec["function"] = info["name"]
            line = f"{kernel:11s} {rec['candidate']:16s} "
            if rec["status"] == "ok":
                variants.append(rec)
                line += f"-> {rec['file']}" + (f"  ({rec['proof']})" if rec.get("proof") else "")
            else:
                skipped.append(rec)
                line += f"SKIPPED ({rec.get('swzc_status')}): {rec.get('detail')}"
            print(line)
        if grid is not None:
            print(f"{kernel:11s} grid as swzc evaluates it: {grid}")

    manifest = {
        "generated_by": "bench/l2/make_variants.py",
        "swzc": version,
        "candidates": candidates,
        "family": args.hw if args.family else None,
        "skip_measured": args.skip_measured,
        "variants": [
            {k: r.get(k) for k in ("kernel", "candidate", "file", "function", "swzc_status", "proof")}
            for r in variants
        ],
        "skipped": [
            {k: r.get(k) for k in ("kernel", "candidate", "swzc_status", "swzc_exit", "detail")}
            for r in skipped
        ],
    }
    (VARIANTS_DIR / args.manifest).write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(variants)} variants, {len(skipped)} skipped -> {rel(VARIANTS_DIR / args.manifest)}")

    if args.compile_check and compile_check([v["file"] for v in variants], args.jobs):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
