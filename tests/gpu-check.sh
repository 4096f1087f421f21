#!/bin/sh
# GPU tests: a real probe of hc_read end to end, the compile cache, a
# deliberately wrong variant rejected, and the self-test op's faults.
# Skips, saying why, where there is no GPU.  Needs python3 to read JSON.
#   tests/gpu-check.sh bin
bin=$(cd "${1:-bin}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
export HCTUNE_KERNELS="$root/kernels-src"
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

# 4. A second probe compiles nothing: every binary from the cache.
"$bin/hctune" probe --tokens 1-8 > "$tmp/probe2.out" 2> "$tmp/probe2.err"
line=$(grep "compiled" "$tmp/probe2.err")
echo "$line"
n=$(echo "$line" | sed -n 's/.*compiled \([0-9]*\) binaries.*/\1/p')
h=$(echo "$line" | sed -n 's/.*(\([0-9]*\) from the cache.*/\1/p')
[ -n "$n" ] && [ "$n" = "$h" ] && ok "second probe: $h of $n binaries from the cache" || bad "compile cache: $line"

# 5. A deliberately wrong variant is rejected for parity.
if [ -d "$HCTUNE_KERNELS/hc_read_wrongtest" ]; then
  "$bin/hctune" probe --op hc_read_wrongtest --tokens 1-2 > "$tmp/wrong.out" 2> "$tmp/wrong.err"
  "$bin/hctune" list --faults --json > "$tmp/faults.json" 2>> "$tmp/err"
  python3 - "$tmp/faults.json" <<'PY' && ok "wrong variant rejected for parity" || bad "wrong variant not rejected"
import json, sys
f = json.load(open(sys.argv[1]))
hit = [x for x in f if x["op"] == "hc_read_wrongtest" and x["reason"] == "parity"]
if not hit: print(f); sys.exit(1)
PY
else
  bad "kernels-src/hc_read_wrongtest is missing"
fi

# 6. The self-test op: each broken variant rejected with its reason.
if [ -d "$HCTUNE_KERNELS/selftest" ] && [ -x "$root/tests/gpu-selftest.sh" ]; then
  if "$root/tests/gpu-selftest.sh" "$bin" "$tmp"; then ok "selftest op"; else bad "selftest op"; fi
fi

echo "gpu-check: $pass passed, $fail failed"
[ $fail -eq 0 ]
