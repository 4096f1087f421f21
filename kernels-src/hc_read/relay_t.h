/*
 * relay_t.h: the arithmetic of relay_t (relay_t.cu), with the indexing that
 * decides which thread sums what, and none of the sm_90 machinery (bulk
 * copies, mbarriers, st.async, the grid barrier).  Where a step has to wait
 * or hand a value over, it calls a functor the caller passes.  Why a header
 * of its own: the CPU emulator (tests/emu/relay_t_emu.cc) runs these very
 * functions with plain memory in place of that machinery and checks their
 * bits against the canonical order; what it cannot run (the copies and the
 * barriers) is left in relay_t.cu, as thin as possible.
 *
 * Needs hc_read.h and fast_common.h (hcr_shfl_idx, hcr_sigmoid) first, and
 * TG (tokens a group: a norm pass and a relay hand-off) and UPT (tokens a
 * pass of the up stage) defined.
 */
#ifndef HCR_RELAY_T_H
#define HCR_RELAY_T_H

#ifndef TG
#error "relay_t: TG must be defined"
#endif
#ifndef UPT
#error "relay_t: UPT must be defined"
#endif

#define RT_NT 320              /* threads */
#define RT_NB 128              /* blocks */
#define RT_CL 4                /* a cluster: one block a stream */
#define RT_RPC 10              /* w_down rows a cluster */
#define RT_QS (HCR_DOWN_Q / S) /* chunks of a lane chain in one stream: 10 */
#define RT_NCU 20              /* channels a block, up and mix */
#define RT_NR (S * RT_NCU)     /* w_up rows a block: 80 */
#define RT_TMAX 8
static_assert(S == RT_CL && HCR_DOWN_Q == S * RT_QS, "relay_t: a block per stream, ten chunks of a chain each");
static_assert(K == (RT_NB / RT_CL) * RT_RPC && RT_NT == HCT_LW * RT_RPC, "relay_t: a thread per (lane, row)");
static_assert(C == RT_NB * RT_NCU && RT_NR * 4 == RT_NT && RT_NT == (RT_NR / 2) * 8,
              "relay_t: 40 row slots of 8 lanes, two w_up rows each");
static_assert(C == HCR_NORM_THREADS * HCR_NORM_PER_THREAD, "relay_t: the norm's threads take whole columns");
static_assert(HCR_UP_CHUNKS == 40, "relay_t: up lane L takes chunk L, and L+32 when L < 8");
static_assert(TG == 1 || TG == 2 || TG == 4 || TG == 8, "relay_t: TG is 1, 2, 4 or 8");
static_assert(UPT == 1 || UPT == 2 || UPT == 4 || UPT == 8, "relay_t: UPT is 1, 2, 4 or 8");

/* Tokens t0 .. t0+NTK-1 of stream s (xs holds R of token t at xs + t*C),
 * by every thread of the block, two __syncthreads: R' = fl(R + P) in place
 * once token u's R has landed (wait_r(u)), the canonical norm of each
 * (threads 0..255: fmaf over c = i + 256m ascending, the warp butterfly 16
 * .. 1, the eight warp sums by the butterfly 4, 2, 1 on lanes 0..7), and
 * xn = fl(fl(R' * w_norm) * rs) in place once w_norm has landed
 * (wait_wn()).  The NTK tokens go through each step together: their
 * chains are independent, so one latency (a load, a shuffle, a barrier)
 * covers all of them.  red: 8 floats a token. */
