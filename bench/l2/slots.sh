#!/usr/bin/env bash
# On the GPU machine, from the repository root, after `python3 bench/l2/slots.py write` here: builds each
# variant in bench/l2/variants/slots/, runs it once with its block times to $OUT/slots/VARIANT.bin, then
# profiles its second launch with ncu (L2 hit rate, DRAM bytes read, L2 sectors, time) into
# $OUT/slots/slots.csv (ncu's raw page, a `### variant` line before each); the programs' own lines go to
# $OUT/slots/plain.txt.
set -u
OUT="${OUT:-./l2_out}"
BIN="${BIN:-/tmp/slots_bin}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
NCU="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
METRICS=lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_sectors.sum,gpu__time_duration.sum
# the L2 request coalescer (Hopper): the read sectors it merged, and those L1 received
METRICS="$METRICS,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lrc__xbar2gpc_sectors_op_read.sum"
mkdir -p "$OUT/slots" "$BIN"
for src in bench/l2/variants/slots/*.cu; do
  "$NVCC" -O3 -arch=sm_90 -o "$BIN/$(basename "$src" .cu)" "$src" &
done
wait
: >"$OUT/slots/slots.csv"
: >"$OUT/slots/plain.txt"
for src in bench/l2/variants/slots/*.cu; do
  v=$(basename "$src" .cu)
  kernel=${v%%__*}
  SWZC_TIMELINE="$OUT/slots/$v.bin" "$BIN/$v" | tee -a "$OUT/slots/plain.txt"
  echo "### $v" >>"$OUT/slots/slots.csv"
  timeout 200 "$NCU" --clock-control none --metrics "$METRICS" --launch-skip 1 --launch-count 1 \
    --kernel-name "$kernel" --csv --page raw --print-units base "$BIN/$v" 2>&1 | grep '^"' >>"$OUT/slots/slots.csv"
done
