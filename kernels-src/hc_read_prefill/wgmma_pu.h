/*
 * wgmma_pu.h: steps 3 and 4 of hc_read_prefill on Hopper as one
 * persistent kernel: the up GEMM u = lo . w_up^T with the gate and the mix
 * as its epilogue, for the variants wgmma_pu (kl, after wgmma_fn.cu's fused
 * down) and wgmma_pb (pair_mma's bits, after the spec's norm and wgmma.cu's
 * down over all of k in order).
 *
 * Why (ncu on an H100, 2026-12-06, T = 8192, docs/perf/h100.md): the up
 * kernel this one replaced (of the variants wgmma and wgmma_fn, retired
 * since) took one UBM x (4 x UBC) tile a CTA, up to two CTAs an SM, each
 * loading its R' tile by TMA once, at its start; it took 444 us at 35% of
 * DRAM's bandwidth, 9 warps an SM resident, an instruction every 4 cycles
 * a scheduler: a CTA held nothing in flight while its GEMM and epilogue
 * ran, so an SM had little memory traffic outstanding most of the time.
 * Here a CTA an SM walks a run of tiles and its producer keeps the next
 * tile's operands and R' in flight while the consumers multiply and mix
 * the current one.
 *
 * A tile is PBM (64) tokens x PBC channels of all 4 streams, so each
 * thread holds every stream of its (token, channel) and mixes in
 * registers, as the old up kernel did.  Tiles are numbered channel block
 * major (tile = cb * MT + mt, MT = cdiv(T, PBM)) and each CTA takes a
 * contiguous run of them, so its w_up block (the 4*PBC rows of its
 * channels, all K = 320: 80 KB at PBC 32) is loaded once per channel
 * block, at most a few times a CTA, and stays in shared memory; what
 * streams a tile is lo's tile (PBM x K bf16, 40 KB, from L2) and R'
 * (PBM x 4 x PBC f32, 32 KB, from memory).
 *
 * Warpgroup 0 is the producer (one thread issues every TMA load);
 * warpgroups 1..NCW are consumers, each with PBC/NCW channels of every
 * stream (N = 4*PBC/NCW columns: wgmma m64nNk16 over the tile's 64 rows),
 * so the epilogue's expf, divisions and stores are spread over 4*NCW
 * warps.  B's rows in shared memory are ordered [consumer][stream]
 * [channel] so each consumer's columns are one contiguous operand.
 *
 * Shared memory: B (5 k blocks of 4*PBC rows x 128 bytes) + PST stages of
 * (A: 5 k blocks of PBM rows x 128 bytes; R': 4 * PBC/32 boxes of
 * [32, PBM] f32, 128B-swizzled) + barriers.  The stage is freed after the
 * epilogue has read its R'.
 *
 * The epilogue's arithmetic is the old up kernel's, expression for
 * expression (g = 1 / (1 + expf(-u)) in IEEE float, m = g0*r0 then fmaf
 * for s = 1..3), so with the spec's norm and an unsplit down GEMM the
 * outputs are pair_mma's bit for bit (measured: the retired variant wgmma
 * at KSPLIT 1, wgmma.cu's down kernel and the old up kernel, passed
 * bitwise against pair_mma at T = 16, 1025, 1041, 2048, 4095, 4096 on an
 * H100; wgmma_pb since at every count checked on an H100 and an H200).
 *
 * Measured (H100, 2026-12-06, T = 8192, docs/perf/h100.md): also asking
 * for a later tile's R' into L2 (cp.async.bulk.prefetch.tensor, two tiles
 * ahead) made every read 70-120 us slower; four consumer warpgroups beat
 * two by 5%.
 *
 * Needs PBM, PBC, NCW, PST and the op constants; wgmma.h first.
 */
#ifndef HCP_WGMMA_PU_H
#define HCP_WGMMA_PU_H

