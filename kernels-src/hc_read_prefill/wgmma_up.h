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
 * R' comes into shared memory by TMA (tm_r, f32, 128B-swizzled boxes of
 * 32 channels), issued by the producer right after the GEMM's first
 * stages, so it lands while the GEMM runs (measured before, reading it in
 * the epilogue with 8-byte loads in the accumulator layout: each warp
 * waited for memory some 16 times in a row, 415 us at T = 8192 for UBM 128,
 * UBC 64, ~21 us a CTA at one CTA an SM).  Where the shared memory allows
 * (UBM 64, UBC 32: 81-105 KB) two CTAs share an SM (launch bounds), so
 * one's epilogue overlaps the other's loads and GEMM.
 *
 * Expected at T = 8192 on the H200 (not yet measured): the kernel is
 * bound by memory (R' 335 MB read, 168 MB written: 132 us at 3.8 TB/s),
 * by what L2 hands the SMs (the operands: lo read C/UBC times, w_up
 * T/UBM times, 630 MB at UBM 128 / UBC 64, 840 MB at 128 / 32, 1.26 GB at
 * 64 / 32; plus the 503 MB of memory traffic, which passes through L2;
 * the down kernel saw 6.5-8.4 TB/s), by the ring's round trips to L2
 * (three at USTAGES 2, one at 5) and, at one CTA an SM, by the
 * epilogue's math (84M expf and IEEE divisions, ~4 us a CTA of 128 x 256
 * on 8 warps) done while that SM loads nothing.  ~170-200 us at UBM 128 /
 * UBC 64 / USTAGES 2 (1.13 GB through L2; 19.4 waves of ~9 us); UMC 2
 * takes w_up's share to half (0.92 GB: ~140-170 us if the clusters
 * schedule well, which wgmma_fn's MC 2 did not); ~200-250 us at 64 / 32.
 *
 * Needs UBM, UBC, USTAGES and the op constants; wgmma.h first.
 */
#ifndef HCP_WGMMA_UP_H
#define HCP_WGMMA_UP_H

#if !defined(UBM) || !defined(UBC) || !defined(USTAGES) || !defined(UMC)
#error "wgmma_up.h: UBM, UBC, USTAGES, UMC must be defined"
#endif
#include "hct_cluster.h"
static_assert(UMC == 1 || UMC == 2, "UMC: up blocks a cluster sharing w_up's tiles, 1 or 2");
static_assert(UBM % 64 == 0 && UBM <= 128, "UBM: 64 or 128");
static_assert(UBC % 32 == 0 && 4 * UBC <= 256 && C % UBC == 0,
              "UBC: whole 32-channel R' boxes, 4*UBC is one wgmma N");
static_assert(S == 4, "the up epilogue mixes 4 streams");

#define HCP_UP_NC (UBM / 64)
#define HCP_UP_THREADS (HCP_WG_THREADS * (HCP_UP_NC + 1))
#define HCP_UP_N (4 * UBC)
#define HCP_UP_A_BYTES (UBM * HCP_TILE_ROW_BYTES)
#define HCP_UP_B_BYTES (HCP_UP_N * HCP_TILE_ROW_BYTES)
#define HCP_UP_STAGE (HCP_UP_A_BYTES + HCP_UP_B_BYTES)
#define HCP_UP_KB (K / 64)
static_assert((UBC * HCP_TILE_ROW_BYTES) % 1024 == 0, "a stream's B rows keep 1024-byte alignment");
static_assert(USTAGES <= HCP_UP_KB, "USTAGES: at most the k blocks (5: all of K at once)");

/* The CTA's R' tile, UBM rows x 4 streams x UBC channels of f32, as
 * S * UBC/32 TMA boxes [32, UBM] (one 128-byte row of 32 channels a
 * token, 128B-swizzled: the 16-byte chunk q of row r at q ^ (r % 8)),
 * box b = s * (UBC/32) + channel/32.  Loaded at the start, it lands
 * while the GEMM runs; the epilogue reads it from shared memory, each
 * warp's 8-byte reads in the accumulator layout two wavefronts (8 rows x
 * 2 chunks land on 8 distinct chunk positions), without bank conflicts. */
