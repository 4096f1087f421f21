#!/bin/sh
# Runs every test program in folder $1, each in its own process with a time
# limit, so one crash or hang fails that program and not the run.  $2 is the
# bin/ folder the tests may call (exported as HCT_BIN).
#   tests/run.sh build/release/tests bin            all of them
#   tests/run.sh build/release/tests bin test_db    one by name
dir=$1
export HCT_BIN=$(cd "$2" && pwd)
export HCTUNE_KERNELS=$(pwd)/kernels-src
shift 2
limit=${HCT_TEST_TIMEOUT:-600}
pass=0 fail=0 failed=""
for t in "$dir"/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  if [ $# -gt 0 ]; then
    case " $* " in *" $name "*) ;; *) continue ;; esac
  fi
  echo "== $name"
  if timeout -k 5 "$limit" "$t"; then
    pass=$((pass + 1))
  else
    rc=$?
    [ $rc -eq 124 ] && echo "$name: timed out after ${limit}s"
    fail=$((fail + 1))
    failed="$failed $name"
  fi
done
echo "programs: $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