template <int NTK, class WaitR, class WaitWn>
HCT_DEV void rt_norm_tokens(int t0, int s, float *xs, const float *pending, const hct_u16 *wn, float *red, int tid,
                            WaitR wait_r, WaitWn wait_wn) {
  const int wp = tid / HCT_LW, lane = tid % HCT_LW;
  const bool norm = tid < HCR_NORM_THREADS;
  float *x0 = xs + (long long)t0 * C + tid;
#pragma unroll
  for (int u = 0; u < NTK; ++u) {
    if (norm && pending != 0) {
      /* Each thread adds P to the elements it sums below (its own);
       * loaded before the wait, so the loads fly while R lands. */
      const float *p = pending + ((long long)(t0 + u) * S + s) * C + tid;
      float pv[HCR_NORM_PER_THREAD];
#pragma unroll
      for (int m = 0; m < HCR_NORM_PER_THREAD; ++m) pv[m] = p[m * HCR_NORM_THREADS];
      wait_r(u);
#pragma unroll
      for (int m = 0; m < HCR_NORM_PER_THREAD; ++m)
        x0[u * C + m * HCR_NORM_THREADS] = x0[u * C + m * HCR_NORM_THREADS] + pv[m];
    } else {
      wait_r(u);
    }
  }
  if (norm) {
    float a[NTK];
#pragma unroll
    for (int u = 0; u < NTK; ++u) a[u] = 0.0f;
#pragma unroll
    for (int m = 0; m < HCR_NORM_PER_THREAD; ++m)
#pragma unroll
      for (int u = 0; u < NTK; ++u) {
        const float x = x0[u * C + m * HCR_NORM_THREADS];
        a[u] = fmaf(x, x, a[u]);
      }
#pragma unroll
    for (int u = 0; u < NTK; ++u) a[u] = hct_warp_sum(a[u]);
    if (lane == 0)
#pragma unroll
      for (int u = 0; u < NTK; ++u) red[(t0 + u) * 8 + wp] = a[u];
  }
  __syncthreads();
  if (norm) {
    float rs[NTK];
#pragma unroll
    for (int u = 0; u < NTK; ++u) {
      /* Warp k's sum in lane k, butterfly 4, 2, 1 on lanes 0..7. */
      float b = lane < HCR_NORM_THREADS / HCT_LW ? red[(t0 + u) * 8 + lane] : 0.0f;
      b += hct_shfl_xor(b, 4);
      b += hct_shfl_xor(b, 2);
      b += hct_shfl_xor(b, 1);
      rs[u] = rsqrtf(hcr_shfl_idx(b, 0) / (float)C + HCT_EPS);
    }
    wait_wn();
#pragma unroll
    for (int m = 0; m < HCR_NORM_PER_THREAD; ++m) {
      const float w = hct_bf16_lo((hct_u32)wn[tid + m * HCR_NORM_THREADS]);
#pragma unroll
      for (int u = 0; u < NTK; ++u) {
        float *x = x0 + u * C + m * HCR_NORM_THREADS;
        const float y = *x * w;
        *x = y * rs[u];
      }
    }
  }
  __syncthreads();
}

/* rt_norm_tokens<n> for a run-time n <= N (a last, partial group). */
template <int N, class WaitR, class WaitWn>
HCT_DEV void rt_norm_n(int n, int t0, int s, float *xs, const float *pending, const hct_u16 *wn, float *red, int tid,
                       WaitR wait_r, WaitWn wait_wn) {
  if (n == N) rt_norm_tokens<N>(t0, s, xs, pending, wn, red, tid, wait_r, wait_wn);
  else if constexpr (N > 1) rt_norm_n<N - 1>(n, t0, s, xs, pending, wn, red, tid, wait_r, wait_wn);
}

/* Thread (lane dl, row dj) of cluster c, block of stream s: row
 * RT_RPC*c + dj's 80 weights of lane dl over stream s (chunk dl + 32q,
 * q = 10s + qq), into registers. */
HCT_DEV void rt_load_wr(hct_u4 (&wr)[RT_QS], const hct_u16 *w_down, int c, int s, int dl, int dj) {
  const hct_u16 *src = w_down + (long long)(RT_RPC * c + dj) * D + (long long)s * C + 8 * dl;
#pragma unroll
  for (int qq = 0; qq < RT_QS; ++qq) wr[qq] = *(const hct_u4 *)(src + 8 * HCT_LW * qq);
}

/* The n <= NTK tokens' chains of lane dl over this stream, side by side:
 * per chunk the weights are widened once and every token's activations
 * loaded, then each token's chain takes its eight fmaf in the canonical
 * order (element 8c .. 8c+7, as hcr_dot8).  The chains are independent, so
 * the NTK of them fill each other's latency (relay ran one token's chain
 * at a time: 80 dependent fmaf, 0.62 us measured, 0.16 of them the fmaf
 * latency).  xg: xn of token t0 (stride C), acc: the chains in and out. */
