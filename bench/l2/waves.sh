#!/usr/bin/env bash
# On the GPU machine, from the repository root, after `python3 bench/l2/waves.py write` here: builds each
# variant in bench/l2/variants/$SET/ (SET: waves unless given; pace for bench/l2/pace.py), runs it once
# plainly and profiles its second launch with ncu (L2 hit rate, DRAM bytes read, L2 sectors, time).  Writes
# $OUT/$SET.csv (ncu's raw page, a `### variant` line before each) and $OUT/${SET}_plain.txt (each
# program's own line: time and checksum).
set -u
OUT="${OUT:-./l2_out}"
SET="${SET:-waves}"
BIN="${BIN:-/tmp/${SET}_bin}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
NCU="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
METRICS=lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_sectors.sum,gpu__time_duration.sum
mkdir -p "$OUT" "$BIN"
for src in bench/l2/variants/$SET/*.cu; do
  "$NVCC" -O3 -arch=sm_90 -o "$BIN/$(basename "$src" .cu)" "$src" &
done
wait
: >"$OUT/$SET.csv"
: >"$OUT/${SET}_plain.txt"
for src in bench/l2/variants/$SET/*.cu; do
  v=$(basename "$src" .cu)
  kernel=${v%%__*}
  echo "### $v" >>"$OUT/$SET.csv"
  "$BIN/$v" | tee -a "$OUT/${SET}_plain.txt"
  timeout 200 "$NCU" --clock-control none --metrics "$METRICS" --launch-skip 1 --launch-count 1 \
    --kernel-name "$kernel" --csv --page raw --print-units base "$BIN/$v" 2>&1 | grep '^"' >>"$OUT/$SET.csv"
done
