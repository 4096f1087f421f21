#!/bin/sh
# Runs the hc_read_prefill templates on the CPU (tests/emu/emu.h, the PTX of
# prefill_mma.h emulated by tests/emu/hc_read_prefill_emu.cc) at reduced
# sizes and checks their bits against the prefill op's canonical order.  No
# GPU needed; a few minutes.
#   tests/emu/run-prefill.sh [build folder]
# Sizes: C = 1024, D = 4096 (128 k tiles of 32 for the down GEMM, so the
# pipeline wraps its stages many times), K = 320 as shipped.  T = 16 and 40
# (one partial M tile, rows past T guarded), 130 (two M tiles); points
# below: variant (1 pair_simt, 2 pair_mma, 3 upmix), DBM DBN DWR
# UBM UBN UWR (pair_simt ignores DWR, UWR), then the token counts.
set -e
out=${1:-build/emu}
mkdir -p "$out"
fail=0
for p in "1 128 64 32 128 64 32 16,40" "1 128 32 32 128 128 32 40" \
         "2 128 160 32 128 128 32 16,40" "2 64 64 32 256 128 64 40,130" \
         "3 128 160 64 256 128 32 16,40" "3 64 32 32 128 128 64 16,130"; do
  set -- $p
  bin="$out/hc_read_prefill_emu_$1_$2_$3_$4_$5_$6_$7"
  g++ -std=c++17 -O1 -g -Wall -Wno-unused-function -Wno-unknown-pragmas -Itests/emu \
    -Ikernels-src/common -Ikernels-src/hc_read_prefill -DS=4 -DC=1024 -DD=4096 -DK=320 \
    -DEMU_VARIANT=$1 -DDBM=$2 -DDBN=$3 -DDWR=$4 -DUBM=$5 -DUBN=$6 -DUWR=$7 -DDST=4 -DUST=3 \
    "-DEMU_TS=$8" -o "$bin" tests/emu/hc_read_prefill_emu.cc
  "$bin" || fail=1
done
if [ $fail -eq 0 ]; then
  echo "emu: every prefill variant and point is bitwise equal to its order"
else
  echo "emu: FAILED"
  exit 1
fi
