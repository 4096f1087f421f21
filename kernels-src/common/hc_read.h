/*
 * hc_read.h: the steps of the hyper-connection read in the canonical (v1)
 * order of /work/shared/spec/hc_read.md, as device functions that the
 * hc_read templates wrap in their own entry points.  Any variant of class
 * bitwise must reproduce, per output element, the exact sequence of
 * roundings written here; keep it that way when changing the staging.
 *
 * Layouts: resid, pending [T][S][C] f32; w_norm [S][C] bf16; w_down [K][D]
 * bf16; w_up [D][K] bf16; scratch xn [T][D] f32 (D = S*C, index s*C + c),
 * lo [T][K] f32, gate [T][D] f32; mixed [T][C] f32 and its bf16/f16 images.
 */
#ifndef HC_READ_H
#define HC_READ_H

#include "hct_kernel.h"

#if !defined(S) || !defined(C) || !defined(D) || !defined(K)
#error "hc_read.h: the op constants S, C, D, K must be defined"
#endif
static_assert(D == S * C, "D must be S*C");
static_assert(D % (8 * HCT_LW) == 0, "down: D must be whole chunks of 8 per lane");
static_assert(K % 8 == 0, "up: K must be whole chunks of 8");

/* The norm is defined for blocks of 256 threads (8 warps). */
#define HCR_NORM_THREADS 256
#define HCR_NORM_PER_THREAD ((C + HCR_NORM_THREADS - 1) / HCR_NORM_THREADS)
/* Steps of 32 chunks of 8 per lane in the down dot: 40 for D = 10240. */
#define HCR_DOWN_Q (D / (8 * HCT_LW))
/* Chunks of 8 of a row of w_up: 40 for K = 320. */
#define HCR_UP_CHUNKS (K / 8)

/* acc = fmaf(w[e], x[e], acc) for the 8 elements of a chunk, in order. */
HCT_DEV float hcr_dot8(hct_u4 w, hct_f4 a, hct_f4 b, float acc) {
  acc = fmaf(hct_bf16_lo(w.x), a.x, acc);
  acc = fmaf(hct_bf16_hi(w.x), a.y, acc);
  acc = fmaf(hct_bf16_lo(w.y), a.z, acc);
  acc = fmaf(hct_bf16_hi(w.y), a.w, acc);
  acc = fmaf(hct_bf16_lo(w.z), b.x, acc);
  acc = fmaf(hct_bf16_hi(w.z), b.y, acc);
  acc = fmaf(hct_bf16_lo(w.w), b.z, acc);
  acc = fmaf(hct_bf16_hi(w.w), b.w, acc);
  return acc;
}

/*
 * Step 1 for one (token, stream), by a whole block of 256 threads.  `red`
 * is 9 floats of shared memory, free on entry.  With `pending`, R' =
 * fl(R + P) is stored into resid here, once per element, and the values
 * stay in registers so R' is never formed twice.  Two switches change
 * when things happen, never the arithmetic:
 *   EARLY_WN  w_norm is loaded with the resid loads, before the reduction,
 *             so a cold w_norm costs no second memory latency after it
 *             (the fast variants, through hcr_fast_norm);
 *   REUSE     `red` is free again on return (a barrier at the end), for a
 *             caller that normalises its next stream with it (v1).
 */
/* Where step 1 puts xn: f32 (hc_read), or rounded to bf16 (RNE) for the
 * GEMMs of hc_read_prefill; the f32 value is the same either way. */
HCT_DEV void hcr_put_xn(float *p, float v) { *p = v; }
HCT_DEV void hcr_put_xn(hct_u16 *p, float v) { *p = hct_f32_to_bf16(v); }

template <bool EARLY_WN, bool REUSE, typename XN>
HCT_DEV void hcr_norm_stream_t(int t, int s, float *resid, const float *pending,
                               const hct_u16 *w_norm, XN *xn, float *red) {
  const int tid = (int)threadIdx.x;
  const long long base = ((long long)t * S + s) * C;
  const hct_u16 *wn = w_norm + (long long)s * C;
  float x[HCR_NORM_PER_THREAD], wv[HCR_NORM_PER_THREAD];
  float a = 0.0f;
  if (EARLY_WN) {
#pragma unroll
    for (int k = 0; k < HCR_NORM_PER_THREAD; ++k) {
      const int c = tid + k * HCR_NORM_THREADS;
      wv[k] = c < C ? hct_bf16_to_f32(wn[c]) : 0.0f;
    }
  }
#pragma unroll
  for (int k = 0; k < HCR_NORM_PER_THREAD; ++k) {
    const int c = tid + k * HCR_NORM_THREADS;
    x[k] = 0.0f;
    if (c < C) {
      float v = resid[base + c];
      if (pending != 0) {
        v = v + pending[base + c];
        resid[base + c] = v;
      }
      x[k] = v;
      a = fmaf(v, v, a);
    }
  }
  a = hct_warp_sum(a);
  if ((tid & (HCT_LW - 1)) == 0) red[tid / HCT_LW] = a;
  __syncthreads();
  if (tid < HCT_LW) {
    /* Warp k's sum in lane k, butterfly 4, 2, 1 on lanes 0..7; the other
     * lanes shuffle zeros among themselves and are ignored. */
    float b = tid < HCR_NORM_THREADS / HCT_LW ? red[tid] : 0.0f;
    b += hct_shfl_xor(b, 4);
    b += hct_shfl_xor(b, 2);
    b += hct_shfl_xor(b, 1);
    if (tid == 0) red[8] = b;
  }
  __syncthreads();
  const float ss = red[8];
  const float rs = rsqrtf(ss / (float)C + HCT_EPS);
  XN *xo = xn + (long long)t * D + (long long)s * C;
#pragma unroll
  for (int k = 0; k < HCR_NORM_PER_THREAD; ++k) {
    const int c = tid + k * HCR_NORM_THREADS;
    if (c < C) {
      const float y = x[k] * (EARLY_WN ? wv[k] : hct_bf16_to_f32(wn[c]));
      hcr_put_xn(&xo[c], y * rs);
    }
  }
  if (REUSE) __syncthreads();
}