#define HCP_UP_R_BOX (UBM * 128)
#define HCP_UP_R_BYTES (S * (UBC / 32) * HCP_UP_R_BOX)
/* The manifest's smem for the launch (stages, R', slack and barriers),
 * and two CTAs an SM where that fits (228 KB an SM, 1 KB of it reserved a
 * CTA): one CTA's epilogue then overlaps the other's loads and GEMM. */
#define HCP_UP_SMEM (USTAGES * HCP_UP_STAGE + HCP_UP_R_BYTES + 1280)
#define HCP_UP_MINB (2 * (HCP_UP_SMEM + 1024) <= 233472 && HCP_UP_NC == 1 ? 2 : 1)

/* With UMC 2 the up kernel runs in clusters of two blocks along the
 * tokens (the same channels, m blocks 2i and 2i+1): each loads streams
 * 2*rank and 2*rank+1 of every w_up tile by TMA multicast into both
 * (half of w_up's L2 traffic, 420 MB at UBM 128), its own lo and R'.  A
 * stage's empty barrier then counts both blocks' consumer warps (each
 * arrives on its own and on the peer's), as wgmma_fn's MC 2 down kernel
 * does; cluster barriers after the barriers' init and before leaving. */
#if UMC > 1
#define HCP_UP_CLUSTER __cluster_dims__(1, UMC, 1)
#else
#define HCP_UP_CLUSTER
#endif

/* Every thread, at its end: with UMC 2 no block leaves while its peer
 * may still write into its stages or arrive on its barriers. */
HCT_DEV void hcp_up_leave(void) {
#if UMC > 1
  __syncwarp();
  hcp_cluster_sync();
#endif
}

/* The loads of the CTA's R' tile (box [32, UBM] of tm_r each) into
 * rtiles, completing on rbar; by one thread. */
HCT_DEV void hcp_up_issue_r(hct_u32 rtiles, const hct_tmap *tm_r, hct_u64 *rbar, int c0, int m0) {
  hct_bulk_expect(rbar, HCP_UP_R_BYTES);
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int h = 0; h < UBC / 32; ++h)
      hct_tma_load_2d(rtiles + (s * (UBC / 32) + h) * HCP_UP_R_BOX, tm_r, s * C + c0 + 32 * h, m0, rbar);
}

/* The CTA's tile of the grid (C / UBC, cdiv(T, UBM)), HCP_UP_THREADS
 * threads.  tm_lo: lo, dims [K, T], box [64, UBM]; tm_wu: w_up, dims
 * [K, D], box [64, UBC]; tm_r: resid, f32, dims [D, T], box [32, UBM],
 * 128B (kernel parameters, by their addresses).  The op's buffers are
 * distinct (__restrict__): with pending, the next P loads may go ahead
 * of this element's stores. */
