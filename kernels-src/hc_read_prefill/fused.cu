/*
 * fused: hc_read_prefill without the norm pass and without xn (class kl).
 * The down GEMM reads R' (f32) itself and applies the norm's scale after
 * each stream's dot:
 *
 *   lo[t][j] = bf16( sum over s of rs[t][s] * sum over c of
 *                    bf16(R'[t][s][c] * w_norm[s][c]) * w_down[j][s*C + c] )
 *
 * where the canonical order rounds bf16(R' * w_norm * rs) before the dot.
 * The k loop walks the streams in order (C is 80 k tiles of 32), so a
 * block has every R' of stream s for its rows when the stream's last tile
 * is done: each thread has summed fmaf(x, x) over its quarter of the row's
 * chunks as it converted them; the four quarters are added by a butterfly
 * (xor 1, 2), rs = rsqrtf(ss/C + EPS), and the stream's accumulators are
 * folded as tot = fmaf(rs, acc, tot), then restart at 0.  The A tiles go
 * global -> shared (f32, cp.async, rows past T zero-filled) -> bf16 tile
 * (x * w_norm, rounded, by the threads) -> ldmatrix; B as in pm_gemm.  The
 * rounding is in another place than the spec's (before the scale instead
 * of after), hence class kl; the error is the same bf16 rounding of the
 * same operand, measured against the float64 reference.  Then upmix's up
 * GEMM with the mix (prefill_upmix.h), reading R' from resid.
 *
 * With pending, R' = fl(R + P) is first written into resid by hc_fu_pending
 * (a grid-stride pass; without pending it returns at once): the down
 * blocks of one row tile read R' many times, and one of them storing it
 * while the others read R would race.
 *
 * Parameters: as upmix's: DBM, DBN, DWR, DST (down), UBM, UBN, UWR, UST.
 *
 * Bytes at T = 8192, cold: R read by the down GEMM (335 MB from DRAM,
 * again from L2 by the other column tile: 670 MB out of L2, w_down 420 MB
 * more) and by the mix (335 MB), mixed written (168 MB); no xn (2 x 168
 * MB) and no norm pass.  Expected on the H200: down about 150-190 us
 * (bound by L2 to SM traffic, about 1.1 GB; the conversion of the next
 * tile overlaps the mma), up and mix as upmix's, 150-190 us: about
 * 300-380 us a read.
 */
#define PM_OWN_DOWN 1
#include "prefill_upmix.h"

#if !defined(DBM) || !defined(DBN) || !defined(DWR) || !defined(DST)
#error "fused: DBM, DBN, DWR, DST must be defined"
#endif

/* Grid (any), block 256: R' = fl(R + P) into resid when pending is given. */
HCT_ENTRY void __launch_bounds__(256) hc_fu_pending(float *resid, const float *pending, int T) {
  if (pending == 0) return;
  const long long n4 = (long long)T * D / 4;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < n4; i += (long long)gridDim.x * 256) {
    hct_f4 r = ((const hct_f4 *)resid)[i];
    const hct_f4 p = ((const hct_f4 *)pending)[i];
    r.x = r.x + p.x;
    r.y = r.y + p.y;
    r.z = r.z + p.z;
    r.w = r.w + p.w;
    ((hct_f4 *)resid)[i] = r;
  }
}

