/*
 * splitk: hc_read in three launches, class kl: the down projection split
 * along k over SPLIT blocks per row group, for full-chip memory
 * parallelism, with a fixed-order reduction.
 *
 *   hc_sk_norm   v2's norm, one block per (token, stream), and the L2
 *                prefetch of both weights spread over SM_COUNT blocks (as
 *                upmix_dec).
 *   hc_sk_down   grid (SPLIT, K/RPB): warp w of block (p, g) takes row
 *                g*RPB + w over the p-th slice of D/SPLIT columns; each lane
 *                loads all of its CPL = D/(256*SPLIT) chunks of weights
 *                before the first use, then for every token a chunked dot
 *                and the butterfly give the slice's partial.  The last
 *                block of the row group (an atomic count in ws) adds the
 *                SPLIT partials in order p = 0, 1, ...: deterministic.
 *   hc_sk_upmix  up and mix fused, as upmix_dec's.
 *
 * Parameters: PF (as upmix_dec), SPLIT (a divisor of D/256), RPB (rows,
 * i.e. warps, per down block), UW and CPW (upmix: warps per block,
 * channels per warp).
 *
 * Scratch: xn T*D*4, part T*SPLIT*K*4, lo T*K*4, ws 4096 zeroed (one
 * counter per row group; each last block puts its counter back to 0).
 */
#include "hc_read.h"

#ifndef PF
#error "splitk: PF must be defined"
#endif
#ifndef SPLIT
#error "splitk: SPLIT must be defined"
#endif
#ifndef RPB
#error "splitk: RPB must be defined"
#endif
#ifndef UW
#error "splitk: UW must be defined"
#endif
#ifndef CPW
#error "splitk: CPW must be defined"
#endif

static_assert((D / (8 * HCT_LW)) % SPLIT == 0, "splitk: SPLIT must divide D/256");
static_assert(K % RPB == 0, "splitk: RPB must divide K");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "splitk: a row of w_up is one or two chunks per lane");
static_assert(C % (UW * CPW) == 0, "splitk: UW*CPW must divide C");

/* ---- step 1: v2's norm and the L2 prefetch (fast_common.h) ---------------*/

#include "fast_common.h"

/* Grid (max(T*S, PF ? SM_COUNT : 0)), block 256. */
HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_sk_norm(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
               const hct_u16 *w_up, float *xn, int T) {
  __shared__ float red[9];
  hcr_fast_norm(resid, pending, w_norm, w_down, w_up, xn, T, red);
}

/* ---- step 2 ---------------------------------------------------------------*/

#define SK_CPS (D / 8 / SPLIT)      /* chunks of 8 per slice */
#define SK_CPL (SK_CPS / HCT_LW)    /* chunks per lane */
#define SK_DT (RPB * HCT_LW)

HCT_DEV float sk_load_cg(const float *p) { return *(const volatile float *)p; }

/* Grid (SPLIT, K/RPB), block RPB*32. */
HCT_ENTRY void __launch_bounds__(SK_DT)
    hc_sk_down(const hct_u16 *w_down, const float *xn, float *part, float *lo, hct_u32 *ws,
               int T) {
  __shared__ int sk_last;
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int sp = (int)blockIdx.x, j = (int)blockIdx.y * RPB + wp;
  const hct_u4 *w = (const hct_u4 *)(w_down + (long long)j * D) + sp * SK_CPS;
  hct_u4 wr[SK_CPL];
#pragma unroll
  for (int m = 0; m < SK_CPL; ++m) wr[m] = w[lane + HCT_LW * m];
  hcr_pdl_launch();
  hcr_pdl_wait();
  for (int t = 0; t < T; ++t) {
    const hct_f4 *HCT_RESTRICT x = (const hct_f4 *)(xn + (long long)t * D) + 2 * sp * SK_CPS;
    float acc = 0.0f;
#pragma unroll
    for (int m = 0; m < SK_CPL; ++m) {
      const int c = lane + HCT_LW * m;
      acc = hcr_dot8(wr[m], x[2 * c], x[2 * c + 1], acc);
    }
    acc = hct_warp_sum(acc);
    if (lane == 0) part[((long long)t * SPLIT + sp) * K + j] = acc;
  }
  __threadfence();
  __syncthreads();
  const int idx = (int)blockIdx.y;
  if (tid == 0) sk_last = atomicAdd(&ws[idx], 1u) == (hct_u32)(SPLIT - 1);
  __syncthreads();
  if (!sk_last) return;
  /* The last block of the row group: the SPLIT partials, in order. */
  __threadfence();
  for (int p = tid; p < T * RPB; p += SK_DT) {
    const int t = p / RPB, jj = (int)blockIdx.y * RPB + p % RPB;
    /* Every load issued before the first add: one memory latency, not
     * SPLIT of them (volatile loads keep their order, so load first). */
    float v[SPLIT];
#pragma unroll
    for (int q = 0; q < SPLIT; ++q) v[q] = sk_load_cg(&part[((long long)t * SPLIT + q) * K + jj]);
    float a = 0.0f;
#pragma unroll
    for (int q = 0; q < SPLIT; ++q) a += v[q];
    lo[(long long)t * K + jj] = a;
  }
  if (tid == 0) ws[idx] = 0u;
}

