/*
 * slice.h: the arithmetic of slice (slice.cu), with the indexing that
 * decides which thread sums what and where each value travels, and none of
 * the sm_90 machinery (cp.async, mbarriers, st.async into a peer block's
 * shared memory, the grid barrier, PDL).  Where a value crosses to another
 * block of the cluster the functions call a functor the caller passes
 * (send(offset, value, rank): the float at byte `offset` of block `rank`'s
 * shared memory), and copies into shared memory go through copy16(dst,
 * src).  The CPU emulator (tests/emu/slice_emu.cc) runs these very
 * functions, phase by phase, with plain memory in place of the machinery,
 * and checks their bits against the canonical order and the bytes each
 * block receives against the counts its mbarriers expect.
 *
 * The split (a cluster of 8 blocks, NCL clusters; rank r of cluster g):
 *   columns  rank r holds, of every token and stream s, the 320 columns
 *            256m + 32r + i (m < 10, i < 32): exactly the columns of the
 *            canonical norm's warp r (thread 32r + i sums c = 32r + i +
 *            256m), and exactly the columns of down lanes 4r .. 4r+3 (lane
 *            L walks columns 8L + 256q + e, q < 40, e < 8, q = 10s + m).
 *            Block-local column q*32 + 8*l4 + e is lane 4r + l4's chunk q.
 *   norm     so rank r sums norm warp r of every (token, stream) from its
 *            own columns alone (the fmaf chain over m, the warp's xor
 *            butterfly), and the cluster's 8 ranks exchange those warp sums:
 *            every rank then runs the 8-warp butterfly itself.
 *   down     cluster g owns rows j0 .. j0+nr-1 (nr = K/NCL or one more),
 *            rank r their lanes 4r .. 4r+3 whole: every lane chain of 40
 *            chunks runs in one thread, from its first fmaf to its last;
 *            a thread runs two rows x two tokens of one lane side by side.
 *            The 32 lane sums of a (token, row) meet in one rank of the
 *            cluster (its reducer), which runs the row's butterfly: lo.
 *   up, mix  block b owns channels cu0 .. cu0+ncu-1 (ncu = C/NB or one
 *            more), their rows s*C + c of w_up; a group of 8 threads runs
 *            canonical lanes ul, ul+8, ul+16, ul+24 (and chunk ul+32) of
 *            the four streams' rows of one channel for four tokens; after
 *            the group's shuffles each of its lanes holds every sum, so
 *            lane ul takes token ul's four gates and mixes in registers.
 * Every output's sequence of roundings is the spec's: the order of each
 * chain and butterfly is written out below; who runs it, and when, is
 * free.
 *
 * Needs hc_read.h and NCL (clusters: 15 or 16) defined first.
 */
#ifndef HCR_SLICE_H
#define HCR_SLICE_H

#ifndef NCL
#error "slice: NCL must be defined"
#endif

#define SL_CL 8                           /* blocks a cluster: one a norm warp */
#define SL_NB (SL_CL * NCL)                /* blocks */
#define SL_NRM ((K + NCL - 1) / NCL)        /* rows a cluster, at most */
#define SL_NCM ((C + SL_NB - 1) / SL_NB)  /* channels a block, at most */
#define SL_NT (16 * SL_NRM)               /* threads: 8 per up channel and token quad */
#define SL_NW (SL_NT / HCT_LW)            /* warps */
#define SL_TMAX 8
#define SL_Q HCR_DOWN_Q                   /* chunks of a lane chain: 40 */
#define SL_QS (SL_Q / S)                  /* of them in one stream: 10 */
#define SL_COLS (SL_Q * 32)               /* columns a block holds of a token: 1280 */
#define SL_NRP (SL_NRM / 2)               /* row pairs (rows rp and rp + SL_NRP) */
#define SL_NSLOT SL_NRM                   /* row sums a reducer takes, at most: 8 tokens x NRM rows / 8 */
static_assert(HCR_NORM_THREADS == SL_CL * HCT_LW && C % HCR_NORM_THREADS == 0,
              "slice: rank r holds norm warp r's columns");
static_assert(HCR_NORM_THREADS == 8 * 4 * SL_CL && SL_Q * 8 * HCT_LW == D && SL_QS * HCR_NORM_THREADS == C,
              "slice: rank r holds down lanes 4r .. 4r+3, ten chunks a stream");
