/*
 * wgmma_up.h: steps 3 and 4 of hc_read_prefill on Hopper, the up GEMM
 * u = lo . w_up^T with the gate and the mix as its epilogue, for the
 * variants wgmma and wgmma_fn (each defines its entry point around
 * hcp_up_body).  A CTA's tile is UBM tokens x (4 x UBC) columns: the same
 * UBC channels c0.. of the 4 streams (rows s*C + c0.. of w_up, one TMA box
 * a stream), so each thread holds every stream of its (token, channel)
 * and mixes in registers: g = 1 / (1 + expf(-u)), m = g0*r0, then fmaf for
 * s = 1..3.  With ADD_PENDING (wgmma_fn, whose down kernel leaves resid
 * as it was), R' = fl(R + P) is formed here and stored into resid, by the
 * one thread that reads it.
 *
 * Needs UBM, UBC, USTAGES and the op constants; wgmma.h first.
 */
#ifndef HCP_WGMMA_UP_H
#define HCP_WGMMA_UP_H

#if !defined(UBM) || !defined(UBC) || !defined(USTAGES)
#error "wgmma_up.h: UBM, UBC, USTAGES must be defined"
#endif
static_assert(UBM % 64 == 0 && UBM <= 128, "UBM: 64 or 128");
static_assert(UBC % 8 == 0 && 4 * UBC <= 256 && C % UBC == 0, "UBC: 4*UBC is one wgmma N");
static_assert(S == 4, "the up epilogue mixes 4 streams");

/* Two floats as one 8-byte access (c is even: the pair is aligned). */
struct alignas(8) hcp_f2 {
  float x, y;
};

#define HCP_UP_NC (UBM / 64)
#define HCP_UP_THREADS (HCP_WG_THREADS * (HCP_UP_NC + 1))
#define HCP_UP_N (4 * UBC)
#define HCP_UP_A_BYTES (UBM * HCP_TILE_ROW_BYTES)
#define HCP_UP_B_BYTES (HCP_UP_N * HCP_TILE_ROW_BYTES)
#define HCP_UP_STAGE (HCP_UP_A_BYTES + HCP_UP_B_BYTES)
#define HCP_UP_KB (K / 64)
static_assert((UBC * HCP_TILE_ROW_BYTES) % 1024 == 0, "a stream's B rows keep 1024-byte alignment");

/* The CTA's tile of the grid (C / UBC, cdiv(T, UBM)), HCP_UP_THREADS
 * threads.  tm_lo: lo, dims [K, T], box [64, UBM]; tm_wu: w_up, dims
 * [K, D], box [64, UBC] (kernel parameters, by their addresses). */