typedef pm_down_cfg fu_cfg;
#define FU_TPS (C / PM_BK)                          /* k tiles a stream: 80 */
#define FU_ROWB (PM_BK * 4 + 16)                    /* bytes of an f32 staging row: 144, conflict-free */
#define FU_CHUNKS (fu_cfg::BM * PM_BK / 8)          /* 8-float chunks of an A tile */
#define FU_NCH (FU_CHUNKS / fu_cfg::THREADS)        /* a thread's chunks */
#define FU_STAGE_A (fu_cfg::BM * FU_ROWB)           /* bytes of an f32 A stage */
#define FU_STAGE_B (fu_cfg::BN * fu_cfg::LDS * 2)   /* bytes of a B stage */
#define FU_ABF (fu_cfg::BM * fu_cfg::LDS * 2)       /* a bf16 A tile (two of them) */
/* The manifest's DST*(DBM*144 + DBN*80) + DBM*164. */
#define FU_SMEM (fu_cfg::STAGES * (FU_STAGE_A + FU_STAGE_B) + 2 * FU_ABF + fu_cfg::BM * 4)
static_assert(C % PM_BK == 0, "fused: a stream must be whole k tiles");
static_assert(FU_CHUNKS % fu_cfg::THREADS == 0 && fu_cfg::THREADS % 4 == 0,
              "fused: a thread converts whole chunks, the four quarters of a row in one warp");
static_assert(fu_cfg::STAGES >= 3, "fused: tile kt+1 is converted while tile kt+2 is in flight");

/*
 * Grid (K/DBN, cdiv(T, DBM)), block fu_cfg::THREADS.  Step kt: one barrier
 * (tile kt+1 landed, bf16 tile kt converted and visible, every warp done
 * with step kt-1), the copies of tile kt+ST-1, then tile kt+1 converted into
 * the other bf16 tile while the mma run on tile kt, so the conversion's ALU
 * work overlaps the tensor cores.  At a stream's last tile the sums of
 * squares (complete: its tiles were converted in the steps before) become
 * rs before the next stream's conversion starts, and the fold follows the
 * mma after a second barrier.
 */
HCT_ENTRY void __launch_bounds__(fu_cfg::THREADS)
    hc_fu_down(const float *HCT_RESTRICT resid, const hct_u16 *HCT_RESTRICT w_norm,
               const hct_u16 *HCT_RESTRICT w_down, hct_u16 *HCT_RESTRICT lo, int T) {
  typedef fu_cfg CF;
  constexpr int BM = CF::BM, BK = PM_BK, ST = CF::STAGES, KT = D / BK;
  HCT_DYN_SHARED(hct_u16, smem);
  char *const sm = (char *)smem;
  const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / CF::WARPS_N, wn = warp % CF::WARPS_N;
  const int m0 = (int)blockIdx.y * DBM, n0 = (int)blockIdx.x * DBN;
  const hct_u32 sbase = pm_smem_addr(smem);
  pm_check_smem(FU_SMEM);
  /* Layout: ST f32 A stages, ST B stages, two bf16 A tiles, rs per row. */
  const hct_u32 sB0 = sbase + ST * FU_STAGE_A, sAbf0 = sB0 + ST * FU_STAGE_B;
  char *const abf0 = sm + ST * (FU_STAGE_A + FU_STAGE_B);
  float *const rs_row = (float *)(abf0 + 2 * FU_ABF);

  auto load_stage = [&](int stage, int kt) {
    const hct_u32 sA = sbase + (hct_u32)(stage * FU_STAGE_A);
    const int k0 = kt * BK;
#pragma unroll
    for (int c = tid; c < BM * (BK / 4); c += CF::THREADS) {
      const int r = c / (BK / 4), kc = (c % (BK / 4)) * 4;
      const bool valid = m0 + r < T;
      pm_cp16(sA + (hct_u32)(r * FU_ROWB + kc * 4), resid + (long long)(valid ? m0 + r : 0) * D + k0 + kc, valid);
    }
    pm_load_b<CF, D, 0>(sB0 + (hct_u32)(stage * FU_STAGE_B), w_down, n0, k0);
  };

  float ss[FU_NCH];
#pragma unroll
  for (int i = 0; i < FU_NCH; ++i) ss[i] = 0.0f;
  /* Tile kt (landed in its stage) -> bf16 tile kt % 2: y = bf16(R' *
   * w_norm), and ss += R'^2 over this thread's quarters of its rows. */
  auto convert = [&](int kt) {
    const char *stg = sm + (kt % ST) * FU_STAGE_A;
    char *abf = abf0 + (kt % 2) * FU_ABF;
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < FU_NCH; ++i) {
      const int c = tid + i * CF::THREADS, r = c / 4, q = c % 4;
      const hct_f4 x0 = *(const hct_f4 *)(stg + r * FU_ROWB + q * 32);
      const hct_f4 x1 = *(const hct_f4 *)(stg + r * FU_ROWB + q * 32 + 16);
      const hct_u4 w = *(const hct_u4 *)(w_norm + k0 + q * 8);
      const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      const float wv[8] = {hct_bf16_lo(w.x), hct_bf16_hi(w.x), hct_bf16_lo(w.y), hct_bf16_hi(w.y),
                           hct_bf16_lo(w.z), hct_bf16_hi(w.z), hct_bf16_lo(w.w), hct_bf16_hi(w.w)};
      hct_u32 y[4];
#pragma unroll
      for (int e = 0; e < 8; e += 2) {
        const float y0 = x[e] * wv[e], y1 = x[e + 1] * wv[e + 1];
        y[e / 2] = (hct_u32)hct_f32_to_bf16(y0) | ((hct_u32)hct_f32_to_bf16(y1) << 16);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) ss[i] = fmaf(x[e], x[e], ss[i]);
      hct_u4 yv;
      yv.x = y[0];
      yv.y = y[1];
      yv.z = y[2];
      yv.w = y[3];
      *(hct_u4 *)(abf + r * (CF::LDS * 2) + q * 16) = yv;
    }
  };

  float acc[CF::MT][CF::NT][4], tot[CF::MT][CF::NT][4];
  pm_zero<CF>(acc);
  pm_zero<CF>(tot);

