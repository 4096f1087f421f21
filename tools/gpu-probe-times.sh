#!/bin/bash
# Issue 34's "Done when" in one device call: the decode probe (hc_read,
# T = 1..8) and the prefill probe (hc_read_prefill, every family, its
# probe_tokens T = 16..32768), each cold (a fresh database: every binary
# compiled) then warm (the same database again: every binary from its
# cache), each ending with where its time went; then verify-decisions of
# the decode probe's decisions (every chosen variant through every check
# again: the same decisions as a full check).  Each probe is stopped with
# SIGINT past its limit, so that it still says where its time went (on
# stderr) and keeps its run's breakdown.  A table last: probe, wall
# seconds, the goal.
#
#   tools/gpu-probe-times.sh OUTDIR [decode|prefill|all] [bin]
#
# OUTDIR gets a log per step (the probe's stdout: the decision table and
# the breakdown; its stderr: the progress), the trials of each probe as
# JSON (gzip), and summary.txt.  The limits keep `all` within 560 s (the
# device tool's 600 s a call): decode cold 90 s, warm 60 s, verify 90 s,
# prefill cold 180 s, warm 140 s; run `decode` and `prefill` as two calls
# where one call is too tight.
set -u
out=${1:?usage: tools/gpu-probe-times.sh OUTDIR [decode|prefill|all] [bin]}
what=${2:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${3:-$root/bin}" && pwd)
mkdir -p "$out"
export HCTUNE_KERNELS=$root/kernels-src
tmp=$(mktemp -d /tmp/hctune-probe-times.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
summary="$out/summary.txt"
{ date -u; git -C "$root" rev-parse --short HEAD 2>/dev/null || cat "$root/build/gpu/commit" 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>/dev/null
  "$bin/hctune" devices 2>&1 | head -3; } > "$summary"

# step NAME LIMIT GOAL DB command...: runs it, its wall time and status
# into the summary, its breakdown's first line beside.
step() {
  local name=$1 limit=$2 goal=$3 db=$4; shift 4
  local t0 t1
  t0=$(date +%s.%N)
  HCTUNE_DB=$db timeout -s INT -k 20 "$limit" "$@" > "$out/$name.out" 2> "$out/$name.err"
  local rc=$?
  t1=$(date +%s.%N)
  local wall
  wall=$(awk "BEGIN { print $t1 - $t0 }")
  local took
  took=$(grep -h "where the time went" "$out/$name.out" "$out/$name.err" | head -1)
  printf "%-16s exit %3d  %7.1f s  (goal %s)  %s\n" "$name" "$rc" "$wall" "$goal" "$took" | tee -a "$summary"
  return $rc
}

decode() {
  local db="$tmp/decode.db"
  step decode-cold 90 "20 s" "$db" "$bin/hctune" probe --tokens 1-8
  step decode-warm 60 "10 s" "$db" "$bin/hctune" probe --tokens 1-8
  step decode-verify 90 "passes" "$db" "$bin/hctune" verify-decisions --op hc_read
  HCTUNE_DB=$db "$bin/hctune" show --op hc_read --json 2>/dev/null | gzip > "$out/decode-trials.json.gz"
}

prefill() {
  local db="$tmp/prefill.db"
  step prefill-cold 180 "90 s" "$db" "$bin/hctune" probe --op hc_read_prefill
  step prefill-warm 140 "45 s" "$db" "$bin/hctune" probe --op hc_read_prefill
  HCTUNE_DB=$db "$bin/hctune" show --op hc_read_prefill --json 2>/dev/null | gzip > "$out/prefill-trials.json.gz"
}

case $what in
  decode) decode ;;
  prefill) prefill ;;
  all) decode; prefill ;;
  *) echo "usage: tools/gpu-probe-times.sh OUTDIR [decode|prefill|all] [bin]" >&2; exit 2 ;;
esac
echo "== where the time went"
for f in "$out"/*-cold.out "$out"/*-warm.out; do
  [ -f "$f" ] || continue
  echo "-- $(basename "$f" .out)"
  sed -n '/where the time went/,/probe took/p' "$f" "${f%.out}.err"
done
cat "$summary"
