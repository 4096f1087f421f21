#!/bin/sh
# GPU test of `hctune probe --device all` (issue 21) on whatever cards the
# machine has (one H200 is enough to run it; several show the overlap):
#   1. a probe of one card alone, in a fresh DB: the reference time;
#   2. `probe --device all` in another fresh DB: every card decided, one
#      compile for the host (each card's binaries all from the cache), the
#      agreement report printed, the time against 1.3x the single card's;
#   3. hctuned on that DB answers every card's UUID from its own decision
#      (source probe), and a card UUID it has never seen of the same model
#      (given with the model key) from the model's pooled decision (fleet);
#   4. hctune list shows the pooled rows beside the cards'.
# Skips, saying why, where there is no GPU.  Needs python3 to read JSON.
#   tests/gpu-multi.sh bin [TOKENS]      (TOKENS default 1-8)
bin=$(cd "${1:-bin}" && pwd)
tokens=${2:-1-8}
root=$(cd "$(dirname "$0")/.." && pwd)
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src"
tmp=$(mktemp -d /tmp/hctune-gpu-multi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }

if ! "$bin/hctune" devices --json > "$tmp/devices.json" 2> "$tmp/devices.err"; then
  echo "gpu-multi: skipped: $(cat "$tmp/devices.err")"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
command -v python3 > /dev/null || { echo "gpu-multi: needs python3 to read results"; exit 1; }
ncards=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$tmp/devices.json")
echo "gpu-multi: $ncards card(s)"

# 1. One card alone, fresh DB (its own compile included, as a user meets it).
t0=$(date +%s.%N)
"$bin/hctune" probe --device 0 --tokens "$tokens" --db "$tmp/single.db" > "$tmp/single.out" 2> "$tmp/single.err" \
  && ok "single-card probe" || bad "single-card probe: $(tail -2 "$tmp/single.err")"
t1=$(date +%s.%N)
single=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
echo "single card: $single s"

# 2. Every card at once, fresh DB.
t0=$(date +%s.%N)
"$bin/hctune" probe --device all --tokens "$tokens" --db "$tmp/multi.db" > "$tmp/multi.out" 2> "$tmp/multi.err"
st=$?
t1=$(date +%s.%N)
multi=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
cat "$tmp/multi.out"
echo "--- progress (first lines of each card):"; grep -m 12 '\[card' "$tmp/multi.err"
[ $st -eq 0 ] && ok "probe --device all: every card decided" || bad "probe --device all: status $st: $(tail -2 "$tmp/multi.err")"
grep -q '^agreement: ' "$tmp/multi.out" && ok "agreement report printed" || bad "no agreement report"
echo "all $ncards card(s): $multi s against one card alone: $single s"
python3 -c "import sys; sys.exit(0 if $multi <= 1.3 * $single else 1)" \
  && ok "probe --device all within 1.3x of one card ($multi s <= 1.3 x $single s)" \
  || bad "probe --device all took $multi s, more than 1.3x one card's $single s"

# Each card's probe found every binary in the host's compile cache.
"$bin/hctune" probe --device all --tokens "$tokens" --db "$tmp/multi.db" --json > "$tmp/multi2.json" 2> "$tmp/multi2.err"
python3 - "$tmp/multi2.json" "$ncards" <<'PY' && ok "second run, --json: every card's binaries from the cache, events per card, one multi_result" || bad "--json run"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
n = int(sys.argv[2])
comp = [e for e in ev if e.get("event") == "compiled"]
res = [e for e in ev if e.get("event") == "multi_result"]
if len(comp) != n or any(c["cache_hits"] != c["binaries"] for c in comp): print("compiled:", comp); sys.exit(1)
if len(res) != 1 or len(res[0]["cards"]) != n or any(c.get("error") for c in res[0]["cards"]): print(res); sys.exit(1)
if {e.get("card") for e in ev if e.get("event") == "result"} != set(range(n)): print("results per card missing"); sys.exit(1)
cards = res[0]["cards"]
print("cards' intervals (s):", [(c["card"], round(c["start_s"], 1), round(c["end_s"], 1)) for c in cards])
PY

# 3. The daemon answers every card, and an unseen card of the same model.
sock="$tmp/hctune.sock"
"$bin/hctuned" --socket "$sock" --db "$tmp/multi.db" > "$tmp/daemon.log" 2>&1 &
dpid=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -S "$sock" ] && break; sleep 0.2; done
python3 - "$tmp/devices.json" > "$tmp/uuids" <<'PY'
import json, sys
for d in json.load(open(sys.argv[1])): print(d["uuid"], d.get("model_key", ""))
PY
allok=1
while read -r uuid model; do
  "$bin/hctune" query --socket "$sock" --op hc_read --tokens "$tokens" --device "$uuid" --timeout 1000 --json > "$tmp/q.json" 2>&1
  python3 - "$tmp/q.json" probe <<'PY' || allok=0
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
if not a or any(x["source"] != sys.argv[2] for x in a): print(a[:2]); sys.exit(1)
PY
  echo "$uuid: $(head -1 "$tmp/q.json" | cut -c1-160)"
  last_model=$model
done < "$tmp/uuids"
[ $allok -eq 1 ] && ok "hctune query answers every card's UUID (source probe)" || bad "query of a card"
"$bin/hctune" query --socket "$sock" --op hc_read --tokens 1 --device "$last_model" --timeout 1000 --json > "$tmp/qm.json" 2>&1
cat "$tmp/qm.json"
python3 - "$tmp/qm.json" <<'PY' && ok "a card of the model the DB has not seen: the pooled decision (source fleet, device pooled-...)" || bad "pooled answer"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
if not a or a[0]["source"] != "fleet": print(a); sys.exit(1)
PY
kill "$dpid" 2> /dev/null; wait "$dpid" 2> /dev/null

# 4. list: pooled rows beside the cards'.
"$bin/hctune" list --db "$tmp/multi.db" > "$tmp/list.out" 2>&1
cat "$tmp/list.out"
grep -q '^pooled (' "$tmp/list.out" && ok "hctune list shows the pooled rows" || bad "no pooled rows in hctune list"

echo "gpu-multi: $pass passed, $fail failed"
[ $fail -eq 0 ]
