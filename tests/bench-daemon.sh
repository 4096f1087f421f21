#!/bin/sh
# make bench-daemon: hct_choose round trips and throughput against a plain
# Unix-socket echo of the same message sizes, in the same run.
#   tests/bench-daemon.sh BIN_DIR TEST_DIR
# Prints the measurements, then as its last line
#   choose/echo p50 X.XX p99 Y.YY throughput Z.ZZ
# (latency ratios: lower is better; throughput ratio: higher is better).
set -e
[ $# -eq 2 ] || { echo "usage: $0 BIN_DIR TEST_DIR" >&2; exit 2; }
export HCT_BIN=$(cd "$1" && pwd)
prog="$2/test_daemon_bench"
[ -x "$prog" ] || { echo "bench-daemon: '$prog' is not built" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! "$prog" bench >"$out" 2>&1; then
  cat "$out"
  echo "bench-daemon: the bench failed" >&2
  exit 1
fi
grep -v '^choose/echo' "$out" || true
grep '^choose/echo' "$out" | tail -n 1
