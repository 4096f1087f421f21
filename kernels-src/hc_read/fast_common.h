/*
 * fast_common.h: what the fast multi-launch hc_read variants (tg, up4,
 * upmix_dec, splitk) share: programmatic-dependent-launch hooks, the L2
 * prefetch of both weights (parameter PF), the first step (v2's norm, one
 * block per token and stream, with the w_norm loads issued early), and the
 * reduction of several canonical butterflies at once (hcr_multi_sum).
 *
 * It also holds the canonical up and mix of a warp's channels
 * (hcr_upmix_warp, used by upmix.h and persist_bw) and the gates-and-mix
 * tail it shares with persist (hcr_gate_mix).
 *
 * Each of those templates defines PF and includes this after hc_read.h;
 * its norm entry is a thin wrapper around hcr_fast_norm, so the entry names
 * stay the variant's own.  Everything here is inlined: the compiled code is
 * the same as when each template carried its own copy (checked by
 * comparing the PTX of every parameter point before and after the move).
 */
#ifndef HCR_FAST_COMMON_H
#define HCR_FAST_COMMON_H

#ifndef PF
#error "fast_common.h: PF must be defined"
#endif

/* ---- programmatic dependent launch (sm_90+) ------------------------------*/

/* When the runtime launches a kernel with programmatic stream
 * serialisation, it may start before the previous kernel of the stream has
 * finished: each kernel lets its successor start at once (hcr_pdl_launch),
 * requests its own weights (never written by any kernel), and only then
 * waits (hcr_pdl_wait) for the previous kernel's completion and memory
 * before any other global access.  Every block waits before it exits, so
 * completion stays transitive along the chain.  Launched the ordinary way,
 * both are no-ops. */
HCT_DEV void hcr_pdl_launch(void) {
#if defined(HCT_CUDA) && HCT_ARCH >= 90
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

HCT_DEV void hcr_pdl_wait(void) {
#if defined(HCT_CUDA) && HCT_ARCH >= 90
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* ---- L2 prefetch of both weights ----------------------------------------- */

#define HCR_FAST_WBYTES ((long long)K * D * 2) /* bytes of w_down, and of w_up */
#if PF == 2 && defined(HCT_CUDA) && HCT_ARCH >= 90
#define HCR_FAST_PIECE 4096
#else
#define HCR_FAST_PIECE 32
#endif
static_assert(HCR_FAST_WBYTES % HCR_FAST_PIECE == 0, "hc_read: prefetch pieces must tile the weights");

/* Pieces are dealt round-robin over blocks first, so every SM issues its
 * share; a piece never straddles the two arrays. */
HCT_DEV void hcr_prefetch(const hct_u16 *w_down, const hct_u16 *w_up) {
#if PF > 0 && defined(HCT_CUDA)
  const long long np = 2 * HCR_FAST_WBYTES / HCR_FAST_PIECE;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long p = blockIdx.x + (long long)gridDim.x * threadIdx.x; p < np; p += step) {
    const long long off = p * HCR_FAST_PIECE;
    const char *a = off < HCR_FAST_WBYTES ? (const char *)w_down + off
                                    : (const char *)w_up + (off - HCR_FAST_WBYTES);
#if HCR_FAST_PIECE == 4096
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], 4096;" ::"l"(a) : "memory");
#else
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
#endif
  }
#endif
}

/* ---- step 1 ---------------------------------------------------------------*/

/* Grid (max(T*S, PF ? SM_COUNT : 0)), block 256; `red` is the entry's
 * __shared__ float[9]. */
HCT_DEV void hcr_fast_norm(float *resid, const float *pending, const hct_u16 *w_norm,
                           const hct_u16 *w_down, const hct_u16 *w_up, float *xn, int T,
                           float *red) {
  hcr_pdl_launch();
  hcr_prefetch(w_down, w_up);
  hcr_pdl_wait();
  const int b = (int)blockIdx.x;
  if (b >= T * S) return;
  hcr_norm_stream_t<true, false>(b / S, b % S, resid, pending, w_norm, xn, red);
}

/* Lane src's value of v, across the warp. */
HCT_DEV float hcr_shfl_idx(float v, int src) {
#if defined(HCT_CUDA)
  return __shfl_sync(0xffffffffu, v, src);
#else
  return __shfl(v, src, HCT_LW);
#endif
}

