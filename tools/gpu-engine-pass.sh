#!/bin/sh
# The engine's pass on a GPU machine, with a STATIC=1 build carried there
# (bin/ and lib/):  tools/gpu-engine-pass.sh OUTDIR
# A probe into a fresh database, a daemon on a temporary socket, then
# bin/hc_engine at T = 1, 4, 8 (100 windows) and examples/torch_engine.py at
# T = 1, 4, 8, and hc_engine once without the daemon.  Logs in OUTDIR, a
# short table last.  About 3 minutes on an H200.  HCT_COMPILE_MODE names
# torch.compile's mode (default max-autotune-no-cudagraphs: the window is
# captured in one CUDA graph of its own).
out=${1:?usage: tools/gpu-engine-pass.sh OUTDIR}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
export HCTUNE_KERNELS="$root/kernels-src:$root/tests/kernels-src" HCTUNE_DB="$out/engine.db"
rm -f "$HCTUNE_DB"
sock=$(mktemp -u /tmp/hctune-engine.XXXXXX.sock)
daemon=""
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null' EXIT
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
  bin/hctune devices
  python3 -c "import torch; print('torch', torch.__version__)" 2>&1
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
t0=$(date +%s)
timeout 150 bin/hctune probe --tokens 1-8 > "$out/probe.txt" 2> "$out/probe.err"; rc_probe=$?
echo "probe: exit $rc_probe, $(($(date +%s) - t0)) s"
bin/hctuned --socket "$sock" --db "$HCTUNE_DB" --kernels "$HCTUNE_KERNELS" 2> "$out/daemon.log" &
daemon=$!
for i in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
t1=$(date +%s)
timeout 120 bin/hc_engine --socket "$sock" --tokens 1,4,8 --windows 100 --json \
  > "$out/hc_engine.json" 2> "$out/hc_engine.err"; rc_engine=$?
echo "hc_engine: exit $rc_engine, $(($(date +%s) - t1)) s"
t2=$(date +%s)
timeout 60 bin/hc_engine --socket "$out/no-daemon.sock" --tokens 4 --windows 20 --parity bitwise \
  > "$out/hc_engine_alone.txt" 2> "$out/hc_engine_alone.err"; rc_alone=$?
echo "hc_engine without a daemon: exit $rc_alone, $(($(date +%s) - t2)) s"
t3=$(date +%s)
PYTHONPATH="$root/python" HCTUNE_LIB="$root/lib/libhctune.so.0" timeout 200 \
  python3 examples/torch_engine.py --socket "$sock" --tokens 1,4,8 --windows 20 --json \
  --compile-mode "${HCT_COMPILE_MODE:-max-autotune-no-cudagraphs}" \
  > "$out/torch_engine.json" 2> "$out/torch_engine.err"; rc_torch=$?
echo "torch_engine.py: exit $rc_torch, $(($(date +%s) - t3)) s"
{
  echo "== probe (exit $rc_probe)"; cat "$out/probe.txt"; [ $rc_probe -eq 0 ] || tail -3 "$out/probe.err"
  echo "== hc_engine --tokens 1,4,8 --windows 100 (exit $rc_engine)"
  python3 - "$out/hc_engine.json" <<'PY' || tail -5 "$out/hc_engine.err"
import json, sys
d = json.load(open(sys.argv[1]))
print("%s, daemon %s %s" % (d["gpu"], d["daemon"], d["note"]))
print("%-3s %-16s %-46s %9s %8s %6s  %s" % ("T", "config", "runs", "ms/window", "reads", "share", "check"))
for r in d["rows"]:
    share = 100 * r["ms_reads"] / r["ms_window"] if r["ms_window"] else 0
    runs = r["variant"] + " " + r["params"] + " [" + r["source"] + (", compiled here" if r["compiled_here"] else "") + "]"
    print("%-3d %-16s %-46s %9.3f %8.3f %5.1f%%  %s" % (r["T"], r["config"], runs,
          r["ms_window"], r["ms_reads"], share, r["check"]))
PY
  echo "== hc_engine without a daemon (exit $rc_alone)"; cat "$out/hc_engine_alone.err" "$out/hc_engine_alone.txt"
  echo "== torch_engine.py --tokens 1,4,8 --windows 20 (exit $rc_torch)"
  python3 - "$out/torch_engine.json" <<'PY' || tail -8 "$out/torch_engine.err"
import json, sys
d = json.load(open(sys.argv[1]))
print("%s, torch %s, compile mode %s %s" % (d["gpu"], d["torch"], d["compile_mode"], d["note"]))
by = {}
for r in d["rows"]:
    by.setdefault(r["T"], {})[r["row"]] = r
print("%-3s %15s %15s %15s %15s %13s  %s" % ("T", "hctune bitwise", "hctune kl", "torch eager", "torch.compile", "copies alone", "hctune faster than compile?"))
for T, rows in sorted(by.items()):
    f = lambda n: rows[n]["ms_window"] if n in rows and rows[n]["ms_window"] is not None else float("nan")
    comp = f("torch.compile")
    verdict = "bitwise %s, kl %s" % ("yes" if f("hctune bitwise") < comp else "NO", "yes" if f("hctune kl") < comp else "NO")
    print("%-3d %15.3f %15.3f %15.3f %15.3f %13.3f  %s" % (T, f("hctune bitwise"), f("hctune kl"), f("torch eager"), comp, f("copies alone"), verdict))
for r in d["rows"]:
    if r["runs"]: print("  T=%d %-15s %s  %s" % (r["T"], r["row"], r["runs"], r["check"]))
PY
} > "$out/summary.txt" 2>&1
cat "$out/summary.txt"
