/*
 * prefill_mma.h: the tensor-core GEMM of pair_mma and upmix (and the down
 * GEMM's entry point, which both use as it is): C[m][n] = sum_k A[m][k] *
 * B[n][k] with A [M][KD] and B [N][KD] bf16, k contiguous (xn . w_down^T,
 * lo . w_up^T), by mma.sync m16n8k16 (bf16 in, f32 accumulate), ldmatrix
 * from shared memory, and a cp.async pipeline of STAGES tiles of BK.
 *
 * The order of every output's sum (why tiles never change the bits): an
 * accumulator starts at 0 and goes through the mma k-steps of 16 in
 * ascending k (tile by tile, and within a tile kk = 0, 16, ...), one mma
 * per step, never split along k and never reduced across warps or blocks.
 * So the value of C[m][n] depends only on A's row m and B's row n, not on
 * BM, BN, BK, STAGES or the warp that holds it: every point of pair_mma
 * gives the same bits, and upmix, which runs the same sequence, gives
 * pair_mma's bits (its reference; manifest "reference": "pair_mma").
 *
 * Tiles: a block holds BM rows of A and BN rows of B.  B's BN rows are G
 * groups of BN/G consecutive rows, group g starting at row g*GSTRIDE +
 * nbase (G = 1: plain; the up GEMM uses G = S, GSTRIDE = C: the same BN/S
 * channels of every stream, so that one thread holds the 4 streams of its
 * (token, channel) for the mix).  Warps: WARPS_M x WARPS_N; warp (wm, wn)
 * holds rows wm*BM/WARPS_M + [0, BM/WARPS_M) and, in every group, the
 * columns wn*WNG + [0, WNG), WNG = BN/G/WARPS_N; its n8 tile j is in group
 * j / NTG at column (j % NTG)*8 of the warp's part.
 *
 * Shared memory: rows of BK + 8 bf16 (16 bytes of pad: ldmatrix's 8 rows of
 * 16 bytes fall in distinct banks for BK = 32 and 64), STAGES stages of
 * (BM + BN) rows.  Rows of A past M are zero-filled by cp.async (src-size
 * 0) and their outputs never stored.
 */
#ifndef HC_PREFILL_MMA_H
#define HC_PREFILL_MMA_H

#include "prefill.h"

/* HCT_EMU_PTX: the CPU emulator's test (tests/emu/hc_read_prefill_emu.cc)
 * supplies the four PTX wrappers below as warp-collective emulations. */
#if !defined(HCT_EMU_PTX)
#if !(defined(HCT_CUDA) && HCT_ARCH >= 80)
#error "prefill_mma.h: bf16 mma.sync, ldmatrix and cp.async need sm_80 or later"
#endif

HCT_DEV hct_u32 pm_smem_addr(const void *p) {
  hct_u32 s;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(p));
  return s;
}

