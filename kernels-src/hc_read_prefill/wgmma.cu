/*
 * wgmma.cu: the variant wgmma_pb, pair_mma's bits on Hopper (sm_90a): the
 * spec's norm, the down GEMM on wgmma with operands brought by TMA over
 * all of k in order, then wgmma_pu.h's persistent up GEMM with the gate
 * and the mix as its epilogue.  Class bitwise against pair_mma: wgmma's
 * k16 steps sum as mma.sync's do (measured bit for bit on an H100 and an
 * H200: docs/perf/h100.md, h200.md), and k is never split, so every lo is
 * pair_mma's sum over k in ascending order.  Three launches:
 *
 *   hc_pf_norm     grid (S, T), 256 threads (prefill.h): the spec's
 *                  canonical norm per (token, stream), writes xn bf16
 *                  [T][D] (and R' into resid with pending).  Memory bound:
 *                  R read once (335 MB at T = 8192) and xn written (168
 *                  MB): measured 131 us there on the H200, 159-161 us on
 *                  the H100.
 *   hcp_wg_down    grid (cdiv(T, DBM), DNS): lo = xn . w_down^T (the TN
 *                  GEMM, both K-major), one CTA a DBM x 320/DNS tile (one
 *                  or two m64n160k16 per warpgroup and k16 step) over all
 *                  of D; a producer warp issues TMA loads into a
 *                  DSTAGES-deep ring of 128B-swizzled tiles (full / empty
 *                  mbarriers), DBM/64 consumer warpgroups; writes lo bf16
 *                  [T][K].  53.7 GFLOP at T = 8192 (90 us measured on the
 *                  H200 with k split in two, ~590 TFLOPS; w_down is
 *                  streamed from L2 by every CTA row, 420 MB at DBM 128).
 *                  DNS 2 splits lo's columns instead of k, so that small T
 *                  still fills the card (T = 2048 is 16 row tiles of 128)
 *                  without changing a single sum.
 *   hcp_pb_up      grid min(SM_COUNT, tiles) (wgmma_pu.h): u = lo .
 *                  w_up^T a tile of 64 tokens x PBC channels of the 4
 *                  streams, the gate g = 1 / (1 + expf(-u)), the mix m =
 *                  g0*r0 then fmaf for s = 1..3; resid holds R' already
 *                  (the norm stored it).
 * Measured (H200, 2026-12-06, the closing call in docs/perf/h200.md), us a
 * read, cold: 74.6 at T = 16, 173.4 at 2048, 461.9 at 8192, 1775.2 at
 * 32768; the fastest variant at 8192 and 32768 of either class.
 *
 * Parameters: DBM (64, 128: token rows of a down CTA), DSTAGES (4: the
 * deepest ring that fits both DBM; any value works), DNS (1, 2: the down
 * tile's columns in one block or two of 160), and wgmma_pu.h's PBM, PBC,
 * NCW, PST.  A warpgroup holds 64 rows of a tile; the down kernel's 160
 * accumulators a thread need setmaxnreg when two consumer warpgroups share
 * the SM's registers with the producer.
 *
 * Tails: TMA fills rows past T with zeros; the epilogues store rows < T.
 */
#include "hct_kernel.h"
#include "prefill.h"
#include "wgmma.h"
#include "wgmma_pu.h"

#if !defined(S) || !defined(C) || !defined(D) || !defined(K)
#error "wgmma: the op constants S, C, D, K must be defined"
#endif
#if !defined(DBM) || !defined(DSTAGES)
#error "wgmma: DBM, DSTAGES must be defined"
#endif
static_assert(D == S * C, "D must be S*C");
static_assert(K == 320, "the down tile is two wgmma of N = 160");
static_assert(DBM % 64 == 0 && DBM <= 128, "DBM: 64 or 128");
static_assert(D % 64 == 0 && K % 64 == 0, "D, K: whole 64-wide k blocks");

/* ---- step 1: the norm: prefill.h's hc_pf_norm (the spec's canonical order,
 * xn as bf16), the pair variants' own, so every variant's xn is one code. */

/* ---- step 2: down, lo = xn . w_down^T ------------------------------------- */

#ifndef DNS
#define DNS 1 /* blocks along lo's 320 columns: 1, or 2 of 160 each */
#endif
static_assert(DNS == 1 || DNS == 2, "DNS: the down tile's columns in 1 or 2 blocks");
#define HCP_DOWN_NC (DBM / 64)                           /* consumer warpgroups */
#define HCP_DOWN_N (K / DNS)                             /* columns of a block */
#define HCP_DOWN_THREADS (HCP_WG_THREADS * (HCP_DOWN_NC + 1))
#define HCP_DOWN_A_BYTES (DBM * HCP_TILE_ROW_BYTES)
#define HCP_DOWN_B_BYTES (HCP_DOWN_N * HCP_TILE_ROW_BYTES)
#define HCP_DOWN_STAGE (HCP_DOWN_A_BYTES + HCP_DOWN_B_BYTES)
#define HCP_DOWN_KB (D / 64)                             /* k blocks: all of D */

/* Grid (cdiv(T, DBM), DNS).  tm_xn: xn, dims [D, T], box [64, DBM];
 * tm_wd: w_down, dims [D, K], box [64, 160]. */