static_assert(HCR_UP_CHUNKS == 40 && K == 8 * SL_Q, "slice: up lane ul takes chunks ul + 8k and ul + 32");
static_assert(SL_NRM % 2 == 0 && SL_NCM <= SL_NRM && SL_NT % HCT_LW == 0 && 2 * SL_NW >= SL_NCM,
              "slice: row pairs; a warp takes two channels (two token quads each) in the up stage");
static_assert(S == 4, "slice: four streams, one a row of an up group");

/* Shared memory, bytes from the start.  W holds the cluster's rows of
 * w_down over the block's columns ([row][q][32] bf16, rows padded by 64
 * bytes so that rows rp and rp+1 fall on opposite halves of the banks),
 * later the block's rows of w_up ([s][channel][K] bf16, padded by 32
 * bytes: four channels on four quarters of the banks).  X holds R', then
 * xn, of the block's columns ([t][q][32] f32, a token padded by 16 floats:
 * tokens t and t+1 on opposite halves), later lo for the up stage. */
#define SL_WDS (SL_Q * 64 + 64)                   /* w_down tile row stride, bytes */
#define SL_WUS (K * 2 + 32)                       /* w_up tile row stride, bytes */
#define SL_XTS (SL_COLS + 16)                     /* X token stride, floats */
#define SL_LTS (HCR_UP_CHUNKS + 1)                /* lo token stride, 16-byte units (padded) */
#define SL_WBYTES (SL_NRM * SL_WDS > S * SL_NCM * SL_WUS ? SL_NRM * SL_WDS : S * SL_NCM * SL_WUS)
#define SL_OFF_W 0
#define SL_OFF_WN (SL_OFF_W + SL_WBYTES)              /* w_norm of the block's columns [q][32] bf16 */
#define SL_OFF_NSL (SL_OFF_WN + SL_COLS * 2)          /* this rank's norm warp sums [t][s] */
#define SL_OFF_NS (SL_OFF_NSL + SL_TMAX * S * 4)      /* every rank's [t][s][rank] */
#define SL_OFF_RS (SL_OFF_NS + SL_TMAX * S * SL_CL * 4) /* the norm's scales [t][s] */
#define SL_OFF_RSUM (SL_OFF_RS + SL_TMAX * S * 4)     /* row partials received [slot][lane] */
#define SL_OFF_RM (SL_OFF_RSUM + SL_NSLOT * HCT_LW * 4) /* R' of the mix channels [t][s][SL_NCM] */
#define SL_OFF_BAR (SL_OFF_RM + SL_TMAX * S * SL_NCM * 4) /* two mbarriers: norm sums, row partials */
#define SL_OFF_X (SL_OFF_BAR + 16)
#define SL_XBYTES(T) ((T) * SL_XTS * 4 > 2 * SL_TMAX * SL_LTS * 16 ? (T) * SL_XTS * 4 : 2 * SL_TMAX * SL_LTS * 16)
#define SL_SMEM(T) (SL_OFF_X + SL_XBYTES(T))
static_assert(SL_OFF_WN % 16 == 0 && SL_OFF_RSUM % 16 == 0 && SL_OFF_X % 16 == 0 && SL_WDS % 16 == 0 &&
                  SL_WUS % 16 == 0,
              "slice: 16-byte aligned regions and rows");
static_assert(SL_OFF_X == (SL_WBYTES + 3856 + SL_NRM * 128 + SL_NCM * 128),
              "slice: the manifest's smem expression is this layout");

/* What a block is, from its cluster g, rank r and index b. */
struct sl_geo {
  int g, r, b;
  int j0, nr;   /* the cluster's rows */
  int cu0, ncu; /* the block's channels */
};

HCT_DEV sl_geo sl_geometry(int g, int r, int b) {
  sl_geo o;
  o.g = g;
  o.r = r;
  o.b = b;
  o.j0 = g * (K / NCL) + (g < K % NCL ? g : K % NCL);
  o.nr = K / NCL + (g < K % NCL ? 1 : 0);
  o.cu0 = b * (C / SL_NB) + (b < C % SL_NB ? b : C % SL_NB);
  o.ncu = C / SL_NB + (b < C % SL_NB ? 1 : 0);
  return o;
}

