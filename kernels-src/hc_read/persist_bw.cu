/*
 * persist_bw: hc_read in one persistent launch, bitwise equal to v1.  One
 * block of 640 threads per SM, two grid barriers (hct_grid.h: a wait that
 * times out raises ws[0] and the kernel returns).  The canonical order
 * fixes each lane's fmaf chain and each butterfly, not which block
 * computes them, so:
 *
 *   start    every block requests all of its weights: its down units by
 *            cp.async (a unit is 8 lanes of one row: 8 x 40 chunks, 5 KB;
 *            units are numbered lane group first, u = lg*K + j, and dealt
 *            to blocks in runs, so a block needs only 1 or 2 lane groups
 *            of xn), and the w_up rows of its channels by cp.async (WUPS
 *            1) or an L2 prefetch (WUPS 0).
 *   stage 1  blocks 0 .. T*S-1 run the canonical norm of (t, s) with 256
 *            of their threads (v2's per-block order): xn and R'.
 *   barrier
 *   stage 2  every block runs the canonical lane chains of its units for
 *            every token (weights from shared memory, xn from L2) and
 *            stores the 32 lane partials of each row to `part`; the block
 *            that completes a row (a count per row in ws) runs its
 *            butterfly: lo.
 *   barrier
 *   stage 3  up and mix as persist's stage C (canonical lane partials of
 *            rows s*C + c, sums by recursive halving, gates and mix in
 *            registers).
 *
 * Parameters: WUPS (w_up in shared memory, about 113 KB per block on 132
 * SMs), PF (the L2 prefetch kind when WUPS is 0: 2 bulk, sm_90; 1 per
 * 32 bytes; 0 none).
 *
 * Scratch: xn T*D*4, part T*K*32*4, lo T*K*4, ws 4096 zeroed (the
 * barrier's words 0..2, the row counts from word 16; each row's count is
 * put back to 0 by the block that completes it).
 */
#include "hc_read.h"
#include "hct_grid.h"
#include "fast_common.h"
#include "persist_common.h"

#ifndef WUPS
#error "persist_bw: WUPS must be defined"
#endif
#ifndef PF
#error "persist_bw: PF must be defined"
#endif

#define PB_NT 640                 /* threads */
#define PB_NW (PB_NT / HCT_LW)    /* warps: 20 */
#define PB_TMAX HCR_PERSIST_TMAX
#define PB_UPC HCR_UP_CHUNKS      /* chunks of a w_up row: 40 */
#define PB_LGW 8                  /* lanes per down unit */
#define PB_NU ((HCT_LW / PB_LGW) * K) /* down units: 1280 */
#define PB_UQ HCR_DOWN_Q          /* steps of a lane chain: 40 */
#define PB_ROWCNT 16              /* first ws word of the row counts */
static_assert(PB_NT >= HCR_NORM_THREADS && HCR_NORM_THREADS % HCT_LW == 0,
              "persist_bw: the norm needs 256 of the block's threads");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "persist_bw: a row of w_up is one or two chunks per lane");
static_assert(S == 4, "persist_bw: the mix is written for 4 streams");
static_assert((PB_ROWCNT + K) * 4 <= 4096, "persist_bw: row counts must fit in ws");

/* hcr_norm_stream for a block of PB_NT threads: threads 0..255 do v2's
 * work, statement for statement (w_norm loaded with resid, as upmix_dec);
 * every thread takes part in the barriers. */
