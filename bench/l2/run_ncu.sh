#!/usr/bin/env bash
# Measure the L2 hit rate and DRAM traffic of every block-order variant in bench/l2/variants/ with ncu.
#
# Runs ON THE GPU MACHINE, from the repository root; needs nvcc, ncu and python3 (stdlib only), not swzc.
#   OUT=/some/dir bash bench/l2/run_ncu.sh            # default OUT=./l2_out
#   bash bench/l2/run_ncu.sh --parse-only LOG         # re-parse a raw log (writes results.json next to it)
# Environment: MANIFEST (default bench/l2/variants/manifest.json), KERNELS=naive_gemm,transpose (subset), JOBS (parallel nvcc, default 16),
#   BUDGET_S (stop starting new variants after this many seconds, default 450), NCU, NVCC (executables),
#   BIN (where the binaries go, default /tmp/l2bin).
#
# For each variant: one plain run (prints `kernel <name> ms <t> checksum <fnv1a>`), then
#   ncu --clock-control none --metrics <5 metrics> --launch-skip 1 --launch-count 1 --csv --page raw
# on the same binary; the program launches its kernel twice and the second launch is the measured one.
# Two flags are added to that command: `--kernel-name <kernel>`, so the skip/count apply to the
# kernel under test only, and `--print-units base` where this ncu has it, so byte counts come unrounded.
# Output in $OUT: l2_raw.log (every command's output, in marked sections), results.json, table.txt.
set -uo pipefail

MANIFEST="${MANIFEST:-bench/l2/variants/manifest.json}"
METRICS=lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_sectors.sum
BIN="${BIN:-/tmp/l2bin}"