/* Global column (within a token) of the block's column q*32 + i. */
HCT_DEV long long sl_col(int r, int q, int i) { return (long long)(q / SL_QS) * C + 256 * (q % SL_QS) + 32 * r + i; }

/* ---- before the wait: the weights ------------------------------------------*/

/* w_norm of the block's columns, then the cluster's rows of w_down over
 * them, 16 bytes a copy (copy16(dst, src)), by every thread (slice.cu
 * commits each as a cp.async group of its own: xn needs only the first).
 * Rows past nr are left alone (their chains run on whatever is there, and
 * are never sent). */
template <class Copy16>
HCT_DEV void sl_load_wn(char *sm, const hct_u16 *w_norm, const sl_geo &o, int tid, Copy16 copy16) {
  for (int p = tid; p < SL_Q * 4; p += SL_NT) {
    const int q = p / 4, k = p % 4;
    copy16(sm + SL_OFF_WN + q * 64 + 16 * k, w_norm + sl_col(o.r, q, 8 * k));
  }
}

template <class Copy16>
HCT_DEV void sl_load_wd(char *sm, const hct_u16 *w_down, const sl_geo &o, int tid, Copy16 copy16) {
  for (int p = tid; p < SL_NRM * SL_Q * 4; p += SL_NT) {
    const int i = p / (SL_Q * 4), q = (p / 4) % SL_Q, k = p % 4;
    if (i < o.nr)
      copy16(sm + SL_OFF_W + i * SL_WDS + q * 64 + 16 * k,
             w_down + (long long)(o.j0 + i) * D + sl_col(o.r, q, 8 * k));
  }
}

/* ---- after the wait: R', the norm's warp sums --------------------------------*/

/* By every thread.  R' = fl(R + P) of the block's columns into X
 * ([t][q][32]), and norm warp r's sum of every (token, stream) pair
 * p = 4t + s into NSL[p]: a warp a pair, lane i the canonical thread
 * 32r + i (fmaf over m ascending, then the warp's butterfly 16 .. 1). */
HCT_DEV void sl_norm(int T, const float *resid, const float *pending, char *sm, const sl_geo &o, int tid) {
  float *xs = (float *)(sm + SL_OFF_X), *nsl = (float *)(sm + SL_OFF_NSL);
  const int lane = tid % HCT_LW, wp = tid / HCT_LW;
#pragma unroll 2
  for (int p = wp; p < T * S; p += SL_NW) {
    const int t = p / S, s = p % S;
    const long long base = ((long long)t * S + s) * C + 32 * o.r + lane;
    float x[SL_QS];
#pragma unroll
    for (int m = 0; m < SL_QS; ++m) x[m] = resid[base + 256 * m];
    if (pending != 0)
#pragma unroll
      for (int m = 0; m < SL_QS; ++m) x[m] = x[m] + pending[base + 256 * m];
    float a = 0.0f;
#pragma unroll
    for (int m = 0; m < SL_QS; ++m) {
      a = fmaf(x[m], x[m], a);
      xs[t * SL_XTS + (s * SL_QS + m) * 32 + lane] = x[m];
    }
    a = hct_warp_sum(a);
    if (lane == 0) nsl[p] = a;
  }
}

/* By every thread, R' = fl(R + P) of the block's mix channels into RM
 * ([t][s][channel]), for the mix and the store after the grid barrier
 * (slice.cu loads them while the cluster's norm sums travel). */
HCT_DEV void sl_load_rm(int T, const float *resid, const float *pending, char *sm, const sl_geo &o, int tid) {
  float *rm = (float *)(sm + SL_OFF_RM);
  for (int i = tid; i < T * S * SL_NCM; i += SL_NT) {
    const int t = i / (S * SL_NCM), s = (i / SL_NCM) % S, cl = i % SL_NCM;
    if (cl < o.ncu) {
      const long long at = ((long long)t * S + s) * C + o.cu0 + cl;
      float v = resid[at];
      if (pending != 0) v = v + pending[at];
      rm[i] = v;
    }
  }
}

/* Bytes each rank receives of the norm sums: 8 ranks x 4T floats. */
HCT_DEV int sl_ns_bytes(int T) { return SL_CL * S * T * 4; }

/* After sl_norm and a __syncthreads: this rank's sums to every rank of the
 * cluster (itself too), NS[p][r] there. */