HCT_DEV void pb_norm_stream(int t, int s, float *resid, const float *pending,
                            const hct_u16 *w_norm, float *xn, float *red) {
  const int tid = (int)threadIdx.x;
  const bool on = tid < HCR_NORM_THREADS; /* whole warps */
  const long long base = ((long long)t * S + s) * C;
  const hct_u16 *wn = w_norm + (long long)s * C;
  float x[HCR_NORM_PER_THREAD], wv[HCR_NORM_PER_THREAD];
  if (on) {
    float a = 0.0f;
#pragma unroll
    for (int k = 0; k < HCR_NORM_PER_THREAD; ++k) {
      const int c = tid + k * HCR_NORM_THREADS;
      wv[k] = c < C ? hct_bf16_to_f32(wn[c]) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < HCR_NORM_PER_THREAD; ++k) {
      const int c = tid + k * HCR_NORM_THREADS;
      x[k] = 0.0f;
      if (c < C) {
        float v = resid[base + c];
        if (pending != 0) {
          v = v + pending[base + c];
          resid[base + c] = v;
        }
        x[k] = v;
        a = fmaf(v, v, a);
      }
    }
    a = hct_warp_sum(a);
    if ((tid & (HCT_LW - 1)) == 0) red[tid / HCT_LW] = a;
  }
  __syncthreads();
  if (tid < HCT_LW) {
    float b = tid < HCR_NORM_THREADS / HCT_LW ? red[tid] : 0.0f;
    b += hct_shfl_xor(b, 4);
    b += hct_shfl_xor(b, 2);
    b += hct_shfl_xor(b, 1);
    if (tid == 0) red[8] = b;
  }
  __syncthreads();
  if (on) {
    const float ss = red[8];
    const float rs = rsqrtf(ss / (float)C + HCT_EPS);
    float *xo = xn + (long long)t * D + (long long)s * C;
#pragma unroll
    for (int k = 0; k < HCR_NORM_PER_THREAD; ++k) {
      const int c = tid + k * HCR_NORM_THREADS;
      if (c < C) {
        const float y = x[k] * wv[k];
        xo[c] = y * rs;
      }
    }
  }
  /* red is reused by the next stream. */
  __syncthreads();
}

/*
 * Grid (SM_COUNT), block 640, dynamic shared memory (bytes):
 *   numax*5120               the down units' weights, [unit][q][lane of 8]
 * + WUPS*ncumax*S*K*2        w_up rows of the block's channels, [c][s][chunk]
 * + 2*8*(K/8)*16             lo of the tokens, [half][t][chunk]
 * with numax = cdiv(4*K, NB), ncumax = cdiv(C, NB).
 */