/* ---- steps 3 and 4 --------------------------------------------------------*/

HCT_DEV float sk_shfl_idx(float v, int src) {
#if defined(HCT_CUDA)
  return __shfl_sync(0xffffffffu, v, src);
#else
  return __shfl(v, src, HCT_LW);
#endif
}

/*
 * Reduces N = 2^M sums of 32 lane partials at once (M <= 5): halving
 * stages at offsets 16, 8, ... (a lane keeps the lower half of its values
 * when its offset bit is clear, the upper half when set, and adds its
 * partner's copy of each kept value), then plain butterfly stages for the
 * offsets left.  Partners always hold the same sums, so every sum is the
 * canonical butterfly's, bit for bit.  Returns the sum of value
 * lane >> (5 - M).
 */
/* One halving stage at offset OFF over the first N values. */
template <int N, int OFF>
HCT_DEV void sk_halve(float *v, int lane) {
  const bool up = (lane & OFF) != 0;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const float keep = up ? v[N / 2 + i] : v[i];
    const float send = up ? v[i] : v[N / 2 + i];
    v[i] = keep + hct_shfl_xor(send, OFF);
  }
}

template <int N>
HCT_DEV float sk_multi_sum(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= HCT_LW && (N & (N - 1)) == 0, "sk_multi_sum: N is 2^M <= 32");
  if (N >= 2) sk_halve<N, 16>(v, lane);
  if (N >= 4) sk_halve<(N >= 4 ? N / 2 : 2), 8>(v, lane);
  if (N >= 8) sk_halve<(N >= 8 ? N / 4 : 2), 4>(v, lane);
  if (N >= 16) sk_halve<(N >= 16 ? N / 8 : 2), 2>(v, lane);
  if (N >= 32) sk_halve<(N >= 32 ? N / 16 : 2), 1>(v, lane);
  float a = v[0];
  /* The offsets left, still in the canonical order (largest first). */
  if (N < 2) a += hct_shfl_xor(a, 16);
  if (N < 4) a += hct_shfl_xor(a, 8);
  if (N < 8) a += hct_shfl_xor(a, 4);
  if (N < 16) a += hct_shfl_xor(a, 2);
  if (N < 32) a += hct_shfl_xor(a, 1);
  return a;
}

#define SK_UT (UW * HCT_LW)

/*
 * Steps 3 and 4 for the channels c0 .. c0+CPW-1 of one warp, with lo of
 * the tokens in shared memory (tokens T..TB-1 zero) as slo[h][t][chunk].  Value s*TB + t of a
 * lane is its partial of row s*C + c for token t; after sk_multi_sum lane
 * L holds the full sum of value L >> (5 - M), and lane t < T gathers its
 * four gates and mixes.
 */
