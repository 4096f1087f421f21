/*
 * wgmma_fn: hc_read_prefill on Hopper (sm_90a) with the norm fused into
 * the down GEMM, so xn never goes through memory.  Class kl: xn is not
 * formed as the spec rounds it.  The down GEMM's A operand is
 * bf16(R' * w_norm) (R' = fl(R + P)), converted in shared memory from R
 * tiles as they stream in, while the same pass sums R'^2 per row and
 * stream; at the end of each stream's 40 k blocks the accumulators are
 * scaled by that stream's rs = rsqrtf(ss / C + EPS) into lo:
 *     lo[t][j] = sum over s of rs[t][s] * sum over k of stream s of
 *                bf16(R'[t][k] * w_norm[k]) * w_down[j][k]
 * which is the exact lo up to bf16 rounding at another scale (the same
 * relative size as the spec's).  Two launches:
 *
 *   hcp_fn_down  grid cdiv(T, 64), 384 threads: warpgroup 0 converts
 *                each k block's R tile (TMA, f32, 64 x 64) into the bf16
 *                A tile (128B-swizzled, as wgmma reads it) and sums the
 *                squares, its thread 0 also issuing the TMA loads FSTAGES-1
 *                blocks ahead; warpgroups 1 and 2 each hold one half
 *                (N = 160) of the 64 x 320 tile, with the stream's
 *                accumulators and lo's (80 + 80 registers: setmaxnreg).
 *                R read once (335 MB at T = 8192): ~100 us with MC 2
 *                (w_down's tiles, 6.5 MB a block row, then read 64 times
 *                from L2, 420 MB); ~170 us with MC 1 if L2 gives ~7 TB/s
 *                (840 MB of w_down); the MMA alone ~60 us.
 *                Measured 229 us at MC 1, FSTAGES 3 (372 at MC 2: MC 2
 *                is out of the space; its code stays).  Why, as far as
 *                the figures tell: 1.18 GB through L2 (w_down 840 MB, R
 *                335 MB) in 229 us is 5.1 TB/s, where wgmma's down kernel
 *                at DBM 64 moved 1.0 GB at 8.4 TB/s with 4 stages of
 *                48 KB; here at most two 56 KB loads are in flight a
 *                block (the third stage is being converted or multiplied),
 *                and at ~3 us of L2 latency under that load (Little's law
 *                on wgmma's down figures) two stages give ~37 GB/s an SM,
 *                4.9 TB/s in all: the ring is too shallow.  The fix (not
 *                made: untested here) is a deeper w_down ring apart from
 *                the R and A tiles (e.g. 4 x 40 KB of w_down, 2 x 16 KB of
 *                R, 2 x 8 KB of A: 208 KB): ~150-160 us expected.
 *   hcp_fn_up    wgmma_up.h with ADD_PENDING: R' formed again from R and
 *                P and stored into resid there.  Measured ~390 us when its
 *                epilogue loaded R' itself; ~150-190 us expected now that
 *                R' comes by TMA during the GEMM (pending, when there is
 *                one, is still read in the epilogue).
 * Expected at T = 8192 on the H200: ~380-420 us for the read.
 *
 * Parameters: FSTAGES (2, 3: stages of 64 KB, R 16 KB + A 8 KB + w_down
 * 40 KB), MC (1; the code also has 2, out of the space since it measured
 * slower, 372 us against 229: the down kernel then runs in clusters of
 * two blocks, each loading one 160-row half of a w_down tile by
 * multicast into both: half the L2 traffic of w_down, which at 64 token
 * rows a block is read 128 times at T = 8192), UBM, UBC, USTAGES, UMC
 * (the up kernel's, as in wgmma; USTAGES 2 or 5).
 */
#include "hct_kernel.h"
#include "hct_cluster.h"
#include "wgmma.h"
#if defined(UBM)
#include "wgmma_up.h"
#endif
#if defined(PBM)
#include "wgmma_pu.h"
#endif

#if !defined(S) || !defined(C) || !defined(D) || !defined(K)
#error "wgmma_fn: the op constants S, C, D, K must be defined"
#endif
#if !defined(FSTAGES) || !defined(MC)
#error "wgmma_fn: FSTAGES and MC must be defined"
#endif
#ifndef FPF
#define FPF 0 /* R tiles prefetched into L2 this many k blocks ahead; 0: none */
#endif
static_assert(MC == 1 || MC == 2, "MC: blocks a cluster sharing w_down's tiles, 1 or 2");
static_assert(D == S * C, "D must be S*C");
static_assert(K == 320, "the down tile is two halves of N = 160");
static_assert(C % 64 == 0, "a stream is whole 64-wide k blocks");