template <int NTK>
HCT_DEV void rt_chains(int n, const hct_u4 (&wr)[RT_QS], const float *xg, float (&acc)[NTK], int dl) {
#pragma unroll
  for (int qq = 0; qq < RT_QS; ++qq) {
    const hct_u4 p = wr[qq];
    const float w[8] = {hct_bf16_lo(p.x), hct_bf16_hi(p.x), hct_bf16_lo(p.y), hct_bf16_hi(p.y),
                        hct_bf16_lo(p.z), hct_bf16_hi(p.z), hct_bf16_lo(p.w), hct_bf16_hi(p.w)};
    /* A token's activations loaded right before its eight fmaf: loading
     * all NTK tokens' first (64 registers at NTK = 8, beside the 40 of wr)
     * spilled 2.6 KB a thread (NVRTC, sm_90). */
#pragma unroll
    for (int g = 0; g < NTK; ++g)
      if (g < n) {
        const hct_f4 *x = (const hct_f4 *)(xg + (long long)g * C + 8 * HCT_LW * qq + 8 * dl);
        const hct_f4 xa = x[0], xb = x[1];
        float a = acc[g];
        a = fmaf(w[0], xa.x, a);
        a = fmaf(w[1], xa.y, a);
        a = fmaf(w[2], xa.z, a);
        a = fmaf(w[3], xa.w, a);
        a = fmaf(w[4], xb.x, a);
        a = fmaf(w[5], xb.y, a);
        a = fmaf(w[6], xb.z, a);
        a = fmaf(w[7], xb.w, a);
        acc[g] = a;
      }
  }
}

/* The down stage of block (cluster c, stream s), by every thread: per token
 * group of TG (the last one partial), the group's norm, then lane dl's
 * chains of row dj over the stream for the group's tokens, started from
 * the accumulators the block of stream s - 1 handed over (recv(gi), then
 * rcv[t][tid]) and handed to stream s + 1 (send(dst, value, gi), dst being
 * rcv[t][tid] of the receiving block); stream 3 keeps them in its own rcv.
 * The next group's norm runs while the later streams still work on this
 * one: the relay is a pipeline over groups. */
template <class WaitR, class WaitWn, class Recv, class Send>
HCT_DEV void rt_down(int T, int c, int s, float *xs, const float *pending, const hct_u16 *wn, float *red, float *rcv,
                     const hct_u4 (&wr)[RT_QS], int tid, WaitR wait_r, WaitWn wait_wn, Recv recv, Send send) {
  (void)c;
  const int dl = tid / RT_RPC;
  for (int t0 = 0, gi = 0; t0 < T; t0 += TG, ++gi) {
    const int n = min(TG, T - t0);
    rt_norm_n<TG>(
        n, t0, s, xs, pending, wn, red, tid, [&](int u) { wait_r(t0 + u); }, wait_wn);
    float acc[TG];
#pragma unroll
    for (int g = 0; g < TG; ++g) acc[g] = 0.0f;
    if (s > 0) {
      recv(gi);
#pragma unroll
      for (int g = 0; g < TG; ++g)
        if (g < n) acc[g] = rcv[(t0 + g) * RT_NT + tid];
    }
    rt_chains<TG>(n, wr, xs + (long long)t0 * C, acc, dl);
#pragma unroll
    for (int g = 0; g < TG; ++g)
      if (g < n) {
        float *dst = rcv + (t0 + g) * RT_NT + tid;
        if (s == S - 1) *dst = acc[g]; /* this thread's own slot, read above by it */
        else send(dst, acc[g], gi);
      }
  }
}

/* Stream 3's end of row RT_RPC*c + j for token t (thread t*10 + j, after a
 * __syncthreads): the canonical butterfly over the 32 lane chains held in
 * rcv[t][L*10 + j], lane L + m into lane L for m = 16 .. 1.  Returns lo. */
