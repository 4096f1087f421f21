/*
 * wgmma: hc_read_prefill on Hopper (sm_90a): the two GEMMs on wgmma with
 * operands brought by TMA, the up GEMM with the gate and the mix as its
 * epilogue.  Class kl (wgmma's summation order inside a k16 step is the
 * hardware's, not mma.sync's).  Four launches:
 *
 *   hc_pf_norm     grid (S, T), 256 threads (prefill.h): the spec's canonical norm per
 *                  (token, stream), writes xn bf16 [T][D] (and R' into
 *                  resid with pending).  Memory bound: R read once (335 MB
 *                  at T = 8192) and xn written (168 MB): ~125 us there.
 *   hcp_wg_down    lo = xn . w_down^T (the TN GEMM, both K-major), one CTA
 *                  a DBM x 320 tile (two m64n160k16 per warpgroup and k16
 *                  step), over D / KSPLIT of K; a producer warp issues TMA
 *                  loads into a DSTAGES-deep ring of 128B-swizzled tiles
 *                  (full / empty mbarriers), DBM/64 consumer warpgroups.
 *                  KSPLIT 1 writes lo bf16 [T][K]; more writes f32
 *                  partials [KSPLIT][T][K] for hcp_wg_reduce.  53.7 GFLOP
 *                  at T = 8192: ~80 us (tensor cores ~56 us; w_down is
 *                  streamed from L2 by every CTA row, 420 MB at DBM 128,
 *                  twice that at 64; KSPLIT 2 gives DBM 128 enough CTAs).
 *   hcp_wg_reduce  lo = bf16(sum of the partials in split order); does
 *                  nothing (one block) when KSPLIT is 1.  ~5 us.
 *   hcp_wg_up      u = lo . w_up^T for a UBM x (4 x UBC) tile whose columns
 *                  are the same UBC channels of the 4 streams (rows
 *                  s*C + c0 .. of w_up, one TMA box a stream), so each
 *                  thread holds all 4 streams of its (token, channel) and
 *                  mixes in registers: g = 1 / (1 + expf(-u)), m = g0*r0,
 *                  then fmaf for s = 1..3; writes mixed, mixed_bf16,
 *                  mixed_f16.  The CTA's R' tile comes by TMA into shared
 *                  memory while the GEMM runs.  53.7 GFLOP plus R read
 *                  again (335 MB) and 168 MB written: measured 415 us when
 *                  the epilogue loaded R' itself; expected now ~150-190 us
 *                  (wgmma_up.h says why).
 * Expected at T = 8192 on the H200: ~390 us for the read (measured: norm
 * 131, down 90, reduce 8; the up kernel as above).
 *
 * Parameters: DBM (64, 128: token rows of a down CTA), KSPLIT (1, 2),
 * DSTAGES (4: the deepest ring that fits both DBM; any value works), UBM
 * (64, 128), UBC (32, 64: channels of an up CTA), USTAGES (2, 3, 5; the
 * up GEMM has only 5 k blocks: with 5 all of K comes at once, one round
 * trip to L2 instead of three at 2, where the shared memory allows it:
 * UBC 32), UMC (1, 2: with 2 the up kernel runs in clusters of two
 * blocks along the tokens sharing each w_up tile by TMA multicast:
 * wgmma_up.h).  UBM 128 and UBC 64 run one up CTA an SM (shared memory:
 * R' takes UBM*UBC*16 bytes), UBM 64 with UBC 32 two.  A warpgroup holds
 * 64 rows of a tile; the down kernel's
 * 160 accumulators a thread need setmaxnreg when two consumer warpgroups
 * share the SM's registers with the producer.
 *
 * Tails: TMA fills rows past T with zeros; the epilogues store rows < T.
 */
#include "hct_kernel.h"
#include "prefill.h"
#include "wgmma.h"
#if defined(UBM)
#include "wgmma_up.h"
#endif
#if defined(PBM)
#include "wgmma_pu.h"
#endif

