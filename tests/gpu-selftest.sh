#!/bin/sh
# The self-test op on a real GPU (issue 4, fault isolation; issue 20, the
# checks an engine's use needs): a probe of tests/kernels-src/selftest must
# survive every broken variant, record each with its reason and the check
# that caught it, choose the correct one and never a wrong one, and skip
# the quarantined ones the next time.  Called by tests/gpu-check.sh with the bin folder and a
# scratch folder (HCTUNE_DB and HCTUNE_KERNELS set by it).
#   tests/gpu-selftest.sh bin /tmp/x
bin=$1
tmp=$2
export HCTUNE_DB="$tmp/selftest.db"
rm -f "$HCTUNE_DB"
fail=0
bad() { fail=1; echo "FAILED: selftest: $*"; }

# 1. The probe completes (exit 0) although variants fail to compile,
# fault, hang, differ by a bit, leave an element unwritten, keep state
# between runs, are wrong on some sets, race, or read their input before
# the PDL wait.  --verify-all: every timed candidate's timed launches are
# verified, not only the winners', so each wrong one shows its reason.
t0=$(date +%s)
if "$bin/hctune" probe --op selftest --tokens 1-4 --verify-all > "$tmp/st1.out" 2> "$tmp/st1.err"; then
  echo "selftest probe finished in $(( $(date +%s) - t0 )) s"
else
  bad "probe exited $?: $(tail -5 "$tmp/st1.err")"
fi
cat "$tmp/st1.out"

# 2. Each broken variant is quarantined with its reason; good is not.
"$bin/hctune" list --faults --json > "$tmp/st_faults.json" 2>> "$tmp/st.err"
python3 - "$tmp/st_faults.json" <<'PY' || bad "fault reasons (see above)"
import json, sys
faults = [f for f in json.load(open(sys.argv[1])) if f["op"] == "selftest"]
by = {}
for f in faults:
    by.setdefault(f["variant"], []).append(f)
want = {"nocompile": "compile", "oob": "fault", "hang": "hang", "onebit": "parity",
        "unwritten": "unwritten", "barrier": "timeout",
        # issue 20: state kept between runs (caught on the third run of one
        # allocation), state that turns wrong only while timed, right only
        # on the first set seen, a race, reading x before the PDL wait.
        "firstruns": "repeat", "firstruns16": "timed", "wrongset": "timed",
        "racy": "nondeterminism", "early": "producer",
        # computes only where its output holds the poison: right on every
        # check (outputs poisoned first), wrong in its timed launches, whose
        # outputs the verification prefills with finite values
        "skipwritten": "timed"}
ok = True
for v, reason in want.items():
    got = [f["reason"] for f in by.get(v, [])]
    if reason not in got:
        print(f"{v}: want reason {reason}, got {got}"); ok = False
for v in ("base", "good"):
    if v in by:
        print(f"{v}: quarantined although correct: {by[v]}"); ok = False
# Each of issue 20's variants is caught by its own check only.
for v in ("firstruns", "firstruns16", "wrongset", "racy", "early", "skipwritten"):
    others = [f["reason"] for f in by.get(v, []) if f["reason"] != want[v]]
    if others:
        print(f"{v}: also quarantined for {others}, want {want[v]} only"); ok = False
# onebit differs at T = 3 only: its log must say so.
for f in by.get("onebit", []):
    if f["reason"] == "parity" and "T=3" not in (f.get("log") or ""):
        print("onebit: the log does not name T=3:", f.get("log")); ok = False
# The barrier timed out from T = 3: recorded at 3, holding for 3 and up.
for f in by.get("barrier", []):
    if f["reason"] == "timeout" and f["tokens"] != 3:
        print("barrier: timeout recorded at T =", f["tokens"], "want 3"); ok = False
# A fault's "tokens" is its reach, as hctune list --faults shows it (0:
# every T; a timeout: its T and up), not where it happened: the log says
# that ("at T=N: ..."), as the failing trial does (hctune show).
for f in faults:
    reach = "all" if f["tokens"] == 0 else f"{f['tokens']}+" if f["reason"] == "timeout" else str(f["tokens"])
    print(f"  {f['variant']:11} {f['reason']:14} holds for T={reach:4} {(f.get('log') or '')[:100]}")
sys.exit(0 if ok else 1)
PY

# 3. good is chosen at every T (bitwise) in both classes and nothing wrong
# ever is; barrier passed at T = 1, 2; each issue-20 variant's trial names
# the check that caught it (hctune show's kind).
"$bin/hctune" list --json > "$tmp/st_list.json" 2>> "$tmp/st.err"
"$bin/hctune" show --op selftest --json > "$tmp/st_trials.json" 2>> "$tmp/st.err"
python3 - "$tmp/st_list.json" "$tmp/st_trials.json" <<'PY' || bad "decisions (see above)"
import json, sys
alldec = [d for d in json.load(open(sys.argv[1])) if d["op"] == "selftest"]
dec = [d for d in alldec if d["parity"] == "bitwise"]
chosen = {}
for d in dec:
    for T in range(d["tmin"], d["tmax"] + 1):
        chosen[T] = d["variant"]
ok = True
for T in range(1, 5):
    if chosen.get(T) != "good":
        print(f"T={T}: chosen {chosen.get(T)}, want good"); ok = False
