/*
 * persist: hc_read in one persistent launch, class kl.  One block of 640
 * threads per SM (the grid rounded down to a multiple of 4), two grid
 * barriers (hct_grid.h: a barrier that times out raises ws[0] and the
 * kernel returns):
 *
 *   start    every block requests all of its weights at once: its column
 *            slice of w_down (all K rows) by cp.async, and the w_up rows of
 *            its channels by cp.async (WUPS 1) or as an L2 prefetch (WUPS
 *            0), so the whole 13.11 MB stream starts at the first
 *            instruction and runs under everything below.
 *   stage A  blocks are dealt to streams, NB/4 per stream; block (s, i)
 *            owns the chunks of 8 columns [s*C/8 + i*(C/8)/NBS, ...) of
 *            stream s.  It forms R' there (storing it back when pending is
 *            given: each element once), y = fl(R' * w_norm), the partial
 *            sum of squares of its slice, and for every row j and token t
 *            the partial dot P = sum over its slice of w_down[j][k] * y[k].
 *            The norm scale rs is not known yet and is applied after the
 *            reduction (lo = sum_s rs_s * P_s): linear, so exact in real
 *            arithmetic, and only the rounding differs from v1.
 *   barrier
 *   stage B  the fixed-order reduction: a warp takes (t, 8 rows): lane
 *            (row, g) sums blocks i = g, g+4, ... in order, then the
 *            butterfly over g; the squares the same way; rs = rsqrtf(ss/C
 *            + EPS); lo = rs_0*P_0, then fmaf over s = 1..3.  Deterministic:
 *            the same bits on every run.
 *   barrier
 *   stage C  up and mix: block b takes channels [b*C/NB, (b+1)*C/NB), a
 *            warp per channel, the canonical up lane partials of the four
 *            rows s*C + c, all sums reduced at once by recursive halving,
 *            the gates and the mix in registers (as upmix_dec).
 *
 * Parameters: MMA (1: the dots of stages A and C on tensor cores, tf32
 * with the activations split in two, see ps_mma2; sm_80+; 0: fmaf), WUPS
 * (1: w_up staged in shared memory too, about 118 KB per block on 132
 * SMs; 0: L2 prefetch only, about 67 KB), PF (with WUPS 0: 2 bulk L2
 * prefetch, sm_90; 1 prefetch.global.L2; 0 none).
 *
 * Scratch: part (partial dots and squares, T*NB*(K+1) floats), lo (T*K),
 * ws (the barrier's words, zeroed).
 */
#include "hc_read.h"
#include "hct_grid.h"
#include "fast_common.h"
#include "persist_common.h"

#ifndef WUPS
#error "persist: WUPS must be defined"
#endif
#ifndef PF
#error "persist: PF must be defined"
#endif
#ifndef MMA
#error "persist: MMA must be defined"
#endif
#if MMA && !(defined(HCT_CUDA) && HCT_ARCH >= 80)
#error "persist: MMA needs sm_80 or later"
#endif

#define PS_NT (2 * K)             /* threads: two per row in stage A */
#define PS_NW (PS_NT / HCT_LW)    /* warps: 20 */
#define PS_CPS (C / 8)            /* chunks of 8 columns per stream: 320 */
#define PS_TMAX HCR_PERSIST_TMAX
#define PS_UPC HCR_UP_CHUNKS      /* chunks of a w_up row: 40 */
#define PS_IMAX 9                 /* stage B: blocks per lane in one pass (NB <= 144) */
static_assert(PS_NT % HCT_LW == 0, "persist: 2*K threads must be whole warps");
static_assert(C % 8 == 0, "persist: a stream is whole chunks of 8");
static_assert(HCR_UP_CHUNKS > HCT_LW && HCR_UP_CHUNKS <= 2 * HCT_LW,
              "persist: a row of w_up is one or two chunks per lane");
static_assert(S == 4, "persist: the mix is written for 4 streams");

#if MMA
/* ---- tensor cores: 3xTF32-style products ----------------------------------
 * mma.m16n8k8 with tf32 inputs and f32 accumulation.  The weights are bf16,
 * exact in tf32; an activation y is split into hi = tf32(y) and lo =
 * tf32(y - hi) (y - hi is exact), and each tile is multiplied twice, so the
 * products carry about 22 bits of y: close to f32 fmaf, at a small fraction
 * of its instruction count.  Fragments (PTX ISA, m16n8k8 .tf32), with
 * g = lane / 4 and i = lane % 4: A a0 (g, i), a1 (g+8, i), a2 (g, i+4),
 * a3 (g+8, i+4); B b0 (k i, n g), b1 (k i+4, n g); C c0 (g, 2i), c1 (g,
 * 2i+1), c2 (g+8, 2i), c3 (g+8, 2i+1). */
