#!/bin/bash
# tools/gpu-decode.sh OUTDIR: the decode read's bitwise measurement (issue
# 35) in one device call, on the GPU machine with bin/, lib/ and build/gpu
# carried (tools/gpu-session.sh prepare, here), each part in what is left
# of BUDGET seconds (default 540; a part is skipped, saying so, when under
# 40 s are left):
#   bench    hctune bench of v1, relay (the bitwise winner so far), pipe and
#            persist (the kl winners) and slice at T = 1..8, cold, a fresh
#            database: every point's parity against v1 at every T with and
#            without pending, and each variant's best time a read
#   trials   hctune show of slice's trials in that database: which of its
#            points (NCL 15, 16) passed and timed what at each T
#   profile  tools/gpu-profile.sh's part slice: Nsight Compute of slice
#            (NCL=15) at T = 1 and 8
# Output in OUTDIR: env.txt, bench.txt, trials.txt, profile/ (profile.txt,
# the logs), a summary on stdout.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
out=${1:?usage: tools/gpu-decode.sh OUTDIR}
[ -x bin/hctune ] || { echo "gpu-decode: no bin/hctune: build here with 'tools/gpu-session.sh prepare' and carry bin lib build/gpu" >&2; exit 2; }
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/build/gpu HCT_BIN=$root/bin HCTUNE_KERNELS=$root/kernels-src
db=$(mktemp -d /tmp/gpu-decode.XXXXXX)/bench.db
start=$(date +%s)
{ date -u; cat build/gpu/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  bin/hctune devices; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
part() { # NAME CAP command...
  local name=$1 cap=$2; shift 2
  local left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
  if [ $left -lt 40 ]; then echo "$name: skipped (${left} s left)"; return; fi
  [ "$cap" -gt $left ] && cap=$left
  local t0=$(date +%s)
  timeout "$cap" "$@" > "$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s (limit $cap s)"
}
part bench 240 bin/hctune bench --db "$db" --variants v1,relay,pipe,persist,slice --tokens 1-8
part trials 30 env COLUMNS=200 bin/hctune show --db "$db" --variant slice
part profile 260 tools/gpu-profile.sh "$out/profile" slice
echo "== bench"; grep -v "^hctune: \(compile\|check\|time\)" "$out/bench.txt" 2>/dev/null | tail -50
echo "== slice's trials that did not pass"
grep -v " pass " "$out/trials.txt" 2>/dev/null | head -30
echo "== slice's timings"; grep -E "timing|timed" "$out/trials.txt" 2>/dev/null | head -40
echo "== profile"; grep -E "^===|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Shared Memory|Stall" \
  "$out/profile/profile.txt" 2>/dev/null | head -80
exit 0