#if !defined(S) || !defined(C) || !defined(D) || !defined(K)
#error "wgmma: the op constants S, C, D, K must be defined"
#endif
#if !defined(DBM) || !defined(KSPLIT) || !defined(DSTAGES)
#error "wgmma: DBM, KSPLIT, DSTAGES must be defined"
#endif
#if !defined(UBM) && !defined(PBM)
#error "wgmma: an up kernel's parameters: UBM, UBC, USTAGES, UMC (wgmma_up.h) or PBM, PBC, NCW, PST, PFD (wgmma_pu.h)"
#endif
static_assert(D == S * C, "D must be S*C");
static_assert(K == 320, "the down tile is two wgmma of N = 160");
static_assert(DBM % 64 == 0 && DBM <= 128, "DBM: 64 or 128");
static_assert(D % (64 * KSPLIT) == 0, "KSPLIT must split D into whole 64-wide k blocks");
static_assert(K % 64 == 0, "K: whole 64-wide k blocks");

/* ---- step 1: the norm: prefill.h's hc_pf_norm (the spec's canonical order,
 * xn as bf16), the pair variants' own, so every variant's xn is one code. */

/* ---- step 2: down, lo = xn . w_down^T ------------------------------------- */

#define HCP_DOWN_NC (DBM / 64)                           /* consumer warpgroups */
#define HCP_DOWN_THREADS (HCP_WG_THREADS * (HCP_DOWN_NC + 1))
#define HCP_DOWN_A_BYTES (DBM * HCP_TILE_ROW_BYTES)
#define HCP_DOWN_B_BYTES (K * HCP_TILE_ROW_BYTES)
#define HCP_DOWN_STAGE (HCP_DOWN_A_BYTES + HCP_DOWN_B_BYTES)
#define HCP_DOWN_KB (D / 64 / KSPLIT)                    /* k blocks of a CTA */

/* Grid (cdiv(T, DBM), KSPLIT).  tm_xn: xn, dims [D, T], box [64, DBM];
 * tm_wd: w_down, dims [D, K], box [64, 160]. */
HCT_ENTRY void __launch_bounds__(HCP_DOWN_THREADS, 1)
    hcp_wg_down(const __grid_constant__ hct_tmap tm_xn, const __grid_constant__ hct_tmap tm_wd,
                hct_u16 *lo, float *part, int T) {
  HCT_DYN_SHARED(unsigned char, smem);
  const int wg = (int)threadIdx.x / HCP_WG_THREADS;
  const int m0 = (int)blockIdx.x * DBM;
  const int kb0 = (int)blockIdx.y * HCP_DOWN_KB;
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
        const int st = kb % DSTAGES, kx = (kb0 + kb) * 64;
        if (!hcp_ring_acquire<DSTAGES>(r, kb)) return;
        hct_bulk_expect(&r.full[st], HCP_DOWN_STAGE);
        const hct_u32 a = r.tiles + st * HCP_DOWN_STAGE, b = a + HCP_DOWN_A_BYTES;
        hct_tma_load_2d(a, &tm_xn, kx, m0, &r.full[st]);
        hct_tma_load_2d(b, &tm_wd, kx, 0, &r.full[st]);
        hct_tma_load_2d(b + 160 * HCP_TILE_ROW_BYTES, &tm_wd, kx, 160, &r.full[st]);
      }
    }
    return;
  }
#if HCP_DOWN_NC > 1
  hcp_regs_inc<232>();
#endif
  const int cw = wg - 1; /* this consumer's 64 rows of the tile */
  const int tid = (int)threadIdx.x % HCP_WG_THREADS, warp = tid / 32, lane = tid % 32;
  float acc[K / 2];