HCT_ENTRY void __launch_bounds__(HCP_DOWN_THREADS, 1)
    hcp_wg_down(const __grid_constant__ hct_tmap tm_xn, const __grid_constant__ hct_tmap tm_wd, hct_u16 *lo,
                int T) {
  HCT_DYN_SHARED(unsigned char, smem);
  const int wg = (int)threadIdx.x / HCP_WG_THREADS;
  const int m0 = (int)blockIdx.x * DBM;
  const int n0 = (int)blockIdx.y * HCP_DOWN_N; /* this block's first column of lo */
  const hcp_ring r = hcp_ring_setup<DSTAGES, HCP_DOWN_STAGE>(smem, 4 * HCP_DOWN_NC);

  if (wg == 0) {
    /* The producer: one thread issues every load. */
#if HCP_DOWN_NC > 1
    hcp_regs_dec<40>();
#endif
    if (threadIdx.x == 0) {
      hct_tma_prefetch(&tm_xn);
      hct_tma_prefetch(&tm_wd);
      for (int kb = 0; kb < HCP_DOWN_KB; ++kb) {
        const int st = kb % DSTAGES, kx = kb * 64;
        if (!hcp_ring_acquire<DSTAGES>(r, kb)) return;
        hct_bulk_expect(&r.full[st], HCP_DOWN_STAGE);
        const hct_u32 a = r.tiles + st * HCP_DOWN_STAGE, b = a + HCP_DOWN_A_BYTES;
        hct_tma_load_2d(a, &tm_xn, kx, m0, &r.full[st]);
        hct_tma_load_2d(b, &tm_wd, kx, n0, &r.full[st]);
        if (DNS == 1) hct_tma_load_2d(b + 160 * HCP_TILE_ROW_BYTES, &tm_wd, kx, 160, &r.full[st]);
      }
    }
    return;
  }
#if HCP_DOWN_NC > 1
  hcp_regs_inc<232>();
#endif
  const int cw = wg - 1; /* this consumer's 64 rows of the tile */
  const int tid = (int)threadIdx.x % HCP_WG_THREADS, warp = tid / 32, lane = tid % 32;
  float acc[HCP_DOWN_N / 2];
#pragma unroll
  for (int i = 0; i < HCP_DOWN_N / 2; ++i) acc[i] = 0.0f;
  for (int kb = 0; kb < HCP_DOWN_KB; ++kb) {
    const int st = kb % DSTAGES;
    if (!hcp_ring_wait_full<DSTAGES>(r, kb)) return;
    const hct_u32 a = r.tiles + st * HCP_DOWN_STAGE + cw * 64 * HCP_TILE_ROW_BYTES;
    const hct_u32 b = r.tiles + st * HCP_DOWN_STAGE + HCP_DOWN_A_BYTES;
    const hct_u64 da = hcp_desc_sw128(a), db0 = hcp_desc_sw128(b),
                  db1 = hcp_desc_sw128(b + 160 * HCP_TILE_ROW_BYTES);
    hcp_fence_acc<HCP_DOWN_N / 2>(acc);
    hcp_wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < 4; ++k16) {
      /* +32 bytes a k16 step: 2 in the descriptor's address field. */
      hcp_wgmma<160>(acc, da + 2 * k16, db0 + 2 * k16);
      if (DNS == 1) hcp_wgmma<160>(acc + 80, da + 2 * k16, db1 + 2 * k16);
    }
    hcp_wgmma_commit();
    hcp_fence_acc<HCP_DOWN_N / 2>(acc);
    /* The previous block's wgmmas are done: its stage may be refilled. */
    hcp_wgmma_wait<1>();
    if (kb > 0 && lane == 0) hct_mbar_arrive(&r.empty[(kb - 1) % DSTAGES]);
  }
  hcp_wgmma_wait<0>();
  hcp_fence_acc<HCP_DOWN_N / 2>(acc);

  /* Epilogue: row 16*warp + lane/4 + 8i of this warpgroup's 64, column
   * h*160 + 8j + 2(lane%4) + e. */
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = m0 + cw * 64 + 16 * warp + lane / 4 + 8 * i;
    if (row >= T) continue;
#pragma unroll
    for (int h = 0; h < 2 / DNS; ++h) {
#pragma unroll
      for (int j = 0; j < 20; ++j) {
        const int col = n0 + h * 160 + 8 * j + 2 * (lane % 4);
        const float v0 = acc[h * 80 + 4 * j + 2 * i], v1 = acc[h * 80 + 4 * j + 2 * i + 1];
        const hct_u32 w = (hct_u32)hct_f32_to_bf16(v0) | ((hct_u32)hct_f32_to_bf16(v1) << 16);
        *(hct_u32 *)(lo + (long long)row * K + col) = w;
      }
    }
  }
}

/* Steps 3 and 4 as one persistent kernel (wgmma_pu.h): after the spec's
 * norm and the down GEMM above, its outputs are pair_mma's bits. */
HCT_ENTRY void __launch_bounds__(HCP_PU_THREADS, 1)
    hcp_pb_up(const __grid_constant__ hct_tmap tm_lo, const __grid_constant__ hct_tmap tm_wu,
              const __grid_constant__ hct_tmap tm_r, float *resid, float *mixed, hct_u16 *mixed_bf16,
              hct_u16 *mixed_f16, int T) {
  hcp_pu_body<false>(&tm_lo, &tm_wu, &tm_r, resid, 0, mixed, mixed_bf16, mixed_f16, T);
}
