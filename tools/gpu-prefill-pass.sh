#!/bin/sh
# The prefill op's check-and-measure pass on a GPU machine (issue 23), with a
# static build carried there:  tools/gpu-prefill-pass.sh OUTDIR [what...]
#
# what (default: all of them, in this order):
#   probe    a cold probe of hc_read_prefill (every family, its probe_tokens
#            16..32768) into a fresh database, timed: the Done-when's 120 s
#   bench    hctune bench of every variant at T = 2048, 8192, 32768, cold
#   torch    tools/torch-prefill.py at the same counts (eager, max-autotune)
#   copy     the op's folder copied under another name, nothing else changed,
#            probed at T = 16, 2048 on the same binary, and queried
#   verify   hctune verify-decisions --exhaustive for the op (the search's
#            decisions against timing every point)
# Logs go to OUTDIR; a summary is printed last.  Exit 0 when every part ran
# and passed, 1 otherwise.
out=${1:?usage: tools/gpu-prefill-pass.sh OUTDIR [probe bench torch copy verify]}
shift
parts=${*:-probe bench torch copy verify}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
mkdir -p "$out"
kern=$(mktemp -d /tmp/hctune-prefill-kernels.XXXXXX)
trap 'rm -rf "$kern"' EXIT
cp -r kernels-src/. "$kern/"
export HCTUNE_KERNELS="$kern" HCTUNE_DB="$out/prefill.db"
rm -f "$HCTUNE_DB"
op=hc_read_prefill
fails=0
note() { echo "$*" >> "$out/summary.txt"; }
: > "$out/summary.txt"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  bin/hctune devices
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

variants=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print(",".join(v["name"] for v in m["variants"]))' "$kern/$op/manifest.json")

for part in $parts; do
  t0=$(date +%s.%N)
  case $part in
  probe)
    timeout ${PROBE_LIMIT:-400} bin/hctune probe --op $op ${PROBE_TOKENS:+--tokens $PROBE_TOKENS} > "$out/probe.txt" 2> "$out/probe.err"; rc=$? ;;
  bench)
    timeout 300 bin/hctune bench --op $op --variants "$variants" --tokens 2048,8192,32768 \
      > "$out/bench.txt" 2> "$out/bench.err"; rc=$? ;;
  torch)
    timeout ${TORCH_LIMIT:-200} python3 tools/torch-prefill.py --tokens 2048,8192,32768 --json \
      > "$out/torch.json" 2> "$out/torch.err"; rc=$? ;;
  copy)
    rm -rf "$kern/prefill_copy"
    cp -r "$kern/$op" "$kern/prefill_copy"
    timeout ${COPY_LIMIT:-200} bin/hctune probe --op prefill_copy --tokens 16,2048 ${COPY_VARIANTS:+--variants $COPY_VARIANTS} > "$out/copy.txt" 2> "$out/copy.err"; rc=$?
    bin/hctune list | grep -E "prefill_copy|^CARD|card" >> "$out/copy.txt" 2>> "$out/copy.err"
    # Served for any T in range: the daemon answers counts never probed.
    sock="$out/d.sock"
    bin/hctuned --socket "$sock" --db "$HCTUNE_DB" --kernels "$kern" 2> "$out/daemon.log" &
    dpid=$!
    sleep 1
    bin/hctune query --socket "$sock" --op prefill_copy --tokens 16,17,700,2048,5000 >> "$out/copy.txt" 2>> "$out/copy.err" || rc=1
    kill $dpid; wait $dpid 2>/dev/null ;;
  verify)
    timeout ${VERIFY_LIMIT:-300} bin/hctune verify-decisions --op $op --exhaustive > "$out/verify.txt" 2> "$out/verify.err"; rc=$? ;;
  *) echo "unknown part '$part'"; rc=2 ;;
  esac
  t1=$(date +%s.%N)
  [ $rc -eq 0 ] || fails=$((fails + 1))
  note "== $part: exit $rc, $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
  case $part in
  probe)  grep -E "compiled|error" "$out/probe.err" | head -5 >> "$out/summary.txt"; cat "$out/probe.txt" >> "$out/summary.txt"
          bin/hctune list >> "$out/summary.txt" 2>&1
          bin/hctune list --faults >> "$out/summary.txt" 2>&1
          # Every variant's best point per T (the deciding timings: every
          # family's search finalists, cold), and whether each variant
          # passed its class at every T.
          bin/hctune show --op $op --json > "$out/trials.json" 2>> "$out/probe.err"
          python3 - "$out/trials.json" >> "$out/summary.txt" 2>&1 <<'PY'
import json, sys, collections
tr = json.load(open(sys.argv[1]))
best = {}
checks = collections.defaultdict(lambda: [0, 0])
for t in tr:
    v, T = t["variant"], t["tokens"]
    if t["kind"] == "timing" and t["status"] == "pass" and (t.get("figures") or {}).get("decides", 1):
        m = t.get("median_us")
        if m and ((v, T) not in best or m < best[(v, T)][0]):
            best[(v, T)] = (m, t.get("params"))
    if t["kind"] == "parity":
        checks[(v, T)][0 if t["status"] == "pass" else 1] += 1
Ts = sorted({T for (_, T) in best} | {T for (_, T) in checks})
vs = sorted({v for (v, _) in best} | {v for (v, _) in checks})
print("best us per read (cold), per variant x T; parity trials passed/failed")
print("%-10s" % "variant" + "".join("%16d" % T for T in Ts))
for v in vs:
    row = []
    for T in Ts:
        b = best.get((v, T))
        p, f = checks.get((v, T), [0, 0])
        row.append("%16s" % (("%.1f" % b[0] if b else "-") + " %d/%d" % (p, f)))
    print("%-10s" % v + "".join(row))
for v in vs:
    for T in Ts:
        if (v, T) in best: print("  %s T=%d %.1f us %s" % (v, T, best[(v, T)][0], best[(v, T)][1]))
PY
          ;;
  bench)  cat "$out/bench.txt" >> "$out/summary.txt"; tail -3 "$out/bench.err" >> "$out/summary.txt" ;;
  torch)  python3 - "$out/torch.json" >> "$out/summary.txt" 2>&1 <<'PY' || tail -3 "$out/torch.err" >> "$out/summary.txt"
import json, sys
d = json.load(open(sys.argv[1]))
print("%s, torch %s" % (d["gpu"], d["torch"]))
for r in d["rows"]:
    print("  T=%-6d %-13s %s" % (r["T"], r["mode"], r.get("error") or "%.1f us (tune %.1f s)" % (r["us"], r["tune_s"])))
PY
          ;;
  copy)   cat "$out/copy.txt" >> "$out/summary.txt"; tail -3 "$out/copy.err" >> "$out/summary.txt" ;;
  verify) cat "$out/verify.txt" >> "$out/summary.txt"; tail -3 "$out/verify.err" >> "$out/summary.txt" ;;
  esac
done
cat "$out/summary.txt"
[ $fails -eq 0 ]
