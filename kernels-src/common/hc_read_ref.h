/*
 * hc_read_ref.h: the float64 reference of the hyper-connection read
 * (/work/shared/spec/hc_read.md) for a list of token rows, as device
 * functions that an op's reference template (reference.cu) wraps in its
 * entry points.  hc_read, hc_read_wrongtest and hc_read_prefill share it:
 * their math is the same, whatever order or rounding their variants use.
 *
 * It follows the math, not a canonical order: every sum is taken in
 * float64, so it stands for the exact result of the op.  Two roundings of
 * the contract are kept because they define the op, not an order: R' =
 * fl(R + P) is a float32 sum (what resid must hold after the op), and the
 * weights are bf16 values.  xn and lo stay float64 (the prefill op's
 * variants round them to bf16 before their GEMMs: that rounding is their
 * error, measured against the exact op).
 *
 * Each sum runs in index order, one thread per output, with products and
 * sums rounded separately (no fused multiply-add): the very operations of
 * the CPU cross-check in tests/ref_hc_read.c, so the two agree to the last
 * bits but for exp's last ulp.
 *
 * Rows: row n of every array below is token t = rows[n] of the op (rows
 * ascending, NROWS of them); only those tokens are computed, so a check of
 * 64 rows of T = 32768 costs 64 rows' work.
 *
 * Layouts (n a sampled row): resid, pending [T][S][C] f32 (pending may be
 * null); w_norm [S][C], w_down [K][D], w_up [D][K] bf16; the reference's
 * own arrays ref_resid, xn, gate [NROWS][D], lo [NROWS][K], ref_mixed,
 * ref_bf16, ref_f16 [NROWS][C], all double.
 */
#ifndef HC_READ_REF_H
#define HC_READ_REF_H

#include "hct_kernel.h"

#if !defined(S) || !defined(C) || !defined(D) || !defined(K)
#error "hc_read_ref.h: the op constants S, C, D, K must be defined"
#endif
static_assert(D == S * C, "D must be S*C");
static_assert(D % 8 == 0 && K % 8 == 0, "D and K must be whole chunks of 8 bf16");

/* A product and a sum, each rounded once: never fused.  NVRTC's intrinsics
 * say so; on HIP, contraction is switched off for the file instead. */
#if defined(HCT_CUDA)
#define HRR_MUL(a, b) __dmul_rn((a), (b))
#define HRR_ADD(a, b) __dadd_rn((a), (b))
#else
#pragma clang fp contract(off)
#define HRR_MUL(a, b) ((a) * (b))
#define HRR_ADD(a, b) ((a) + (b))
#endif

/* Block sizes of the steps (the entry points' launch bounds). */
#define HRR_NORM_THREADS 256
#define HRR_DOWN_THREADS 64
#define HRR_UP_THREADS 128
#define HRR_MIX_THREADS 256

HCT_DEV double hrr_bf16(hct_u16 h) { return (double)hct_bf16_to_f32(h); }

/* f16 bits to their value, through the float32 with the same value (exact:
 * every f16 is a float32). */
HCT_DEV double hrr_f16(hct_u16 h) {
  const hct_u32 sign = (hct_u32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return (double)__uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0u) {
    const double v = (double)m * 5.9604644775390625e-08; /* 2^-24 */
    return sign ? -v : v;
  }
  return (double)__uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

/* The sum of an 8-element chunk of bf16 weights times x[0..8), added to
 * acc in index order. */
HCT_DEV double hrr_dot8(hct_u4 w, const double *x, double acc) {
  const hct_u32 q[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    acc = HRR_ADD(acc, HRR_MUL((double)hct_bf16_lo(q[j]), x[2 * j]));
    acc = HRR_ADD(acc, HRR_MUL((double)hct_bf16_hi(q[j]), x[2 * j + 1]));
  }
  return acc;
}

/*
 * Step 1 for row n, stream s, by a block of HRR_NORM_THREADS: R' = fl(R +
 * P) into ref_resid (the reference of resid), then xn = R' * w_norm *
 * rsqrt(mean(R'^2) + eps), the mean summed over c in order by one thread
 * (a per-thread order would be an order of our own; C is small).  `red`
 * is C doubles of shared memory.
 */
HCT_DEV void hrr_norm(int n, int s, const int *rows, const float *resid, const float *pending,
                      const hct_u16 *w_norm, double *ref_resid, double *xn, double *red,
                      double *rs_shared) {
  const long long t = rows[n];
  const long long src = (t * S + s) * C, dst = ((long long)n * S + s) * C;
  for (int c = (int)threadIdx.x; c < C; c += HRR_NORM_THREADS) {
    float v = resid[src + c];
    if (pending != 0) v = __fadd_rn(v, pending[src + c]);
    red[c] = (double)v;
    ref_resid[dst + c] = (double)v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double ss = 0.0;
    for (int c = 0; c < C; ++c) ss = HRR_ADD(ss, HRR_MUL(red[c], red[c]));
    *rs_shared = 1.0 / sqrt(HRR_ADD(ss / (double)C, (double)HCT_EPS));
  }
  __syncthreads();
  const double rs = *rs_shared;
  for (int c = (int)threadIdx.x; c < C; c += HRR_NORM_THREADS)
    xn[dst + c] = HRR_MUL(HRR_MUL(red[c], hrr_bf16(w_norm[(long long)s * C + c])), rs);
}

/* Step 2, lo[n][j] = sum_d w_down[j][d] * xn[n][d], for output j. */
HCT_DEV void hrr_down(int n, int j, const hct_u16 *w_down, const double *xn, double *lo) {
  const hct_u4 *w = (const hct_u4 *)(w_down + (long long)j * D);
  const double *x = xn + (long long)n * D;
  double acc = 0.0;
  for (int q = 0; q < D / 8; ++q) acc = hrr_dot8(w[q], x + 8 * q, acc);
  lo[(long long)n * K + j] = acc;
}

/* Step 3, gate[n][i] = sigma(sum_k w_up[i][k] * lo[n][k]), for output i. */
HCT_DEV void hrr_up(int n, int i, const hct_u16 *w_up, const double *lo, double *gate) {
  const hct_u4 *w = (const hct_u4 *)(w_up + (long long)i * K);
  const double *x = lo + (long long)n * K;
  double acc = 0.0;
  for (int q = 0; q < K / 8; ++q) acc = hrr_dot8(w[q], x + 8 * q, acc);
  gate[(long long)n * D + i] = 1.0 / (1.0 + exp(-acc));
}

/* Step 4, mixed[n][c] = sum_s gate[n][s][c] * R'[n][s][c], and its 16-bit
 * images: the exact value rounded through float32 (as the kernels round
 * their float32 result), then to bf16 and f16. */
HCT_DEV void hrr_mix(int n, int c, const double *ref_resid, const double *gate, double *ref_mixed,
                     double *ref_bf16, double *ref_f16) {
  const long long base = (long long)n * D;
  double m = 0.0;
  for (int s = 0; s < S; ++s) m = HRR_ADD(m, HRR_MUL(gate[base + s * C + c], ref_resid[base + s * C + c]));
  const long long o = (long long)n * C + c;
  ref_mixed[o] = m;
  const float f = __double2float_rn(m);
  if (ref_bf16 != 0) ref_bf16[o] = hrr_bf16(hct_f32_to_bf16(f));
  if (ref_f16 != 0) ref_f16[o] = hrr_f16(hct_f32_to_f16(f));
}

#endif /* HC_READ_REF_H */
