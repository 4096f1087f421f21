#!/bin/sh
# Builds tools/lab/lab.cu into bin/lab (nvcc, sm_90, static CUDA runtime),
# with the compiler's resource report on stderr.
#   tools/lab/build.sh [OUT [NVCC FLAGS...]]   e.g. bin/lab_c4 -DCL=4
set -e
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
out=${1:-bin/lab}
[ $# -gt 0 ] && shift
mkdir -p bin
"$nvcc" -O3 -std=c++17 -arch=sm_90 --default-stream per-thread -Xptxas -v "$@" \
  -Ikernels-src/common -Ikernels-src/hc_read -o "$out" tools/lab/lab.cu
