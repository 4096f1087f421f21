#!/bin/sh
# Builds tools/lab/lab.cu into bin/lab (nvcc, sm_90, static CUDA runtime),
# with the compiler's resource report on stderr.
set -e
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
mkdir -p bin
"$nvcc" -O3 -std=c++17 -arch=sm_90 --default-stream per-thread -Xptxas -v \
  -Ikernels-src/common -Ikernels-src/hc_read -o bin/lab tools/lab/lab.cu