template <bool ADD_PENDING>
HCT_DEV void hcp_up_body(const hct_tmap *tm_lo, const hct_tmap *tm_wu, const hct_tmap *tm_r,
                         float *__restrict__ resid, const float *__restrict__ pending,
                         float *__restrict__ mixed, hct_u16 *__restrict__ mixed_bf16,
                         hct_u16 *__restrict__ mixed_f16, int T) {
  HCT_DYN_SHARED(unsigned char, hcp_up_smem);
  const int wg = (int)threadIdx.x / HCP_WG_THREADS;
  const int c0 = (int)blockIdx.x * UBC, m0 = (int)blockIdx.y * UBM;
  const hcp_ring r =
      hcp_ring_setup<USTAGES, HCP_UP_STAGE, HCP_UP_R_BYTES>(hcp_up_smem, 4 * HCP_UP_NC * UMC);
  /* rbar: R' has landed (one arrival, the producer's, with its bytes). */
  hct_u64 *rbar = r.empty + USTAGES;
  const hct_u32 rtiles = r.tiles + USTAGES * HCP_UP_STAGE;
  if (threadIdx.x == 0) {
    hct_mbar_init(rbar, 1);
    hct_mbar_init_fence();
  }
  __syncthreads();
#if UMC > 1
  const int rank = hct_cluster_rank();
  /* The peer's barriers are ready before anything lands in them. */
  hcp_cluster_sync();
#endif

  if (wg == 0) {
    if (threadIdx.x == 0) {
      hct_tma_prefetch(tm_lo);
      hct_tma_prefetch(tm_wu);
      hct_tma_prefetch(tm_r);
      for (int kb = 0; kb < HCP_UP_KB; ++kb) {
        const int st = kb % USTAGES, kx = kb * 64;
        /* The GEMM's first stages are on their way (L2 hits); now R'
         * (from memory, needed last), before waiting for a free stage. */
        if (kb == USTAGES) hcp_up_issue_r(rtiles, tm_r, rbar, c0, m0);
        if (!hcp_ring_acquire<USTAGES>(r, kb)) return;
        hct_bulk_expect(&r.full[st], HCP_UP_STAGE);
        const hct_u32 a = r.tiles + st * HCP_UP_STAGE, b = a + HCP_UP_A_BYTES;
        hct_tma_load_2d(a, tm_lo, kx, m0, &r.full[st]);
#if UMC > 1
#pragma unroll
        for (int s = rank * (S / UMC); s < (rank + 1) * (S / UMC); ++s)
          hct_tma_load_2d_multicast(b + s * UBC * HCP_TILE_ROW_BYTES, tm_wu, kx, s * C + c0, &r.full[st],
                                    (hct_u16)((1u << UMC) - 1u));
#else
#pragma unroll
        for (int s = 0; s < S; ++s)
          hct_tma_load_2d(b + s * UBC * HCP_TILE_ROW_BYTES, tm_wu, kx, s * C + c0, &r.full[st]);
#endif
      }
      /* A ring of every k block: no stage is reused, R' goes last. */
      if (USTAGES == HCP_UP_KB) hcp_up_issue_r(rtiles, tm_r, rbar, c0, m0);
    } else if (ADD_PENDING && pending != 0 && threadIdx.x >= 32) {
      /* Warps 1-3 have nothing else to do: P's rows of the tile (read
       * in the epilogue with 8-byte loads) into L2 while the GEMM runs,
       * so those loads wait for L2, not memory. */
      for (int q = (int)threadIdx.x - 32; q < UBM * S; q += HCP_WG_THREADS - 32) {
        const int t = m0 + q / S, s = q % S;
        if (t < T) hct_bulk_prefetch_l2(pending + ((long long)t * S + s) * C + c0, UBC * 4);
      }
    }
    hcp_up_leave();
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
    if (kb > 0 && lane == 0) {
      hct_mbar_arrive(&r.empty[(kb - 1) % USTAGES]);
#if UMC > 1
      /* The peer's producer writes its streams into this stage too. */
      hcp_mbar_arrive_remote(hct_mapa(&r.empty[(kb - 1) % USTAGES], rank ^ 1));
#endif
    }
  }
  hcp_wgmma_wait<0>();
  hcp_fence_acc<HCP_UP_N / 2>(acc);

  /* Epilogue.  Column n of the tile is stream n / UBC, channel c0 + n % UBC:
   * register 4j + 2i + e with j = s*(UBC/8) + jj is stream s, channel
   * c0 + 8jj + 2(lane%4) + e, row 16*warp + lane/4 + 8i. */
  if (!hcp_wait(rbar, 0)) return;
  const unsigned char *rsm = hcp_up_smem + (rtiles - hct_smem_addr(hcp_up_smem));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rt = cw * 64 + 16 * warp + lane / 4 + 8 * i; /* row of the tile; rt % 8 = lane / 4 */
    const int t = m0 + rt;
    if (t >= T) continue;
#pragma unroll
    for (int jj = 0; jj < UBC / 8; ++jj) {
      const int cc = 8 * jj + 2 * (lane % 4), c = c0 + cc;
      /* cc's byte in its box's 128-byte row, its 16-byte chunk swizzled. */
      const int in_row = ((((cc % 32) / 4) ^ (rt % 8)) << 4) + (cc % 4) * 4;
      float g[S][2], rv[S][2];
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const long long at = ((long long)t * S + s) * C + c;
        hcp_f2 x = *(const hcp_f2 *)(rsm + (s * (UBC / 32) + cc / 32) * HCP_UP_R_BOX + rt * 128 + in_row);
        if (ADD_PENDING && pending != 0) {
          const hcp_f2 p = *(const hcp_f2 *)(pending + at);
          x.x = x.x + p.x;
          x.y = x.y + p.y;
          *(hcp_f2 *)(resid + at) = x;
        }
        (void)at;
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
  hcp_up_leave();
}

#endif /* HCP_WGMMA_UP_H */
