#!/usr/bin/env bash
# Test run_ncu.sh without a GPU: fake nvcc and ncu stand in for the real ones, and the fake ncu prints
# ncu's --csv --page raw layout by hand (quoted values, a units row, thousands separators, ==PROF== lines
# and the program's own output mixed in). Checks the parsed numbers and the checksum comparison.
#   bash bench/l2/selftest.sh          (from the repository root; needs python3 only)
set -euo pipefail
T=$(mktemp -d)
[ -n "${SELFTEST_KEEP:-}" ] && echo "selftest: keeping $T" || trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/units_base" "$T/units_auto"

# fake nvcc: "-O3 -arch=sm_90 -o OUT FILE" -> OUT is a script that prints the program's result line.
# Every variant gets the kernel's checksum, except smem_gemm__colmajor, which gets a wrong one.
cat >"$T/bin/nvcc" <<'SH'
#!/usr/bin/env bash
if [ "${1:-}" = --version ]; then echo "Cuda compilation tools, release 0.0 (fake)"; echo "Build fake"; exit 0; fi
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2;; -*) shift;; *) src=$1; shift;; esac; done
stem=$(basename "$src" .cu); kernel=${stem%%__*}
sum=$(printf %s "$kernel" | cksum | cut -d' ' -f1)
[ "$stem" = smem_gemm__colmajor ] && sum=999
printf '#!/bin/sh\necho "kernel %s ms 12.5000 checksum %016x"\n' "$kernel" "$sum" >"$out"
chmod +x "$out"
SH
# fake ncu: runs the binary (its line lands in the middle of ==PROF== lines), then the raw CSV.
cat >"$T/bin/ncu" <<'SH'
#!/usr/bin/env bash
if [ "${1:-}" = --help ]; then echo "  --print-units arg  (base|auto)"; exit 0; fi
if [ "${1:-}" = --version ]; then echo "Version 2099.1.0.0 (fake)"; exit 0; fi
base=0; for a in "$@"; do [ "$a" = base ] && base=1; bin=$a; done
stem=$(basename "$bin"); kernel=${stem%%__*}
echo "==PROF== Connected to process 4242 ($bin)"
echo "==PROF== Profiling \"$kernel\" - 0: 0%....50%....100% - 1 pass"
"$bin"
echo "==PROF== Disconnected from process 4242"
echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum","lts__t_sector_hit_rate.pct","lts__t_sectors.sum"'
if [ $base = 1 ]; then
  echo '"","","","","","","","","","","","byte","byte","nsecond","%","sector"'
  echo "\"0\",\"4242\",\"$stem\",\"127.0.0.1\",\"$kernel(const float *, const float *, float *, int)\",\"1\",\"7\",\"(16, 16, 1)\",\"(256, 256, 1)\",\"0\",\"9.0\",\"3,421,234,560\",\"67,108,864\",\"92,453,120\",\"88.12\",\"4,563,402,752\""
else
  echo '"","","","","","","","","","","","Gbyte","Mbyte","msecond","%","Msector"'
  echo "\"0\",\"4242\",\"$stem\",\"127.0.0.1\",\"$kernel\",\"1\",\"7\",\"(16, 16, 1)\",\"(256, 256, 1)\",\"0\",\"9.0\",\"3.42\",\"67.11\",\"92.45\",\"88.12\",\"4,563.40\""
fi
SH
chmod +x "$T/bin/nvcc" "$T/bin/ncu"

check() {  # check RESULTS_JSON EXPECTED_READ EXPECTED_TIME_NS EXPECTED_SECTORS
  python3 - "$@" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
read, t_ns, sect = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
manifest = json.load(open("bench/l2/variants/manifest.json"))["variants"]
expected = sum(v["kernel"] in ("naive_gemm", "smem_gemm") for v in manifest)  # the manifest's orders of both
assert expected >= 2 * 12 and len(res) == expected, (len(res), expected)
for r in res:
    assert r["l2_hit_pct"] == 88.12, r
    assert r["dram_read_bytes"] == read, r
    assert abs(r["ncu_time_ns"] - t_ns) < 1e-3 * t_ns, r
    assert r["lts_sectors"] == sect, r
    bad = r["kernel"] == "smem_gemm" and r["candidate"] == "colmajor"
    assert r["checksum_matches_identity"] is (not bad), r
    assert r["ok"] is (not bad), r
    assert r["checksum_under_ncu"] == r["checksum"], r
print("selftest: parsed values as expected for", sys.argv[1])
PY
}

export PATH="$T/bin:$PATH" BIN="$T/l2bin"
# base units (an ncu with --print-units): exact integers
set +e
OUT="$T/units_base" KERNELS=naive_gemm,smem_gemm JOBS=4 bash bench/l2/run_ncu.sh >"$T/base.txt" 2>&1
rc=$?
set -e
[ $rc = 1 ] || { cat "$T/base.txt"; echo "selftest: expected exit 1 (one checksum differs), got $rc"; exit 1; }
check "$T/units_base/results.json" 3421234560 92453120 4563402752
# scaled units (no --print-units): Gbyte, msecond, Msector
sed -i 's/--print-units arg  (base|auto)/(no such option)/' "$T/bin/ncu"
set +e
OUT="$T/units_auto" KERNELS=naive_gemm,smem_gemm JOBS=4 bash bench/l2/run_ncu.sh >"$T/auto.txt" 2>&1
rc=$?
set -e
[ $rc = 1 ] || { cat "$T/auto.txt"; echo "selftest: expected exit 1, got $rc"; exit 1; }
check "$T/units_auto/results.json" 3420000000 92450000 4563400000
# --parse-only on a copy of the log gives the same results
cp "$T/units_auto/l2_raw.log" "$T/again.log"
set +e; bash bench/l2/run_ncu.sh --parse-only "$T/again.log" "$T/units_auto/manifest.json" >/dev/null; set -e
cmp <(python3 -m json.tool "$T/results.json") <(python3 -m json.tool "$T/units_auto/results.json")
echo "selftest: table of the scaled-units run:"
cat "$T/units_auto/table.txt"
echo "selftest: ok"
