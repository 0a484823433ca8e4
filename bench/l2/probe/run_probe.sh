#!/usr/bin/env bash
# L1 and L2 sector counts of load_probe.cu's copy loops, alone (1 block), one wave (264) and the whole grid
# (4096), with 16-byte and 4-byte loads, A only, B only and both.  Runs ON THE GPU MACHINE from the
# repository root:  OUT=$OUT bash bench/l2/probe/run_probe.sh
# Writes $OUT/load_probe.csv (ncu's raw page, one block of rows per run) and $OUT/metrics.txt (the L2 and
# L1-to-L2 metrics this ncu knows, to read the names from).
set -u
OUT="${OUT:-./probe_out}"
BIN="${BIN:-/tmp/load_probe}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
NCU="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
mkdir -p "$OUT"
"$NVCC" -O3 -arch=sm_90 -o "$BIN" bench/l2/probe/load_probe.cu || exit 1
"$NCU" --query-metrics --chip gh100 >"$OUT/all_metrics.txt" 2>&1
grep -E '^(lrc__|lts__t_(sectors|requests)_srcunit|l1tex__m_)' "$OUT/all_metrics.txt" >"$OUT/metrics.txt"
METRICS=l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_op_read.sum,lts__t_sector_hit_rate.pct,lts__t_sectors.sum
for extra in l1tex__m_xbar2l1tex_read_sectors l1tex__m_l1tex2xbar_req lts__t_requests_srcunit_tex_op_read \
             lts__t_sectors_srcunit_ltcfabric lrc__t_sectors lrc__t_requests lrc__t_sectors_op_read lrc__t_requests_op_read; do
  grep -q "^$extra " "$OUT/all_metrics.txt" && METRICS="$METRICS,$extra.sum"
done
echo "metrics: $METRICS" | tee "$OUT/used_metrics.txt"
: >"$OUT/load_probe.csv"
for blocks in 1 264 4096; do
  for mode in a16 b16 ab16 a4 b4 ab4; do
    echo "### $mode $blocks" >>"$OUT/load_probe.csv"
    timeout 120 "$NCU" --clock-control none --metrics "$METRICS" --launch-skip 1 --launch-count 1 \
      --csv --page raw --print-units base "$BIN" "$mode" "$blocks" 2>&1 | grep '^"' >>"$OUT/load_probe.csv"
  done
done
echo done