/* v1's, v2's and v3's step 1 (the canonical order). */
HCT_DEV void hcr_norm_stream(int t, int s, float *resid, const float *pending,
                             const hct_u16 *w_norm, float *xn, float *red) {
  hcr_norm_stream_t<false, true>(t, s, resid, pending, w_norm, xn, red);
}

/* Step 2's sum for one row and token, by one logical warp: lane L's fmaf
 * chain over chunks L + 32q of the row w and of x (xn of the token), in
 * order, then the butterfly; every lane returns the sum.  w and x may be in
 * global or shared memory.  UNROLL only tells the compiler how far to
 * unroll; the order is the same. */
template <int UNROLL>
HCT_DEV float hcr_down_sum(const hct_u4 *w, const hct_f4 *x, int lane) {
  float acc = 0.0f;
#pragma unroll UNROLL
  for (int q = 0; q < HCR_DOWN_Q; ++q) {
    const int c = lane + HCT_LW * q;
    acc = hcr_dot8(w[c], x[2 * c], x[2 * c + 1], acc);
  }
  return hct_warp_sum(acc);
}

/* Step 2 for one (token, row j), by one logical warp (lane = its lane). */
HCT_DEV void hcr_down_row(int t, int j, int lane, const hct_u16 *w_down, const float *xn,
                          float *lo) {
  const float acc = hcr_down_sum<4>((const hct_u4 *)(w_down + (long long)j * D),
                                    (const hct_f4 *)(xn + (long long)t * D), lane);
  if (lane == 0) lo[(long long)t * K + j] = acc;
}

/* The gate of step 3. */
HCT_DEV float hcr_sigmoid(float u) { return 1.0f / (1.0f + expf(-u)); }

/* Step 3 for one (token, row i), by one logical warp. */
HCT_DEV void hcr_up_row(int t, int i, int lane, const hct_u16 *w_up, const float *lo,
                        float *gate) {
  const hct_u4 *w = (const hct_u4 *)(w_up + (long long)i * K);
  const hct_f4 *l = (const hct_f4 *)(lo + (long long)t * K);
  float acc = 0.0f;
  for (int ch = lane; ch < HCR_UP_CHUNKS; ch += HCT_LW)
    acc = hcr_dot8(w[ch], l[2 * ch], l[2 * ch + 1], acc);
  acc = hct_warp_sum(acc);
  if (lane == 0) gate[(long long)t * D + i] = hcr_sigmoid(acc);
}

/* Step 4's sum for one (token, channel) (hcr_mix_sum), and its stores
 * (hcr_mix_out), wherever the gates and R' are: stream s's gate at
 * g[s * gs], its R' at r[s * rs]; the output element o of mixed and its two
 * 16-bit images. */
HCT_DEV float hcr_mix_sum(const float *g, long long gs, const float *r, long long rs) {
  float m = g[0] * r[0];
#pragma unroll
  for (int s = 1; s < S; ++s) m = fmaf(g[s * gs], r[s * rs], m);
  return m;
}

HCT_DEV void hcr_mix_out(const float *g, long long gs, const float *r, long long rs, long long o, float *mixed,
                         hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  const float m = hcr_mix_sum(g, gs, r, rs);
  mixed[o] = m;
  mixed_bf16[o] = hct_f32_to_bf16(m);
  mixed_f16[o] = hct_f32_to_f16(m);
}

/* Step 4 for one (token, channel): r is R' (resid after the norm stage). */
HCT_DEV void hcr_mix(int t, int c, const float *resid, const float *gate, float *mixed,
                     hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  hcr_mix_out(gate + (long long)t * D + c, C, resid + (long long)t * S * C + c, C, (long long)t * C + c, mixed,
              mixed_bf16, mixed_f16);
}

#endif /* HC_READ_H */