find_tool() {  # find_tool NAME: print a path to NAME (PATH, then the usual CUDA install places)
  local name=$1 c
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  for c in /usr/local/cuda/bin/$name /usr/local/cuda-*/bin/$name /opt/nvidia/nsight-compute/*/$name \
           /usr/local/cuda/nsight-compute-*/$name /usr/local/NVIDIA-Nsight-Compute*/$name; do
    if [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}

parse() {  # parse LOG MANIFEST RESULTS_JSON TABLE_TXT
  python3 - "$@" <<'PY'
import csv, json, re, sys

log_path, manifest_path, out_json, table_path = sys.argv[1:5]
manifest = json.load(open(manifest_path))
variants = manifest["variants"] if isinstance(manifest, dict) else manifest

# ---- split the raw log into sections: ### BEGIN <kind> <file> ... ### END <kind> <file> rc=<rc>
sections = {}
cur = None
with open(log_path, errors="replace") as fh:
    for line in fh:
        line = line.rstrip("\r\n")
        m = re.match(r"^### BEGIN (build|plain|ncu) (\S+)\s*$", line)
        if m:
            cur = {"lines": [], "rc": None}
            sections[(m.group(1), m.group(2))] = cur
            continue
        m = re.match(r"^### END (build|plain|ncu) (\S+) rc=(-?\d+)", line)
        if m:
            if cur is not None:
                cur["rc"] = int(m.group(3))
            cur = None
            continue
        if cur is not None:
            cur["lines"].append(line)

PROGRAM_LINE = re.compile(r"^kernel (\S+) ms (\S+) checksum ([0-9a-fA-F]+)\s*$")

def program_line(lines):
    for line in lines:
        m = PROGRAM_LINE.match(line.strip())
        if m:
            return m.group(1), float(m.group(2)), m.group(3).lower()
    return None

# ---- ncu's raw CSV: a header row of column names, a units row (empty ID), one row per launch.
PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
          "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3, "Ti": 1024.0 ** 4}
TIME_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
           "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

def number(text):
    t = (text or "").strip().replace(",", "")  # ncu may print thousands separators: "1,234,567.50"
    if t.lower() in ("", "n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None

def scaled(value, unit, base):
    """VALUE in UNIT converted to BASE ('byte', 'sector', 'ns' or '%'); None if the unit is unknown."""
    if value is None:
        return None
    u = (unit or "").strip()
    if base == "ns":
        return value * TIME_NS[u] if u in TIME_NS else (value if u == "" else None)
    if base == "%":
        return value if u in ("%", "") else None
    if u == "":
        return value
    for suffix in (base, base + "s", {"byte": "B"}.get(base, base)):
        if u.endswith(suffix) and u[: len(u) - len(suffix)] in PREFIX:
            return value * PREFIX[u[: len(u) - len(suffix)]]
    return None

FIELDS = {  # result key -> (metric, base unit)
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct", "%"),
    "dram_read_bytes": ("dram__bytes_read.sum", "byte"),
    "dram_write_bytes": ("dram__bytes_write.sum", "byte"),
    "lts_sectors": ("lts__t_sectors.sum", "sector"),
    "ncu_time_ns": ("gpu__time_duration.sum", "ns"),
}

def parse_ncu(lines, function):
    """Return (metrics dict, error or None) from ncu --csv --page raw output mixed with other lines."""
    rows = list(csv.reader([l for l in lines if l.startswith('"')]))
    header, units, data = None, None, []
    for r in rows:
        if r and r[0] == "ID":
            header, units = r, None  # (a second process would print its own header)
            continue
        if header is None:
            continue
        if units is None and r and r[0].strip() == "":
            units = r
            continue
        if len(r) == len(header):
            data.append((header, units, r))
    if not data:
        errs = [l for l in lines if l.startswith("==ERROR==") or "ERR_NVGPUCTRPERM" in l]
        return None, ("; ".join(errs[:3]) if errs else "no ncu CSV data row in the output")
    if "Kernel Name" in data[0][0]:
        mine = [d for d in data if re.match(re.escape(function) + r"\b", d[2][d[0].index("Kernel Name")].strip())]
        if mine:
            data = mine
    err = None if len(data) == 1 else f"{len(data)} profiled launches, expected 1; the first is used"
    header, units, row = data[0]
    out = {}
    for key, (metric, base) in FIELDS.items():
        if metric not in header:
            err = (err + "; " if err else "") + f"metric {metric} missing from the CSV"
            out[key] = None
            continue
        i = header.index(metric)
        unit = units[i] if units and i < len(units) else ""
        v = scaled(number(row[i]), unit, base)
        if v is None and number(row[i]) is not None:
            err = (err + "; " if err else "") + f"unknown unit {unit!r} for {metric}"
        out[key] = v
    for key in ("dram_read_bytes", "dram_write_bytes", "lts_sectors"):
        if out[key] is not None:
            out[key] = int(round(out[key]))
    if "Grid Size" in header:
        out["ncu_grid"] = row[header.index("Grid Size")]
    return out, err

results = []
for v in variants:
    f, fn = v["file"], v.get("function") or v["kernel"]
    rec = {"kernel": v["kernel"], "candidate": v["candidate"], "file": f,
           "l2_hit_pct": None, "dram_read_bytes": None, "dram_write_bytes": None, "lts_sectors": None,
           "ncu_time_ns": None, "checksum": None, "checksum_matches_identity": None,
           "plain_ms": None, "plain_rc": None, "checksum_under_ncu": None, "ncu_rc": None, "errors": []}
    b = sections.get(("build", f))
    if b is not None and b["rc"] != 0:
        rec["errors"].append("build failed (see the build section of the log)")
    p = sections.get(("plain", f))
    if p is None:
        rec["errors"].append("not run")
    else:
        rec["plain_rc"] = p["rc"]
        got = program_line(p["lines"])
        if got:
            _, rec["plain_ms"], rec["checksum"] = got
        else:
            rec["errors"].append("plain run printed no result line")
        if p["rc"] != 0:
            rec["errors"].append(f"plain run exit {p['rc']}")
    n = sections.get(("ncu", f))
    if n is not None:
        rec["ncu_rc"] = n["rc"]
        got = program_line(n["lines"])
        if got:
            rec["checksum_under_ncu"] = got[2]
        metrics, err = parse_ncu(n["lines"], fn)
        if metrics:
            rec.update(metrics)
        if err:
            rec["errors"].append("ncu: " + err)
    elif p is not None:
        rec["errors"].append("ncu not run")
    results.append(rec)

ident = {r["kernel"]: r["checksum"] for r in results if r["candidate"] == "identity"}
for r in results:
    if r["checksum"] is not None and ident.get(r["kernel"]) is not None:
        r["checksum_matches_identity"] = r["checksum"] == ident[r["kernel"]]
        if not r["checksum_matches_identity"]:
            r["errors"].append("checksum differs from identity")
    r["ok"] = not r["errors"]

with open(out_json, "w") as fh:
    json.dump(results, fh, indent=1)
    fh.write("\n")

def fmt(x, scale=1.0, spec="{:.1f}"):
    return "-" if x is None else spec.format(x / scale)

base_read = {r["kernel"]: r["dram_read_bytes"] for r in results if r["candidate"] == "identity"}
hdr = f"{'kernel':11s} {'candidate':16s} {'L2 hit%':>7s} {'DRAM rd MB':>10s} {'rd/ident':>8s} {'DRAM wr MB':>10s} " \
      f"{'L2 sect M':>9s} {'ncu ms':>8s} {'run ms':>8s}  checksum"
lines = [hdr, "-" * len(hdr)]
for r in results:
    rel = None
    if r["dram_read_bytes"] is not None and base_read.get(r["kernel"]):
        rel = r["dram_read_bytes"] / base_read[r["kernel"]]
    ck = {True: "same", False: "DIFFERS", None: "?"}[r["checksum_matches_identity"]]
    lines.append(f"{r['kernel']:11s} {r['candidate']:16s} {fmt(r['l2_hit_pct']):>7s} "
                 f"{fmt(r['dram_read_bytes'], 1e6):>10s} {fmt(rel, 1, '{:.2f}'):>8s} "
                 f"{fmt(r['dram_write_bytes'], 1e6):>10s} {fmt(r['lts_sectors'], 1e6):>9s} "
                 f"{fmt(r['ncu_time_ns'], 1e6, '{:.3f}'):>8s} {fmt(r['plain_ms'], 1, '{:.3f}'):>8s}  {ck}"
                 + ("" if r["ok"] else "   ! " + "; ".join(r["errors"])))
bad = [r for r in results if not r["ok"]]
lines.append(f"{len(results) - len(bad)}/{len(results)} variants measured with a checksum equal to identity's")
text = "\n".join(lines)
print(text)
with open(table_path, "w") as fh:
    fh.write(text + "\n")
sys.exit(1 if bad else 0)
PY
}

if [ "${1:-}" = "--parse-only" ]; then
  log=${2:?usage: run_ncu.sh --parse-only LOG [MANIFEST]}
  dir=$(dirname "$log")
  parse "$log" "${3:-$MANIFEST}" "$dir/results.json" "$dir/table.txt"
  exit $?
fi

[ -f "$MANIFEST" ] || { echo "run_ncu.sh: $MANIFEST not found; run from the repository root" >&2; exit 2; }
OUT="${OUT:-./l2_out}"
JOBS="${JOBS:-16}"
BUDGET_S="${BUDGET_S:-450}"
mkdir -p "$OUT" "$BIN"
LOG="$OUT/l2_raw.log"
: >"$LOG"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }

NVCC="${NVCC:-$(find_tool nvcc)}" || { echo "run_ncu.sh: nvcc not found" >&2; exit 2; }
NCU="${NCU:-$(find_tool ncu)}" || { echo "run_ncu.sh: ncu not found" >&2; exit 2; }
EXTRA=()
if "$NCU" --help 2>&1 | grep -q -- '--print-units'; then EXTRA+=(--print-units base); fi
{
  echo "### run_ncu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  fi
  "$NVCC" --version | tail -n 2
  "$NCU" --version | tail -n 1
  echo "### ncu extra flags: ${EXTRA[*]:-none}"
} >>"$LOG" 2>&1

# kernel <TAB> candidate <TAB> file <TAB> function, filtered by $KERNELS
mapfile -t ROWS < <(python3 - "$MANIFEST" "${KERNELS:-}" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = set(filter(None, sys.argv[2].split(",")))
for v in (m["variants"] if isinstance(m, dict) else m):
    if not keep or v["kernel"] in keep:
        print("\t".join([v["kernel"], v["candidate"], v["file"], v.get("function") or v["kernel"]]))
PY
)
[ "${#ROWS[@]}" -gt 0 ] || { echo "run_ncu.sh: no variants selected" >&2; exit 2; }
RUN_MANIFEST="$OUT/manifest.json"
python3 - "$MANIFEST" "${KERNELS:-}" "$RUN_MANIFEST" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = set(filter(None, sys.argv[2].split(",")))
vs = m["variants"] if isinstance(m, dict) else m
json.dump({"variants": [v for v in vs if not keep or v["kernel"] in keep]}, open(sys.argv[3], "w"), indent=1)
PY

echo "building ${#ROWS[@]} variants with $NVCC -O3 -arch=sm_90 (-P $JOBS) into $BIN"
BUILD_LOGS=$(mktemp -d)
printf '%s\n' "${ROWS[@]}" | cut -f3 | xargs -P "$JOBS" -I{} sh -c '
  f="$1"; stem=$(basename "$f" .cu)
  "$2" -O3 -arch=sm_90 -o "$3/$stem" "$f" >"$4/$stem.log" 2>&1; echo $? >"$4/$stem.rc"' _ {} "$NVCC" "$BIN" "$BUILD_LOGS"
nfail=0
for row in "${ROWS[@]}"; do
  IFS=$'\t' read -r kernel cand file fn <<<"$row"
  stem=$(basename "$file" .cu)
  rc=$(cat "$BUILD_LOGS/$stem.rc" 2>/dev/null || echo 127)
  { echo "### BEGIN build $file"; cat "$BUILD_LOGS/$stem.log" 2>/dev/null; echo "### END build $file rc=$rc"; } >>"$LOG"
  [ "$rc" = 0 ] || { nfail=$((nfail + 1)); echo "  build FAILED: $file"; }
done
rm -rf "$BUILD_LOGS"
echo "built in $(elapsed) s, $nfail failed"

i=0
for row in "${ROWS[@]}"; do
  IFS=$'\t' read -r kernel cand file fn <<<"$row"
  i=$((i + 1))
  stem=$(basename "$file" .cu)
  [ -x "$BIN/$stem" ] || continue
  if [ "$(elapsed)" -ge "$BUDGET_S" ]; then
    echo "time budget of $BUDGET_S s reached: variants $i..${#ROWS[@]} not run"
    break
  fi
  printf '[%2d/%d %4ds] %-11s %-16s' "$i" "${#ROWS[@]}" "$(elapsed)" "$kernel" "$cand"
  plain_out=$(timeout 120 "$BIN/$stem" 2>&1)
  rc=$?
  { echo "### BEGIN plain $file"; printf '%s\n' "$plain_out"; echo "### END plain $file rc=$rc"; } >>"$LOG"
  { echo "### BEGIN ncu $file"
    timeout 240 "$NCU" --clock-control none --metrics "$METRICS" --launch-skip 1 --launch-count 1 \
      --csv --page raw --kernel-name "$fn" ${EXTRA[@]+"${EXTRA[@]}"} "$BIN/$stem" 2>&1
    echo "### END ncu $file rc=$?"; } >>"$LOG"
  echo " $(grep -m1 '^kernel ' <<<"$plain_out" | cut -d' ' -f3-) (exit $rc)"
done
echo "runs done in $(elapsed) s; raw log: $LOG"

parse "$LOG" "$RUN_MANIFEST" "$OUT/results.json" "$OUT/table.txt"
status=$?
echo "results: $OUT/results.json (total $(elapsed) s)"
exit $status