#define HCP_FN_BM 64
#define HCP_FN_THREADS (3 * HCP_WG_THREADS)
#define HCP_FN_R_BYTES (HCP_FN_BM * 64 * 4) /* f32 rows of 256 bytes, unswizzled */
#define HCP_FN_A_BYTES (HCP_FN_BM * HCP_TILE_ROW_BYTES)
#define HCP_FN_B_BYTES (K * HCP_TILE_ROW_BYTES)
#define HCP_FN_STAGE (HCP_FN_R_BYTES + HCP_FN_A_BYTES + HCP_FN_B_BYTES)
#define HCP_FN_TX (HCP_FN_R_BYTES + HCP_FN_B_BYTES) /* what TMA brings a stage */
#define HCP_FN_KB (D / 64)
#define HCP_FN_KB_STREAM (C / 64)
static_assert(HCP_FN_STAGE % 1024 == 0, "stages keep 1024-byte alignment");

/* The loads of k block kb into its stage, by one thread: R rows m0.. and
 * all 320 rows of w_down (two boxes of 160; with MC 2, this block's half
 * into both blocks of the cluster, the peer's half comes from the peer);
 * 0 when the wait for the stage timed out (hcp_wait).  The stage's empty
 * barrier counts the consumer warps of every block it is written into. */
HCT_DEV int hcp_fn_issue(const hcp_ring &r, const hct_tmap *tm_r, const hct_tmap *tm_wd, int kb,
                         int m0, int rank) {
  const int st = kb % FSTAGES;
  if (!hcp_ring_acquire<FSTAGES>(r, kb)) return 0;
  hct_bulk_expect(&r.full[st], HCP_FN_TX);
  const hct_u32 base = r.tiles + st * HCP_FN_STAGE;
  const hct_u32 b = base + HCP_FN_R_BYTES + HCP_FN_A_BYTES;
  hct_tma_load_2d(base, tm_r, kb * 64, m0, &r.full[st]);
  /* R's tile FPF blocks on, into L2 (w_down's tiles, read by every block,
   * are there already): its load then waits for L2, not memory, and the
   * two loads in flight of a shallow ring cover that. */
  if (FPF > 0 && kb + FPF < HCP_FN_KB) hct_tma_prefetch_l2_2d(tm_r, (kb + FPF) * 64, m0);
#if MC > 1
  hct_tma_load_2d_multicast(b + rank * 160 * HCP_TILE_ROW_BYTES, tm_wd, kb * 64, rank * 160,
                            &r.full[st], (hct_u16)((1u << MC) - 1u));
#else
  (void)rank;
  hct_tma_load_2d(b, tm_wd, kb * 64, 0, &r.full[st]);
  hct_tma_load_2d(b + 160 * HCP_TILE_ROW_BYTES, tm_wd, kb * 64, 160, &r.full[st]);
#endif
  return 1;
}

#if MC > 1
#define HCP_FN_CLUSTER __cluster_dims__(MC, 1, 1)
#else
#define HCP_FN_CLUSTER
#endif

/* Grid MC * cdiv(T, 64 MC) (clusters of MC consecutive blocks).  tm_r:
 * resid, f32, dims [D, T], box [64, 64], no swizzle; tm_wd: w_down, dims
 * [D, K], box [64, 160], 128B. */
