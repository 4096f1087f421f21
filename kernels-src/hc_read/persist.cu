/*
 * persist: hc_read in one persistent launch, class kl, one grid barrier.
 *
 * Blocks are dealt to (stream s, row group g): S*RG blocks, one per SM,
 * 640 threads.  Block (s, g) owns the K/RG rows j of w_down from g*K/RG
 * on, over the columns of stream s only, and the C/(S*RG) channels
 * c0 = b*C/(S*RG) .. of the up and mix.
 *
 *   start    the block requests, in the order they are needed, by bulk
 *            copies into shared memory (hct_bulk.h, issued by one warp): R of stream s for every token, w_norm of
 *            s and R of its channels; its w_down rows over stream s; its
 *            w_up rows (s'*C + c for its channels and all four streams).  About 110 KB a block, 13.1 MB for the grid:
 *            the whole weight stream starts at the first instruction and
 *            runs under everything below.
 *   stage A  y = fl(R' * w_norm) over stream s and the sum of squares of
 *            R' (the whole stream is here, so every block of stream s
 *            computes the same rs, bit for bit, without a barrier); the
 *            dots of its rows with y on tensor cores (3xTF32: bf16
 *            weights are exact in tf32, y is split in two tf32 halves),
 *            times rs: q[t][s][j] = rs * (w_down[j][s] . y).  lo is linear
 *            in the four streams' q, so the norm needs no grid barrier;
 *            only the rounding differs from v1.
 *   barrier  (hct_grid.h: arrival counts, no per-run zeroing); with
 *            pending, each block now stores its share of R' (not before:
 *            other blocks read R until they reach the barrier)
 *   stage B  every block gathers lo[t][j] = ((q0 + q1) + q2) + q3, the
 *            same order everywhere;
 *   stage C  up on tensor cores (the same 3xTF32 products, 16 rows a
 *            tile, each tile's 40 k-steps in 4 quarters added in order),
 *            the gates, the mix in registers.
 *
 * Deterministic: a fixed order everywhere, so the same bits on every run.
 * Launched the ordinary way (never as a programmatic dependent launch: it
 * reads resid from its first instruction).
 *
 * Parameter RG: row groups (K/RG rows a block; S*RG blocks must all be
 * resident, so S*RG <= SM_COUNT).
 *
 * Scratch: part (q, T*S*K floats), ws (the barrier's two words, zeroed
 * once at allocation).
 *
 * Built by nvcc too (tools/lab/): HCR_LAB leaves the entry out, and every
 * stage can record the global timer into `trace` (null in hctune).
 */
#include "hc_read.h"
#include "hct_grid.h"
/* No L2 prefetch parameter here: the weights go straight to shared memory. */
#define PF 0
#include "fast_common.h"
#include "persist_common.h"

#ifndef RG
#error "persist: RG must be defined"
#endif
#if !(defined(HCT_CUDA) && HCT_ARCH >= 90)
#error "persist: needs the copy engine's bulk copies (sm_90 or later)"
#endif
#include "hct_bulk.h"

#define PK_NT 640                   /* threads */
#define PK_NW (PK_NT / HCT_LW)      /* warps: 20 */
#define PK_NB (S * RG)              /* blocks */
#define PK_RPB (K / RG)             /* w_down rows a block */
#define PK_NCU (C / PK_NB)          /* channels a block, stage C */
#define PK_NR (S * PK_NCU)          /* w_up rows a block */
#define PK_TMAX HCR_PERSIST_TMAX    /* tokens: 8 */
#define PK_CPS (C / 8)              /* chunks of 8 columns in a stream: 320 */
#define PK_WDS (PK_CPS + 1)         /* w_down row stride in chunks (padded: conflict-free) */
#define PK_UPC HCR_UP_CHUNKS        /* chunks of a w_up row: 40 */
#define PK_WUS (PK_UPC + 1)         /* w_up row stride in chunks (padded) */
#define PK_YS (C + 4)               /* floats a token row of y (padded) */
#define PK_KS (PK_CPS / PK_NW)      /* k-steps a warp in stage A: 16 */
#define PK_RED (PK_NW * 16 * PK_TMAX > 4 * PK_NR * PK_TMAX ? PK_NW * 16 * PK_TMAX : 4 * PK_NR * PK_TMAX)
static_assert(K % RG == 0 && C % PK_NB == 0, "persist: rows and channels must split evenly");
static_assert(PK_RPB <= 16, "persist: a block's rows are one tensor-core tile");
static_assert(PK_CPS % PK_NW == 0, "persist: stage A's k-steps split evenly over warps");
static_assert(PK_NR % 16 == 0, "persist: stage C's rows are whole tiles");
static_assert(PK_UPC % 4 == 0, "persist: stage C's k-steps split in quarters");
static_assert(C % (4 * PK_NT) == 0, "persist: stage A's elements split evenly over threads");
static_assert(S == 4, "persist: the mix is written for 4 streams");

