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
#   prefill  wgmma_fn's down and up, upmix's up (and pair_mma's GEMMs), the
#            wgmma variant's kernels, all at T = 8192
#   decode   relay (NG=4, PDL=1) and slice (NCL=15) at T = 1, 8
#   slice    slice (NCL=15) at T = 1, 8 only
#   torch    tools/torch-prefill.py at T = 2048, 8192, 32768 (the anchor)
# The decode kernels (clusters and a programmatic dependent launch) are
# profiled with DECODE_SECTIONS, not --set full: under --set full ncu gave
# up on relay and on relay_t (retired since): "Failed to profile" after
# 8-9 passes, exit 9; 2026-12-06, H100.
# Output: OUTDIR/profile.txt (every report's details), OUTDIR/reps.tgz (the
# .ncu-rep files), OUTDIR/torch.txt, a log a part.
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
reps=$ops/reps
mkdir -p "$reps"
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
    > "$out/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s"
  { echo "=================== $name (T = $T; $*)"
    "$ncu" -i "$reps/$name.ncu-rep" --page details --print-units base 2>&1; } >> "$out/profile.txt"
}

for part in $parts; do
  case $part in
    prefill)
      one hc_read_prefill pf_wgmma_fn 8192 'hcp_fn_' 2 wgmma_fn:UBM=64
      one hc_read_prefill pf_upmix 8192 'hc_um_upmix|hc_pm_' 3 upmix:DBM=128,DBN=160,DWR=32,UBM=128
      one hc_read_prefill pf_wgmma 8192 'hcp_wg_|hc_pf_norm' 6 wgmma:DBM=128,KSPLIT=2,UBC=64 ;;
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
    *) echo "gpu-profile: unknown part '$part'" >&2 ;;
  esac
done
tar -C "$reps" -czf "$out/reps.tgz" . 2>/dev/null
ls -la "$out"