HCT_DEV float rt_row_sum(const float *rcv, int t, int j) {
  float v[HCT_LW];
#pragma unroll
  for (int l = 0; l < HCT_LW; ++l) v[l] = rcv[t * RT_NT + l * RT_RPC + j];
  /* (each level its own loop: nested, relay's compiler left v in local memory) */
#pragma unroll
  for (int l = 0; l < 16; ++l) v[l] = v[l] + v[l + 16];
#pragma unroll
  for (int l = 0; l < 8; ++l) v[l] = v[l] + v[l + 8];
#pragma unroll
  for (int l = 0; l < 4; ++l) v[l] = v[l] + v[l + 4];
  v[0] = v[0] + v[2];
  v[1] = v[1] + v[3];
  return v[0] + v[1];
}

/* After the grid barrier, by every thread of block b (channels cu0 ..
 * cu0+19): R' of the block's channels into rcv [t][s][channel] (stored back
 * into resid with pending: every block has read R by now, and only this
 * block writes these elements), and lo of every cluster into los as two
 * halves [half][t][chunk of 8] of 16 bytes (relay's layout: the eight lanes
 * of an up group read 128 contiguous bytes a load).  ld4(p): the 16 bytes
 * of lo at p (ld.global.cg on the card: lo was written by other blocks in
 * this launch). */
template <class Ld4>
HCT_DEV void rt_gather(float *resid, const float *pending, const float *lo, float *los, float *rcv, int T, int tid,
                       int cu0, Ld4 ld4) {
  const int mt = tid / RT_NCU, mcl = tid % RT_NCU; /* a thread per (token, channel) */
  float rm[S] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (mt < T) {
#pragma unroll
    for (int sr = 0; sr < S; ++sr) {
      const long long at = ((long long)mt * S + sr) * C + cu0 + mcl;
      rm[sr] = resid[at];
      if (pending != 0) rm[sr] = rm[sr] + pending[at];
    }
  }
  for (int p = tid; p < T * (K / 4); p += RT_NT) ((hct_f4 *)los)[(p % 2) * (RT_TMAX * K / 8) + p / 2] = ld4(lo + 4 * p);
  if (mt < T)
#pragma unroll
    for (int sr = 0; sr < S; ++sr) {
      rcv[mt * RT_NR + sr * RT_NCU + mcl] = rm[sr];
      if (pending != 0) resid[((long long)mt * S + sr) * C + cu0 + mcl] = rm[sr];
    }
}

/* The up stage's dots for tokens t0 .. t0+NTK-1 of the thread's two rows
 * (ir and ir + 40 of the block's 80, w_up rows in w4 [row][chunk]) and
 * canonical lanes ul, ul+8, ul+16, ul+24 (lane ul also takes chunk ul+32,
 * after its first): chunk by chunk, the weights widened once for the NTK
 * tokens; per token the butterfly's levels 16 and 8 as the additions they
 * are, then levels 4, 2, 1 by shuffles inside the group of eight; and the
 * gates (relay took the sigmoid in a pass of its own behind a
 * __syncthreads: the same values, one barrier more). */
template <int NTK>
HCT_DEV void rt_up_tokens(int t0, const hct_u4 *w4, const hct_f4 *los, float *gt, int ir, int ul) {
  float va[NTK][4], vb[NTK][4];
#pragma unroll
  for (int k = 0; k < 5; ++k) {
    const int ch = k < 4 ? ul + 8 * k : ul + 32;
    const hct_u4 pa = w4[ir * HCR_UP_CHUNKS + ch], pb = w4[(ir + RT_NR / 2) * HCR_UP_CHUNKS + ch];
    const float wa[8] = {hct_bf16_lo(pa.x), hct_bf16_hi(pa.x), hct_bf16_lo(pa.y), hct_bf16_hi(pa.y),
                         hct_bf16_lo(pa.z), hct_bf16_hi(pa.z), hct_bf16_lo(pa.w), hct_bf16_hi(pa.w)};
    const float wb[8] = {hct_bf16_lo(pb.x), hct_bf16_hi(pb.x), hct_bf16_lo(pb.y), hct_bf16_hi(pb.y),
                         hct_bf16_lo(pb.z), hct_bf16_hi(pb.z), hct_bf16_lo(pb.w), hct_bf16_hi(pb.w)};
#pragma unroll
    for (int u = 0; u < NTK; ++u) {
      const hct_f4 *l4 = los + (t0 + u) * (K / 8);
      const hct_f4 x0 = l4[ch], x1 = l4[RT_TMAX * K / 8 + ch];
      const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float a = k < 4 ? 0.0f : va[u][0], b = k < 4 ? 0.0f : vb[u][0];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        a = fmaf(wa[e], xv[e], a);
        b = fmaf(wb[e], xv[e], b);
      }
      va[u][k < 4 ? k : 0] = a;
      vb[u][k < 4 ? k : 0] = b;
    }
  }
  /* The gates: after the shuffles every lane of the group of eight holds the
   * row's sum (an xor butterfly gives all its lanes the same bits: IEEE
   * addition commutes), so lane ul takes token ul's two sigmoids, and a
   * warp runs two sigmoid sequences a pass, as relay's separate sweep did
   * a thread, with no barrier.  (Taken by lane 0 alone, inside the loop, a
   * warp ran 2 x NTK of them, and the expf beside the dots' registers
   * spilled 8 to 36 bytes, NVRTC sm_90.) */
  float sa = 0.0f, sb = 0.0f;