#if !defined(PBM) || !defined(PBC) || !defined(NCW) || !defined(PST)
#error "wgmma_pu.h: PBM, PBC, NCW, PST must be defined"
#endif
static_assert(PBM == 64, "PBM: one m64 wgmma row block a tile");
static_assert(PBC % 32 == 0 && C % PBC == 0, "PBC: whole 32-channel R' boxes");
static_assert(NCW >= 1 && NCW <= 4 && PBC % (8 * NCW) == 0, "NCW: each consumer whole 8-channel groups");
static_assert(4 * PBC / NCW <= 256, "a consumer's columns are one wgmma N");
static_assert(S == 4 && K % 64 == 0, "the up epilogue mixes 4 streams; K whole k blocks");

#define HCP_PU_CW (PBC / NCW)   /* channels of a consumer */
#define HCP_PU_N (4 * HCP_PU_CW) /* its columns: 4 streams x CW channels */
#define HCP_PU_KB (K / 64)
#define HCP_PU_THREADS (HCP_WG_THREADS * (NCW + 1))
#define HCP_PU_B_KB (4 * PBC * HCP_TILE_ROW_BYTES)
#define HCP_PU_B_BYTES (HCP_PU_KB * HCP_PU_B_KB)
#define HCP_PU_A_KB (PBM * HCP_TILE_ROW_BYTES)
#define HCP_PU_A_BYTES (HCP_PU_KB * HCP_PU_A_KB)
#define HCP_PU_R_BOX (PBM * 128)
#define HCP_PU_R_BYTES (S * (PBC / 32) * HCP_PU_R_BOX)
#define HCP_PU_STAGE (HCP_PU_A_BYTES + HCP_PU_R_BYTES)
/* The manifest's smem: B, the stages, 1024 of alignment slack, 256 for
 * the barriers. */
#define HCP_PU_SMEM (HCP_PU_B_BYTES + PST * HCP_PU_STAGE + 1280)
static_assert((HCP_PU_CW * HCP_TILE_ROW_BYTES) % 1024 == 0, "a consumer-stream block of B keeps 1024-byte alignment");
static_assert(HCP_PU_STAGE % 1024 == 0 && HCP_PU_B_BYTES % 1024 == 0, "stages keep 1024-byte alignment");

/* The CTA's run of tiles [t0, t1) of nt. */
HCT_DEV void hcp_pu_run(int nt, int *t0, int *t1) {
  const long long b = blockIdx.x, g = gridDim.x;
  *t0 = (int)(b * nt / g);
  *t1 = (int)((b + 1) * nt / g);
}

/* Grid min(SM_COUNT, (C/PBC) * cdiv(T, PBM)), HCP_PU_THREADS threads.
 * tm_lo: lo, dims [K, T], box [64, PBM]; tm_wu: w_up, dims [K, D], box
 * [64, PBC/NCW]; tm_r: resid, f32, dims [D, T], box [32, PBM], 128B.  With
 * ADD_PENDING and pending given, R' = fl(R + P) is formed in the
 * epilogue and stored into resid (wgmma_fn.cu's down leaves resid as it
 * was). */