/* ---- several butterflies at once ------------------------------------------*/

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
HCT_DEV void hcr_halve(float *v, int lane) {
  const bool up = (lane & OFF) != 0;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const float keep = up ? v[N / 2 + i] : v[i];
    const float send = up ? v[i] : v[N / 2 + i];
    v[i] = keep + hct_shfl_xor(send, OFF);
  }
}

template <int N>
HCT_DEV float hcr_multi_sum(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= HCT_LW && (N & (N - 1)) == 0, "hcr_multi_sum: N is 2^M <= 32");
  if (N >= 2) hcr_halve<N, 16>(v, lane);
  if (N >= 4) hcr_halve<(N >= 4 ? N / 2 : 2), 8>(v, lane);
  if (N >= 8) hcr_halve<(N >= 8 ? N / 4 : 2), 4>(v, lane);
  if (N >= 16) hcr_halve<(N >= 16 ? N / 8 : 2), 2>(v, lane);
  if (N >= 32) hcr_halve<(N >= 32 ? N / 16 : 2), 1>(v, lane);
  float a = v[0];
  /* The offsets left, still in the canonical order (largest first). */
  if (N < 2) a += hct_shfl_xor(a, 16);
  if (N < 4) a += hct_shfl_xor(a, 8);
  if (N < 8) a += hct_shfl_xor(a, 4);
  if (N < 16) a += hct_shfl_xor(a, 2);
  if (N < 32) a += hct_shfl_xor(a, 1);
  return a;
}

/* ---- steps 3 and 4 by one warp ------------------------------------------ */

/* The end of an up-and-mix warp: gt holds, in lane v << (5 - M), the gate
 * of value v = s*TB + t (token t, stream s); the lanes that mix (`mixer`,
 * token tm) gather their four gates and store the mix of R' (r) and its
 * 16-bit images for channel c. */
template <int TB, int M>
HCT_DEV void hcr_gate_mix(float gt, const float (&r)[S], int tm, bool mixer, int c, float *mixed,
                          hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  float gs[S];
#pragma unroll
  for (int s = 0; s < S; ++s) gs[s] = hcr_shfl_idx(gt, (s * TB + tm) << (5 - M));
  if (mixer) hcr_mix_out(gs, 1, r, 1, (long long)tm * C + c, mixed, mixed_bf16, mixed_f16);
}

/*
 * Steps 3 and 4 in the canonical order for the channels c0 .. c0+NC-1 of
 * one warp (upmix.h's upmix_dec and splitk, persist_bw), with lo of the
 * tokens in shared memory (tokens T..TB-1 zero) as slo[h][t][chunk], h
 * the first or second float4 of a chunk, 8 token rows a half.  w holds
 * each channel's four w_up rows (chunks lane and lane + 32), rr R' of the
 * token the lane mixes.  Value s*TB + t of a lane is its partial of row
 * s*C + c for token t; after hcr_multi_sum lane L holds the full sum of
 * value L >> (5 - M), and lane t < T gathers its four gates and mixes.
 */
template <int TB, int NC>
HCT_DEV void hcr_upmix_warp(const hct_u4 (&w)[NC][S][2], const float (&rr)[NC][S],
                           const hct_f4 *slo, int lane, int c0, int T, float *mixed,
                           hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  constexpr int NV = S * TB;
  constexpr int M = TB == 1 ? 2 : TB == 2 ? 3 : TB == 4 ? 4 : 5;
  static_assert(S == 4 && (1 << M) == NV, "hcr_upmix_warp: 4 streams x TB tokens is 2^M");
  const bool two = lane + HCT_LW < HCR_UP_CHUNKS;
  const int tm = lane & (TB - 1);
  const bool mixer = lane < T && lane < TB;
#pragma unroll
  for (int i = 0; i < NC; ++i) {
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
    const float g = hcr_sigmoid(hcr_multi_sum<NV>(v, lane));
    hcr_gate_mix<TB, M>(g, rr[i], tm, mixer, c0 + i, mixed, mixed_bf16, mixed_f16);
  }
}

#endif /* HCR_FAST_COMMON_H */
