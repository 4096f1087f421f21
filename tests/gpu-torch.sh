#!/bin/sh
# Engines that compile hctune in (issue 36), on a GPU: a probe into a
# temporary database and a daemon on a temporary socket (as gpu-engine.sh
# makes them), then the parts named (default: all, in this order):
#   model    examples/torch_model.py: two instances (target, drafter) of a
#            48-layer model, bitwise and kl layers, compiled with
#            fullgraph=True and mode="max-autotune" at Dynamo's default
#            limits, T = 1..8: every output bit-identical to the same kernels
#            launched without torch.compile, and the graphs Dynamo compiled
#            (its unique_graphs counter) at most 2
#   window   examples/torch_engine.py --tokens 1,4,8 --compiled-window
#            max-autotune: exits 0 (every check: hctune's outputs against
#            eager, the compiled copies-alone row within 10% of the captured
#            one) within 300 s
#   prefill  a probe of hc_read_prefill at T = 2048,8192 (pair_mma, upmix,
#            wgmma_pb and the baseline), then bin/hc_engine --window prefill and
#            examples/torch_engine.py --window prefill: bits:pair_mma
#            bit-identical to pair_mma over the window
# Skips, saying why, without a GPU; without torch (with CUDA) the torch
# steps skip and hc_engine's prefill window still runs.  Each step is
# skipped, saying so, when HCT_TORCH_BUDGET seconds (default 540) would not
# cover its limit.  Needs python3.
#   tests/gpu-torch.sh [bin] [model] [window] [prefill]
bin=$(cd "${1:-bin}" && pwd)
[ $# -gt 0 ] && shift
parts=${*:-model window prefill}
root=$(cd "$(dirname "$0")/.." && pwd)
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src"
tmp=$(mktemp -d /tmp/hctune-gpu-torch.XXXXXX)
daemon=""
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$tmp"' EXIT
export HCTUNE_DB="$tmp/torch.db"
sock="$tmp/hctune.sock"
budget=${HCT_TORCH_BUDGET:-540}
start=$(date +%s)
pass=0 fail=0 skip=0
ok()      { pass=$((pass + 1)); echo "ok: $*"; }
bad()     { fail=$((fail + 1)); echo "FAILED: $*"; }
skipped() { skip=$((skip + 1)); echo "skipped: $*"; }
# fits LIMIT: whether LIMIT seconds are left of the budget
fits()    { [ $(( budget - ($(date +%s) - start) )) -ge "$1" ]; }
want()    { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }

for p in $parts; do
  case $p in model|window|prefill) ;; *) echo "gpu-torch: '$p': no such part (model, window, prefill)" >&2; exit 2 ;; esac
done
if ! "$bin/hctune" devices > "$tmp/devices" 2> "$tmp/devices.err"; then
  echo "gpu-torch: skipped: $(cat "$tmp/devices.err")"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi
command -v python3 > /dev/null || { echo "gpu-torch: needs python3 to read results"; exit 1; }
cat "$tmp/devices"
torch_why=$(python3 -c "import torch; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'; print('torch', torch.__version__)" 2>&1 | tail -1)
case $torch_why in torch\ *) echo "$torch_why"; have_torch=1 ;; *) have_torch=0 ;; esac
pyrun() { PYTHONPATH="$root/python" HCTUNE_LIB="$bin/../lib/libhctune.so.0" "$@"; }

if want model || want window; then
  "$bin/hctune" probe --tokens 1-8 > "$tmp/probe.out" 2> "$tmp/probe.err" || bad "probe of hc_read: $(tail -2 "$tmp/probe.err")"
fi
"$bin/hctuned" --socket "$sock" --db "$HCTUNE_DB" --kernels "$HCTUNE_KERNELS" --quiet 2> "$tmp/daemon.err" &
daemon=$!
for i in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || bad "daemon did not start: $(cat "$tmp/daemon.err")"

# 1. The two-instance model: bit-identical to eager, graphs counted.
if want model; then
  if [ $have_torch -eq 0 ]; then skipped "model: no torch with CUDA here ($torch_why)"
  elif ! fits 240; then skipped "model: under 240 s of the budget left"
  else
    t0=$(date +%s)
    pyrun timeout 240 python3 "$root/examples/torch_model.py" --socket "$sock" --tokens 1-8 --json \
      > "$tmp/model.json" 2> "$tmp/model.err"; rc=$?
    if python3 - "$tmp/model.json" 2> /dev/null <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
print("torch_model on %s, torch %s, mode %s, recompile_limit %d: %d graphs compiled (Dynamo's "
      "unique_graphs), %d cache entries of Model.forward, %d calls, %s s" % (
      d["gpu"], d["torch"], d["mode"], d["recompile_limit"], d["graphs"], d["cache_entries"],
      d["calls"], d["seconds"]))
