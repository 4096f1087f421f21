/*
 * pair_simt: the baseline of hc_read_prefill.  Four launches: the norm
 * (prefill.h, xn as bf16), the down GEMM lo = bf16(xn . w_down^T), the up
 * GEMM gated = sigmoid(lo . w_up^T), and the mix reading gated back.
 *
 * The GEMMs are plain SIMT: every output is one f32 chain
 * acc = fmaf(a[k], b[k], acc) over k = 0, 1, ..., in ascending order,
 * starting from 0 (the canonical order of this op, which the kl variants
 * are measured against through the float64 reference).  A block computes a
 * BM x BN tile of the output from shared-memory tiles of BK = 16 k-values
 * (A and B widened to f32 once, stored k-major so a thread reads its 8 rows
 * and 4 columns as float4s); a thread holds 8 x 4 outputs.  The tile sizes
 * change which thread computes an output, never its chain: every point
 * gives the same bits.
 *
 * Parameters: DBM, DBN: the down GEMM's tile (N = K = 320); UBM, UBN: the
 * up GEMM's (N = D = 10240).  Threads per block: BM*BN/32.
 *
 * Expected on the H200 at T = 8192 (53.7 GFLOP per GEMM, f32 FMA peak
 * about 67 TFLOPS): each GEMM bound by the FMA pipes and the shared-memory
 * loads (3 LDS.128 per 32 FMA), about 25-35 TFLOPS, 1.6-2.1 ms each; norm
 * and mix bandwidth-bound (R read twice, 335 MB each, xn written, gated
 * written and read), about 0.35 ms together: about 4 ms a read.
 */
#include "prefill.h"

#if !defined(DBM) || !defined(DBN) || !defined(UBM) || !defined(UBN)
#error "pair_simt: DBM, DBN, UBM, UBN must be defined"
#endif

#define PS_BK 16
#define PS_TM 8
#define PS_TN 4

static_assert(D % PS_BK == 0 && K % PS_BK == 0, "pair_simt: the k extents must be whole tiles of 16");
static_assert(K % DBN == 0 && D % UBN == 0, "pair_simt: N must be whole tiles");

/* Epilogues: what becomes of an accumulated dot. */
#define PS_EPI_LO 0    /* lo[t][n] = bf16(acc) */
#define PS_EPI_GATE 1  /* gated[t][n] = 1/(1+expf(-acc)) */

/*
 * out[m][n] for m < M, the rows of A [M][KD] and B [N][KD] (both bf16, k
 * contiguous), for the BM x BN tile at blockIdx (x: N tile, y: M tile: the
 * blocks sharing an A tile run together).
 */
template <int BM, int BN, int KD, int N, int EPI>
HCT_DEV void ps_gemm(const hct_u16 *A, const hct_u16 *B, void *out, int M) {
  constexpr int THREADS = (BM / PS_TM) * (BN / PS_TN);
  constexpr int CPR = PS_BK / 8; /* 16-byte chunks of a tile row */
  alignas(16) __shared__ float As[PS_BK][BM + 4];
  alignas(16) __shared__ float Bs[PS_BK][BN + 4];
  const int tid = (int)threadIdx.x;
  const int tx = tid % (BN / PS_TN), ty = tid / (BN / PS_TN);
  const int n0 = (int)blockIdx.x * BN, m0 = (int)blockIdx.y * BM;
  float acc[PS_TM][PS_TN];
#pragma unroll
  for (int i = 0; i < PS_TM; ++i)
#pragma unroll
    for (int j = 0; j < PS_TN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < KD; k0 += PS_BK) {
    for (int c = tid; c < BM * CPR; c += THREADS) {
      const int r = c / CPR, kc = (c % CPR) * 8;
      hct_u4 w = {0u, 0u, 0u, 0u};
      if (m0 + r < M) w = *(const hct_u4 *)(A + (long long)(m0 + r) * KD + k0 + kc);
      As[kc + 0][r] = hct_bf16_lo(w.x);
      As[kc + 1][r] = hct_bf16_hi(w.x);
      As[kc + 2][r] = hct_bf16_lo(w.y);
      As[kc + 3][r] = hct_bf16_hi(w.y);
      As[kc + 4][r] = hct_bf16_lo(w.z);
      As[kc + 5][r] = hct_bf16_hi(w.z);
      As[kc + 6][r] = hct_bf16_lo(w.w);
      As[kc + 7][r] = hct_bf16_hi(w.w);
    }
    for (int c = tid; c < BN * CPR; c += THREADS) {
      const int r = c / CPR, kc = (c % CPR) * 8;
      const hct_u4 w = *(const hct_u4 *)(B + (long long)(n0 + r) * KD + k0 + kc);
      Bs[kc + 0][r] = hct_bf16_lo(w.x);
      Bs[kc + 1][r] = hct_bf16_hi(w.x);
      Bs[kc + 2][r] = hct_bf16_lo(w.y);
      Bs[kc + 3][r] = hct_bf16_hi(w.y);
      Bs[kc + 4][r] = hct_bf16_lo(w.z);
      Bs[kc + 5][r] = hct_bf16_hi(w.z);
      Bs[kc + 6][r] = hct_bf16_lo(w.w);
      Bs[kc + 7][r] = hct_bf16_hi(w.w);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < PS_BK; ++k) {
      const hct_f4 a0 = *(const hct_f4 *)&As[k][ty * PS_TM];
      const hct_f4 a1 = *(const hct_f4 *)&As[k][ty * PS_TM + 4];
      const hct_f4 b = *(const hct_f4 *)&Bs[k][tx * PS_TN];
      const float a[PS_TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[PS_TN] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < PS_TM; ++i)
#pragma unroll
        for (int j = 0; j < PS_TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < PS_TM; ++i) {
    const int m = m0 + ty * PS_TM + i;
    if (m >= M) continue;
    const long long o = (long long)m * N + n0 + tx * PS_TN;
    if (EPI == PS_EPI_LO) {
      hct_u16 *lo = (hct_u16 *)out;
#pragma unroll
      for (int j = 0; j < PS_TN; ++j) lo[o + j] = hct_f32_to_bf16(acc[i][j]);
    } else {
      hct_f4 g;
      g.x = hcr_sigmoid(acc[i][0]);
      g.y = hcr_sigmoid(acc[i][1]);
      g.z = hcr_sigmoid(acc[i][2]);
      g.w = hcr_sigmoid(acc[i][3]);
      *(hct_f4 *)((float *)out + o) = g;
    }
  }
}

/* Grid (K/DBN, cdiv(T, DBM)), block DBM*DBN/32. */
HCT_ENTRY void __launch_bounds__(DBM *DBN / (PS_TM * PS_TN))
    hc_ps_down(const hct_u16 *w_down, const hct_u16 *xn, hct_u16 *lo, int T) {
  ps_gemm<DBM, DBN, D, K, PS_EPI_LO>(xn, w_down, lo, T);
}

/* Grid (D/UBN, cdiv(T, UBM)), block UBM*UBN/32. */
HCT_ENTRY void __launch_bounds__(UBM *UBN / (PS_TM * PS_TN))
    hc_ps_up(const hct_u16 *w_up, const hct_u16 *lo, float *gated, int T) {
  ps_gemm<UBM, UBN, K, D, PS_EPI_GATE>(lo, w_up, gated, T);
}