for d in alldec:
    if d["variant"] not in ("good", "base"):
        print(f"{d['parity']} T={d['tmin']}-{d['tmax']}: {d['variant']} chosen, a wrong variant"); ok = False
    print(f"  decided {d['parity']:8} T={d['tmin']}-{d['tmax']}: {d['variant']}")
trials = json.load(open(sys.argv[2]))
caught = {"firstruns": ("repeat", "repeat"), "firstruns16": ("timed", "timed"),
          "wrongset": ("timed", "timed"), "racy": ("determinism", "nondeterminism"),
          "early": ("producer", "producer"), "skipwritten": ("timed", "timed")}
for v, (kind, status) in caught.items():
    got = [(t["kind"], t["status"]) for t in trials if t["variant"] == v and t["status"] != "pass"]
    if (kind, status) not in got:
        print(f"{v}: no trial of kind {kind} with status {status}: {got}"); ok = False
    else:
        log = next(t.get("log") or "" for t in trials
                   if t["variant"] == v and (t["kind"], t["status"]) == (kind, status))
        print(f"  {v:12} caught by the {kind} check: {log[:110]}")
# good went through every check: its passing trials list them.
checks = set()
for t in trials:
    if t["variant"] == "good" and t.get("kind") == "parity" and t.get("status") == "pass":
        checks |= set((t.get("figures") or {}).get("checks") or [])
for c in ("parity", "repeat", "determinism"):
    if c not in checks:
        print(f"good: no passing trial lists the {c} check ({sorted(checks)})"); ok = False
passed = {(t["variant"], t["tokens"]) for t in trials
          if t.get("kind") == "parity" and t.get("status") == "pass"}
for T in (1, 2):
    if ("barrier", T) not in passed:
        print(f"barrier: no passing parity trial at T={T}"); ok = False
# onebit is right at T = 1 and 2: it fails at T = 3 only.
for T in (1, 2):
    if ("onebit", T) not in passed:
        print(f"onebit: no passing parity trial at T={T}"); ok = False
sys.exit(0 if ok else 1)
PY

# 4. A second probe skips the quarantined candidates: it completes and
# records no new fault of a run (nothing broken ran on the GPU again).
# Compile faults are left out of the count: compiling is on the CPU, and
# the probe compiles before it looks at the quarantine.
nfaults() {
  "$bin/hctune" list --faults --json 2>/dev/null |
    python3 -c 'import json,sys; print(len([f for f in json.load(sys.stdin) if f["op"] == "selftest" and f["reason"] != "compile"]))'
}
n1=$(nfaults)
t0=$(date +%s)
if "$bin/hctune" probe --op selftest --tokens 1-4 --verify-all > "$tmp/st2.out" 2> "$tmp/st2.err"; then
  echo "second selftest probe finished in $(( $(date +%s) - t0 )) s"
  grep -q "quarantined" "$tmp/st2.err" || bad "second probe: no candidate reported as quarantined"
else
  bad "second probe exited $?: $(tail -5 "$tmp/st2.err")"
fi
n2=$(nfaults)
[ "$n1" = "$n2" ] || bad "second probe recorded new faults ($n1 before, $n2 after): quarantine not applied"

# 5. --retry-quarantined runs them again: the probe completes, and the
# broken variants fail again (new faults).
if ! "$bin/hctune" probe --op selftest --tokens 1-4 --retry-quarantined --verify-all > "$tmp/st3.out" 2> "$tmp/st3.err"; then
  bad "probe --retry-quarantined exited $?: $(tail -5 "$tmp/st3.err")"
fi
n3=$(nfaults)
[ "$n3" -gt "$n2" ] || bad "--retry-quarantined recorded no new fault ($n2 before, $n3 after)"

# 6. The database survived the faults.
python3 - "$HCTUNE_DB" <<'PY' || bad "integrity_check"
import sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0]
print("integrity_check:", r)
sys.exit(0 if r == "ok" else 1)
PY
# 7. verify-decisions re-checks a chosen variant with every check: with the
# bitwise decisions made to name wrongset (right only on the first buffers
# it sees), it must fail, saying the timed check caught it; with good back,
# it passes.
python3 - "$HCTUNE_DB" wrongset <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE decisions SET variant = ? WHERE op = 'selftest' AND parity = 'bitwise'", (sys.argv[2],))
db.commit()
PY
"$bin/hctune" verify-decisions --op selftest > "$tmp/vd1.out" 2> "$tmp/vd1.err"
st=$?
cat "$tmp/vd1.out"
[ $st -eq 1 ] || bad "verify-decisions of a wrong chosen variant exited $st, want 1"
grep -q "wrongset .*REJECTED by the timed check" "$tmp/vd1.out" || bad "verify-decisions did not say the timed check rejected wrongset"
python3 - "$HCTUNE_DB" good <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE decisions SET variant = ? WHERE op = 'selftest' AND parity = 'bitwise'", (sys.argv[2],))
db.commit()
PY
if "$bin/hctune" verify-decisions --op selftest --limit 1.5 > "$tmp/vd2.out" 2> "$tmp/vd2.err"; then
  grep -q "every chosen variant passes every check" "$tmp/vd2.out" || bad "verify-decisions of good: no 'passes every check' line"
else
  st=$?
  cat "$tmp/vd2.out"
  bad "verify-decisions of good exited $st (its output above): $(tail -3 "$tmp/vd2.err")"
fi
[ $fail -eq 0 ] && echo "selftest: every broken variant caught by its check, none chosen"
exit $fail
