#!/bin/sh
# hc_read_prefill's Hopper variants wgmma_pu (the norm fused into the down
# GEMM, kl) and wgmma_pb (pair_mma's bits) on an sm_90 card: stage by stage,
# then the probe's verdict, then its speed.  Skips, saying why, without an
# sm_90 card.  Needs python3 to read JSON.
#   tests/gpu-wgmma.sh [bin [tests folder]]      (defaults: bin, build/release/tests)
#
# 1. Stages (tests/test_wgmma.c): the variant's launches as the tuner makes
#    them (tensor maps included), then R', xn, lo and mixed each checked
#    against float64 from the previous stage's device result, at T = 16,
#    100, 2048, for points covering every parameter value of each.  A wrong
#    stage prints its first wrong elements as "lo[row][col] = got, want
#    x", and where the first one's value belongs ("holds the value of
#    [row][col]"): a wrong descriptor, swizzle or fragment map shows as a
#    pattern there.  HCT_WGMMA_VARIANT=wgmma_pb HCT_WGMMA_POINT='{"DBM":64,...}'
#    checks one point, HCT_WGMMA_T="16 100" other counts.  It also times
#    each launch (hot).
# 2. The probe: hctune probe --variants wgmma_pu,wgmma_pb at T = 16, 100,
#    2048; every parity trial of each (with and without pending) must pass
#    its class (wgmma_pu kl against the baseline, wgmma_pb bitwise against
#    pair_mma); a failing one is printed with its figures and log (one
#    line per variant).
# 3. hctune bench of both (and pair_mma, upmix when the manifest has them)
#    at T = 2048 and 8192, cold.
# HCT_WGMMA_STEPS="stages probe bench" (the default) picks the steps, to
# spend less device time on a second run.
bin=$(cd "${1:-bin}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
tests=$(cd "${2:-$root/build/release/tests}" && pwd)
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src"
tmp=$(mktemp -d /tmp/hctune-gpu-wgmma.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export HCTUNE_DB="$tmp/wgmma.db"
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }

if ! "$bin/hctune" devices --json > "$tmp/devices.json" 2> "$tmp/devices.err"; then
  echo "gpu-wgmma: skipped: $(cat "$tmp/devices.err")"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
command -v python3 > /dev/null || { echo "gpu-wgmma: needs python3 to read results"; exit 1; }
dev=$(python3 -c '
import json, sys
for d in json.load(open(sys.argv[1])):
    if d.get("arch") == "sm_90": print(d.get("uuid")); break
' "$tmp/devices.json")
if [ -z "$dev" ]; then
  echo "gpu-wgmma: skipped: no sm_90 card (wgmma is sm_90a code): $(cat "$tmp/devices.json")"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
echo "card $dev"

steps=${HCT_WGMMA_STEPS:-stages probe bench}
step() { case " $steps " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# 1. Stages.
if ! step stages; then
  echo "stages: not asked for (HCT_WGMMA_STEPS)"
elif [ -x "$tests/test_wgmma" ]; then
  t0=$(date +%s)
  # A wait that never completes ends its kernel after 4 s (wgmma.h), so
  # the limit is for what nothing else catches.
  if HCT_TEST_FILTER= timeout 1200 "$tests/test_wgmma" > "$tmp/stages.out" 2>&1; then
    ok "stages: R', xn, lo, mixed right at every point and T ($(( $(date +%s) - t0 )) s)"
  else
    bad "stages (the first wrong elements of each stage are below)"
  fi
  cat "$tmp/stages.out"
else
  bad "stages: $tests/test_wgmma not built (make tests)"
fi

# The Hopper variants the manifest has (wgmma_pb at least), then the
# others timed beside them.
names() {
  python3 -c '
import json, sys
names = [v["name"] for v in json.load(open(sys.argv[1]))["variants"]]
print(",".join([n for n in sys.argv[2].split(",") if n in names]))
' "$root/kernels-src/hc_read_prefill/manifest.json" "$1"
}
hopper=$(names wgmma_pu,wgmma_pb)
case ",$hopper," in *,wgmma_pb,*) ;; *) bad "the manifest has no variant wgmma_pb";; esac

# 2. The probe's verdict at T = 16, 100, 2048.
if step probe; then
t0=$(date +%s)
if "$bin/hctune" probe --device "$dev" --op hc_read_prefill --variants "$hopper" --tokens 16,100,2048 \
    --no-decide > "$tmp/probe.out" 2> "$tmp/probe.err"; then
  echo "probe finished in $(( $(date +%s) - t0 )) s"
else
  bad "probe exited $?: $(tail -5 "$tmp/probe.err")"
fi
cat "$tmp/probe.out"
"$bin/hctune" show --op hc_read_prefill --json > "$tmp/trials.json" 2>> "$tmp/probe.err"
"$bin/hctune" list --faults --json > "$tmp/faults.json" 2>> "$tmp/probe.err"
for v in $(echo "$hopper" | tr , ' '); do
python3 - "$tmp/trials.json" "$tmp/faults.json" "$v" <<'PY'
import json, sys
v = sys.argv[3]
trials = json.load(open(sys.argv[1]))
faults = [f for f in json.load(open(sys.argv[2])) if f.get("op") == "hc_read_prefill" and f.get("variant") == v]
need = {(t, p) for t in (16, 100, 2048) for p in (0, 1)}
passed, failed = set(), []
for tr in trials:
    if tr.get("kind") != "parity" or tr.get("variant") != v: continue
    key = (tr["tokens"], tr["pending"])
    if tr["status"] == "pass": passed.add(key)
    else: failed.append(tr)
for tr in failed[:6]:
    print(f"  {v} T={tr['tokens']} pending={tr['pending']} {json.dumps(tr.get('params'))}: {tr['status']}")
    print("   ", json.dumps({k: tr.get(k) for k in ("figures", "log", "reason") if tr.get(k)})[:1500])
for f in faults[:6]:
    print(f"  {v} quarantined {json.dumps(f.get('params'))}: {f.get('reason')}: {(f.get('log') or '')[:400]}")
missing = need - passed
if missing: print(f"  no passing trial of {v} at (T, pending):", sorted(missing))
sys.exit(1 if missing else 2 if failed or faults else 0)
PY
rc=$?
# 0: every point passed everywhere; 2: some point passes at every (T,
# pending) but others failed (a bug in those configurations); 1: not.
case $rc in
  0) ok "probe: $v passes its class at T=16, 100, 2048 with and without pending, every point" ;;
  2) ok "probe: $v passes its class at T=16, 100, 2048 with and without pending"
     bad "probe: some points of $v fail (above): those configurations are wrong" ;;
  *) bad "probe: $v not passing its class at every T (above)" ;;
esac
done
fi

# 3. Speed, cold, beside the other tensor-core variants where they exist.
vars=$(names wgmma_pu,wgmma_pb,pair_mma,upmix)
if ! step bench; then
  echo "bench: not asked for (HCT_WGMMA_STEPS)"
elif "$bin/hctune" bench --device "$dev" --op hc_read_prefill --variants "$vars" --tokens 2048,8192 \
    > "$tmp/bench.out" 2> "$tmp/bench.err"; then
  ok "bench of $vars at T = 2048, 8192"
else
  bad "bench exited $?: $(tail -5 "$tmp/bench.err")"
fi
cat "$tmp/bench.out" 2> /dev/null
grep "wgmma-time" "$tmp/stages.out" 2> /dev/null | sed 's/^/  hot, per launch: /'

echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
