#!/usr/bin/env bash
# Time every block-order variant of some kernels against each other: ROUNDS rounds, each running every
# variant once in a fresh shuffled order, so that drift in the GPU's state falls on all of them alike.
#
# Runs ON THE GPU MACHINE, from the repository root; needs nvcc and python3 (stdlib only), not swzc.
#   KERNELS=naive_gemm,gemm_bf16_wmma ROUNDS=3 OUT=/some/dir bash bench/l2/time_variants.sh
# Environment: MANIFEST (default bench/l2/variants/manifest.json), KERNELS (required), ROUNDS (default 3),
#   BUDGET_S (stop starting new rounds after this many seconds, default 400), JOBS, NVCC, BIN (default
#   /tmp/l2bin: binaries already there from run_ncu.sh are reused).
# Each run prints `kernel <name> ms <t> checksum <hex>`: the measured launch, timed with CUDA events.
# Output in $OUT: times.json ({"rounds": n, "runs": [{kernel, candidate, round, ms, checksum}], "median_ms":
# {kernel: {candidate: ms}}}) and times.txt.
set -uo pipefail

MANIFEST="${MANIFEST:-bench/l2/variants/manifest.json}"
OUT="${OUT:-./l2_out}"
ROUNDS="${ROUNDS:-3}"
BUDGET_S="${BUDGET_S:-400}"
JOBS="${JOBS:-16}"
BIN="${BIN:-/tmp/l2bin}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
: "${KERNELS:?set KERNELS=a,b}"
mkdir -p "$OUT" "$BIN"
START=$(date +%s)

python3 - "$MANIFEST" "$KERNELS" >"$OUT/time_rows.tsv" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = set(sys.argv[2].split(","))
for v in m["variants"]:
    if v["kernel"] in keep:
        print("\t".join([v["kernel"], v["candidate"], v["file"]]))
PY
cut -f3 "$OUT/time_rows.tsv" | xargs -P "$JOBS" -I{} sh -c '
  f="$1"; stem=$(basename "$f" .cu)
  [ -x "$3/$stem" ] || "$2" -O3 -arch=sm_90 -o "$3/$stem" "$f" >/dev/null 2>&1' _ {} "$NVCC" "$BIN"
echo "built in $(( $(date +%s) - START )) s"

python3 - "$OUT" "$BIN" "$ROUNDS" "$BUDGET_S" "$START" <<'PY'
import json, os, random, re, statistics, subprocess, sys, time

out, binary_dir, rounds, budget, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "time_rows.tsv")) if line.strip()]
line = re.compile(r"^kernel (\S+) ms (\S+) checksum ([0-9a-fA-F]+)\s*$", re.M)
rng = random.Random(12)
runs = []
done = 0
for r in range(rounds):
    if time.time() - start > budget:
        print(f"time budget of {budget:.0f} s reached after {done} rounds")
        break
    order = rows[:]
    rng.shuffle(order)
    for kernel, cand, path in order:
        exe = os.path.join(binary_dir, os.path.basename(path)[:-3])
        if not os.access(exe, os.X_OK):
            continue
        try:
            proc = subprocess.run([exe], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            continue
        got = line.search(proc.stdout)
        if proc.returncode == 0 and got:
            runs.append({"kernel": kernel, "candidate": cand, "round": r, "ms": float(got.group(2)), "checksum": got.group(3)})
    done += 1
median = {}
for run in runs:
    median.setdefault(run["kernel"], {}).setdefault(run["candidate"], []).append(run["ms"])
median = {k: {c: statistics.median(v) for c, v in cs.items()} for k, cs in median.items()}
json.dump({"rounds": done, "runs": runs, "median_ms": median}, open(os.path.join(out, "times.json"), "w"), indent=1)
with open(os.path.join(out, "times.txt"), "w") as fh:
    for kernel, cs in median.items():
        ident = cs.get("identity")
        for cand, ms in sorted(cs.items(), key=lambda kv: kv[1]):
            speed = f"{ident / ms:.3f}x" if ident else "-"
            fh.write(f"{kernel:18s} {cand:16s} {ms:9.3f} ms  {speed}\n")
print(open(os.path.join(out, "times.txt")).read())
print(f"{len(runs)} runs in {done} rounds, {time.time() - start:.0f} s")
PY
