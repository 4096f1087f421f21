#!/bin/sh
# GPU tests: a real probe of hc_read end to end, the compile cache, a
# deliberately wrong variant rejected, and the self-test op's faults.
# Skips, saying why, where there is no GPU.  Needs python3 to read JSON.
#   tests/gpu-check.sh bin
bin=$(cd "${1:-bin}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src"
tmp=$(mktemp -d /tmp/hctune-gpu-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export HCTUNE_DB="$tmp/gpu.db"
pass=0 fail=0

ok()   { pass=$((pass + 1)); echo "ok: $*"; }
bad()  { fail=$((fail + 1)); echo "FAILED: $*"; }

if ! "$bin/hctune" devices > "$tmp/devices" 2> "$tmp/devices.err"; then
  echo "gpu-check: skipped: $(cat "$tmp/devices.err")"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
cat "$tmp/devices"
command -v python3 > /dev/null || { echo "gpu-check: needs python3 to read results"; exit 1; }

# 1. A probe of the decode op, T = 1..8, end to end.
if "$bin/hctune" probe --tokens 1-8 > "$tmp/probe1.out" 2> "$tmp/probe1.err"; then
  ok "probe finished"; cat "$tmp/probe1.out"
else
  bad "probe: $(tail -3 "$tmp/probe1.err")"
fi

# 2. Every bitwise/baseline parity trial of v1, v2, v3 passed at every T with
# and without pending, and each was compared (figures recorded).
"$bin/hctune" show --op hc_read --json > "$tmp/trials.json" 2>> "$tmp/err"
python3 - "$tmp/trials.json" <<'PY' && ok "parity trials: v1, v2, v3 pass at T=1..8 with and without pending" || bad "parity trials"
import json, sys
trials = json.load(open(sys.argv[1]))
need = {(v, t, p) for v in ("v1", "v2", "v3") for t in range(1, 9) for p in (0, 1)}
seen = set()
for tr in trials:
    if tr.get("kind") != "parity": continue
    key = (tr["variant"], tr["tokens"], tr["pending"])
    if key[0] in ("v1", "v2", "v3"):
        if tr["status"] != "pass":
            print("not passed:", key, tr["status"], tr.get("figures")); sys.exit(1)
        figs = tr.get("figures") or {}
        if isinstance(figs, str): figs = json.loads(figs)
        if "mixed" not in figs: print("no figures for", key); sys.exit(1)
        if key[0] != "v1" and figs["mixed"]["mismatches"] != 0: print("mismatch", key); sys.exit(1)
        seen.add(key)
missing = need - seen
if missing: print("missing:", sorted(missing)[:10]); sys.exit(1)
PY

# 3. list shows the same winners as the probe printed.
"$bin/hctune" list --json > "$tmp/list.json" 2>> "$tmp/err"
python3 - "$tmp/list.json" <<'PY' && ok "list: a bitwise decision covers T=1..8" || bad "list"
import json, sys
d = json.load(open(sys.argv[1]))
covered = set()
for x in d:
    if x["op"] == "hc_read" and x["parity"] == "bitwise":
        covered |= set(range(x["tmin"], x["tmax"] + 1))
if not set(range(1, 9)) <= covered: print("covered:", covered); sys.exit(1)
PY

# 3b. Issue 20: every decision is verified after timing (a passing "timed"
# trial of its variant and point at each T it covers, the baseline aside),
# carries a software key and is not stale; no hc_read variant was caught by
# the checks of an engine's use (repeat, determinism, producer, timed): that
# would be a real variant wrong as an engine runs it.
"$bin/hctune" list --faults --json > "$tmp/faults1.json" 2>> "$tmp/err"
python3 - "$tmp/list.json" "$tmp/trials.json" "$tmp/faults1.json" <<'PY' && ok "decisions verified after timing, keyed, current" || bad "decisions not verified after timing (see above)"
import json, sys
dec = [d for d in json.load(open(sys.argv[1])) if d["op"] == "hc_read"]
trials = json.load(open(sys.argv[2]))
timed = {(t["variant"], json.dumps(t["params"], sort_keys=True), t["tokens"]) for t in trials
         if t.get("kind") == "timed" and t.get("status") == "pass"}
ok = True
for d in dec:
    print(f"  {d['parity']:8} T={d['tmin']}-{d['tmax']}: {d['variant']} {json.dumps(d['params'])}"
          f" ({d['median_us']:.2f} us, baseline {d['baseline_us']:.2f})")
    if len(d.get("software_key") or "") != 32: print("   no software key"); ok = False
    if d.get("stale"): print("   stale:", d.get("stale_reason")); ok = False
    if d["variant_class"] == "baseline": continue
    for T in range(d["tmin"], d["tmax"] + 1):
        if (d["variant"], json.dumps(d["params"], sort_keys=True), T) not in timed:
            print(f"   T={T}: no passing timed trial (not verified after timing)"); ok = False
new = [f for f in json.load(open(sys.argv[3])) if f["op"] == "hc_read"
       and f["reason"] in ("repeat", "nondeterminism", "producer", "timed")]
for f in new:
    print(f"  caught: {f['variant']} {json.dumps(f['params'])}: {f['reason']}: {(f.get('log') or '')[:160]}")
    ok = False
sys.exit(0 if ok else 1)
PY

# 3c. verify-decisions re-checks every chosen variant with every check.
if "$bin/hctune" verify-decisions --op hc_read > "$tmp/vd.out" 2> "$tmp/vd.err"; then
  ok "verify-decisions: every chosen variant passes every check"; tail -1 "$tmp/vd.out"
else
  bad "verify-decisions exited $?: $(grep -E 'REJECTED|OVER|not timed' "$tmp/vd.out" | head -5) $(tail -2 "$tmp/vd.err")"
fi

# 4. A second probe compiles nothing: every binary from the cache.
"$bin/hctune" probe --tokens 1-8 > "$tmp/probe2.out" 2> "$tmp/probe2.err"
line=$(grep "compiled" "$tmp/probe2.err")
echo "$line"
n=$(echo "$line" | sed -n 's/.*compiled \([0-9]*\) binaries.*/\1/p')
h=$(echo "$line" | sed -n 's/.*(\([0-9]*\) from the cache.*/\1/p')
[ -n "$n" ] && [ "$n" = "$h" ] && ok "second probe: $h of $n binaries from the cache" || bad "compile cache: $line"

# 4b. Issue 20: with nothing changed since, probe --stale finds every
# decision current and probes nothing.
if "$bin/hctune" probe --tokens 1-8 --stale > "$tmp/stale.out" 2> "$tmp/stale.err" &&
   grep -q "every decision is current; nothing to probe" "$tmp/stale.out"; then
  ok "probe --stale: nothing stale"
else
  bad "probe --stale: $(cat "$tmp/stale.out" "$tmp/stale.err" | tail -5)"
fi

# 4c. Issue 29: the probe's checks make their figures on the card; the same
# probe with the host's figures (HCTUNE_CHECK_ON_HOST=1), both from one
# seed (HCTUNE_PROBE_SEED) into databases of their own, must record the same
# figures for every parity trial both ran on the same inputs: counts and
# indices equal, errors to 1e-12 relative, KL to 1e-6 (the device's expm1).
for side in card host; do
  if [ $side = host ]; then export HCTUNE_CHECK_ON_HOST=1; fi
  HCTUNE_PROBE_SEED=29 HCTUNE_DB="$tmp/$side.db" "$bin/hctune" probe --tokens 1-8 \
    > "$tmp/probe_$side.out" 2> "$tmp/probe_$side.err" || bad "probe with the figures on the $side: $(tail -2 "$tmp/probe_$side.err")"
  unset HCTUNE_CHECK_ON_HOST
  HCTUNE_DB="$tmp/$side.db" "$bin/hctune" show --op hc_read --json > "$tmp/trials_$side.json" 2>> "$tmp/err"
done
python3 - "$tmp/trials_card.json" "$tmp/trials_host.json" <<'PY' && ok "figures on the card equal the host's" || bad "figures on the card differ from the host's"
import json, math, sys
def trials(path):
    out = {}
    for tr in json.load(open(path)):
        if tr.get("kind") != "parity" or not tr.get("figures"): continue
        figs = tr["figures"]
        if isinstance(figs, str): figs = json.loads(figs)
        out[(tr["variant"], json.dumps(tr.get("params")), tr["tokens"], tr["pending"], str(tr.get("seed")))] = figs
    return out
card, host = trials(sys.argv[1]), trials(sys.argv[2])
both = sorted(set(card) & set(host))
if len(both) < 20: print("only", len(both), "trials in both probes"); sys.exit(1)
def num(v):
    return float("inf") if v in ("inf", None) else float("-inf") if v == "-inf" else float("nan") if v == "nan" else float(v)
bad = 0
for key in both:
    for buf, h in host[key].items():
        c = card[key].get(buf)
        if not isinstance(h, dict): continue
        if c is None: print(key, buf, "missing on the card"); bad += 1; continue
        for f, hv in h.items():
            cv = c.get(f)
            if isinstance(hv, (int, list)) and not isinstance(hv, bool) and f not in ("rel_err", "max_err_ratio", "kl_mean", "kl_max", "argmax_agree"):
                if hv != cv: print(key, buf, f, "host", hv, "card", cv); bad += 1
                continue
            a, b = num(hv), num(cv)
            if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
                if not (a == b or (math.isnan(a) and math.isnan(b))): print(key, buf, f, hv, cv); bad += 1
                continue
            tol = max(1e-6 * abs(a), 1e-18) if f.startswith("kl") else 1e-12 * abs(a)
            if abs(a - b) > tol: print(key, buf, f, "host", hv, "card", cv); bad += 1
print(len(both), "trials compared,", bad, "differences")
sys.exit(1 if bad else 0)
PY

# 5. A deliberately wrong variant is rejected for parity.
if [ -d "$root/tests/kernels-src/hc_read_wrongtest" ]; then
  "$bin/hctune" probe --op hc_read_wrongtest --tokens 1-2 > "$tmp/wrong.out" 2> "$tmp/wrong.err"
  "$bin/hctune" list --faults --json > "$tmp/faults.json" 2>> "$tmp/err"
  python3 - "$tmp/faults.json" <<'PY' && ok "wrong variant rejected for parity" || bad "wrong variant not rejected"
import json, sys
f = json.load(open(sys.argv[1]))
hit = [x for x in f if x["op"] == "hc_read_wrongtest" and x["reason"] == "parity"]
if not hit: print(f); sys.exit(1)
PY
else
  bad "tests/kernels-src/hc_read_wrongtest is missing"
fi

# 6. The self-test op: each broken variant rejected with its reason.
if [ -d "$root/tests/kernels-src/selftest" ] && [ -x "$root/tests/gpu-selftest.sh" ]; then
  if "$root/tests/gpu-selftest.sh" "$bin" "$tmp"; then ok "selftest op"; else bad "selftest op"; fi
fi

# 7. A probe killed 20 times at random moments leaves a database that passes
# its integrity check and still holds every trial committed before each kill.
export HCTUNE_DB="$tmp/kill.db"
prev="" killed=0
for i in $(seq 1 20); do
  "$bin/hctune" probe --tokens 1-3 --variants v2,tg --quiet > /dev/null 2>&1 &
  pid=$!
  sleep "$(awk -v s="$i$$" 'BEGIN { srand(s); printf "%.2f", 0.2 + rand() * 4 }')"
  kill -9 "$pid" 2> /dev/null && killed=$((killed + 1))
  wait "$pid" 2> /dev/null
  python3 - "$HCTUNE_DB" "$tmp/uids.$i" "$prev" <<'PY' || { bad "kill $i: database damaged or trials lost"; break; }
import os, sqlite3, sys
db, out, prev = sys.argv[1], sys.argv[2], sys.argv[3]
if not os.path.exists(db): open(out, "w").close(); sys.exit(0)
c = sqlite3.connect(db)
ok = c.execute("pragma integrity_check").fetchone()[0]
if ok != "ok": print("integrity_check:", ok); sys.exit(1)
uids = {r[0] for r in c.execute("select uid from trials")}
if prev:
    lost = set(open(prev).read().split()) - uids
    if lost: print(len(lost), "committed trials lost"); sys.exit(1)
open(out, "w").write("\n".join(sorted(uids)))
PY
  prev="$tmp/uids.$i"
done
[ $i -eq 20 ] && ok "20 kills ($killed while running): integrity ok, $(wc -l < "$prev") trials, none lost"

# 8. A probe through the daemon; then the library answers with its winners.
export HCTUNE_DB="$tmp/daemon.db"
sock="$tmp/hctune.sock"
"$bin/hctuned" --socket "$sock" --db "$HCTUNE_DB" > "$tmp/daemon.log" 2>&1 &
dpid=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -S "$sock" ] && break; sleep 0.2; done
"$bin/hctune" query --socket "$sock" --timeout 600000 \
  --raw '{"cmd":"probe","device":"0","op":"hc_read","tokens":"1-8"}' > "$tmp/dprobe.out" 2>&1
tail -1 "$tmp/dprobe.out" | cut -c1-300
sleep 1
"$bin/hctune" query --socket "$sock" --op hc_read --tokens 1-8 --timeout 1000 --json > "$tmp/dquery.json" 2>&1
"$bin/hctune" list --json > "$tmp/dlist.json" 2>> "$tmp/err"
cat "$tmp/dquery.json"
python3 - "$tmp/dquery.json" "$tmp/dlist.json" <<'PY' && ok "daemon: query T=1..8 gives the probe's winners, source probe" || bad "daemon query"
import json, sys
answers = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
dec = [d for d in json.load(open(sys.argv[2])) if d["op"] == "hc_read" and d["parity"] == "bitwise"]
if len(answers) != 8: print("answers:", len(answers)); sys.exit(1)
for a in answers:
    t = a["tokens"]
    d = [x for x in dec if x["tmin"] <= t <= x["tmax"]]
    if not d: print("no decision at", t); sys.exit(1)
    if a["source"] != "probe" or a["variant"] != d[0]["variant"]:
        print("T", t, a, "decision", d[0]["variant"]); sys.exit(1)
PY
kill "$dpid" 2> /dev/null; wait "$dpid" 2> /dev/null
head -5 "$tmp/daemon.log"

echo "gpu-check: $pass passed, $fail failed"
[ $fail -eq 0 ]