template <class Send>
HCT_DEV void sl_norm_send(int T, const char *sm, const sl_geo &o, int tid, Send send) {
  const float *nsl = (const float *)(sm + SL_OFF_NSL);
  for (int i = tid; i < T * S * SL_CL; i += SL_NT) {
    const int p = i / SL_CL, rank = i % SL_CL;
    send(SL_OFF_NS + (p * SL_CL + o.r) * 4, nsl[p], rank);
  }
}

/* Once every rank's sums have landed: the 8-warp butterfly of each pair
 * (warp k's sum in lane k; offsets 4, 2, 1: lane 0 ends with
 * ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7))) and rs, as v1. */
HCT_DEV void sl_scales(int T, char *sm, int tid) {
  const float *ns = (const float *)(sm + SL_OFF_NS);
  float *rs = (float *)(sm + SL_OFF_RS);
  if (tid < T * S) {
    const float *v = ns + tid * SL_CL;
    const float ss = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    rs[tid] = rsqrtf(ss / (float)C + HCT_EPS);
  }
}

/* After sl_scales and a __syncthreads (and w_norm landed): xn =
 * fl(fl(R' * w_norm) * rs) in place, four elements a step. */
HCT_DEV void sl_xn(int T, char *sm, int tid) {
  float *xs = (float *)(sm + SL_OFF_X);
  const hct_u16 *wn = (const hct_u16 *)(sm + SL_OFF_WN);
  const float *rs = (const float *)(sm + SL_OFF_RS);
  for (int p = tid; p < T * (SL_COLS / 4); p += SL_NT) {
    const int t = p / (SL_COLS / 4), c4 = p % (SL_COLS / 4), q = c4 / 8;
    hct_f4 *x = (hct_f4 *)(xs + t * SL_XTS) + c4;
    const float sc = rs[t * S + q / SL_QS];
    const hct_u32 w01 = *(const hct_u32 *)(wn + 4 * c4), w23 = *(const hct_u32 *)(wn + 4 * c4 + 2);
    hct_f4 v = *x;
    float y;
    y = v.x * hct_bf16_lo(w01);
    v.x = y * sc;
    y = v.y * hct_bf16_hi(w01);
    v.y = y * sc;
    y = v.z * hct_bf16_lo(w23);
    v.z = y * sc;
    y = v.w * hct_bf16_hi(w23);
    v.w = y * sc;
    *x = v;
  }
}

/* ---- down: whole lane chains -------------------------------------------------*/

/* acc = fmaf(w[e], x[e], acc) for e = 0..7 in order (hcr_dot8, with the
 * weights widened once for the tokens that share them). */
HCT_DEV float sl_dot8(const float (&w)[8], hct_f4 a, hct_f4 b, float acc) {
  acc = fmaf(w[0], a.x, acc);
  acc = fmaf(w[1], a.y, acc);
  acc = fmaf(w[2], a.z, acc);
  acc = fmaf(w[3], a.w, acc);
  acc = fmaf(w[4], b.x, acc);
  acc = fmaf(w[5], b.y, acc);
  acc = fmaf(w[6], b.z, acc);
  acc = fmaf(w[7], b.w, acc);
  return acc;
}

HCT_DEV void sl_widen(hct_u4 p, float (&w)[8]) {
  w[0] = hct_bf16_lo(p.x);
  w[1] = hct_bf16_hi(p.x);
  w[2] = hct_bf16_lo(p.y);
  w[3] = hct_bf16_hi(p.y);
  w[4] = hct_bf16_lo(p.z);
  w[5] = hct_bf16_hi(p.z);
  w[6] = hct_bf16_lo(p.w);
  w[7] = hct_bf16_hi(p.w);
}

/* Where (token t, row j) of cluster-local rows meets: the reducer rank
 * and its slot, pairs dealt round-robin over the ranks.  A rank takes
 * sl_rs_slots() of them; each slot receives 32 lane sums. */
HCT_DEV int sl_rs_pair(int t, int j, int nr) { return t * nr + j; }
HCT_DEV int sl_rs_slots(int T, int nr, int r) { return (T * nr - r + SL_CL - 1) / SL_CL; }
HCT_DEV int sl_rs_bytes(int T, int nr, int r) { return sl_rs_slots(T, nr, r) * HCT_LW * 4; }