/* Shared memory, in bytes (the manifest's smem expression is this sum). */
#define PK_SMEM(T)                                                                              \
  (PK_RPB * PK_WDS * 16 + PK_NR * PK_WUS * 16 + (T) * PK_YS * 4 + PK_RED * 4 + K * 8 * 4 +     \
   PK_TMAX * S * PK_NCU * 4 + 256 * 4 + PK_TMAX * (C / RG) * 4 + C * 2 + 32)

/* ---- tensor cores: 3xTF32-style products ----------------------------------
 * mma.m16n8k8 with tf32 inputs and f32 accumulation.  The weights are bf16,
 * exact in tf32; an activation y is split into hi = tf32(y) and lo =
 * tf32(y - hi) (y - hi is exact), and each tile is multiplied twice, so the
 * products carry about 22 bits of y.  Fragments (PTX ISA, m16n8k8 .tf32),
 * g = lane / 4, i = lane % 4: A a0 (g, i), a1 (g+8, i), a2 (g, i+4), a3
 * (g+8, i+4); B b0 (k i, n g), b1 (k i+4, n g); C c0 (g, 2i), c1 (g,
 * 2i+1), c2 (g+8, 2i), c3 (g+8, 2i+1). */
HCT_DEV hct_u32 pk_bf16_bits(hct_u4 w, int e) {
  const hct_u32 word = e < 2 ? w.x : e < 4 ? w.y : e < 6 ? w.z : w.w;
  return (e & 1) ? (word & 0xffff0000u) : (word << 16);
}

HCT_DEV void pk_split(float y, hct_u32 &hi, hct_u32 &lo) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(y));
  const float r = y - __uint_as_float(hi);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(r));
}