HCT_ENTRY void HCP_FN_CLUSTER __launch_bounds__(HCP_FN_THREADS, 1)
    hcp_fn_down(const __grid_constant__ hct_tmap tm_r, const __grid_constant__ hct_tmap tm_wd,
                const float *pending, const hct_u16 *w_norm, hct_u16 *lo, int T) {
  HCT_DYN_SHARED(unsigned char, smem);
  const int wg = (int)threadIdx.x / HCP_WG_THREADS;
  const int tid = (int)threadIdx.x % HCP_WG_THREADS, warp = tid / 32, lane = tid % 32;
  const int m0 = (int)blockIdx.x * HCP_FN_BM;
  /* ring: full (TMA), empty (8 consumer warps); then conv[FSTAGES] (the
   * 128 converter threads wrote the stage's A tile), rsb[S] (a stream's rs
   * is in rs_buf), rs_buf[S][64].  Every converter thread arrives itself,
   * after its own proxy fence: no ordering between lanes is assumed. */
  const hcp_ring r = hcp_ring_setup<FSTAGES, HCP_FN_STAGE>(smem, 8 * MC);
#if MC > 1
  const int rank = hct_cluster_rank();
#else
  const int rank = 0;
#endif
  hct_u64 *conv = r.empty + FSTAGES, *rsb = conv + FSTAGES;
  float *rs_buf = (float *)(rsb + S);
  unsigned char *tiles = smem + (r.tiles - hct_smem_addr(smem));
  if (threadIdx.x == 0) {
    for (int s = 0; s < FSTAGES; ++s) hct_mbar_init(&conv[s], HCP_WG_THREADS);
    for (int s = 0; s < S; ++s) hct_mbar_init(&rsb[s], HCP_WG_THREADS);
    hct_mbar_init_fence();
  }
  __syncthreads();
#if MC > 1
  /* The peer's barriers are ready before anything lands in them. */
  hcp_cluster_sync();
#endif

  if (wg == 0) {
    /* The converter.  Thread tid takes the 4 columns c16*4.. (16 bytes of
     * f32) of rows g + 8j, j < 8: a quarter warp reads 128 contiguous bytes
     * of one row (no bank conflict), and the 16 threads of a row are the
     * lanes of one half warp (their sums meet by xor 8, 4, 2, 1). */
    hcp_regs_dec<88>();
    const int c16 = tid & 15, g = tid >> 4;
    float ss[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) ss[j] = 0.0f;
    if (tid == 0) {
      hct_tma_prefetch(&tm_r);
      hct_tma_prefetch(&tm_wd);
      for (int kb = 0; kb < FSTAGES - 1 && kb < HCP_FN_KB; ++kb)
        hcp_fn_issue(r, &tm_r, &tm_wd, kb, m0, rank);
    }
    for (int kb = 0; kb < HCP_FN_KB; ++kb) {
      const int st = kb % FSTAGES, k0 = kb * 64 + c16 * 4;
      hct_f4 pv[8];
      if (pending != 0) {
        /* Issued before the wait, so their latency hides behind it. */
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int t = m0 + g + 8 * j;
          pv[j] = t < T ? *(const hct_f4 *)(pending + (long long)t * D + k0) : hct_f4{0, 0, 0, 0};
        }
      }
      const hct_u32 w01 = *(const hct_u32 *)(w_norm + k0), w23 = *(const hct_u32 *)(w_norm + k0 + 2);
      const float w0 = hct_bf16_lo(w01), w1 = hct_bf16_hi(w01), w2 = hct_bf16_lo(w23),
                  w3 = hct_bf16_hi(w23);
      if (!hcp_wait(&r.full[st], (hct_u32)(kb / FSTAGES) & 1u)) return;
      const unsigned char *rt = tiles + st * HCP_FN_STAGE;
      unsigned char *at = tiles + st * HCP_FN_STAGE + HCP_FN_R_BYTES;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int row = g + 8 * j;
        hct_f4 x = *(const hct_f4 *)(rt + row * 256 + c16 * 16);
        if (pending != 0) {
          x.x = x.x + pv[j].x;
          x.y = x.y + pv[j].y;
          x.z = x.z + pv[j].z;
          x.w = x.w + pv[j].w;
        }
        ss[j] = fmaf(x.x, x.x, ss[j]);
        ss[j] = fmaf(x.y, x.y, ss[j]);
        ss[j] = fmaf(x.z, x.z, ss[j]);
        ss[j] = fmaf(x.w, x.w, ss[j]);
        const float y0 = x.x * w0, y1 = x.y * w1, y2 = x.z * w2, y3 = x.w * w3;
        const hct_u32 lo2 = (hct_u32)hct_f32_to_bf16(y0) | ((hct_u32)hct_f32_to_bf16(y1) << 16);
        const hct_u32 hi2 = (hct_u32)hct_f32_to_bf16(y2) | ((hct_u32)hct_f32_to_bf16(y3) << 16);
        /* Element (row, k) of a 128B-swizzled tile: 16-byte chunk k/8
         * of the row, XORed with row % 8. */
        const int off = row * 128 + (((c16 >> 1) ^ (row & 7)) << 4) + ((c16 & 1) << 3);
        *(hct_u32 *)(at + off) = lo2;
        *(hct_u32 *)(at + off + 4) = hi2;
      }
      /* The A tile is read by wgmma (the async proxy). */
      hcp_fence_async_smem();
      hct_mbar_arrive(&conv[st]);
      if (kb % HCP_FN_KB_STREAM == HCP_FN_KB_STREAM - 1) {
        const int s = kb / HCP_FN_KB_STREAM;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float v = ss[j];
          v += hct_shfl_xor(v, 8);
          v += hct_shfl_xor(v, 4);
          v += hct_shfl_xor(v, 2);
          v += hct_shfl_xor(v, 1);
          if (c16 == 0) rs_buf[s * HCP_FN_BM + g + 8 * j] = rsqrtf(v / (float)C + HCT_EPS);
          ss[j] = 0.0f;
        }
        hct_mbar_arrive(&rsb[s]);
      }
      /* The loads FSTAGES-1 blocks ahead, into the stage of block kb-1,
       * which the consumers are about done with by now. */
      if (tid == 0 && kb + FSTAGES - 1 < HCP_FN_KB &&
          !hcp_fn_issue(r, &tm_r, &tm_wd, kb + FSTAGES - 1, m0, rank))
        return;
    }