/*
 * After sl_xn and a __syncthreads (and w_down landed), by every thread:
 * thread (row pair rp, token pair tp, lane l4) runs the canonical chains
 * of lane L = 4r + l4 for rows rp and rp + SL_NRP and tokens tp and tp + H
 * (H = ceil(T/2)): 40 chunks, each chunk's weights widened once for both
 * tokens, then sends each (token, row)'s chain to its reducer, RSUM[slot][L]
 * there.  Thread bits, lowest first: the token pair's low bit (when there
 * are two pairs or more), the row pair's low bit, l4, then the rest; so
 * threads tn and tn^1 load the same weights and tn and tn^2 the same
 * activations (a shared load whose thread pairs agree returns twice the
 * registers a clock), and a quarter warp's loads fall on distinct banks
 * (rows rp, rp+1 and tokens tp, tp+1 sit on opposite halves).  NTOK: 1
 * at T = 1 (no second token), else 2.
 */
template <int NTOK, class Send>
HCT_DEV void sl_chains(int T, const char *sm, const sl_geo &o, int tid, Send send) {
  const int H = (T + 1) / 2;      /* token pairs */
  const int tb = H >= 2 ? 1 : 0;  /* a token bit lowest */
  const int tp0 = tid & tb, rest = tid >> tb;
  const int rp0 = rest & 1, l4 = (rest >> 1) & 3, hi = rest >> 3;
  const int nth = (H + tb) >> tb; /* token-pair groups */
  const int tp = (hi % nth) * (1 + tb) + tp0, rp = (hi / nth) * 2 + rp0;
  if (rp >= SL_NRP || tp >= H) return;
  const int ta = tp, tb2 = tp + H < T ? tp + H : tp;
  const hct_u4 *wa = (const hct_u4 *)(sm + SL_OFF_W + rp * SL_WDS) + l4;
  const hct_u4 *wb = (const hct_u4 *)(sm + SL_OFF_W + (rp + SL_NRP) * SL_WDS) + l4;
  const hct_f4 *xa = (const hct_f4 *)((const float *)(sm + SL_OFF_X) + ta * SL_XTS) + 2 * l4;
  const hct_f4 *xb = (const hct_f4 *)((const float *)(sm + SL_OFF_X) + tb2 * SL_XTS) + 2 * l4;
  float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* [row][token] */
#pragma unroll 4
  for (int q = 0; q < SL_Q; ++q) {
    float fa[8], fb[8];
    sl_widen(wa[4 * q], fa);
    sl_widen(wb[4 * q], fb);
    const hct_f4 x0 = xa[8 * q], x1 = xa[8 * q + 1];
    a00 = sl_dot8(fa, x0, x1, a00);
    a10 = sl_dot8(fb, x0, x1, a10);
    if (NTOK == 2) {
      const hct_f4 y0 = xb[8 * q], y1 = xb[8 * q + 1];
      a01 = sl_dot8(fa, y0, y1, a01);
      a11 = sl_dot8(fb, y0, y1, a11);
    }
  }
  const int L = 4 * o.r + l4;
  const float acc[2][2] = {{a00, a01}, {a10, a11}};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int j = rp + h * SL_NRP;
    if (j >= o.nr) continue;
#pragma unroll
    for (int u = 0; u < NTOK; ++u) {
      if (u == 1 && tp + H >= T) continue;
      const int pi = sl_rs_pair(u == 0 ? ta : tp + H, j, o.nr);
      send(SL_OFF_RSUM + ((pi / SL_CL) * HCT_LW + L) * 4, acc[h][u], pi % SL_CL);
    }
  }
}

/* sl_chains for every T: one token a thread at T = 1 (where a second
 * would only repeat the first: the chains' latency is the stage there),
 * two otherwise (at odd T a thread's second token may be past T: computed
 * on the first's activations, not sent). */
template <class Send>
HCT_DEV void sl_down(int T, const char *sm, const sl_geo &o, int tid, Send send) {
  if (T == 1) sl_chains<1>(T, sm, o, tid, send);
  else sl_chains<2>(T, sm, o, tid, send);
}

/* Once this rank's row partials have landed: a warp a slot, lane L the
 * chain of canonical lane L, the butterfly (hct_warp_sum, as v1), lo. */