template <bool ADD_PENDING>
HCT_DEV void hcp_up_body(const hct_tmap *tm_lo, const hct_tmap *tm_wu, float *resid,
                         const float *pending, float *mixed, hct_u16 *mixed_bf16,
                         hct_u16 *mixed_f16, int T) {
  HCT_DYN_SHARED(unsigned char, hcp_up_smem);
  const int wg = (int)threadIdx.x / HCP_WG_THREADS;
  const int c0 = (int)blockIdx.x * UBC, m0 = (int)blockIdx.y * UBM;
  const hcp_ring r = hcp_ring_setup<USTAGES, HCP_UP_STAGE>(hcp_up_smem, 4 * HCP_UP_NC);

  if (wg == 0) {
    if (threadIdx.x == 0) {
      hct_tma_prefetch(tm_lo);
      hct_tma_prefetch(tm_wu);
      for (int kb = 0; kb < HCP_UP_KB; ++kb) {
        const int st = kb % USTAGES, kx = kb * 64;
        if (!hcp_ring_acquire<USTAGES>(r, kb)) return;
        hct_bulk_expect(&r.full[st], HCP_UP_STAGE);
        const hct_u32 a = r.tiles + st * HCP_UP_STAGE, b = a + HCP_UP_A_BYTES;
        hct_tma_load_2d(a, tm_lo, kx, m0, &r.full[st]);
#pragma unroll
        for (int s = 0; s < S; ++s)
          hct_tma_load_2d(b + s * UBC * HCP_TILE_ROW_BYTES, tm_wu, kx, s * C + c0, &r.full[st]);
      }
    }
    return;
  }
  const int cw = wg - 1;
  const int tid = (int)threadIdx.x % HCP_WG_THREADS, warp = tid / 32, lane = tid % 32;
  float acc[HCP_UP_N / 2];
#pragma unroll
  for (int i = 0; i < HCP_UP_N / 2; ++i) acc[i] = 0.0f;
  for (int kb = 0; kb < HCP_UP_KB; ++kb) {
    const int st = kb % USTAGES;
    if (!hcp_ring_wait_full<USTAGES>(r, kb)) return;
    const hct_u32 a = r.tiles + st * HCP_UP_STAGE + cw * 64 * HCP_TILE_ROW_BYTES;
    const hct_u32 b = r.tiles + st * HCP_UP_STAGE + HCP_UP_A_BYTES;
    const hct_u64 da = hcp_desc_sw128(a), db = hcp_desc_sw128(b);
    hcp_fence_acc<HCP_UP_N / 2>(acc);
    hcp_wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < 4; ++k16) hcp_wgmma<HCP_UP_N>(acc, da + 2 * k16, db + 2 * k16);
    hcp_wgmma_commit();
    hcp_fence_acc<HCP_UP_N / 2>(acc);
    hcp_wgmma_wait<1>();
    if (kb > 0 && lane == 0) hct_mbar_arrive(&r.empty[(kb - 1) % USTAGES]);
  }
  hcp_wgmma_wait<0>();
  hcp_fence_acc<HCP_UP_N / 2>(acc);

  /* Epilogue.  Column n of the tile is stream n / UBC, channel c0 + n % UBC:
   * register 4j + 2i + e with j = s*(UBC/8) + jj is stream s, channel
   * c0 + 8jj + 2(lane%4) + e, row 16*warp + lane/4 + 8i. */
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int t = m0 + cw * 64 + 16 * warp + lane / 4 + 8 * i;
    if (t >= T) continue;
#pragma unroll
    for (int jj = 0; jj < UBC / 8; ++jj) {
      const int c = c0 + 8 * jj + 2 * (lane % 4);
      float g[S][2], rv[S][2];
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const long long at = ((long long)t * S + s) * C + c;
        hcp_f2 x = *(const hcp_f2 *)(resid + at);
        if (ADD_PENDING && pending != 0) {
          const hcp_f2 p = *(const hcp_f2 *)(pending + at);
          x.x = x.x + p.x;
          x.y = x.y + p.y;
          *(hcp_f2 *)(resid + at) = x;
        }
        rv[s][0] = x.x;
        rv[s][1] = x.y;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float u = acc[4 * (s * (UBC / 8) + jj) + 2 * i + e];
          g[s][e] = 1.0f / (1.0f + expf(-u));
        }
      }
      float m[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = g[0][e] * rv[0][e];
        v = fmaf(g[1][e], rv[1][e], v);
        v = fmaf(g[2][e], rv[2][e], v);
        v = fmaf(g[3][e], rv[3][e], v);
        m[e] = v;
      }
      const long long o = (long long)t * C + c;
      *(hcp_f2 *)(mixed + o) = hcp_f2{m[0], m[1]};
      *(hct_u32 *)(mixed_bf16 + o) =
          (hct_u32)hct_f32_to_bf16(m[0]) | ((hct_u32)hct_f32_to_bf16(m[1]) << 16);
      *(hct_u32 *)(mixed_f16 + o) =
          (hct_u32)hct_f32_to_f16(m[0]) | ((hct_u32)hct_f32_to_f16(m[1]) << 16);
    }
  }
}

#endif /* HCP_WGMMA_UP_H */