for parity, by_t in d["choices"].items():
    print("  %s: %s" % (parity, "; ".join("T=%s %s" % kv for kv in sorted(by_t.items()))))
print("  mismatches against eager: %s" % (d["mismatches"] or "none"))
sys.exit(0 if d["ok"] else 1)
PY
      ok "model: 2 instances x 48 layers at T = 1..8, bit-identical to eager, graphs within 2 (exit $rc, $(($(date +%s) - t0)) s)"
    else
      bad "model (exit $rc): $(tail -5 "$tmp/model.err")"
    fi
  fi
fi

# 2. The decode window compiled whole, at Dynamo's default limits.
if want window; then
  if [ $have_torch -eq 0 ]; then skipped "window: no torch with CUDA here ($torch_why)"
  elif ! fits 300; then skipped "window: under 300 s of the budget left"
  else
    t0=$(date +%s)
    if pyrun timeout 300 python3 "$root/examples/torch_engine.py" --socket "$sock" --tokens 1,4,8 \
         --windows 10 --compiled-window max-autotune > "$tmp/window.out" 2> "$tmp/window.err"; then
      cat "$tmp/window.out"; ok "window: torch_engine.py --compiled-window max-autotune, every check ($(($(date +%s) - t0)) s)"
    else
      rc=$?; cat "$tmp/window.out"; bad "window (exit $rc, $(($(date +%s) - t0)) s): $(grep -v '^ *$' "$tmp/window.err" | tail -4)"
    fi
  fi
fi

# 3. The prefill window, C and Python, on the daemon's prefill choices.
if want prefill; then
  if ! fits 150; then skipped "prefill: under 150 s of the budget left"
  else
    t0=$(date +%s)
    limit=$(( budget - (t0 - start) - 120 )); [ $limit -gt 240 ] && limit=240
    if timeout "$limit" "$bin/hctune" probe --op hc_read_prefill --tokens 2048,8192 \
         --variants pair_mma,upmix,wgmma_pb > "$tmp/probe_pf.out" 2> "$tmp/probe_pf.err"; then
      ok "probe of hc_read_prefill at T = 2048,8192 ($(($(date +%s) - t0)) s)"; cat "$tmp/probe_pf.out"
    else
      bad "probe of hc_read_prefill (exit $?, limit $limit s): $(tail -2 "$tmp/probe_pf.err"); the windows run what the library falls back to"
    fi
    kill -HUP "$daemon" 2>/dev/null   # the daemon rereads the database
    sleep 1
    t1=$(date +%s)
    if timeout 120 "$bin/hc_engine" --window prefill --socket "$sock" --tokens 2048,8192 --windows 10 \
         --json > "$tmp/pf_c.json" 2> "$tmp/pf_c.err"; then
      ok "hc_engine --window prefill: every check holds ($(($(date +%s) - t1)) s)"
    else
      bad "hc_engine --window prefill (exit $?): $(tail -3 "$tmp/pf_c.err")"
    fi
    python3 - "$tmp/pf_c.json" 2> /dev/null <<'PY' || echo "(no table: $(tail -2 "$tmp/pf_c.err"))"
import json, sys
d = json.load(open(sys.argv[1]))
print("hc_engine prefill window on %s, daemon %s %s" % (d["gpu"], d["daemon"], d["note"]))
for r in d["rows"]:
    print("T=%-5d %-22s %-10s %-52s %8.3f ms (other work %.3f)  %s" % (r["T"], r["config"], r["variant"],
          r["params"] + " [" + r["source"] + "]", r["ms_window"], r["ms_other"], r["check"]))
PY
    if [ $have_torch -eq 0 ]; then skipped "torch prefill window: no torch with CUDA here ($torch_why)"
    elif ! fits 60; then skipped "torch prefill window: under 60 s of the budget left"
    else
      t2=$(date +%s)
      limit=$(( budget - (t2 - start) )); [ $limit -gt 240 ] && limit=240
      if pyrun timeout "$limit" python3 "$root/examples/torch_engine.py" --window prefill --socket "$sock" \
           > "$tmp/pf_torch.out" 2> "$tmp/pf_torch.err"; then
        cat "$tmp/pf_torch.out"; ok "torch_engine.py --window prefill: every check ($(($(date +%s) - t2)) s)"
      else
        rc=$?; cat "$tmp/pf_torch.out"; bad "torch_engine.py --window prefill (exit $rc): $(grep -v '^ *$' "$tmp/pf_torch.err" | tail -4)"
      fi
    fi
  fi
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
