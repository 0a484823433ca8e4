#!/usr/bin/env bash
# L1 and L2 sector counts of a few variants, to see how many of a kernel's global-load sectors L1 serves
# and how many reach L2 (the L2 model assumes each block's footprint reaches L2 once).
#
# Runs ON THE GPU MACHINE from the repository root, after bench/l2/make_variants.py wrote the variants:
#   OUT=$OUT bash bench/l2/l1_probe.sh [VARIANT ...]     # VARIANT: a file stem in bench/l2/variants/
# Writes $OUT/$CSV (l1_probe.csv): one row of ncu's raw page per variant (the second launch, as run_ncu.sh).
# LRC=1 adds the L2 request coalescer's counters (Hopper): the read sectors it could merge and did merge.
# FABRIC=1 adds the sectors sent between the two L2 partitions (Hopper) and DRAM's read bytes.
# A VARIANT ending in _1sm is the variant without that suffix, launched with 120 KB of (unused) dynamic
# shared memory, so that one block runs per SM: it tells what co-resident blocks on one SM share in L1.
set -u
OUT="${OUT:-./l2_out}"
BIN="${BIN:-/tmp/l1bin}"
CSV="${CSV:-l1_probe.csv}"
mkdir -p "$OUT" "$BIN"
METRICS=l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_op_read.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sectors.sum,lts__t_sector_hit_rate.pct
[ "${LRC:-0}" = 1 ] && METRICS="$METRICS,lrc__request_sectors_op_read_coalescable.sum,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lrc__lts2lrc_sectors_op_read.sum,lrc__xbar2gpc_sectors_op_read.sum"
NCU="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
if [ "${FABRIC:-0}" = 1 ]; then
  # the sectors a near L2 partition sends on to the far one (the home of the address), and, where this ncu
  # has them, the lookups that hit and missed, by where they came from (an SM, or the other partition)
  "$NCU" --query-metrics --chip gh100 >"$OUT/ncu_metrics.txt" 2>&1
  METRICS="$METRICS,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum"
  for extra in lts__t_sectors_srcunit_ltcfabric_lookup_hit lts__t_sectors_srcunit_ltcfabric_lookup_miss \
               lts__t_sectors_srcunit_tex_lookup_hit lts__t_sectors_srcunit_tex_lookup_miss; do
    grep -q "^$extra " "$OUT/ncu_metrics.txt" && METRICS="$METRICS,$extra.sum"
  done
  rm -f "$OUT/ncu_metrics.txt"
fi
VARIANTS=("$@")
[ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(gemm_bf16_wmma__identity gemm_bf16_wmma__grouped_4 gemm_bf16_wmma__grouped_16
  gemm_bf16_wmma__hilbert_8 naive_gemm__identity smem_gemm__identity wmma_gemm__identity)
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
for v in "${VARIANTS[@]}"; do
  src="bench/l2/variants/$v.cu"
  if [[ $v == *_1sm ]]; then
    kernel=${v%%__*}
    src="$BIN/$v.cu"
    sed -e "s/<<<tiles, THREADS>>>/<<<tiles, THREADS, 120 * 1024>>>/" \
        -e "0,/^  $kernel<<</s//  cudaFuncSetAttribute($kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 120 * 1024);\n  $kernel<<</" \
        "bench/l2/variants/${v%_1sm}.cu" >"$src"
  fi
  "$NVCC" -O3 -arch=sm_90 -o "$BIN/$v" "$src" &
done
wait
: >"$OUT/$CSV"
for v in "${VARIANTS[@]}"; do
  kernel=${v%%__*}
  echo "### $v" >>"$OUT/$CSV"
  timeout 120 "$NCU" --clock-control none --metrics "$METRICS" --launch-skip 1 --launch-count 1 \
    --kernel-name "$kernel" --csv --page raw --print-units base "$BIN/$v" 2>&1 | grep '^"' >>"$OUT/$CSV"
done
cat "$OUT/$CSV"