HCT_DEV void pk_mma(float (&d)[4], const hct_u32 (&a)[4], hct_u32 b0, hct_u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The A fragment of rows r0 and r0+8 of a tile, chunk pointers already
 * offset to the k-step (null: a row past the tile's end, read as zero). */
HCT_DEV void pk_afrag(hct_u32 (&a)[4], const hct_u4 *p0, const hct_u4 *p1, int ti) {
  const hct_u4 z = {0, 0, 0, 0};
  const hct_u4 wa = p0 ? *p0 : z, wb = p1 ? *p1 : z;
  a[0] = pk_bf16_bits(wa, ti);
  a[1] = pk_bf16_bits(wb, ti);
  a[2] = pk_bf16_bits(wa, ti + 4);
  a[3] = pk_bf16_bits(wb, ti + 4);
}

HCT_DEV void pk_stamp(hct_u64 *trace, int i) {
  if (trace != 0 && threadIdx.x == 0) trace[blockIdx.x * 16 + i] = hct_globaltimer();
}

/* Stage A's elementwise part for TB >= T tokens: y = fl(R' * w_norm) in
 * place, this block's share of R' kept for the store after the barrier
 * (every block's reads of resid are done by then), and this thread's
 * partial sums of squares. */
template <int TB>
HCT_DEV void pk_norm_part(float *y, const hct_u16 *wn, float *rsh, const float *pending, int s,
                          int g, int T, float (&a)[TB]) {
  const int tid = (int)threadIdx.x;
#pragma unroll
  for (int t = 0; t < TB; ++t) {
    a[t] = 0.0f;
    if (t >= T) continue;
#pragma unroll
    for (int i = 0; i < C / PK_NT; ++i) {
      const int c = tid + i * PK_NT;
      float x = y[t * PK_YS + c];
      if (pending != 0) {
        const long long at = ((long long)t * S + s) * C + c;
        x = x + pending[at];
        if (c / (C / RG) == g) rsh[t * (C / RG) + c % (C / RG)] = x;
      }
      a[t] = fmaf(x, x, a[t]);
      y[t * PK_YS + c] = x * hct_bf16_to_f32(wn[c]);
    }
  }
}

template <int TB>
HCT_DEV void pk_read(float *resid, const float *pending, const hct_u16 *w_norm,
                     const hct_u16 *w_down, const hct_u16 *w_up, float *part, hct_u32 *ws,
                     float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T, hct_u64 *trace) {
  HCT_DYN_SHARED(hct_u4, pk_sm);
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const int gq = lane >> 2, ti = lane & 3;
  const int b = (int)blockIdx.x, s = b / RG, g = b % RG;
  const int j0 = g * PK_RPB, cu0 = b * PK_NCU;
  pk_stamp(trace, 0);
  hct_grid_t grid = hct_grid_begin(ws);

  hct_u4 *wd = pk_sm;                                   /* [row][chunk], stride PK_WDS */
  hct_u4 *wu = wd + PK_RPB * PK_WDS;                    /* [s][cl][chunk], stride PK_WUS */
  float *y = (float *)(wu + PK_NR * PK_WUS);            /* [t][c], stride PK_YS */
  float *red = y + T * PK_YS;                           /* stage A's tiles, then C's */
  float *slo = red + PK_RED;                            /* lo, [half][t][chunk] float4 */
  float *rm = slo + K * 8;                              /* R of the channels, [t][s][cl] */
  float *ssq = rm + PK_TMAX * S * PK_NCU;               /* squares [warp][t], then rs */
  float *rsh = ssq + 256;                               /* R' of its share, [t][C/RG] */
  hct_u16 *wn = (hct_u16 *)(rsh + PK_TMAX * (C / RG));  /* w_norm of stream s */

  hct_u64 *bar = (hct_u64 *)(wn + C);                  /* three mbarriers */

  /* ---- start: every byte this block reads, in the order it is needed,
   * as bulk copies issued by warp 0 (about 100 of them; items dealt over
   * its lanes in order): group 0 R of stream s, w_norm of s and R of the
   * block's channels; group 1 its w_down rows; group 2 its w_up rows. */
  if (tid == 0)
    for (int i = 0; i < 3; ++i) hct_bulk_init(&bar[i]);
  __syncthreads();
  if (wp == 0) {
    if (lane == 0) {
      hct_bulk_expect(&bar[0], T * C * 4 + C * 2 + T * S * PK_NCU * 4);
      hct_bulk_expect(&bar[1], PK_RPB * C * 2);
      hct_bulk_expect(&bar[2], PK_NR * K * 2);
    }
    __syncwarp();
    const int n0 = T + 1 + T * S, n1 = n0 + PK_RPB, n2 = n1 + PK_NR;
    for (int i = lane; i < n2; i += HCT_LW) {
      if (i < T) {
        hct_bulk_copy(y + i * PK_YS, resid + ((long long)i * S + s) * C, C * 4, &bar[0]);
      } else if (i == T) {
        hct_bulk_copy(wn, w_norm + (long long)s * C, C * 2, &bar[0]);
      } else if (i < n0) {
        const int ts = i - T - 1; /* t*S + s' */
        hct_bulk_copy(rm + ts * PK_NCU, resid + (long long)ts * C + cu0, PK_NCU * 4, &bar[0]);
      } else if (i < n1) {
        const int r = i - n0;
        hct_bulk_copy(wd + r * PK_WDS, w_down + (long long)(j0 + r) * D + (long long)s * C, C * 2, &bar[1]);
      } else {
        const int row = i - n1; /* s'*NCU + cl */
        const int sr = row / PK_NCU, cl = row % PK_NCU;
        hct_bulk_copy(wu + row * PK_WUS, w_up + ((long long)sr * C + cu0 + cl) * K, K * 2, &bar[2]);
      }
    }
  }
  pk_stamp(trace, 1);

  /* ---- stage A ---------------------------------------------------------- */
  hct_bulk_wait(&bar[0], 0);
  pk_stamp(trace, 2);
  {
    float a[TB];
    pk_norm_part<TB>(y, wn, rsh, pending, s, g, T, a);
    const float v = hcr_multi_sum<TB>(a, lane);
    /* Lane t << (5 - log2 TB) holds token t's warp sum. */
    constexpr int SH = TB == 1 ? 5 : TB == 2 ? 4 : TB == 4 ? 3 : 2;
    if ((lane & ((1 << SH) - 1)) == 0 && (lane >> SH) < T) ssq[wp * PK_TMAX + (lane >> SH)] = v;
  }
  __syncthreads(); /* y and the squares' partials */
  hct_bulk_wait(&bar[1], 0);
  pk_stamp(trace, 3);
  if (tid < T) {
    float ss = 0.0f;
    for (int w = 0; w < PK_NW; ++w) ss += ssq[w * PK_TMAX + tid];
    ssq[PK_NW * PK_TMAX + tid] = rsqrtf(ss / (float)C + HCT_EPS);
  }
  {
    /* Warp wp: k-steps [wp*KS, (wp+1)*KS) of the stream, rows gq and
     * gq+8 of the block's (those past PK_RPB read as zero), tokens as the
     * 8 columns of B (those past T read as zero). */
    /* Four independent accumulator chains (hi and lo halves of y, even
     * and odd k-steps), added in a fixed order at the end: a quarter of
     * the dependent mma latency of a single chain. */
    float d[4][4] = {};
    const hct_u4 *r0 = gq < PK_RPB ? wd + gq * PK_WDS : 0;
    const hct_u4 *r1 = gq + 8 < PK_RPB ? wd + (gq + 8) * PK_WDS : 0;
    const float *yt = y + gq * PK_YS;
#pragma unroll
    for (int k = 0; k < PK_KS; ++k) {
      const int ks = wp * PK_KS + k;
      hct_u32 a[4];
      pk_afrag(a, r0 ? r0 + ks : 0, r1 ? r1 + ks : 0, ti);
      const float y0 = gq < T ? yt[ks * 8 + ti] : 0.0f;
      const float y1 = gq < T ? yt[ks * 8 + ti + 4] : 0.0f;
      hct_u32 h0, l0, h1, l1;
      pk_split(y0, h0, l0);
      pk_split(y1, h1, l1);
      pk_mma(d[2 + (k & 1)], a, l0, l1);
      pk_mma(d[k & 1], a, h0, h1);
    }
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = (d[2][i] + d[3][i]) + (d[0][i] + d[1][i]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      red[(wp * 16 + gq) * PK_TMAX + 2 * ti + h] = v[h];
      red[(wp * 16 + gq + 8) * PK_TMAX + 2 * ti + h] = v[2 + h];
    }
  }
  __syncthreads();
  if (tid < PK_RPB * PK_TMAX) {
    const int r = tid / PK_TMAX, t = tid % PK_TMAX;
    if (t < T) {
      float dot = 0.0f;
      for (int w = 0; w < PK_NW; ++w) dot += red[(w * 16 + r) * PK_TMAX + t];
      part[((long long)t * S + s) * K + j0 + r] = ssq[PK_NW * PK_TMAX + t] * dot;
    }
  }
  pk_stamp(trace, 4);
  if (!hct_grid_sync(&grid)) return;
  pk_stamp(trace, 5);
  if (pending != 0)
    for (int p = tid; p < T * (C / RG); p += PK_NT) {
      const int t = p / (C / RG), e = p % (C / RG);
      resid[((long long)t * S + s) * C + g * (C / RG) + e] = rsh[p];
    }

  /* ---- stage B: lo, [half][t][chunk] float4 (B fragments in stage C) ---- */
  for (int p = tid; p < PK_TMAX * K; p += PK_NT) {
    const int t = p / K, k = p % K;
    float l = 0.0f;
    if (t < T) {
      const float *q = part + (long long)t * S * K + k;
      l = ((hcr_ldcg(q) + hcr_ldcg(q + K)) + hcr_ldcg(q + 2 * K)) + hcr_ldcg(q + 3 * K);
    }
    slo[(((k >> 2) & 1) * PK_TMAX + t) * (K / 2) + (k >> 3) * 4 + (k & 3)] = l;
  }
  hct_bulk_wait(&bar[2], 0);
  __syncthreads(); /* lo */
  pk_stamp(trace, 6);

  /* ---- stage C: up, gates, mix ------------------------------------------ */
  {
    /* Item = (tile of 16 rows, quarter of the 40 k-steps); the quarters'
     * sums land in red as [quarter][row][token]. */
    for (int item = wp; item < (PK_NR / 16) * 4; item += PK_NW) {
      const int tile = item / 4, kq = item % 4;
      const int ra = tile * 16 + gq;
      const hct_u4 *p0 = wu + ra * PK_WUS, *p1 = wu + (ra + 8) * PK_WUS;
      float d[4][4] = {};
#pragma unroll
      for (int k = 0; k < PK_UPC / 4; ++k) {
        const int ks = kq * (PK_UPC / 4) + k;
        hct_u32 a[4];
        pk_afrag(a, p0 + ks, p1 + ks, ti);
        const float y0 = slo[(gq * (K / 8) + ks) * 4 + ti];
        const float y1 = slo[((PK_TMAX + gq) * (K / 8) + ks) * 4 + ti];
        hct_u32 h0, l0, h1, l1;
        pk_split(y0, h0, l0);
        pk_split(y1, h1, l1);
        pk_mma(d[2 + (k & 1)], a, l0, l1);
        pk_mma(d[k & 1], a, h0, h1);
      }
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = (d[2][i] + d[3][i]) + (d[0][i] + d[1][i]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        red[(kq * PK_NR + ra) * PK_TMAX + 2 * ti + h] = v[h];
        red[(kq * PK_NR + ra + 8) * PK_TMAX + 2 * ti + h] = v[2 + h];
      }
    }
  }
  __syncthreads();
  pk_stamp(trace, 7);
  for (int p = tid; p < T * PK_NCU; p += PK_NT) {
    const int t = p / PK_NCU, cl = p % PK_NCU, c = cu0 + cl;
    float gs[S], r[S];
#pragma unroll
    for (int sr = 0; sr < S; ++sr) {
      const int row = sr * PK_NCU + cl;
      float u = red[row * PK_TMAX + t];
#pragma unroll
      for (int q = 1; q < 4; ++q) u += red[(q * PK_NR + row) * PK_TMAX + t];
      gs[sr] = hcr_sigmoid(u);
      r[sr] = rm[(t * S + sr) * PK_NCU + cl];
      if (pending != 0) r[sr] = r[sr] + pending[((long long)t * S + sr) * C + c];
    }
    float m = gs[0] * r[0];
#pragma unroll
    for (int sr = 1; sr < S; ++sr) m = fmaf(gs[sr], r[sr], m);
    const long long o = (long long)t * C + c;
    mixed[o] = m;
    mixed_bf16[o] = hct_f32_to_bf16(m);
    mixed_f16[o] = hct_f32_to_f16(m);
  }
  pk_stamp(trace, 8);
}

#define PK_ARGS resid, pending, w_norm, w_down, w_up, part, ws, mixed, mixed_bf16, mixed_f16, T, trace
#define PK_PARAMS                                                                               \
  float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,            \
      const hct_u16 *w_up, float *part, hct_u32 *ws, float *mixed, hct_u16 *mixed_bf16,         \
      hct_u16 *mixed_f16, int T
HCT_DEV void pk_dispatch(PK_PARAMS, hct_u64 *trace) {
  if (T <= 1)
    pk_read<1>(PK_ARGS);
  else if (T <= 2)
    pk_read<2>(PK_ARGS);
  else if (T <= 4)
    pk_read<4>(PK_ARGS);
  else
    pk_read<8>(PK_ARGS);
}

#ifndef HCR_LAB
/* Grid S*RG, block 640, dynamic shared memory PK_SMEM(T) (the manifest's
 * expression). */
HCT_ENTRY void __launch_bounds__(PK_NT, 1) hc_ps_read(PK_PARAMS) {
  pk_dispatch(resid, pending, w_norm, w_down, w_up, part, ws, mixed, mixed_bf16, mixed_f16, T, 0);
}
#endif