HCT_DEV void sl_rows(int T, const char *sm, float *lo, const sl_geo &o, int tid) {
  const float *rsum = (const float *)(sm + SL_OFF_RSUM);
  const int lane = tid % HCT_LW, n = sl_rs_slots(T, o.nr, o.r);
  for (int slot = tid / HCT_LW; slot < n; slot += SL_NW) {
    const float v = hct_warp_sum(rsum[slot * HCT_LW + lane]);
    const int pi = slot * SL_CL + o.r, t = pi / o.nr, j = pi % o.nr;
    if (lane == 0) lo[(long long)t * K + o.j0 + j] = v;
  }
}

/* ---- up and mix ----------------------------------------------------------------*/

/* The block's rows of w_up into W ([s][channel][K], padded), 16 bytes a
 * copy, by every thread (once every chain is done with w_down). */
template <class Copy16>
HCT_DEV void sl_load_wup(char *sm, const hct_u16 *w_up, const sl_geo &o, int tid, Copy16 copy16) {
  for (int p = tid; p < S * o.ncu * HCR_UP_CHUNKS; p += SL_NT) {
    const int ch = p % HCR_UP_CHUNKS, cl = (p / HCR_UP_CHUNKS) % o.ncu, s = p / (HCR_UP_CHUNKS * o.ncu);
    copy16(sm + SL_OFF_W + (s * SL_NCM + cl) * SL_WUS + 16 * ch, w_up + ((long long)s * C + o.cu0 + cl) * K + 8 * ch);
  }
}

/* After the grid barrier, by every thread: R' of the mix channels back
 * into resid (with pending: every block has read R by now, and only this
 * block writes these elements). */
HCT_DEV void sl_store_resid(int T, float *resid, const float *pending, const char *sm, const sl_geo &o, int tid) {
  if (pending == 0) return;
  const float *rm = (const float *)(sm + SL_OFF_RM);
  for (int i = tid; i < T * S * SL_NCM; i += SL_NT) {
    const int t = i / (S * SL_NCM), s = (i / SL_NCM) % S, cl = i % SL_NCM;
    if (cl < o.ncu) resid[((long long)t * S + s) * C + o.cu0 + cl] = rm[i];
  }
}

/* lo of every token into X as [half][t][chunk] of 16 bytes (a chunk's
 * elements 0..3 in half 0, 4..7 in half 1; token stride SL_LTS), so that
 * the lanes of an up group read contiguous 16-byte pieces.  ld4(p): 16
 * bytes of lo (ld.global.cg on the card: other blocks wrote it). */
template <class Ld4>
HCT_DEV void sl_gather(int T, const float *lo, char *sm, int tid, Ld4 ld4) {
  hct_f4 *los = (hct_f4 *)(sm + SL_OFF_X);
  for (int p = tid; p < T * (K / 4); p += SL_NT) {
    const int t = p / (K / 4), f = p % (K / 4);
    los[((f % 2) * SL_TMAX + t) * SL_LTS + f / 2] = ld4(lo + (long long)t * K + 4 * f);
  }
}

/* One chunk ch of the up dots for the four rows (streams) of a channel
 * and tokens t0 .. t0+NU-1: MODE 0 starts each chain, 1 continues it, 2
 * adds a fresh chain's sum to acc (one butterfly addition).  lo's rows
 * past T hold whatever X held: their sums are never used. */
template <int NU, int MODE>
HCT_DEV void sl_up_chunk(float (&acc)[S][NU], const hct_u4 *w0, const hct_f4 *l0, int ch) {
  hct_f4 xa[NU], xb[NU];
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    xa[u] = l0[u * SL_LTS + ch];
    xb[u] = l0[(SL_TMAX + u) * SL_LTS + ch];
  }
#pragma unroll
  for (int s = 0; s < S; ++s) {
    float w[8];
    sl_widen(w0[s * SL_NCM * (SL_WUS / 16) + ch], w);
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      if (MODE == 0) acc[s][u] = sl_dot8(w, xa[u], xb[u], 0.0f);
      else if (MODE == 1) acc[s][u] = sl_dot8(w, xa[u], xb[u], acc[s][u]);
      else acc[s][u] = acc[s][u] + sl_dot8(w, xa[u], xb[u], 0.0f);
    }
  }
}

