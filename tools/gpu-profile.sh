#!/bin/bash
# tools/gpu-profile.sh OUTDIR [PART...]: Nsight Compute profiles of chosen
# kernels at one parameter point each, on the GPU machine, with bin/, lib/
# and build/gpu carried (tools/gpu-session.sh prepare).  Each part copies
# the op with tools/one-point.py (only the variants named, one point each,
# the baseline and references at their first point), runs `hctune bench`
# on that copy under ncu (--clock-control none; --set full, or for the
# decode kernels the sections below) for the first launches of the kernels
# named, and writes the report's details as text.
#
# Parts (default: prefill decode torch):
#   prefill  wgmma_pu's down (wgmma_fn.cu, FSPLIT 1) and up, upmix's up (and
#            pair_mma's GEMMs), wgmma_pb's norm, down and up, all at T = 8192
#   decode   relay (NG=4, PDL=1) and slice (NCL=15) at T = 1, 8
#   slice    slice (NCL=15) at T = 1, 8 only
#   torch    tools/torch-prefill.py at T = 2048, 8192, 32768 (the anchor)
#   pfnew    the persistent up kernel (wgmma_pu.h) under ncu at T = 8192,
#            then bench of wgmma_pu and wgmma_pb (every point) beside
#            upmix and pair_mma (one point each) at T = 2048, 8192
# (The part bits, which asked whether wgmma's k16 steps give mma.sync's
# bits, is gone: they do, on an H100, docs/perf/h100.md; wgmma_pb is the
# answer, and the variant it ran, wgmma, is retired.)
# The decode kernels (clusters and a programmatic dependent launch) are
# profiled with DECODE_SECTIONS, not --set full: under --set full ncu gave
# up on relay and on relay_t (retired since): "Failed to profile" after
# 8-9 passes, exit 9; 2026-12-06, H100.
# Output (at most 8 files, as the device tool brings back): OUTDIR/profile.txt
# (every report's details), reps.tgz (the .ncu-rep files), logs.tgz (a log
# a part), torch.txt, pfnew.json; a summary of the profiles last on stdout.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
out=${1:?usage: tools/gpu-profile.sh OUTDIR [prefill|decode|torch ...]}
shift
parts=${*:-prefill decode torch}
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/build/gpu HCT_BIN=$root/bin
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || echo "gpu-profile: no ncu found: profiles skipped" >&2
ops=$(mktemp -d /tmp/gpu-profile.XXXXXX)
cp -r kernels-src/common "$ops/"
reps=$ops/reps logs=$ops/logs
mkdir -p "$reps" "$logs"
# What ncu collects: --set full, or (decode kernels) these sections.
ncu_what=(--set full)
DECODE_SECTIONS=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats
  --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats
  --section InstructionStats --section ComputeWorkloadAnalysis)

# one OPDIR NAME T REGEX COUNT VARIANT[:P=V,...]...: a profile of the first
# COUNT launches matching REGEX in a bench of the variants at T.
one() {
  local op=$1 name=$2 T=$3 regex=$4 count=$5
  shift 5
  rm -rf "${ops:?}/$op"
  python3 tools/one-point.py "kernels-src/$op" "$ops/$op" "$@" || return
  local v
  v=$(for s in "$@"; do printf '%s,' "${s%%:*}"; done)
  local t0=$(date +%s)
  HCTUNE_KERNELS=$ops timeout 240 "$ncu" --clock-control none --target-processes all \
    --kernel-name "regex:$regex" --launch-count "$count" "${ncu_what[@]}" \
    -o "$reps/$name" -f \
    bin/hctune bench --db "$ops/bench.db" --op "$op" --variants "${v%,}" --tokens "$T" \
    > "$logs/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s"
  { echo "=================== $name (T = $T; $*)"
    "$ncu" -i "$reps/$name.ncu-rep" --page details --print-units base 2>&1; } >> "$out/profile.txt"
}

for part in $parts; do
  case $part in
    prefill)
      one hc_read_prefill pf_wgmma_pu_fn 8192 'hcp_fn_down|hcp_fp_up' 2 wgmma_pu:FSPLIT=1,NCW=4
      one hc_read_prefill pf_upmix 8192 'hc_um_upmix|hc_pm_' 3 upmix:DBM=128,DBN=160,DWR=32,UBM=128
      one hc_read_prefill pf_wgmma_pb 8192 'hcp_wg_down|hcp_pb_up|hc_pf_norm' 3 wgmma_pb:DBM=128,DNS=2,NCW=4 ;;
    decode)
      ncu_what=("${DECODE_SECTIONS[@]}")
      for T in 1 8; do
        one hc_read dec_relay_T$T $T 'hc_rl_read' 1 relay:PDL=1,NG=4
        one hc_read dec_slice_T$T $T 'hc_sl_read' 1 slice:NCL=15
      done
      ncu_what=(--set full) ;;
    slice)
      ncu_what=("${DECODE_SECTIONS[@]}")
      for T in 1 8; do one hc_read dec_slice_T$T $T 'hc_sl_read' 1 slice:NCL=15; done
      ncu_what=(--set full) ;;
    torch)
      t0=$(date +%s)
      timeout 200 python3 tools/torch-prefill.py --tokens 2048,8192,32768 > "$out/torch.txt" 2>&1
      echo "torch: exit $? in $(( $(date +%s) - t0 )) s"; cat "$out/torch.txt" ;;
    pfnew)
      one hc_read_prefill pf_wgmma_pu 8192 'hcp_fp_up' 1 wgmma_pu:NCW=4
      for T in 2048 8192; do
        rm -rf "${ops:?}/hc_read_prefill"
        python3 tools/one-point.py kernels-src/hc_read_prefill "$ops/hc_read_prefill" 'wgmma_pu:*' 'wgmma_pb:*' \
          upmix:DBM=128,DBN=160,DWR=32,UBM=128 > /dev/null || continue
        t0=$(date +%s)
        HCTUNE_KERNELS=$ops timeout 150 bin/hctune bench --db "$ops/pfnew.db" --op hc_read_prefill \
          --variants wgmma_pu,wgmma_pb,upmix,pair_mma --tokens $T > "$logs/pfnew_$T.log" 2>&1
        echo "pfnew T=$T: exit $? in $(( $(date +%s) - t0 )) s"
        grep -v "^hctune: \(compile\|check\|time\|verify\|search\)" "$logs/pfnew_$T.log" | tail -8
      done
      HCTUNE_KERNELS=$ops bin/hctune show --db "$ops/pfnew.db" --op hc_read_prefill --json > "$out/pfnew.json" 2>&1 ;;
    *) echo "gpu-profile: unknown part '$part'" >&2 ;;
  esac
done
tar -C "$reps" -czf "$out/reps.tgz" . 2>/dev/null
tar -C "$logs" -czf "$out/logs.tgz" . 2>/dev/null
# A summary to read first: each profiled kernel's duration and throughputs.
grep -E "^===|^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per" "$out/profile.txt" | head -150
ls -la "$out"
