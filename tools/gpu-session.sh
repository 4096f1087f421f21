#!/bin/bash
# A GPU session's first call: the GPU tests first, then the measurements,
# each part within its cap and the time left of BUDGET seconds (default
# 540, issue 34: the device tool gives a call 600 s; a part is skipped,
# saying so, when under 45 s are left).
#
#   tools/gpu-session.sh prepare      here, on the machine without a GPU:
#                                     make STATIC=1, and build/gpu/ with the
#                                     GPU test programs and libcmocka
#   tools/gpu-session.sh run OUTDIR [PART...]
#                                     there, with bin/ lib/ build/gpu carried
#                                     (the device tool's carry), OUTDIR $OUT
#
# Parts, in order: worker (test_worker's test_gpu_*: the figures made on
# the card against the host's, of the checks and of the verification of
# timed launches; the self-test op through the worker), gpucheck
# (tests/gpu-check.sh), prefill (tests/gpu-prefill.sh: what a sparse probe
# promises, the planted tiletest op), engine (tests/gpu-engine.sh), bench
# (hctune bench of the decode variants at T = 1..8): the default run, whose
# caps add up to 540 s (60, 200, 130, 100, 50; predicted from the probes'
# breakdowns, not measured: parts.txt says what each took, move the caps
# when one takes more); and torch (tests/gpu-torch.sh's model and window:
# the two-instance model compiled at Dynamo's default limits, the compiled
# decode window; about 6 minutes) and torchprefill (its prefill part: the
# prefill window in C and Python after a probe of the prefill op; about 5
# minutes), which run only when named: they do not fit one call with the
# rest (`run OUT torch`, `run OUT torchprefill`).  Named PARTs run alone,
# in that order.  A log a part; a summary last.  The probes' own times
# (issue 34's goals) are tools/gpu-probe-times.sh's, a call of their own.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
case ${1:-} in
  prepare)
    make -s -j"$(nproc)" STATIC=1 all || exit 1
    mkdir -p build/gpu
    cp build/static/tests/test_worker build/static/tests/fake_worker build/gpu/ || exit 1
    cp -L "$(cc -print-file-name=libcmocka.so.0)" build/gpu/ 2>/dev/null ||
      cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 build/gpu/ || exit 1
    git rev-parse --short HEAD > build/gpu/commit
    echo "build/gpu ready at $(cat build/gpu/commit): carry bin lib build/gpu"
    exit 0 ;;
  run) out=${2:?usage: tools/gpu-session.sh run OUTDIR [PART...]}; shift 2; only=" $* " ;;
  *) echo "usage: tools/gpu-session.sh prepare | run OUTDIR [PART...]" >&2; exit 2 ;;
esac
parts=" worker gpucheck prefill engine bench torch torchprefill "
for p in $only; do
  case $parts in *" $p "*) ;; *) echo "gpu-session: '$p': no such part (${parts# })" >&2; exit 2 ;; esac
done
[ -x build/gpu/test_worker ] || { echo "gpu-session: no build/gpu/test_worker: run 'tools/gpu-session.sh prepare' first and carry build/gpu" >&2; exit 2; }
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/build/gpu HCT_BIN=$root/bin
export HCTUNE_KERNELS=$root/kernels-src:$root/tests/kernels-src
start=$(date +%s)
{ date -u; cat build/gpu/commit
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  bin/hctune devices; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
part() { # NAME CAP command...: a part of the default run
  local name=$1 cap=$2; shift 2
  case $only in "  ") ;; *" $name "*) ;; *) return ;; esac
  run_part "$name" "$cap" "$@"
}
named() { # NAME CAP command...: a part that runs only when named
  local name=$1
  case $only in *" $name "*) run_part "$@" ;; esac
}
run_part() {
  local name=$1 cap=$2; shift 2
  local left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
  if [ $left -lt 45 ]; then echo "$name: skipped (${left} s left)" | tee -a "$out/parts.txt"; return; fi
  [ "$cap" -gt $left ] && cap=$left
  local t0=$(date +%s)
  HCT_TORCH_BUDGET=$((cap - 10)) timeout "$cap" "$@" > "$out/$name.txt" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s (limit $cap s)" | tee -a "$out/parts.txt"
}
part worker 60 env HCT_TEST_FILTER='test_gpu_*' build/gpu/test_worker
part gpucheck 200 tests/gpu-check.sh bin
part prefill 130 tests/gpu-prefill.sh bin
part engine 100 tests/gpu-engine.sh bin
part bench 50 env HCTUNE_DB=/tmp/gpu-session-bench.db bin/hctune bench \
  --variants v1,relay,pipe,persist,slice --tokens 1-8
named torch 540 tests/gpu-torch.sh bin model window
named torchprefill 540 tests/gpu-torch.sh bin prefill
echo "== worker"; grep -E "OK \]|FAILED|PASSED|ERROR|skipped" "$out/worker.txt" 2>/dev/null | head -20
echo "== gpu-check"; grep -E "^ok|^FAILED|passed|skipped|where the time went|probe took" "$out/gpucheck.txt" 2>/dev/null
echo "== prefill"; grep -E "^ok|^FAILED|passed|skipped|MISSING|serves a planted" "$out/prefill.txt" 2>/dev/null
echo "== engine"; tail -25 "$out/engine.txt" 2>/dev/null
echo "== bench"; grep -v "^hctune: \(compile\|check\|time\)" "$out/bench.txt" 2>/dev/null | tail -45
for t in torch torchprefill; do
  [ -f "$out/$t.txt" ] || continue
  echo "== $t"; grep -E "^ok|^FAILED|^skipped|passed|graphs compiled|copies alone|hctune kl compiled|Dynamo:|bit-identical|DIFFER" "$out/$t.txt"
done
echo "== the parts' times (of ${BUDGET:-540} s)"; cat "$out/parts.txt" 2>/dev/null
exit 0
