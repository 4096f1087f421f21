#!/bin/sh
# The engine's side on a GPU: bin/hc_engine and examples/torch_engine.py
# against a daemon this script starts on a temporary socket, after a probe
# into a temporary database; then hc_engine without a daemon (the baseline
# compiled by the library).  Skips, saying why, without a GPU (or, for the
# PyTorch engine, without torch).
#   tests/gpu-engine.sh bin
bin=$(cd "${1:-bin}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src"
tmp=$(mktemp -d /tmp/hctune-gpu-engine.XXXXXX)
daemon=""
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$tmp"' EXIT
export HCTUNE_DB="$tmp/engine.db"
sock="$tmp/hctune.sock"
pass=0 fail=0 skip=0
ok()   { pass=$((pass + 1)); echo "ok: $*"; }
bad()  { fail=$((fail + 1)); echo "FAILED: $*"; }

if ! "$bin/hctune" devices > "$tmp/devices" 2> "$tmp/devices.err"; then
  echo "gpu-engine: skipped: $(cat "$tmp/devices.err")"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
command -v python3 > /dev/null || { echo "gpu-engine: needs python3 to read results"; exit 1; }

"$bin/hctune" probe --tokens 1-8 > "$tmp/probe.out" 2> "$tmp/probe.err" || bad "probe: $(tail -2 "$tmp/probe.err")"
"$bin/hctuned" --socket "$sock" --db "$HCTUNE_DB" --kernels "$HCTUNE_KERNELS" --quiet 2> "$tmp/daemon.err" &
daemon=$!
for i in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || bad "daemon did not start: $(cat "$tmp/daemon.err")"

# 1. hc_engine on the daemon's choices: bitwise identical to all-v1, kl's
# metrics finite, every row loaded.
windows=${HCT_ENGINE_WINDOWS:-20}
if "$bin/hc_engine" --socket "$sock" --tokens 1,4,8 --windows "$windows" --json \
     > "$tmp/engine.json" 2> "$tmp/engine.err"; then
  ok "hc_engine: every check holds"
else
  bad "hc_engine (exit $?): $(tail -3 "$tmp/engine.err")"
fi
python3 - "$tmp/engine.json" <<'PY' && ok "hc_engine: the daemon served the choices, bitwise identical to all-v1" || bad "hc_engine's rows"
import json, sys
d = json.load(open(sys.argv[1]))
if not d["daemon"]: print("no daemon"); sys.exit(1)
for r in d["rows"]:
    print("T=%d %-16s %-10s %-40s %8.3f ms  %s" % (r["T"], r["config"], r["variant"], r["params"], r["ms_window"], r["check"]))
    if not r["ok"]: sys.exit(1)
    if r["config"] != "all-v1" and r["source"] not in ("probe", "fleet", "pin"):
        print("not the daemon's:", r); sys.exit(1)
    if r["config"] == "bitwise choice" and not r["check"].startswith("bit-identical"): sys.exit(1)
PY

# 2. Without a daemon: the baseline, compiled by the library, said so.
if "$bin/hc_engine" --socket "$tmp/none.sock" --tokens 4 --windows 5 --parity bitwise \
     > "$tmp/alone.out" 2> "$tmp/alone.err" && grep -q "no daemon" "$tmp/alone.err" &&
   grep -q "compiled here" "$tmp/alone.out"; then
  ok "hc_engine without a daemon: the baseline compiled here"
else
  bad "hc_engine without a daemon: $(cat "$tmp/alone.err" "$tmp/alone.out" | tail -4)"
fi

# 3. The PyTorch engine: hctune's read against torch eager and torch.compile.
if python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
  if PYTHONPATH="$root/python" HCTUNE_LIB="$bin/../lib/libhctune.so.0" \
     python3 "$root/examples/torch_engine.py" --socket "$sock" --tokens 1,4,8 --windows 10 \
     > "$tmp/torch.out" 2> "$tmp/torch.err"; then
    cat "$tmp/torch.out"; ok "torch_engine.py"
  else
    bad "torch_engine.py: $(tail -3 "$tmp/torch.err")"
  fi
else
  skip=$((skip + 1)); echo "skipped: torch_engine.py: no torch with CUDA here"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
