/*
 * reference.cu: hc_read_prefill's float64 reference, run on the GPU for the
 * token rows the check samples (manifest "reference"; docs/manifest.md).
 * It computes the exact math of the op, not a summation order and without
 * rounding xn and lo to bf16: the candidates' error against it is then
 * their own rounding (bf16 xn and lo, f32 sums), which the kl class bounds
 * relative to the baseline's.
 *
 * Row n of every array here is token rows[n] (ascending, NROWS of them).
 * Inputs (never written): resid, pending (null: none) f32 [T][S][C],
 * w_norm [S][C], w_down [K][D], w_up [D][K] bf16.  Scratch: xn double
 * [NROWS][D], lo double [NROWS][K].  Outputs, double: ref_resid [NROWS][D]
 * (R' = fl(R + P), the one f32 rounding the op defines, or R), ref_mixed
 * [NROWS][C], and the images of mixed rounded through f32: ref_bf16 and
 * ref_f16 [NROWS][C].
 */
#include "hct_kernel.h"

#if !defined(S) || !defined(C) || !defined(D) || !defined(K)
#error "reference.cu: the op constants S, C, D, K must be defined"
#endif

#define REF_THREADS 256

/* R' of element e of token t: the f32 sum the op defines. */
HCT_DEV float ref_rprime(const float *resid, const float *pending, long long e) {
  return pending != 0 ? resid[e] + pending[e] : resid[e];
}

/* A block-wide sum of 256 doubles (any order: float64 is far below the
 * candidates' f32 error). */
HCT_DEV double ref_block_sum(double v, double *red) {
  const int tid = (int)threadIdx.x;
  red[tid] = v;
  __syncthreads();
  for (int w = REF_THREADS / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] += red[tid + w];
    __syncthreads();
  }
  const double s = red[0];
  __syncthreads();
  return s;
}

/* Grid (S, NROWS), block 256: ref_resid, and xn = R' * w_norm * rs with
 * rs = 1/sqrt(mean(R'^2) + EPS), in float64. */
HCT_ENTRY void __launch_bounds__(REF_THREADS)
    hc_pf_ref_norm(const float *resid, const float *pending, const hct_u16 *w_norm, const int *rows, double *xn,
                   double *ref_resid, int NROWS) {
  __shared__ double red[REF_THREADS];
  const int s = (int)blockIdx.x, n = (int)blockIdx.y;
  if (n >= NROWS) return;
  const long long base = ((long long)rows[n] * S + s) * C;
  double ss = 0.0;
  for (int c = (int)threadIdx.x; c < C; c += REF_THREADS) {
    const double r = (double)ref_rprime(resid, pending, base + c);
    ss += r * r;
  }
  ss = ref_block_sum(ss, red);
  const double rs = 1.0 / sqrt(ss / (double)C + (double)HCT_EPS);
  for (int c = (int)threadIdx.x; c < C; c += REF_THREADS) {
    const double r = (double)ref_rprime(resid, pending, base + c);
    const long long o = (long long)n * D + (long long)s * C + c;
    ref_resid[o] = r;
    xn[o] = r * (double)hct_bf16_to_f32(w_norm[s * C + c]) * rs;
  }
}

/* Grid (K, NROWS), block 256: lo[n][j] = xn[n] . w_down[j] (a block's sum
 * through shared memory, so the same text builds for CUDA and HIP). */
HCT_ENTRY void __launch_bounds__(REF_THREADS)
    hc_pf_ref_down(const hct_u16 *w_down, const double *xn, double *lo, int NROWS) {
  __shared__ double red[REF_THREADS];
  const int j = (int)blockIdx.x, n = (int)blockIdx.y;
  if (j >= K || n >= NROWS) return;
  const hct_u16 *w = w_down + (long long)j * D;
  const double *x = xn + (long long)n * D;
  double a = 0.0;
  for (int k = (int)threadIdx.x; k < D; k += REF_THREADS) a += (double)hct_bf16_to_f32(w[k]) * x[k];
  a = ref_block_sum(a, red);
  if (threadIdx.x == 0) lo[(long long)n * K + j] = a;
}

/* f16 bits to double (every f16 is exact in double). */
HCT_DEV double ref_f16_value(hct_u16 h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? (double)__uint_as_float(0x7fc00000u) : sign * (double)__uint_as_float(0x7f800000u);
  if (e == 0) return sign * (double)m * 5.9604644775390625e-08; /* 2^-24 */
  return sign * (1.0 + (double)m / 1024.0) * ldexp(1.0, e - 15);
}

/* Grid (cdiv(C, 256), NROWS), block 256: per (row n, channel c), u of the
 * 4 streams = lo[n] . w_up[s*C + c], g = 1/(1+exp(-u)), mixed = sum over
 * s of g * R'. */
HCT_ENTRY void __launch_bounds__(REF_THREADS)
    hc_pf_ref_upmix(const float *resid, const float *pending, const hct_u16 *w_up, const int *rows, const double *lo,
                    double *ref_mixed, double *ref_bf16, double *ref_f16, int NROWS) {
  __shared__ double l[K];
  const int n = (int)blockIdx.y, c = (int)blockIdx.x * REF_THREADS + (int)threadIdx.x;
  if (n >= NROWS) return;
  for (int j = (int)threadIdx.x; j < K; j += REF_THREADS) l[j] = lo[(long long)n * K + j];
  __syncthreads();
  if (c >= C) return;
  double m = 0.0;
  for (int s = 0; s < S; ++s) {
    const hct_u16 *w = w_up + ((long long)s * C + c) * K;
    double u = 0.0;
    for (int j = 0; j < K; ++j) u += (double)hct_bf16_to_f32(w[j]) * l[j];
    const double g = 1.0 / (1.0 + exp(-u));
    m += g * (double)ref_rprime(resid, pending, ((long long)rows[n] * S + s) * C + c);
  }
  const long long o = (long long)n * C + c;
  ref_mixed[o] = m;
  ref_bf16[o] = (double)hct_bf16_to_f32(hct_f32_to_bf16((float)m));
  ref_f16[o] = ref_f16_value(hct_f32_to_f16((float)m));
}