template <int TB>
HCT_DEV void sk_upmix_warp(const hct_u4 (&w)[CPW][S][2], const float (&rr)[CPW][S],
                           const hct_f4 *slo, int lane, int c0, int T, float *mixed,
                           hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  constexpr int NV = S * TB;
  constexpr int M = TB == 1 ? 2 : TB == 2 ? 3 : TB == 4 ? 4 : 5;
  static_assert(S == 4 && (1 << M) == NV, "splitk: 4 streams x TB tokens is 2^M");
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS;
  const int tm = lane & (TB - 1);
  const bool mixer = lane < T && lane < TB;
#pragma unroll
  for (int i = 0; i < CPW; ++i) {
    float v[NV];
#pragma unroll
    for (int t = 0; t < TB; ++t) {
      const hct_f4 *l0 = slo + t * (K / 8), *l1 = slo + (8 + t) * (K / 8);
      const hct_f4 a = l0[lane], b = l1[lane];
      hct_f4 a2 = {0.0f, 0.0f, 0.0f, 0.0f}, b2 = a2;
      if (two) {
        a2 = l0[lane + HCT_LW];
        b2 = l1[lane + HCT_LW];
      }
#pragma unroll
      for (int s = 0; s < S; ++s) {
        float acc = hcr_dot8(w[i][s][0], a, b, 0.0f);
        if (two) acc = hcr_dot8(w[i][s][1], a2, b2, acc);
        v[s * TB + t] = acc;
      }
    }
    const float g = hcr_sigmoid(sk_multi_sum<NV>(v, lane));
    float gs[S];
#pragma unroll
    for (int s = 0; s < S; ++s) gs[s] = sk_shfl_idx(g, (s * TB + tm) << (5 - M));
    if (mixer) {
      float m = gs[0] * rr[i][0];
#pragma unroll
      for (int s = 1; s < S; ++s) m = fmaf(gs[s], rr[i][s], m);
      const long long o = (long long)tm * C + c0 + i;
      mixed[o] = m;
      mixed_bf16[o] = hct_f32_to_bf16(m);
      mixed_f16[o] = hct_f32_to_f16(m);
    }
  }
}

/*
 * Grid (C / (UW*CPW)), block UW*32.  Warp w of block b takes channels
 * (b*UW + w)*CPW + i, i < CPW.  The reduction is sized by TB, the least
 * power of two >= T, picked at run time (one binary serves every T).
 */
HCT_ENTRY void __launch_bounds__(SK_UT)
    hc_sk_upmix(const float *resid, const hct_u16 *w_up, const float *lo, float *mixed,
                hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  __shared__ hct_f4 slo[2 * 8 * (K / 8)];
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int c0 = ((int)blockIdx.x * UW + wp) * CPW;
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS; /* lanes with a second chunk */
  const int TB = T <= 1 ? 1 : T <= 2 ? 2 : T <= 4 ? 4 : 8;
  const int tm = lane & (TB - 1);                 /* the token lane t mixes */
  const bool mixer = lane < T && lane < TB;

  /* Weights first: every load of the warp is in flight before any use. */
  hct_u4 w[CPW][S][2];
#pragma unroll
  for (int i = 0; i < CPW; ++i)
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const hct_u4 *row = (const hct_u4 *)(w_up + ((long long)s * C + c0 + i) * K);
      w[i][s][0] = row[lane];
      w[i][s][1] = two ? row[lane + HCT_LW] : hct_u4{0, 0, 0, 0};
    }
  hcr_pdl_launch();
  hcr_pdl_wait();
  /* R' of the token this lane mixes. */
  float rr[CPW][S];
#pragma unroll
  for (int i = 0; i < CPW; ++i)
#pragma unroll
    for (int s = 0; s < S; ++s)
      rr[i][s] = mixer ? resid[((long long)tm * S + s) * C + c0 + i] : 0.0f;

  /* lo of the T tokens, tokens T..TB-1 as zeros (their sums are unused),
   * as slo[h][t][chunk]: the first (h 0) and second (h 1) float4 of each
   * chunk of 8, so a warp reads 32 consecutive float4 (4 wavefronts, not
   * 8 as with chunks side by side). */
  const hct_f4 *lo4 = (const hct_f4 *)lo;
  for (int p = tid; p < TB * K / 4; p += SK_UT) {
    const int t = p / (K / 4), q = p % (K / 4);
    slo[((q & 1) * 8 + t) * (K / 8) + (q >> 1)] =
        t < T ? lo4[p] : hct_f4{0.0f, 0.0f, 0.0f, 0.0f};
  }
  __syncthreads();

  switch (TB) {
    case 1: sk_upmix_warp<1>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    case 2: sk_upmix_warp<2>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    case 4: sk_upmix_warp<4>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
    default: sk_upmix_warp<8>(w, rr, slo, lane, c0, T, mixed, mixed_bf16, mixed_f16); break;
  }
}