template <bool ADD_PENDING>
HCT_DEV void hcp_pu_body(const hct_tmap *tm_lo, const hct_tmap *tm_wu, const hct_tmap *tm_r,
                         float *__restrict__ resid, const float *__restrict__ pending,
                         float *__restrict__ mixed, hct_u16 *__restrict__ mixed_bf16,
                         hct_u16 *__restrict__ mixed_f16, int T) {
  HCT_DYN_SHARED(unsigned char, smem);
  const int wg = (int)threadIdx.x / HCP_WG_THREADS;
  const int mt_count = (T + PBM - 1) / PBM;
  int t0, t1;
  hcp_pu_run((C / PBC) * mt_count, &t0, &t1);

  /* Layout: B, then the stages (a ring of PST: full / empty), then the
   * barriers: full[PST], empty[PST], bfull, bempty. */
  const hct_u32 raw = hct_smem_addr(smem);
  const hct_u32 pad = ((raw + 1023u) & ~1023u) - raw;
  const hct_u32 bt = raw + pad, st0 = bt + HCP_PU_B_BYTES;
  hct_u64 *full = (hct_u64 *)(smem + pad + HCP_PU_B_BYTES + PST * HCP_PU_STAGE);
  hct_u64 *empty = full + PST, *bfull = empty + PST, *bempty = bfull + 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < PST; ++s) {
      hct_mbar_init(&full[s], 1);
      hct_mbar_init(&empty[s], 4 * NCW);
    }
    hct_mbar_init(bfull, 1);
    hct_mbar_init(bempty, 4 * NCW);
    hct_mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    if (threadIdx.x != 0) return;
    hct_tma_prefetch(tm_lo);
    hct_tma_prefetch(tm_wu);
    hct_tma_prefetch(tm_r);
    int cur = -1, nb = 0;
    for (int t = t0, li = 0; t < t1; ++t, ++li) {
      const int cb = t / mt_count, m0 = (t % mt_count) * PBM, c0 = cb * PBC;
      if (cb != cur) {
        /* Every consumer is done multiplying with the previous block. */
        if (nb > 0 && !hcp_wait(bempty, (hct_u32)(nb - 1) & 1u)) return;
        hct_bulk_expect(bfull, HCP_PU_B_BYTES);
        for (int kb = 0; kb < HCP_PU_KB; ++kb)
          for (int h = 0; h < NCW; ++h)
#pragma unroll
            for (int s = 0; s < S; ++s)
              hct_tma_load_2d(bt + kb * HCP_PU_B_KB + (h * S + s) * HCP_PU_CW * HCP_TILE_ROW_BYTES, tm_wu,
                              kb * 64, s * C + c0 + h * HCP_PU_CW, bfull);
        cur = cb;
        ++nb;
      }
      const int st = li % PST;
      if (li >= PST && !hcp_wait(&empty[st], (hct_u32)(li / PST - 1) & 1u)) return;
      const hct_u32 a = st0 + st * HCP_PU_STAGE, rt = a + HCP_PU_A_BYTES;
      hct_bulk_expect(&full[st], HCP_PU_STAGE);
      /* R' first: it comes from memory, the A tile from L2. */
#pragma unroll
      for (int s = 0; s < S; ++s)
#pragma unroll
        for (int hb = 0; hb < PBC / 32; ++hb)
          hct_tma_load_2d(rt + (s * (PBC / 32) + hb) * HCP_PU_R_BOX, tm_r, s * C + c0 + 32 * hb, m0, &full[st]);
#pragma unroll
      for (int kb = 0; kb < HCP_PU_KB; ++kb) hct_tma_load_2d(a + kb * HCP_PU_A_KB, tm_lo, kb * 64, m0, &full[st]);
    }
    return;
  }

  const int h = wg - 1;
  const int tid = (int)threadIdx.x % HCP_WG_THREADS, warp = tid / 32, lane = tid % 32;
  int cur = -1, nb = 0;
  for (int t = t0, li = 0; t < t1; ++t, ++li) {
    const int cb = t / mt_count, m0 = (t % mt_count) * PBM, c0 = cb * PBC;
    if (cb != cur) {
      if (!hcp_wait(bfull, (hct_u32)nb & 1u)) return;
      cur = cb;
      ++nb;
    }
    const int st = li % PST;
    if (!hcp_wait(&full[st], (hct_u32)(li / PST) & 1u)) return;
    const hct_u32 a = st0 + st * HCP_PU_STAGE;
    float acc[HCP_PU_N / 2];
#pragma unroll
    for (int i = 0; i < HCP_PU_N / 2; ++i) acc[i] = 0.0f;
    hcp_fence_acc<HCP_PU_N / 2>(acc);
    hcp_wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < HCP_PU_KB; ++kb) {
      const hct_u64 da = hcp_desc_sw128(a + kb * HCP_PU_A_KB);
      const hct_u64 db = hcp_desc_sw128(bt + kb * HCP_PU_B_KB + h * S * HCP_PU_CW * HCP_TILE_ROW_BYTES);
#pragma unroll
      for (int k16 = 0; k16 < 4; ++k16) hcp_wgmma<HCP_PU_N>(acc, da + 2 * k16, db + 2 * k16);
    }
    hcp_wgmma_commit();
    hcp_fence_acc<HCP_PU_N / 2>(acc);
    hcp_wgmma_wait<0>();
    hcp_fence_acc<HCP_PU_N / 2>(acc);
    /* The last tile of this channel block in the run: B may be reloaded. */
    if (!(t + 1 < t1 && (t + 1) / mt_count == cb) && lane == 0) hct_mbar_arrive(bempty);

    /* Epilogue.  Column n of the consumer's tile is stream n / CW,
     * channel c0 + h*CW + n % CW: register 4j + 2i + e with j = s*(CW/8)
     * + jj is stream s, channel 8jj + 2(lane%4) + e of the consumer's,
     * row 16*warp + lane/4 + 8i. */
    const unsigned char *rsm = smem + pad + HCP_PU_B_BYTES + st * HCP_PU_STAGE + HCP_PU_A_BYTES;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = 16 * warp + lane / 4 + 8 * i; /* row of the tile; r % 8 = lane / 4 */
      const int tok = m0 + r;
      if (tok >= T) continue;