#if MC > 1
    /* No block leaves while its peer may still arrive on its barriers. */
    hcp_cluster_sync();
#endif
    return;
  }

  /* A consumer: half h of the 320 columns, rows 16*warp + lane/4 + 8i. */
  hcp_regs_inc<208>();
  const int h = wg - 1;
  float acc[80], lacc[80];
#pragma unroll
  for (int i = 0; i < 80; ++i) acc[i] = lacc[i] = 0.0f;
  for (int kb = 0; kb < HCP_FN_KB; ++kb) {
    const int st = kb % FSTAGES;
    if (!hcp_wait(&conv[st], (hct_u32)(kb / FSTAGES) & 1u)) return;
    const hct_u32 a = r.tiles + st * HCP_FN_STAGE + HCP_FN_R_BYTES;
    const hct_u32 b = a + HCP_FN_A_BYTES + h * 160 * HCP_TILE_ROW_BYTES;
    const hct_u64 da = hcp_desc_sw128(a), db = hcp_desc_sw128(b);
    hcp_fence_acc<80>(acc);
    hcp_wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < 4; ++k16) hcp_wgmma<160>(acc, da + 2 * k16, db + 2 * k16);
    hcp_wgmma_commit();
    hcp_fence_acc<80>(acc);
    hcp_wgmma_wait<1>();
    if (kb > 0 && lane == 0) {
      hct_mbar_arrive(&r.empty[(kb - 1) % FSTAGES]);
#if MC > 1
      /* The peer's producer writes its half into this stage too. */
      hcp_mbar_arrive_remote(hct_mapa(&r.empty[(kb - 1) % FSTAGES], rank ^ 1));
#endif
    }
    if (kb % HCP_FN_KB_STREAM == HCP_FN_KB_STREAM - 1) {
      /* The stream is summed: scale it by its rs into lo's accumulators. */
      hcp_wgmma_wait<0>();
      hcp_fence_acc<80>(acc);
      const int s = kb / HCP_FN_KB_STREAM;
      if (!hcp_wait(&rsb[s], 0)) return;
      const float rs0 = rs_buf[s * HCP_FN_BM + 16 * warp + lane / 4];
      const float rs1 = rs_buf[s * HCP_FN_BM + 16 * warp + lane / 4 + 8];
#pragma unroll
      for (int i = 0; i < 80; ++i) {
        lacc[i] = fmaf((i & 2) ? rs1 : rs0, acc[i], lacc[i]);
        acc[i] = 0.0f;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = m0 + 16 * warp + lane / 4 + 8 * i;
    if (row >= T) continue;
#pragma unroll
    for (int j = 0; j < 20; ++j) {
      const int col = h * 160 + 8 * j + 2 * (lane % 4);
      const hct_u32 w = (hct_u32)hct_f32_to_bf16(lacc[4 * j + 2 * i]) |
                        ((hct_u32)hct_f32_to_bf16(lacc[4 * j + 2 * i + 1]) << 16);
      *(hct_u32 *)(lo + (long long)row * K + col) = w;
    }
  }
#if MC > 1
  hcp_cluster_sync();
#endif
}

#if defined(UBM)
/* Steps 3 and 4 (wgmma_up.h), forming R' = fl(R + P) and storing it. */
HCT_ENTRY void HCP_UP_CLUSTER __launch_bounds__(HCP_UP_THREADS, HCP_UP_MINB)
    hcp_fn_up(const __grid_constant__ hct_tmap tm_lo, const __grid_constant__ hct_tmap tm_wu,
              const __grid_constant__ hct_tmap tm_r, float *resid, const float *pending, float *mixed,
              hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  hcp_up_body<true>(&tm_lo, &tm_wu, &tm_r, resid, pending, mixed, mixed_bf16, mixed_f16, T);
}
#endif

#if defined(PBM)
/* Steps 3 and 4 as one persistent kernel (wgmma_pu.h), for wgmma_pu,
 * forming R' = fl(R + P) and storing it. */
HCT_ENTRY void __launch_bounds__(HCP_PU_THREADS, 1)
    hcp_fp_up(const __grid_constant__ hct_tmap tm_lo, const __grid_constant__ hct_tmap tm_wu,
              const __grid_constant__ hct_tmap tm_r, float *resid, const float *pending, float *mixed,
              hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  hcp_pu_body<true>(&tm_lo, &tm_wu, &tm_r, resid, pending, mixed, mixed_bf16, mixed_f16, T);
}
#endif