/*
 * The up stage of channel cl (of the block's) and tokens t0 .. t0+NU-1
 * (past T: computed on whatever lo's rows hold, not stored; a channel
 * past the block's: computed on its last, not stored), by the 8 threads ul of a
 * group, and the mix.  Canonical lane ul's chain is chunk ul then chunk
 * ul+32; lanes ul+8, ul+16, ul+24 take one chunk each; the butterfly's
 * levels 16 and 8 are the additions (v[ul] + v[ul+16]) + (v[ul+8] +
 * v[ul+24]) in the thread, levels 4, 2, 1 shuffles across the group (its
 * lanes are lane bits 2..4: offsets 16, 8, 4).  Every lane of the group
 * then holds each sum; lane ul takes token t0 + ul.
 */
template <int NU>
HCT_DEV void sl_up_group(int T, const char *sm, const sl_geo &o, int cl, int t0, int ul, float *mixed,
                         hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  const int cle = cl < o.ncu ? cl : o.ncu - 1;
  const hct_u4 *w0 = (const hct_u4 *)(sm + SL_OFF_W + cle * SL_WUS);
  const hct_f4 *l0 = (const hct_f4 *)(sm + SL_OFF_X) + t0 * SL_LTS;
  float a[S][NU], b[S][NU];
  sl_up_chunk<NU, 0>(a, w0, l0, ul);      /* lane ul */
  sl_up_chunk<NU, 1>(a, w0, l0, ul + 32); /* lane ul, its second chunk */
  sl_up_chunk<NU, 0>(b, w0, l0, ul + 16); /* lane ul + 16 */
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int u = 0; u < NU; ++u) a[s][u] = a[s][u] + b[s][u]; /* level 16, lane ul */
  sl_up_chunk<NU, 0>(b, w0, l0, ul + 8);  /* lane ul + 8 */
  sl_up_chunk<NU, 2>(b, w0, l0, ul + 24); /* + lane ul + 24: level 16, lane ul + 8 */
  float z[S] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      float v = a[s][u] + b[s][u]; /* level 8 */
      v += hct_shfl_xor(v, 16);    /* level 4: lane ul ^ 4 */
      v += hct_shfl_xor(v, 8);     /* level 2 */
      v += hct_shfl_xor(v, 4);     /* level 1 */
      if (u == ul) z[s] = v;
    }
  const int t = t0 + ul;
  if (ul < NU && t < T && cl < o.ncu) {
    const float *rm = (const float *)(sm + SL_OFF_RM) + t * S * SL_NCM + cl;
    float g[S];
#pragma unroll
    for (int s = 0; s < S; ++s) g[s] = hcr_sigmoid(z[s]);
    hcr_mix_out(g, 1, rm, SL_NCM, (long long)t * C + o.cu0 + cl, mixed, mixed_bf16, mixed_f16);
  }
}

/* After sl_gather, w_up landed and a __syncthreads, by every thread: lane
 * bits 0 and 1 pick the warp's channel and token quad (tokens 4tq ..
 * 4tq+3; two quads when T > 4, the low bit then the quad: threads tn and
 * tn^1 load the same weights, tn and tn^2 the same lo), bits 2..4 the
 * group lane ul.  Every lane of a warp takes part in its shuffles. */
HCT_DEV void sl_upmix(int T, const char *sm, const sl_geo &o, int tid, float *mixed, hct_u16 *mixed_bf16,
                      hct_u16 *mixed_f16) {
  const int lane = tid % HCT_LW, wp = tid / HCT_LW, slot = lane & 3, ul = lane >> 2;
  if (T > 4) {
    const int cl = 2 * wp + (slot >> 1);
    if (2 * wp < o.ncu) sl_up_group<4>(T, sm, o, cl, 4 * (slot & 1), ul, mixed, mixed_bf16, mixed_f16);
    return;
  }
  const int cl = 4 * wp + slot;
  if (4 * wp >= o.ncu) return; /* the whole warp */
  switch (T) {
  case 4: sl_up_group<4>(T, sm, o, cl, 0, ul, mixed, mixed_bf16, mixed_f16); break;
  case 3: sl_up_group<3>(T, sm, o, cl, 0, ul, mixed, mixed_bf16, mixed_f16); break;
  case 2: sl_up_group<2>(T, sm, o, cl, 0, ul, mixed, mixed_bf16, mixed_f16); break;
  default: sl_up_group<1>(T, sm, o, cl, 0, ul, mixed, mixed_bf16, mixed_f16); break;
  }
}

#endif /* HCR_SLICE_H */