#pragma unroll
      for (int jj = 0; jj < HCP_PU_CW / 8; ++jj) {
        const int cc = h * HCP_PU_CW + 8 * jj + 2 * (lane % 4), c = c0 + cc;
        /* cc's byte in its box's 128-byte row, its 16-byte chunk swizzled. */
        const int in_row = ((((cc % 32) / 4) ^ (r % 8)) << 4) + (cc % 4) * 4;
        float g[S][2], rv[S][2];
#pragma unroll
        for (int s = 0; s < S; ++s) {
          hcp_f2 x = *(const hcp_f2 *)(rsm + (s * (PBC / 32) + cc / 32) * HCP_PU_R_BOX + r * 128 + in_row);
          if (ADD_PENDING && pending != 0) {
            const long long at = ((long long)tok * S + s) * C + c;
            const hcp_f2 p = *(const hcp_f2 *)(pending + at);
            x.x = x.x + p.x;
            x.y = x.y + p.y;
            *(hcp_f2 *)(resid + at) = x;
          }
          rv[s][0] = x.x;
          rv[s][1] = x.y;
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float u = acc[4 * (s * (HCP_PU_CW / 8) + jj) + 2 * i + e];
            g[s][e] = 1.0f / (1.0f + expf(-u));
          }
        }
        float m[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float v = g[0][e] * rv[0][e];
          v = fmaf(g[1][e], rv[1][e], v);
          v = fmaf(g[2][e], rv[2][e], v);
          v = fmaf(g[3][e], rv[3][e], v);
          m[e] = v;
        }
        const long long o = (long long)tok * C + c;
        *(hcp_f2 *)(mixed + o) = hcp_f2{m[0], m[1]};
        *(hct_u32 *)(mixed_bf16 + o) =
            (hct_u32)hct_f32_to_bf16(m[0]) | ((hct_u32)hct_f32_to_bf16(m[1]) << 16);
        *(hct_u32 *)(mixed_f16 + o) =
            (hct_u32)hct_f32_to_f16(m[0]) | ((hct_u32)hct_f32_to_f16(m[1]) << 16);
      }
    }
    /* This warp's reads of the stage's R' are done. */
    __syncwarp();
    if (lane == 0) hct_mbar_arrive(&empty[st]);
  }
}

#endif /* HCP_WGMMA_PU_H */
