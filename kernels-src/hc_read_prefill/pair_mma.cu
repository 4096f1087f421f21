/*
 * pair_mma: hc_read_prefill with both GEMMs on tensor cores (mma.sync
 * m16n8k16 bf16, f32 accumulate; prefill_mma.h).  Four launches: the norm
 * (prefill.h, xn as bf16), the down GEMM (lo = bf16(xn . w_down^T)), the up
 * GEMM writing gated = 1/(1+expf(-u)) as f32 [T][D], and the mix reading it
 * back (prefill.h).
 *
 * The bits do not depend on the point: every output's sum is the mma
 * k-steps in ascending k from 0, with no split-K (prefill_mma.h), and the
 * gate and mix are hc_read's expressions.  upmix is checked bitwise against
 * this variant at its default point.
 *
 * Parameters: DBM x DBN, DWR, DST: the down GEMM's tile (M = T, N = K =
 * 320, k = D = 10240), a warp's rows and the stages; UBM x UBN, UWR, UST:
 * the up GEMM's (N = D, k = K = 320; UBN/S channels of each stream a
 * block).  Both k tiles are 32 (PM_BK).
 *
 * Expected on the H200 at T = 8192 (bytes: R f32 335 MB, xn bf16 168 MB,
 * gated f32 335 MB; 53.7 GFLOP per GEMM, about 90 us each at the 600
 * TFLOPS mma.sync reaches at best):
 *   norm  503 MB of DRAM traffic: about 130 us, bound by bandwidth;
 *   down  128 blocks of 128 x 160 (one an SM, 97% of 132): xn comes from
 *         DRAM once, but L2 hands the SMs 756 MB (each xn tile twice,
 *         w_down once per row tile): about 110-140 us, bound by L2
 *         bandwidth and the mma issue rate together (a 64-row warp tile,
 *         DWR = 64, halves the shared-memory reads per mma);
 *   up    630-840 MB out of L2 (lo once per column tile, w_up once per
 *         row tile: the 256-row tile halves the latter) and gated written
 *         (335 MB): about 120-150 us;
 *   mix   670 MB read, 168 MB written: about 210 us, bound by bandwidth.
 * About 570-630 us a read; smaller tiles (DBM = 64, DBN = 64 or 32) serve
 * the small counts, where 128 x 160 leaves most SMs idle: at T <= 64 the
 * down GEMM is K/DBN blocks each walking all 320 k tiles in turn (bound by
 * that chain's latency, tens of us), so DBN = 32 doubles its blocks.
 */
#include "prefill_mma.h"

/* Grid (D/UBN, cdiv(T, UBM)), block pm_up_cfg::THREADS: gated = sigmoid(u)
 * for the tile's rows and, in every stream, its UBN/S channels. */
HCT_ENTRY void __launch_bounds__(pm_up_cfg::THREADS)
    hc_pm_up(const hct_u16 *w_up, const hct_u16 *lo, float *gated, int T) {
  typedef pm_up_cfg CF;
  HCT_DYN_SHARED(hct_u16, smem);
  const int m0 = (int)blockIdx.y * UBM, c0 = (int)blockIdx.x * CF::BNG;
  float acc[CF::MT][CF::NT][4];
  pm_up_tile(w_up, lo, T, m0, c0, smem, acc);
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int wm = warp / CF::WARPS_N, wn = warp % CF::WARPS_N;
#pragma unroll
  for (int mt = 0; mt < CF::MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int t = m0 + wm * CF::WTM + mt * 16 + (lane >> 2) + 8 * h;
      if (t >= T) continue;
#pragma unroll
      for (int j = 0; j < CF::NT; ++j) {
        const int s = j / CF::NTG;
        const int c = c0 + wn * CF::WNG + (j % CF::NTG) * 8 + 2 * (lane & 3);
        pm_f2 g;
        g.x = hcr_sigmoid(acc[mt][j][2 * h]);
        g.y = hcr_sigmoid(acc[mt][j][2 * h + 1]);
        *(pm_f2 *)(gated + (long long)t * D + (long long)s * C + c) = g;
      }
    }
}
