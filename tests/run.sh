#!/bin/bash
# Runs the test programs of folder $1, each in its own process with a time
# limit, so one crash or hang fails that program and not the run.  $2 is the
# bin/ folder the tests may call (exported as HCT_BIN).
#   tests/run.sh build/release/tests bin                     all of them
#   tests/run.sh build/release/tests bin test_db test_stats  these programs
#   tests/run.sh build/release/tests bin test_daemon test_pins
#   tests/run.sh build/release/tests bin test_daemon:test_pins
#                     one test of a program (a name after a program, or
#                     PROGRAM:TEST; cmocka's filter: * and ? match)
# A program counts as skipped when it ran no test that passed and skipped
# at least one (cmocka's skip()).  The last two lines are cmocka's tests'
# tally and the programs' ("programs: N passed, N failed, N skipped").
# HCT_TEST_TALLY=FILE appends the tests' "PASSED FAILED SKIPPED" to FILE,
# then the failed programs' paths (make check adds up its passes and names
# what failed).  HCT_TEST_JOBS=N runs N programs at a
# time (their output is then printed whole as each ends).
dir=$1
[ -d "$dir" ] || { echo "run.sh: test folder '$dir' does not exist (build it: make tests)"; exit 2; }
[ -d "$2" ] || { echo "run.sh: bin folder '$2' does not exist (build it: make)"; exit 2; }
export HCT_BIN=$(cd "$2" && pwd)
# The product's ops, then the tests' own (tests/kernels-src: selftest,
# hc_read_wrongtest), which are never installed.
export HCT_TEST_ROOT=$(pwd)
export HCTUNE_KERNELS=$(pwd)/kernels-src:$(pwd)/tests/kernels-src
shift 2
limit=${HCT_TEST_TIMEOUT:-600}
jobs=${HCT_TEST_JOBS:-1}
work=$(mktemp -d /tmp/hct_run.XXXXXX) || exit 2
trap 'rm -rf "$work"' EXIT

# The plan: one line per program, "NAME FILTER" (FILTER "-" for all).
plan=$work/plan
: >"$plan"
if [ $# -eq 0 ]; then
  for t in "$dir"/test_*; do
    [ -x "$t" ] && [ -f "$t" ] && echo "$(basename "$t") -" >>"$plan"
  done
else
  last=""
  for a in "$@"; do
    case $a in
      *:*)
        [ -n "$last" ] && echo "$last -" >>"$plan"
        echo "${a%%:*} ${a#*:}" >>"$plan"
        last="" ;;
      *)
        if [ -x "$dir/$a" ] && [ -f "$dir/$a" ]; then
          [ -n "$last" ] && echo "$last -" >>"$plan"
          last=$a
        elif [ -n "$last" ]; then
          echo "$last $a" >>"$plan"
          last=""
        else
          echo "run.sh: '$a' is not a test program in $dir, nor a test after one"
          exit 2
        fi ;;
    esac
  done
  [ -n "$last" ] && echo "$last -" >>"$plan"
fi

# A line for the program's log, and the terminal when one runs at a time.
say() {
  echo "$*" >>"$log"
  if [ "$jobs" -le 1 ]; then echo "$*"; fi
}

# Runs one program; its output goes to $work/NAME.log, its tally (status
# and cmocka's counts) to $work/NAME.sum.
run_one() {
  name=$1 filter=$2
  log=$work/$name.log
  : >"$log"
  if [ ! -x "$dir/$name" ]; then
    say "run.sh: no test program '$name' in $dir (it was there when the run began: something rebuilt or removed it)"
    echo "fail 0 1 0" >"$work/$name.sum"
    return
  fi
  if [ "$filter" = "-" ]; then unset HCT_TEST_FILTER; else export HCT_TEST_FILTER=$filter; fi
  start=$(date +%s)
  # The program writes its log itself, through no pipe: a child it leaves
  # behind (a daemon of a failed test) must not keep this runner waiting
  # for an end of file.  It runs in a session of its own, and whatever is
  # left of that session when it ends is killed.  One at a time, the log
  # is followed as it grows.
  setsid -w timeout -k 5 "$limit" "$dir/$name" >>"$log" 2>&1 </dev/null &
  pid=$!
  follow=""
  if [ "$jobs" -le 1 ]; then
    tail -n +1 -f --pid=$pid "$log" &
    follow=$!
  fi
  wait $pid
  rc=$?
  pkill -KILL -s $pid 2>/dev/null
  [ -n "$follow" ] && wait $follow
  secs=$(($(date +%s) - start))
  [ $rc -eq 124 ] && say "$name: timed out after ${limit}s"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  p=${p:-0} f=${f:-0} s=${s:-0}
  if [ $rc -ne 0 ]; then
    status=fail
    [ "$f" -eq 0 ] && f=1 # a crash or an early exit: count it
  elif [ "$filter" != "-" ] && [ $((p + f + s)) -eq 0 ]; then
    say "$name: no test matches '$filter'"
    status=fail f=1
  elif [ "$p" -eq 0 ] && [ "$s" -gt 0 ]; then
    status=skip
  else
    status=pass
  fi
  say "$name: $status ($p passed, $f failed, $s skipped) in ${secs}s"
  echo "$status $p $f $s" >"$work/$name.sum"
}

header() {
  if [ "$2" = "-" ]; then echo "== $1"; else echo "== $1 (only $2)"; fi
}

# Runs the plan, $jobs programs at a time; prints each program's output as
# it ends (in plan order when one at a time).
running=0
while read -r name filter; do
  if [ "$jobs" -le 1 ]; then
    header "$name" "$filter"
    run_one "$name" "$filter"
  else
    (run_one "$name" "$filter"; header "$name" "$filter"; cat "$work/$name.log") &
    running=$((running + 1))
    if [ $running -ge "$jobs" ]; then
      wait -n
      running=$((running - 1))
    fi
  fi
done <"$plan"
wait

pp=0 pf=0 ps=0 tp=0 tf=0 ts=0 failed=""
while read -r name filter; do
  # A program that left no tally (its runner killed) failed, as one test.
  status=fail p=0 f=1 s=0
  [ -s "$work/$name.sum" ] && read -r status p f s <"$work/$name.sum"
  case $status in
    pass) pp=$((pp + 1)) ;;
    skip) ps=$((ps + 1)) ;;
    *) pf=$((pf + 1)); failed="$failed $name" ;;
  esac
  tp=$((tp + p)) tf=$((tf + f)) ts=$((ts + s))
done <"$plan"
echo "tests: $tp passed, $tf failed, $ts skipped"
[ -n "$HCT_TEST_TALLY" ] && echo "$tp $tf $ts$(for n in $failed; do printf ' %s' "$dir/$n"; done)" >>"$HCT_TEST_TALLY"
[ $pf -eq 0 ] || echo "failed:$failed"
echo "programs: $pp passed, $pf failed, $ps skipped"
[ $pf -eq 0 ]