#pragma unroll
  for (int u = 0; u < NTK; ++u) {
    float ua = (va[u][0] + va[u][2]) + (va[u][1] + va[u][3]); /* the butterfly's levels 16 and 8 */
    float ub = (vb[u][0] + vb[u][2]) + (vb[u][1] + vb[u][3]);
    ua += hct_shfl_xor(ua, 4);
    ub += hct_shfl_xor(ub, 4);
    ua += hct_shfl_xor(ua, 2);
    ub += hct_shfl_xor(ub, 2);
    ua += hct_shfl_xor(ua, 1);
    ub += hct_shfl_xor(ub, 1);
    if (u == ul) {
      sa = ua;
      sb = ub;
    }
  }
  if (ul < NTK) {
    gt[(t0 + ul) * RT_NR + ir] = hcr_sigmoid(sa);
    gt[(t0 + ul) * RT_NR + ir + RT_NR / 2] = hcr_sigmoid(sb);
  }
}

/* After rt_gather and w_up's landing (and a __syncthreads), by every
 * thread of block b: the gates of the block's 80 rows for every token, UPT
 * tokens a pass, one __syncthreads, and the mix of its channels (canonical
 * fmaf order, a thread per (token, channel)) with its two 16-bit images. */
HCT_DEV void rt_upmix(int T, const hct_u16 *wub, const float *los, float *gt, const float *rcv, int tid, int cu0,
                      float *mixed, hct_u16 *mixed_bf16, hct_u16 *mixed_f16) {
  const int ul = tid % 8, ir = tid / 8;
  const hct_u4 *w4 = (const hct_u4 *)wub;
  for (int t0 = 0; t0 < T; t0 += UPT) {
    const int n = min(UPT, T - t0);
    /* A pass a count, so that no token's dots are computed for nothing. */
    if (n == UPT) rt_up_tokens<UPT>(t0, w4, (const hct_f4 *)los, gt, ir, ul);
#if UPT >= 8
    else if (n >= 4) {
      rt_up_tokens<4>(t0, w4, (const hct_f4 *)los, gt, ir, ul);
      if (n - 4 >= 2) rt_up_tokens<2>(t0 + 4, w4, (const hct_f4 *)los, gt, ir, ul);
      if (n % 2) rt_up_tokens<1>(t0 + n - 1, w4, (const hct_f4 *)los, gt, ir, ul);
    }
#endif
#if UPT >= 4
    else if (n >= 2) {
      rt_up_tokens<2>(t0, w4, (const hct_f4 *)los, gt, ir, ul);
      if (n == 3) rt_up_tokens<1>(t0 + 2, w4, (const hct_f4 *)los, gt, ir, ul);
    }
#endif
    else rt_up_tokens<1>(t0, w4, (const hct_f4 *)los, gt, ir, ul);
  }
  __syncthreads();
  const int mt = tid / RT_NCU, mcl = tid % RT_NCU;
  if (mt < T)
    hcr_mix_out(gt + mt * RT_NR + mcl, RT_NCU, rcv + mt * RT_NR + mcl, RT_NCU, (long long)mt * C + cu0 + mcl, mixed,
                mixed_bf16, mixed_f16);
}

#endif /* HCR_RELAY_T_H */
