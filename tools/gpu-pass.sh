#!/bin/sh
# One check-and-measure pass on a GPU machine, with a static build carried
# there (make STATIC=1):  tools/gpu-pass.sh OUTDIR [probe args...]
# Writes logs to OUTDIR and prints a short summary last.
out=${1:?usage: tools/gpu-pass.sh OUTDIR}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src" HCTUNE_DB="$out/probe.db"
rm -f "$HCTUNE_DB"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  bin/hctune devices
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
t0=$(date +%s.%N)
timeout 300 bin/hctune probe "$@" > "$out/probe1.txt" 2> "$out/probe1.err"; rc1=$?
t1=$(date +%s.%N)
timeout 300 bin/hctune probe "$@" > "$out/probe2.txt" 2> "$out/probe2.err"; rc2=$?
t2=$(date +%s.%N)
{
  echo "== probe 1 (cold compile cache): exit $rc1, $(awk "BEGIN{print $t1 - $t0}") s"
  grep -E "compiled|error|warning" "$out/probe1.err" | head -20
  cat "$out/probe1.txt"
  echo "== probe 2 (warm compile cache): exit $rc2, $(awk "BEGIN{print $t2 - $t1}") s"
  grep -E "compiled|error|warning" "$out/probe2.err" | head -20
  cat "$out/probe2.txt"
  echo "== list"; bin/hctune list
  echo "== faults"; bin/hctune list --faults
  # Issue 20: the checks of an engine's use, counted from the trials (kind:
  # the check; "timed" pass: a winner verified after timing).
  echo "== checks"
  bin/hctune show --json 2>/dev/null | python3 -c '
import json, sys, collections
n = collections.Counter((t["kind"], t["status"]) for t in json.load(sys.stdin)
                        if t["kind"] in ("parity", "repeat", "determinism", "producer", "timed"))
for (k, s), c in sorted(n.items()): print(f"  {k:12} {s:16} {c}")' 2>/dev/null || echo "  (needs python3)"
} > "$out/summary.txt" 2>&1
cat "$out/summary.txt"