/* 16 bytes global -> shared; zeros instead when !valid (src not read). */
HCT_DEV void pm_cp16(hct_u32 dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

HCT_DEV void pm_ldsm4(hct_u32 (&r)[4], hct_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* d += A * B, one m16n8k16 step. */
HCT_DEV void pm_mma(float (&d)[4], const hct_u32 (&a)[4], hct_u32 b0, hct_u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The launch's dynamic shared memory must hold the tiles: the manifest
 * computes it from the parameters, the code from pm_cfg, so a launch that
 * got less (the two out of step) traps rather than writes past it. */
HCT_DEV void pm_check_smem(hct_u32 need) {
  hct_u32 have;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(have));
  if (have < need) __trap();
}
#endif /* !HCT_EMU_PTX */

/* Two floats as one 8-byte access (an accumulator pair's columns). */
struct alignas(8) pm_f2 {
  float x, y;
};

/* The k tile of both GEMMs: 32, two mma k-steps (the manifest's shared
 * memory sizes count (PM_BK + 8) * 2 = 80 bytes a tile row). */
#define PM_BK 32

template <int BM_, int BN_, int BK_, int WARPS_M, int WARPS_N_, int STAGES_, int G>
struct pm_cfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int LDS = BK + 8;           /* bf16 per shared row */
  static constexpr int WTM = BM / WARPS_M;     /* a warp's rows */
  static constexpr int MT = WTM / 16;          /* its m16 tiles */
  static constexpr int BNG = BN / G;           /* B rows per group */
  static constexpr int WNG = BNG / WARPS_N;    /* a warp's columns per group */
  static constexpr int NTG = WNG / 8;          /* its n8 tiles per group */
  static constexpr int NT = G * NTG;           /* its n8 tiles */
  static constexpr int STAGE = (BM + BN) * LDS; /* bf16 per stage */
  static constexpr int SMEM = STAGES * STAGE * 2;
  static_assert(BM % (16 * WARPS_M) == 0, "BM must be whole m16 tiles per warp");
  static_assert(BN % G == 0 && BNG % (16 * WARPS_N) == 0, "a warp's columns per group must be whole n16 pairs");
  static_assert(BK % 16 == 0, "BK must be whole k16 steps");
};

/* Where the warp's n8 tile j starts among the block's BN rows of B. */
template <class CF>
HCT_DEV int pm_ncol(int wn, int j) {
  return (j / CF::NTG) * CF::BNG + wn * CF::WNG + (j % CF::NTG) * 8;
}

/* Zeroes a thread's accumulators. */
template <class CF>
HCT_DEV void pm_zero(float (&acc)[CF::MT][CF::NT][4]) {
#pragma unroll
  for (int mt = 0; mt < CF::MT; ++mt)
#pragma unroll
    for (int j = 0; j < CF::NT; ++j) acc[mt][j][0] = acc[mt][j][1] = acc[mt][j][2] = acc[mt][j][3] = 0.0f;
}

/* Copies (cp.async) the block's BN rows of B, k0 + [0, BK), into the tile
 * at shared address sB: local row r is row (r / BNG)*GSTRIDE + nbase +
 * r % BNG of B [.][KD]. */
template <class CF, int KD, long long GSTRIDE>
HCT_DEV void pm_load_b(hct_u32 sB, const hct_u16 *B, int nbase, int k0) {
  constexpr int CPR = CF::BK / 8; /* 16-byte chunks per tile row */
#pragma unroll
  for (int c = (int)threadIdx.x; c < CF::BN * CPR; c += CF::THREADS) {
    const int r = c / CPR, kc = (c % CPR) * 8;
    const long long row = (long long)(r / CF::BNG) * GSTRIDE + nbase + r % CF::BNG;
    pm_cp16(sB + (hct_u32)(r * CF::LDS + kc) * 2u, B + row * KD + k0 + kc, true);
  }
}

/*
 * One k tile (BK, in k-steps of 16 ascending) of the warp (wm, wn): the A
 * tile at sA (BM rows of LDS bf16), the B tile at sB (BN rows), into acc.
 */
template <class CF>
HCT_DEV void pm_mma_tile(hct_u32 sA, hct_u32 sB, int wm, int wn, float (&acc)[CF::MT][CF::NT][4]) {
  const int lane = (int)threadIdx.x & 31;
  /* ldmatrix lane offsets: A (x4: rows 0..15 at k 0, then at k 8) and B
   * (x4: n 0..7 at k 0, n 0..7 at k 8, n 8..15 at k 0, n 8..15 at k 8). */
  const int a_row = lane & 15, a_k = (lane >> 4) * 8;
  const int b_row = (lane & 7) + ((lane >> 4) << 3), b_k = ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int kk = 0; kk < CF::BK; kk += 16) {
    hct_u32 af[CF::MT][4];
    hct_u32 bf[CF::NT][2];
#pragma unroll
    for (int mt = 0; mt < CF::MT; ++mt)
      pm_ldsm4(af[mt], sA + (hct_u32)((wm * CF::WTM + mt * 16 + a_row) * CF::LDS + kk + a_k) * 2u);
#pragma unroll
    for (int j = 0; j < CF::NT; j += 2) {
      hct_u32 r[4];
      pm_ldsm4(r, sB + (hct_u32)((pm_ncol<CF>(wn, j) + b_row) * CF::LDS + kk + b_k) * 2u);
      bf[j][0] = r[0];
      bf[j][1] = r[1];
      bf[j + 1][0] = r[2];
      bf[j + 1][1] = r[3];
    }
#pragma unroll
    for (int mt = 0; mt < CF::MT; ++mt)
#pragma unroll
      for (int j = 0; j < CF::NT; ++j) pm_mma(acc[mt][j], af[mt], bf[j][0], bf[j][1]);
  }
}

/*
 * The accumulators of the calling thread for the block's tile: rows m0 +
 * [0, BM) of A (m < M valid), B's rows by groups (above); KD a multiple of
 * BK.  acc[mt][j][e]: row wm*WTM + mt*16 + lane/4 (+8 for e >= 2), column
 * pm_ncol(wn, j) + 2*(lane%4) + (e&1).  smem: CF::SMEM bytes, dynamic.
 */