#pragma unroll
  for (int i = 0; i < K / 2; ++i) acc[i] = 0.0f;
  for (int kb = 0; kb < HCP_DOWN_KB; ++kb) {
    const int st = kb % DSTAGES;
    if (!hcp_ring_wait_full<DSTAGES>(r, kb)) return;
    const hct_u32 a = r.tiles + st * HCP_DOWN_STAGE + cw * 64 * HCP_TILE_ROW_BYTES;
    const hct_u32 b = r.tiles + st * HCP_DOWN_STAGE + HCP_DOWN_A_BYTES;
    const hct_u64 da = hcp_desc_sw128(a), db0 = hcp_desc_sw128(b),
                  db1 = hcp_desc_sw128(b + 160 * HCP_TILE_ROW_BYTES);
    hcp_fence_acc<K / 2>(acc);
    hcp_wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < 4; ++k16) {
      /* +32 bytes a k16 step: 2 in the descriptor's address field. */
      hcp_wgmma<160>(acc, da + 2 * k16, db0 + 2 * k16);
      hcp_wgmma<160>(acc + 80, da + 2 * k16, db1 + 2 * k16);
    }
    hcp_wgmma_commit();
    hcp_fence_acc<K / 2>(acc);
    /* The previous block's wgmmas are done: its stage may be refilled. */
    hcp_wgmma_wait<1>();
    if (kb > 0 && lane == 0) hct_mbar_arrive(&r.empty[(kb - 1) % DSTAGES]);
  }
  hcp_wgmma_wait<0>();
  hcp_fence_acc<K / 2>(acc);

  /* Epilogue: row 16*warp + lane/4 + 8i of this warpgroup's 64, column
   * h*160 + 8j + 2(lane%4) + e. */
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = m0 + cw * 64 + 16 * warp + lane / 4 + 8 * i;
    if (row >= T) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int j = 0; j < 20; ++j) {
        const int col = h * 160 + 8 * j + 2 * (lane % 4);
        const float v0 = acc[h * 80 + 4 * j + 2 * i], v1 = acc[h * 80 + 4 * j + 2 * i + 1];
        if (KSPLIT == 1) {
          const hct_u32 w = (hct_u32)hct_f32_to_bf16(v0) | ((hct_u32)hct_f32_to_bf16(v1) << 16);
          *(hct_u32 *)(lo + (long long)row * K + col) = w;
        } else {
          float *p = part + ((long long)blockIdx.y * T + row) * K + col;
          p[0] = v0;
          p[1] = v1;
        }
      }
    }
  }
}

/* Grid (max(1, (KSPLIT > 1) * cdiv(T*K, 256))), 256 threads. */
HCT_ENTRY void __launch_bounds__(256) hcp_wg_reduce(const float *part, hct_u16 *lo, int T) {
  if (KSPLIT == 1) return;
  const long long n = (long long)T * K, idx = (long long)blockIdx.x * 256 + threadIdx.x;
  if (idx >= n) return;
  float v = part[idx];
#pragma unroll
  for (int k = 1; k < KSPLIT; ++k) v += part[k * n + idx];
  lo[idx] = hct_f32_to_bf16(v);
}

#if defined(UBM)
/* Steps 3 and 4 (wgmma_up.h): resid holds R' already (the norm stored it). */
HCT_ENTRY void HCP_UP_CLUSTER __launch_bounds__(HCP_UP_THREADS, HCP_UP_MINB)
    hcp_wg_up(const __grid_constant__ hct_tmap tm_lo, const __grid_constant__ hct_tmap tm_wu,
              const __grid_constant__ hct_tmap tm_r, float *resid, float *mixed, hct_u16 *mixed_bf16,
              hct_u16 *mixed_f16, int T) {
  hcp_up_body<false>(&tm_lo, &tm_wu, &tm_r, resid, 0, mixed, mixed_bf16, mixed_f16, T);
}
#endif

#if defined(PBM)
/* Steps 3 and 4 as one persistent kernel (wgmma_pu.h), for wgmma_pb: with
 * the spec's norm and KSPLIT 1 its outputs are pair_mma's bits. */
HCT_ENTRY void __launch_bounds__(HCP_PU_THREADS, 1)
    hcp_pb_up(const __grid_constant__ hct_tmap tm_lo, const __grid_constant__ hct_tmap tm_wu,
              const __grid_constant__ hct_tmap tm_r, float *resid, float *mixed, hct_u16 *mixed_bf16,
              hct_u16 *mixed_f16, int T) {
  hcp_pu_body<false>(&tm_lo, &tm_wu, &tm_r, resid, 0, mixed, mixed_bf16, mixed_f16, T);
}
#endif
