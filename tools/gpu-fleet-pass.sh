#!/bin/sh
# Issue 17's run on a GPU machine, with a STATIC=1 build carried there:
#   tools/gpu-fleet-pass.sh OUTDIR [--tokens LIST]
# A full probe of this card into a fresh DB (timed, cold compile cache);
# its export; a second identical card synthesized from that export (new
# trial ids, another UUID and host); the two merged; a fresh daemon with
# --fleet-db and an empty local DB answering this card (one it has not
# seen) and a made-up card of the same model; then `probe --verify-fleet`
# into another fresh DB, timed against the full probe.  Logs to OUTDIR,
# a summary last.  Needs python3 (its sqlite3 module) for the synthesis.
out=${1:?usage: tools/gpu-fleet-pass.sh OUTDIR [--tokens LIST]}
shift
tokens=1-8
[ "$1" = --tokens ] && tokens=$2
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src"
mkdir -p "$out"
t=$(mktemp -d /tmp/hctune-fleet.XXXXXX)
trap 'kill $dpid 2>/dev/null; rm -rf "$t"' EXIT
now() { date +%s.%N; }

t0=$(now)
HCTUNE_DB="$t/a.db" bin/hctune probe --tokens "$tokens" --quiet > "$out/probe.txt" 2>&1
rc_probe=$?
t1=$(now)
bin/hctune db export --db "$t/a.db" "$t/a.fleet" > "$out/export.txt" 2>&1
rc_export=$?
uuid=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select uuid from devices limit 1').fetchone()[0])" "$t/a.db")
model=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select model_key from devices limit 1').fetchone()[0])" "$t/a.db")

# The second card: the same model, its own trial ids, no decisions (the
# merge recomputes them from the pooled trials).
cp "$t/a.fleet" "$t/b.fleet"
python3 - "$t/b.fleet" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
synth = "GPU-5e7e0000-0000-4000-8000-00000000f1ee"
cols = {r[1] for r in db.execute("pragma table_info(trials)")}
db.execute("update trials set uid = lower(hex(randomblob(16))), uuid = ?, host = 'h200-synth'", (synth,))
db.execute("update devices set uuid = ?, host = 'h200-synth'", (synth,))
for t in ("faults",):
    if db.execute("select count(*) from sqlite_schema where name = ?", (t,)).fetchone()[0]:
        tc = {r[1] for r in db.execute(f"pragma table_info({t})")}
        if "uuid" in tc: db.execute(f"update {t} set uuid = ?", (synth,))
        if "uid" in tc: db.execute(f"update {t} set uid = lower(hex(randomblob(16)))")
        if "host" in tc: db.execute(f"update {t} set host = 'h200-synth'")
db.execute("delete from decisions")
db.commit()
PY
bin/hctune db merge "$t/fleet.fleet" "$t/a.fleet" "$t/b.fleet" > "$out/merge.txt" 2>&1
rc_merge=$?

bin/hctuned --db "$t/local.db" --fleet-db "$t/fleet.fleet" --socket "$t/s.sock" > "$out/daemon.log" 2>&1 &
dpid=$!
for i in $(seq 1 100); do [ -S "$t/s.sock" ] && break; sleep 0.1; done
{
  echo "== this card ($uuid), unseen by the daemon's local DB"
  for p in bitwise kl; do
    HCTUNE_SOCKET="$t/s.sock" bin/hctune query --op hc_read --tokens "$tokens" --device "$uuid" --parity $p --timeout 2000 --json
  done
  echo "== a card of the same model the daemon has never seen (model key given)"
  HCTUNE_SOCKET="$t/s.sock" bin/hctune query --op hc_read --tokens "$tokens" --device "$model" --timeout 2000 --json
} > "$out/query.txt" 2>&1
kill $dpid 2>/dev/null; wait $dpid 2>/dev/null

t2=$(now)
HCTUNE_DB="$t/v.db" bin/hctune probe --verify-fleet --fleet-db "$t/fleet.fleet" --tokens "$tokens" > "$out/verify.txt" 2>&1
rc_verify=$?
t3=$(now)
HCTUNE_DB="$t/v.db" bin/hctune list > "$out/verify-list.txt" 2>&1

{
  echo "card $uuid, model $model"
  echo "full probe (cold): exit $rc_probe, $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"
  echo "export: exit $rc_export; merge: exit $rc_merge"
  tail -5 "$out/merge.txt"
  echo "== answers (variant, source) from --fleet-db"
  python3 - "$out/query.txt" "$t/a.db" <<'PY'
import json, sqlite3, sys
# What the card's own probe decided, to compare the fleet's answers with.
want = {}
for p, lo, hi, v in sqlite3.connect(sys.argv[2]).execute("select parity, tmin, tmax, variant from decisions"):
    for T in range(lo, hi + 1): want[(p, T)] = v
total = fleet = same = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"): print(line); continue
    a = json.loads(line)
    T, v, cls, src = a.get("tokens"), a.get("variant"), a.get("class"), a.get("source")
    total += 1; fleet += src == "fleet"
    hit = v in (want.get(("bitwise", T)), want.get(("kl", T)))
    same += hit
    print(f"  T={T} {v} ({cls}) source={src}{'' if hit else '  (not this card probe winner)'}")
print(f"{fleet} of {total} answers from the fleet, {same} the variant this card's probe chose")
PY
  echo "verify-fleet: exit $rc_verify, $(awk "BEGIN{printf \"%.2f\", $t3 - $t2}") s" \
       "($(awk "BEGIN{printf \"%.2f\", ($t3 - $t2) / ($t1 - $t0)}") of the full probe)"
  tail -15 "$out/verify.txt"
  cat "$out/verify-list.txt"
} > "$out/summary.txt" 2>&1
cat "$out/summary.txt"