template <class CF, int KD, long long GSTRIDE>
HCT_DEV void pm_gemm(const hct_u16 *A, int M, int m0, const hct_u16 *B, int nbase, hct_u16 *smem,
                     float (&acc)[CF::MT][CF::NT][4]) {
  constexpr int BM = CF::BM, BK = CF::BK, STAGES = CF::STAGES;
  constexpr int KT = KD / BK;
  constexpr int CPR = BK / 8; /* 16-byte chunks per tile row */
  static_assert(KD % BK == 0, "KD must be whole tiles");
  static_assert(STAGES >= 2, "the pipeline needs 2 stages or more");
  const int tid = (int)threadIdx.x, warp = tid >> 5;
  const int wm = warp / CF::WARPS_N, wn = warp % CF::WARPS_N;
  const hct_u32 sbase = pm_smem_addr(smem);
  pm_check_smem(CF::SMEM);
  pm_zero<CF>(acc);

  auto load_stage = [&](int stage, int kt) {
    const hct_u32 sA = sbase + (hct_u32)(stage * CF::STAGE) * 2u;
    const int k0 = kt * BK;
#pragma unroll
    for (int c = tid; c < BM * CPR; c += CF::THREADS) {
      const int r = c / CPR, kc = (c % CPR) * 8;
      const bool valid = m0 + r < M;
      const hct_u16 *src = A + (long long)(valid ? m0 + r : 0) * KD + k0 + kc;
      pm_cp16(sA + (hct_u32)(r * CF::LDS + kc) * 2u, src, valid);
    }
    pm_load_b<CF, KD, GSTRIDE>(sA + (hct_u32)(BM * CF::LDS) * 2u, B, nbase, k0);
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_stage(s, s);
    hct_cp_async_commit();
  }

#pragma unroll 1
  for (int kt = 0; kt < KT; ++kt) {
    hct_cp_async_wait<STAGES - 2>();
    __syncthreads();
    /* The stage written now was computed on in step kt-1, which every warp
     * has left (the barrier above). */
    if (kt + STAGES - 1 < KT) load_stage((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    hct_cp_async_commit();
    const hct_u32 sA = sbase + (hct_u32)((kt % STAGES) * CF::STAGE) * 2u;
    pm_mma_tile<CF>(sA, sA + (hct_u32)(BM * CF::LDS) * 2u, wm, wn, acc);
  }
  hct_cp_async_wait<0>();
}

/*
 * The down GEMM of pair_mma and upmix: lo[t][j] = bf16(xn[t] . w_down[j]).
 * Parameters DBM x DBN (the block's tile), DWR (a warp's rows: 32 or 64),
 * DST (stages); warps (DBM/DWR) x 2, each DWR rows x DBN/2 columns.  Grid
 * (K/DBN, cdiv(T, DBM)): the blocks of one row tile of xn run together and
 * share it through L2.
 */
#if defined(DBM) && defined(DBN) && defined(DWR) && defined(DST)
typedef pm_cfg<DBM, DBN, PM_BK, DBM / DWR, 2, DST, 1> pm_down_cfg;

/* lo = bf16(acc) for the down tile's rows below T (hc_pm_down's end). */
HCT_DEV void pm_store_lo(const float (&acc)[pm_down_cfg::MT][pm_down_cfg::NT][4], hct_u16 *lo, int T, int m0,
                         int n0) {
  typedef pm_down_cfg CF;
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
        const int n = n0 + pm_ncol<CF>(wn, j) + 2 * (lane & 3);
        const hct_u32 v = (hct_u32)hct_f32_to_bf16(acc[mt][j][2 * h]) |
                          ((hct_u32)hct_f32_to_bf16(acc[mt][j][2 * h + 1]) << 16);
        *(hct_u32 *)(lo + (long long)t * K + n) = v;
      }
    }
}

HCT_ENTRY void __launch_bounds__(pm_down_cfg::THREADS)
    hc_pm_down(const hct_u16 *w_down, const hct_u16 *xn, hct_u16 *lo, int T) {
  typedef pm_down_cfg CF;
  HCT_DYN_SHARED(hct_u16, smem);
  const int m0 = (int)blockIdx.y * DBM, n0 = (int)blockIdx.x * DBN;
  float acc[CF::MT][CF::NT][4];
  pm_gemm<CF, D, 0>(xn, T, m0, w_down, n0, smem, acc);
  pm_store_lo(acc, lo, T, m0, n0);
}
#endif

/*
 * The up GEMM's tile, for pair_mma and upmix: u = lo . w_up^T for rows m0 +
 * [0, UBM) and, in each stream s, the channels c0 + [0, UBN/S) (w_up rows
 * s*C + c).  Warps (UBM/UWR) x (UBN/64): each UWR rows (32 or 64) x 16
 * channels of every stream, n8 tile j = s*2 + (channel half).  Parameters
 * UBM, UBN, UWR, UST (stages).
 */
#if defined(UBM) && defined(UBN) && defined(UWR) && defined(UST)
typedef pm_cfg<UBM, UBN, PM_BK, UBM / UWR, UBN / 64, UST, S> pm_up_cfg;

HCT_DEV void pm_up_tile(const hct_u16 *w_up, const hct_u16 *lo, int T, int m0, int c0, hct_u16 *smem,
                        float (&acc)[pm_up_cfg::MT][pm_up_cfg::NT][4]) {
  pm_gemm<pm_up_cfg, K, C>(lo, T, m0, w_up, c0, smem, acc);
}
#endif

#endif /* HC_PREFILL_MMA_H */
