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
 * gated f32 335 MB; 53.7 GFLOP per GEMM): norm 503 MB moved, about 130 us
 * (bandwidth); down about 110-150 us (mma.sync issue rate, one or two
 * blocks an SM: 128 to 256 blocks over 132 SMs at the 128 x 160 and 64 x
 * 160 tiles; xn is read once from DRAM, w_down stays in L2); up about
 * 100-130 us (mma.sync, plus writing gated, 335 MB: about 80 us of
 * bandwidth, overlapped across blocks); mix 335 + 335 MB read, 168 MB
 * written, about 210 us (bandwidth).  About 550-620 us a read.
 */
#include "prefill_mma.h"

struct alignas(8) pm_f2 {
  float x, y;
};

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