HCT_DEV hct_u32 ps_bf16_bits(hct_u4 w, int e) {
  const hct_u32 word = e < 2 ? w.x : e < 4 ? w.y : e < 6 ? w.z : w.w;
  return (e & 1) ? (word & 0xffff0000u) : (word << 16);
}

HCT_DEV void ps_split(float y, hct_u32 &hi, hct_u32 &lo) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(y));
  const float r = y - __uint_as_float(hi);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(r));
}

HCT_DEV void ps_mma(float (&d)[4], const hct_u32 (&a)[4], hct_u32 b0, hct_u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* A x (B_hi + B_lo) into d. */
HCT_DEV void ps_mma2(float (&d)[4], const hct_u32 (&a)[4], float y0, float y1) {
  hct_u32 h0, l0, h1, l1;
  ps_split(y0, h0, l0);
  ps_split(y1, h1, l1);
  ps_mma(d, a, l0, l1);
  ps_mma(d, a, h0, h1);
}
#endif

/* Block geometry, the same in every stage. */
struct ps_geo {
  int nb, nbs;      /* blocks, blocks per stream */
  int s, i;         /* this block's stream and index within it */
  int ch0, nch;     /* its chunks of 8 columns: [ch0, ch0 + nch) of D/8 */
  int nchmax;       /* the most chunks any block has */
  int cu0, ncu;     /* its channels for stage C */
  int ncumax;
};

HCT_DEV ps_geo ps_geometry(void) {
  ps_geo g;
  g.nb = (int)gridDim.x;
  g.nbs = g.nb / S;
  g.s = (int)blockIdx.x / g.nbs;
  g.i = (int)blockIdx.x % g.nbs;
  const int a = g.i * PS_CPS / g.nbs, b = (g.i + 1) * PS_CPS / g.nbs;
  g.ch0 = g.s * PS_CPS + a;
  g.nch = b - a;
  g.nchmax = (PS_CPS + g.nbs - 1) / g.nbs;
  g.cu0 = (int)blockIdx.x * C / g.nb;
  g.ncu = ((int)blockIdx.x + 1) * C / g.nb - g.cu0;
  g.ncumax = (C + g.nb - 1) / g.nb;
  return g;
}

/* Stage A's dots for TB tokens (TB >= T, a power of two): thread (j, h)
 * takes row j over half h of the block's chunks. */
template <int TB>
HCT_DEV void ps_down(const ps_geo &g, const hct_u4 *smA, const float *sy, float *red, float *part,
                     int T) {
  const int tid = (int)threadIdx.x;
  const int j = tid % K, h = tid / K;
  const int half = (g.nch + 1) / 2;
  const int c0 = h == 0 ? 0 : half, c1 = h == 0 ? half : g.nch;
  const int ny = g.nchmax * 8; /* floats per token row of sy */
  float acc[TB];
#pragma unroll
  for (int t = 0; t < TB; ++t) acc[t] = 0.0f;
  for (int ch = c0; ch < c1; ++ch) {
    const hct_u4 w = smA[ch * K + j];
    const float wf[8] = {hct_bf16_lo(w.x), hct_bf16_hi(w.x), hct_bf16_lo(w.y), hct_bf16_hi(w.y),
                         hct_bf16_lo(w.z), hct_bf16_hi(w.z), hct_bf16_lo(w.w), hct_bf16_hi(w.w)};
#pragma unroll
    for (int t = 0; t < TB; ++t) {
      const hct_f4 *y = (const hct_f4 *)(sy + t * ny + ch * 8);
      const hct_f4 a = y[0], b = y[1];
      float v = acc[t];
      v = fmaf(wf[0], a.x, v);
      v = fmaf(wf[1], a.y, v);
      v = fmaf(wf[2], a.z, v);
      v = fmaf(wf[3], a.w, v);
      v = fmaf(wf[4], b.x, v);
      v = fmaf(wf[5], b.y, v);
      v = fmaf(wf[6], b.z, v);
      v = fmaf(wf[7], b.w, v);
      acc[t] = v;
    }
  }
  if (h == 1) {
#pragma unroll
    for (int t = 0; t < TB; ++t) red[t * K + j] = acc[t];
  }
  __syncthreads();
  if (h == 0) {
    /* part[((t*S + s)*NBS + i)*K + j]: a block writes T runs of K floats. */
#pragma unroll
    for (int t = 0; t < TB; ++t)
      if (t < T) part[((long long)(t * S + g.s) * g.nbs + g.i) * K + j] = acc[t] + red[t * K + j];
  }
}

/*
 * Grid ((SM_COUNT/4)*4), block 2*K = 640, dynamic shared memory (bytes):
 *   nchmax*K*16            w_down slice, [chunk][row]
 * + WUPS*ncumax*S*K*2      w_up rows of the block's channels, [c][s][chunk]
 * + 2 * 8*nchmax*8*4       y and its squares, [token][column]
 * + 8*K*4                  stage A's second-half dots, then lo in stage C
 * with nchmax = cdiv(C/8, NB/4), ncumax = cdiv(C, NB).
 */
HCT_ENTRY void __launch_bounds__(PS_NT, 1)
    hc_ps_read(float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
               const hct_u16 *w_up, float *part, float *lo, hct_u32 *ws, float *mixed,
               hct_u16 *mixed_bf16, hct_u16 *mixed_f16, int T) {
  extern __shared__ hct_u4 ps_sm[];
  const int tid = (int)threadIdx.x, lane = tid % HCT_LW, wp = tid / HCT_LW;
  const ps_geo g = ps_geometry();
  const int TB = T <= 1 ? 1 : T <= 2 ? 2 : T <= 4 ? 4 : 8;
  hct_u4 *smA = ps_sm;
  hct_u4 *smB = smA + g.nchmax * K;
  float *sy = (float *)(smB + (WUPS ? g.ncumax * S * PS_UPC : 0));
  float *sq = sy + PS_TMAX * g.nchmax * 8;
  float *red = sq + PS_TMAX * g.nchmax * 8;

  /* ---- start: every weight byte of this block is requested ------------ */
  for (int p = tid; p < g.nch * K; p += PS_NT) {
    const int ch = p % g.nch, j = p / g.nch; /* a row's chunks are adjacent */
    hct_cp_async16(&smA[ch * K + j], (const hct_u4 *)(w_down + (long long)j * D) + g.ch0 + ch);
  }
  hct_cp_async_commit();
#if WUPS
  for (int p = tid; p < g.ncu * S * PS_UPC; p += PS_NT) {
    const int q = p % PS_UPC, cs = p / PS_UPC; /* cs = cl*S + s */
    const int cl = cs / S, s = cs % S;
    hct_cp_async16(&smB[cs * PS_UPC + q],
                   (const hct_u4 *)(w_up + ((long long)s * C + g.cu0 + cl) * K) + q);
  }
#else
  /* Rows s*C + cu0 .. s*C + cu0 + ncu - 1 are adjacent in w_up. */
  if (tid < S && g.ncu > 0)
    hcr_prefetch_bytes(w_up + ((long long)tid * C + g.cu0) * K, g.ncu * K * 2);
#endif
  hct_cp_async_commit();

  /* Under programmatic dependent launch, the previous kernel of the stream
   * may still run: wait for it before touching anything but weights.  (No
   * early trigger: the next launch could not be resident beside this one.)
   * A no-op when launched the ordinary way. */
#if defined(HCT_CUDA) && HCT_ARCH >= 90
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

  /* ---- stage A ---------------------------------------------------------- */
  const int nel = g.nch * 8, ny = g.nchmax * 8;
  const int k0 = g.ch0 * 8;           /* first column, in D */
  const int cc0 = k0 - g.s * C;       /* first channel, in the stream */
  for (int p = tid; p < T * nel; p += PS_NT) {
    const int t = p / nel, e = p % nel;
    const long long at = ((long long)t * S + g.s) * C + cc0 + e;
    float x = resid[at];
    if (pending != 0) {
      x = x + pending[at];
      resid[at] = x;
    }
    const float y = x * hct_bf16_to_f32(w_norm[k0 + e]);
    sy[t * ny + e] = y;
    sq[t * ny + e] = x * x;
  }
  /* Columns past the slice (nch < nchmax) are never read. */
  hct_cp_async_wait<1>(); /* w_down landed; w_up may still be in flight */
  __syncthreads();
  /* Squares: warp t sums its token's row in a fixed order. */
  if (wp < T) {
    float a = 0.0f;
    for (int e = lane; e < nel; e += HCT_LW) a += sq[wp * ny + e];
    a = hct_warp_sum(a);
    if (lane == 0) part[(long long)T * S * g.nbs * K + (wp * S + g.s) * g.nbs + g.i] = a;
  }
#if MMA
  {
    /* Warp w: rows 16w .. 16w+15 (all K rows over the 20 warps), the
     * tokens as the 8 columns of B (those past T read as zero), one
     * k-step per chunk of 8 columns. */
    static_assert(PS_NW * 16 == K, "persist: MMA needs K = 16 rows per warp");
    const int gq = lane >> 2, ti = lane & 3, j0 = wp * 16;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int ch = 0; ch < g.nch; ++ch) {
      const hct_u4 wa = smA[ch * K + j0 + gq], wb = smA[ch * K + j0 + gq + 8];
      const hct_u32 a[4] = {ps_bf16_bits(wa, ti), ps_bf16_bits(wb, ti), ps_bf16_bits(wa, ti + 4),
                            ps_bf16_bits(wb, ti + 4)};
      const float y0 = gq < T ? sy[gq * ny + ch * 8 + ti] : 0.0f;
      const float y1 = gq < T ? sy[gq * ny + ch * 8 + ti + 4] : 0.0f;
      ps_mma2(d, a, y0, y1);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int t = 2 * ti + h;
      if (t < T) {
        float *o = part + ((long long)(t * S + g.s) * g.nbs + g.i) * K + j0 + gq;
        o[0] = d[h];
        o[8] = d[2 + h];
      }
    }
  }
#else
  switch (TB) {
    case 1: ps_down<1>(g, smA, sy, red, part, T); break;
    case 2: ps_down<2>(g, smA, sy, red, part, T); break;
    case 4: ps_down<4>(g, smA, sy, red, part, T); break;
    default: ps_down<8>(g, smA, sy, red, part, T); break;
  }
#endif
  if (!hct_grid_sync(ws)) return;

  /* ---- stage B ---------------------------------------------------------- */
  {
    const float *sqp = part + (long long)T * S * g.nbs * K;
    const int jj = lane % 8, gq = lane / 8; /* row within 8, block phase */
    for (int job = (int)blockIdx.x * PS_NW + wp; job < T * (K / 8); job += g.nb * PS_NW) {
      const int t = job / (K / 8), j = (job % (K / 8)) * 8 + jj;
      /* Blocks i = gq, gq+4, ...: up to PS_IMAX of them loaded before the
       * first add (one memory latency, not one per block), the rest (more
       * than 4*PS_IMAX blocks per stream) in a second pass, same order. */
      float v[2 * S];
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const float *ps = part + ((long long)(t * S + s) * g.nbs) * K + j;
        const float *qs = sqp + (t * S + s) * g.nbs;
        float pa[PS_IMAX], qa[PS_IMAX];
#pragma unroll
        for (int m = 0; m < PS_IMAX; ++m) {
          const int i = gq + 4 * m;
          pa[m] = i < g.nbs ? hcr_ldcg(ps + (long long)i * K) : 0.0f;
          qa[m] = i < g.nbs ? hcr_ldcg(qs + i) : 0.0f;
        }
        float a = 0.0f, q = 0.0f;
#pragma unroll
        for (int m = 0; m < PS_IMAX; ++m) {
          a += pa[m];
          q += qa[m];
        }
        for (int i = gq + 4 * PS_IMAX; i < g.nbs; i += 4) {
          a += hcr_ldcg(ps + (long long)i * K);
          q += hcr_ldcg(qs + i);
        }
        v[s] = a;
        v[S + s] = q;
      }
#pragma unroll
      for (int k = 0; k < 2 * S; ++k) {
        v[k] += hct_shfl_xor(v[k], 16);
        v[k] += hct_shfl_xor(v[k], 8);
      }
      float rs[S];
#pragma unroll
      for (int s = 0; s < S; ++s) rs[s] = rsqrtf(v[S + s] / (float)C + HCT_EPS);
      float l = rs[0] * v[0];
#pragma unroll
      for (int s = 1; s < S; ++s) l = fmaf(rs[s], v[s], l);
      if (gq == 0) lo[(long long)t * K + j] = l;
    }
  }
  if (!hct_grid_sync(ws)) return;

  /* ---- stage C ---------------------------------------------------------- */
  /* lo as [h][t][chunk] float4: the first (h 0) and second (h 1) half of
   * each chunk of 8, so a warp reads consecutive float4 (upmix_dec.cu). */
  hct_f4 *slo = (hct_f4 *)red;
  for (int p = tid; p < (MMA ? PS_TMAX : TB) * K; p += PS_NT) {
    const int t = p / K, k = p % K;
    ((float *)slo)[(((k >> 2) & 1) * PS_TMAX + t) * (K / 2) + (k >> 3) * 4 + (k & 3)] =
        t < T ? hcr_ldcg(lo + p) : 0.0f;
  }
  hct_cp_async_wait<0>();
  __syncthreads();
