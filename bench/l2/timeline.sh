#!/usr/bin/env bash
# On the GPU machine, from the repository root, after `python3 bench/l2/timeline.py write` here: builds each
# variant in bench/l2/variants/timeline/ and runs it once, its measured launch's block times into
# $OUT/timeline/KERNEL.bin and its own line (time, checksum) into $OUT/timeline/plain.txt.
set -u
OUT="${OUT:-./l2_out}"
BIN="${BIN:-/tmp/timeline_bin}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
mkdir -p "$OUT/timeline" "$BIN"
for src in bench/l2/variants/timeline/*.cu; do
  "$NVCC" -O3 -arch=sm_90 -o "$BIN/$(basename "$src" .cu)" "$src" &
done
wait
: >"$OUT/timeline/plain.txt"
for src in bench/l2/variants/timeline/*.cu; do
  v=$(basename "$src" .cu)
  SWZC_TIMELINE="$OUT/timeline/$v.bin" "$BIN/$v" | tee -a "$OUT/timeline/plain.txt"
done