HCT_ENTRY void __launch_bounds__(PB_NT, 1)
    hc_pb_read(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
               const hct_u16 *w_up, float *xn, float *part, float *lo, hct_u32 *ws, float *mixed,
               hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  extern __shared__ hct_u4 pb_sm[];
  __shared__ float red[9];
  __shared__ int rows_done[K]; /* rows this block completes */
  __shared__ int n_done;
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int nb = (int)gridDim.x, b = (int)blockIdx.x;
  const int u0 = b * PB_NU / nb, nu = (b + 1) * PB_NU / nb - u0;
  const int numax = (PB_NU + nb - 1) / nb;
  const int cu0 = b * C / nb, ncu = (b + 1) * C / nb - cu0;
  const int ncumax = (C + nb - 1) / nb;
  const int TB = T <= 1 ? 1 : T <= 2 ? 2 : T <= 4 ? 4 : 8;
  hct_u4 *smW = pb_sm;
  hct_u4 *smB = smW + numax * PB_UQ * PB_LGW;
  hct_f4 *slo = (hct_f4 *)(smB + (WUPS ? ncumax * S * PB_UPC : 0));

  /* ---- start: every weight byte of this block is requested ------------ */
  for (int p = tid; p < nu * PB_UQ * PB_LGW; p += PB_NT) {
    const int l = p % PB_LGW, q = (p / PB_LGW) % PB_UQ, uu = p / (PB_LGW * PB_UQ);
    const int u = u0 + uu, lg = u / K, j = u % K;
    hct_cp_async16(&smW[(uu * PB_UQ + q) * PB_LGW + l],
                   (const hct_u4 *)(w_down + (long long)j * D) + (lg * PB_LGW + l + HCT_LW * q));
  }
  hct_cp_async_commit();
#if WUPS
  for (int p = tid; p < ncu * S * PB_UPC; p += PB_NT) {
    const int q = p % PB_UPC, cs = p / PB_UPC;
    const int cl = cs / S, s = cs % S;
    hct_cp_async16(&smB[cs * PB_UPC + q],
                   (const hct_u4 *)(w_up + ((long long)s * C + cu0 + cl) * K) + q);
  }
#else
  if (tid < S && ncu > 0) hcr_prefetch_bytes(w_up + ((long long)tid * C + cu0) * K, ncu * K * 2);
#endif
  hct_cp_async_commit();
#if defined(HCT_CUDA) && HCT_ARCH >= 90
  /* Under programmatic dependent launch, wait for the previous kernel
   * before touching anything but weights; a no-op otherwise. */
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

  /* ---- stage 1: the canonical norm ---------------------------------------*/
  for (int p = b; p < T * S; p += nb) pb_norm_stream(p / S, p % S, resid, pending, w_norm, xn, red);
  if (!hct_grid_sync(ws)) return;

  /* ---- stage 2: the canonical lane chains, then the butterflies --------- */
  hct_cp_async_wait<1>(); /* the down units landed */
  __syncthreads();
  const int nc = nu * PB_LGW; /* chains of this block, per token */
  for (int p = tid; p < nc * T; p += PB_NT) {
    const int ci = p % nc, t = p / nc;
    const int uu = ci / PB_LGW, l = ci % PB_LGW;
    const int u = u0 + uu, lg = u / K, j = u % K;
    const int L = lg * PB_LGW + l;
    /* xn was written in this launch, by other blocks, before the barrier:
     * plain (L1-allocating) loads are right, as this SM never read these
     * lines before; never the read-only path. */
    const hct_f4 *x = (const hct_f4 *)(xn + (long long)t * D);
    const hct_u4 *w = smW + uu * PB_UQ * PB_LGW + l;
    float acc = 0.0f;
#pragma unroll 8
    for (int q = 0; q < PB_UQ; ++q) {
      const int c = L + HCT_LW * q;
      acc = hcr_dot8(w[q * PB_LGW], x[2 * c], x[2 * c + 1], acc);
    }
    part[((long long)t * K + j) * HCT_LW + L] = acc;
  }
  __threadfence();
  if (tid == 0) n_done = 0;
  __syncthreads();
  /* One count per unit: the fourth lane group of a row to arrive runs it. */
  for (int uu = tid; uu < nu; uu += PB_NT) {
    const int j = (u0 + uu) % K;
    if (atomicAdd(&ws[PB_ROWCNT + j], 1u) == (hct_u32)(HCT_LW / PB_LGW - 1)) {
      ws[PB_ROWCNT + j] = 0u; /* ready for the next launch */
      rows_done[atomicAdd(&n_done, 1)] = j;
    }
  }
  __syncthreads();
  __threadfence();
  for (int p = wp; p < n_done * T; p += PB_NW) {
    const int j = rows_done[p % n_done], t = p / n_done;
    float v = hcr_ldcg(&part[((long long)t * K + j) * HCT_LW + lane]);
    v = hct_warp_sum(v);
    if (lane == 0) lo[(long long)t * K + j] = v;
  }
  if (!hct_grid_sync(ws)) return;

  /* ---- stage 3: up and mix ------------------------------------------------*/
  for (int p = tid; p < TB * K; p += PB_NT) {
    const int t = p / K, k = p % K;
    ((float *)slo)[(((k >> 2) & 1) * PB_TMAX + t) * (K / 2) + (k >> 3) * 4 + (k & 3)] =
        t < T ? hcr_ldcg(lo + p) : 0.0f;
  }
  hct_cp_async_wait<0>();
  __syncthreads();
  const bool two = lane + HCT_LW < PB_UPC;
  for (int cl = wp; cl < ncu; cl += PB_NW) {
    const int c = cu0 + cl;
    hct_u4 w[S][2];
#pragma unroll
    for (int s = 0; s < S; ++s) {
#if WUPS
      const hct_u4 *row = smB + (cl * S + s) * PB_UPC;
#else
      const hct_u4 *row = (const hct_u4 *)(w_up + ((long long)s * C + c) * K);
#endif
      w[s][0] = row[lane];
      w[s][1] = two ? row[lane + HCT_LW] : hct_u4{0, 0, 0, 0};
    }
    switch (TB) {
      case 1: hcr_persist_upmix<1>(w, slo, resid, lane, c, T, mixed, mixed_bf16, mixed_f16); break;
      case 2: hcr_persist_upmix<2>(w, slo, resid, lane, c, T, mixed, mixed_bf16, mixed_f16); break;
      case 4: hcr_persist_upmix<4>(w, slo, resid, lane, c, T, mixed, mixed_bf16, mixed_f16); break;
      default: hcr_persist_upmix<8>(w, slo, resid, lane, c, T, mixed, mixed_bf16, mixed_f16); break;
    }
  }
}