#if MMA
  {
    /* Rows r = cl*S + s of the block's channels, 16 per tile; each tile's
     * 40 k-steps in 4 quarters (independent accumulators, one warp each),
     * the quarters added in order afterwards.  ub reuses the w_down slice
     * (free since stage A): [quarter][row][token]. */
    float *ub = (float *)smA;
    const int nrmax = g.ncumax * S, nrows = g.ncu * S, mt = (nrows + 15) / 16;
    const int gq = lane >> 2, ti = lane & 3;
    const float *sl = (const float *)slo;
    for (int item = wp; item < mt * 4; item += PS_NW) {
      const int tile = item / 4, kq = item % 4;
      const int r0 = tile * 16 + gq, r1 = r0 + 8;
      const bool ok0 = r0 < nrows, ok1 = r1 < nrows;
#if WUPS
      const hct_u4 *row0 = smB + (ok0 ? r0 : 0) * PS_UPC, *row1 = smB + (ok1 ? r1 : 0) * PS_UPC;
#else
      const hct_u4 *row0 = (const hct_u4 *)(w_up + ((long long)(r0 % S) * C + g.cu0 + (ok0 ? r0 : 0) / S) * K);
      const hct_u4 *row1 = (const hct_u4 *)(w_up + ((long long)(r1 % S) * C + g.cu0 + (ok1 ? r1 : 0) / S) * K);
#endif
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int ks = kq * (PS_UPC / 4); ks < (kq + 1) * (PS_UPC / 4); ++ks) {
        const hct_u4 z = {0, 0, 0, 0};
        const hct_u4 wa = ok0 ? row0[ks] : z, wb = ok1 ? row1[ks] : z;
        const hct_u32 a[4] = {ps_bf16_bits(wa, ti), ps_bf16_bits(wb, ti), ps_bf16_bits(wa, ti + 4),
                              ps_bf16_bits(wb, ti + 4)};
        /* B (k, n) = lo[n][8 ks + k]: first half of the chunk for k < 4. */
        const float y0 = sl[(gq * (K / 8) + ks) * 4 + ti];
        const float y1 = sl[((PS_TMAX + gq) * (K / 8) + ks) * 4 + ti];
        ps_mma2(d, a, y0, y1);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int t = 2 * ti + h;
        if (ok0) ub[(kq * nrmax + r0) * PS_TMAX + t] = d[h];
        if (ok1) ub[(kq * nrmax + r1) * PS_TMAX + t] = d[2 + h];
      }
    }
    __syncthreads();
    for (int p = tid; p < T * g.ncu; p += PS_NT) {
      const int t = p / g.ncu, cl = p % g.ncu, c = g.cu0 + cl;
      float gs[S];
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int r = cl * S + s;
        float u = ub[r * PS_TMAX + t];
#pragma unroll
        for (int q = 1; q < 4; ++q) u += ub[(q * nrmax + r) * PS_TMAX + t];
        gs[s] = hcr_sigmoid(u);
      }
      const float *rp = resid + (long long)t * S * C + c;
      float r[S];
#pragma unroll
      for (int s = 0; s < S; ++s) r[s] = hcr_ldcg(rp + (long long)s * C);
      float m = gs[0] * r[0];
#pragma unroll
      for (int s = 1; s < S; ++s) m = fmaf(gs[s], r[s], m);
      const long long o = (long long)t * C + c;
      mixed[o] = m;
      mixed_bf16[o] = hct_f32_to_bf16(m);
      mixed_f16[o] = hct_f32_to_f16(m);
    }
  }
#else
  const bool two = lane + HCT_LW < PS_UPC;
  for (int cl = wp; cl < g.ncu; cl += PS_NW) {
    const int c = g.cu0 + cl;
    hct_u4 w[S][2];
#pragma unroll
    for (int s = 0; s < S; ++s) {
#if WUPS
      const hct_u4 *row = smB + (cl * S + s) * PS_UPC;
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
#endif
}