#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < KT) load_stage(s, s);
    hct_cp_async_commit();
  }
  hct_cp_async_wait<ST - 2>();
  __syncthreads();
  convert(0);

#pragma unroll 1
  for (int kt = 0; kt < KT; ++kt) {
    /* Committed so far: ST-1+kt groups; tiles 0..kt+1 must have landed. */
    hct_cp_async_wait<ST - 3>();
    __syncthreads();
    /* The stage written now held tile kt-1: converted in step kt-2, its B
     * read by step kt-1's mma; both done before the barrier. */
    if (kt + ST - 1 < KT) load_stage((kt + ST - 1) % ST, kt + ST - 1);
    hct_cp_async_commit();

    const bool stream_end = (kt + 1) % FU_TPS == 0;
    if (stream_end) {
      /* The stream's sums of squares are complete (tiles up to kt were
       * converted in earlier steps): its rs per row, before tile kt+1 (the
       * next stream's) adds to ss. */
#pragma unroll
      for (int i = 0; i < FU_NCH; ++i) {
        float v = ss[i];
        v += hct_shfl_xor(v, 1);
        v += hct_shfl_xor(v, 2);
        if ((tid & 3) == 0) rs_row[(tid + i * CF::THREADS) / 4] = rsqrtf(v / (float)C + HCT_EPS);
        ss[i] = 0.0f;
      }
    }
    if (kt + 1 < KT) convert(kt + 1);
    pm_mma_tile<CF>(sAbf0 + (hct_u32)((kt % 2) * FU_ABF), sB0 + (hct_u32)((kt % ST) * FU_STAGE_B), wm, wn, acc);

    if (stream_end) {
      __syncthreads(); /* rs_row written */
#pragma unroll
      for (int mt = 0; mt < CF::MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float rr = rs_row[wm * CF::WTM + mt * 16 + (lane >> 2) + 8 * h];
#pragma unroll
          for (int j = 0; j < CF::NT; ++j)
#pragma unroll
            for (int e = 2 * h; e < 2 * h + 2; ++e) {
              tot[mt][j][e] = fmaf(rr, acc[mt][j][e], tot[mt][j][e]);
              acc[mt][j][e] = 0.0f;
            }
        }
    }
  }
  hct_cp_async_wait<0>();
  pm_store_lo(tot, lo, T, m0, n0);
}
