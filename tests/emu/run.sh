#!/bin/sh
# Runs the hc_read templates on the CPU (tests/emu/emu.h) at reduced sizes
# and checks their bits against the canonical order, and the op's float64
# reference template against the math (tests/emu/ref_emu.cc).  No GPU needed; takes
# a few minutes (every GPU thread is a fiber).
#   tests/emu/run.sh [build folder]
# Sizes: C = 1024 (so a v3 tile holds 2 steps of 32 chunks per lane, and
# reordering inside a tile is caught), D = 4096, K = 320 as shipped (so the
# up kernel's second chunk for lanes 0..7 is used).  Points: DOWN_WARPS,
# UP_WARPS, TPL, then the token counts (T < TPL, T = TPL, partial groups).
set -e
out=${1:-build/emu}
mkdir -p "$out"
fail=0
for p in "4 8 1 1,3" "8 4 2 3" "4 4 4 3,8" "8 8 8 8"; do
  set -- $p
  bin="$out/hc_read_emu_$1_$2_$3"
  g++ -std=c++17 -O1 -g -Wall -Wno-unused-function -Wno-unknown-pragmas -Itests/emu \
    -Ikernels-src/common -Ikernels-src/hc_read -DS=4 -DC=1024 -DD=4096 -DK=320 \
    -DDOWN_WARPS=$1 -DUP_WARPS=$2 -DTPL=$3 "-DEMU_TS=$4" -o "$bin" tests/emu/hc_read_emu.cc
  "$bin" || fail=1
done
# slice (tests/emu/slice_emu.cc) at its shipped sizes (its split is fixed
# to C = 2560, K = 320), both NCL: 15 (uneven rows and channels: 21 or 22)
# and 16; token counts with one token pair (1, 2), partial pairs (3, 5, 7),
# whole ones (4, 6, 8), the up stage's one quad (1..4) and two (5..8).
for p in "15 1,2,5,8" "16 3,4,6,7"; do
  set -- $p
  bin="$out/slice_emu_$1"
  g++ -std=c++17 -O1 -g -Wall -Wno-unused-function -Wno-unknown-pragmas -ffp-contract=off -Itests/emu \
    -Ikernels-src/common -Ikernels-src/hc_read -DS=4 -DC=2560 -DD=10240 -DK=320 \
    -DNCL=$1 "-DEMU_TS=$2" -o "$bin" tests/emu/slice_emu.cc
  "$bin" || fail=1
done
# The check must be able to fail: slice.h with one reordering each (the
# chain's chunks backwards; two fmaf of a chunk swapped; a norm chain's
# squares backwards; the up butterfly's levels 4 and 2 swapped), each of
# which must differ from the canonical order.  (Commuting two operands is
# no reordering: a + b == b + a bit for bit.)
mutate() { # NAME SED-ARGS...
  name=$1; shift
  dir="$out/mutant_$name"
  mkdir -p "$dir"
  cp kernels-src/hc_read/slice.h "$dir/"
  sed -i "$@" "$dir/slice.h"
  if cmp -s kernels-src/hc_read/slice.h "$dir/slice.h"; then
    echo "emu: mutant $name: the edit no longer applies to slice.h"; fail=1; return
  fi
  g++ -std=c++17 -O1 -Wno-unknown-pragmas -ffp-contract=off -Itests/emu -I"$dir" -Ikernels-src/common \
    -Ikernels-src/hc_read -DS=4 -DC=2560 -DD=10240 -DK=320 -DNCL=16 -DEMU_TS=1 -o "$dir/emu" tests/emu/slice_emu.cc
  if "$dir/emu" > "$dir/log" 2>&1; then
    echo "emu: mutant $name: NOT caught (bitwise equal)"; fail=1
  else
    echo "emu: mutant $name: caught ($(grep -c DIFFERS "$dir/log") of 2 runs differ)"
  fi
}
mutate chain 's/  for (int q = 0; q < SL_Q; ++q) {/  for (int q = SL_Q - 1; q >= 0; --q) {/'
mutate dot8 '/acc = fmaf(w\[2\], a.z, acc);/{N;s/\(.*\)\n\(.*\)/\2\n\1/}'
mutate normchain 's/  for (int m = 0; m < SL_QS; ++m) {/  for (int m = SL_QS - 1; m >= 0; --m) {/'
mutate upshfl '/v += hct_shfl_xor(v, 16);/{N;s/\(.*\)\n\(.*\)/\2\n\1/}'
# The float64 reference template for a list of rows, against the math.
g++ -std=c++17 -O1 -g -Wall -Wno-unused-function -Wno-unknown-pragmas -ffp-contract=off -Itests/emu \
  -Ikernels-src/common -Ikernels-src/hc_read -DS=4 -DC=1024 -DD=4096 -DK=320 \
  -o "$out/ref_emu" tests/emu/ref_emu.cc
"$out/ref_emu" || fail=1
if [ $fail -eq 0 ]; then
  echo "emu: every variant and point is bitwise equal to the canonical order"
else
  echo "emu: FAILED"
  exit 1
fi
