/*
 * v3: v2, plus a down kernel that stages the activations xn in shared
 * memory for TPL tokens at once, so each row of w_down is read once per TPL
 * tokens instead of once per token.
 *
 * Staging: xn is cut into half-stream tiles of C/2 = 1280 floats (160
 * chunks of 8).  Tile h holds exactly the chunks lane L uses at steps
 * q = 5h .. 5h+4 of the canonical order (chunk c = L + 32q = 160h + L +
 * 32(q - 5h)), so walking the tiles in order and, inside a tile, q in order
 * gives every lane its canonical fmaf sequence; the butterfly is the same.
 * Two tiles are in flight (cp.async on sm_80+, plain copies elsewhere), and
 * each lane loads the next tile's weights into registers before it uses
 * the current tile.
 *
 * Shared layout, per (buffer, token): the first and the second float4 of
 * each chunk in two regions of 160 float4, the second region padded by 4
 * float4.  Reads (lane L, chunk L + 32i) are consecutive float4s of one
 * region: no bank conflict.  Copies walk xn contiguously (coalesced): lane
 * pairs write chunk i of both regions, and the 64-byte pad puts the two
 * regions on disjoint banks, so the copies are conflict-free too.
 *
 * Parameters: DOWN_WARPS, UP_WARPS as in v1; TPL tokens per down block.
 * Dynamic shared memory: TPL * 2 buffers * 2 regions * 164 * 16 bytes =
 * TPL * 10496.
 */
#include "hc_read.h"

#ifndef DOWN_WARPS
#error "v3: DOWN_WARPS must be defined"
#endif
#ifndef UP_WARPS
#error "v3: UP_WARPS must be defined"
#endif
#ifndef TPL
#error "v3: TPL must be defined"
#endif

#define V3_TILE (C / 2)                    /* floats per tile: 1280 */
#define V3_TCH (V3_TILE / 8)               /* chunks per tile: 160 */
#define V3_QPT (V3_TCH / HCT_LW)           /* steps q per tile: 5 */
#define V3_NTILES (D / V3_TILE)            /* tiles: 8 */
#define V3_F4 (V3_TILE / 4)                /* float4 per tile and token: 320 */
#define V3_REGION (V3_TCH + 4)             /* float4 per region, padded */
#define V3_THREADS (DOWN_WARPS * HCT_LW)
static_assert(C % 2 == 0 && V3_TILE % (8 * HCT_LW) == 0,
              "v3: a half stream must be whole steps of 32 chunks");
static_assert(TPL >= 1 && TPL <= 16, "v3: TPL out of range");

/* Float4 index of (buffer, token, region, chunk) in the shared array. */
#define V3_AT(b, tt, r, ch) ((((b) * TPL + (tt)) * 2 + (r)) * V3_REGION + (ch))

/* Starts the copy of tile h of tokens t0 .. t0+TPL-1 into buffer b; tokens
 * past T are not copied (and never read). */
HCT_DEV void v3_issue(hct_f4 *sm, const float *xn, int t0, int T, int h, int b) {
  for (int g = (int)threadIdx.x; g < TPL * V3_F4; g += V3_THREADS) {
    const int tt = g / V3_F4, f = g % V3_F4;
    if (t0 + tt < T) {
      const float *src = xn + (long long)(t0 + tt) * D + (long long)h * V3_TILE + 4 * f;
      hct_cp_async16(&sm[V3_AT(b, tt, f & 1, f >> 1)], src);
    }
  }
  hct_cp_async_commit();
}

HCT_ENTRY void __launch_bounds__(HCR_NORM_THREADS)
    hc_v3_norm(float *resid, const float *pending, const hct_u16 *w_norm, float *xn, int T) {
  __shared__ float red[9];
  const int s = (int)blockIdx.x, t = (int)blockIdx.y;
  if (s >= S || t >= T) return;
  hcr_norm_stream(t, s, resid, pending, w_norm, xn, red);
}

/* Grid (cdiv(K, DOWN_WARPS), cdiv(T, TPL)), block DOWN_WARPS*32, dynamic
 * shared memory TPL * 10496 bytes. */
HCT_ENTRY void __launch_bounds__(V3_THREADS)
    hc_v3_down(const hct_u16 *w_down, const float *xn, float *lo, int T) {
  HCT_DYN_SHARED(hct_f4, v3_sm);
  const int lane = (int)threadIdx.x & (HCT_LW - 1);
  const int j = (int)blockIdx.x * DOWN_WARPS + (int)threadIdx.x / HCT_LW;
  const int t0 = (int)blockIdx.y * TPL;
  /* Every thread helps with the copies and the barriers, even a warp
   * without a row (j >= K), so nobody returns early. */
  const bool active = j < K;
  const hct_u4 *w = (const hct_u4 *)(w_down + (long long)(active ? j : 0) * D);

  float acc[TPL];
#pragma unroll
  for (int tt = 0; tt < TPL; ++tt) acc[tt] = 0.0f;

  v3_issue(v3_sm, xn, t0, T, 0, 0);
  v3_issue(v3_sm, xn, t0, T, 1, 1);

  hct_u4 wcur[V3_QPT], wnext[V3_QPT];
#pragma unroll
  for (int i = 0; i < V3_QPT; ++i) wcur[i] = active ? w[lane + HCT_LW * i] : hct_u4{0, 0, 0, 0};

  for (int h = 0; h < V3_NTILES; ++h) {
    const int b = h & 1;
    /* The next tile's weights are in flight while this tile is used. */
    if (active && h + 1 < V3_NTILES) {
#pragma unroll
      for (int i = 0; i < V3_QPT; ++i) wnext[i] = w[(h + 1) * V3_TCH + lane + HCT_LW * i];
    }
    /* Groups committed so far: tiles 0 .. h+1; all but the newest done
     * means tile h has landed. */
    hct_cp_async_wait<1>();
    __syncthreads();
    if (active) {
#pragma unroll
      for (int i = 0; i < V3_QPT; ++i) {
        const int ch = lane + HCT_LW * i;
#pragma unroll
        for (int tt = 0; tt < TPL; ++tt) {
          if (t0 + tt < T)
            acc[tt] = hcr_dot8(wcur[i], v3_sm[V3_AT(b, tt, 0, ch)], v3_sm[V3_AT(b, tt, 1, ch)],
                               acc[tt]);
        }
      }
    }
    /* Buffer b is refilled only after every warp has finished with it. */
    __syncthreads();
    if (h + 2 < V3_NTILES)
      v3_issue(v3_sm, xn, t0, T, h + 2, b);
    else
      hct_cp_async_commit(); /* an empty group keeps the count in step */
#pragma unroll
    for (int i = 0; i < V3_QPT; ++i) wcur[i] = wnext[i];
  }
  hct_cp_async_wait<0>();

#pragma unroll
  for (int tt = 0; tt < TPL; ++tt) {
    const float v = hct_warp_sum(acc[tt]);
    if (active && lane == 0 && t0 + tt < T) lo[(long long)(t0 + tt) * K + j] = v;
  }
}

/* Grid (cdiv(D, UP_WARPS), T), block UP_WARPS*32. */
HCT_ENTRY void __launch_bounds__(UP_WARPS *HCT_LW)
    hc_v3_up(const hct_u16 *w_up, const float *lo, float *gate, int T) {
  const int i = (int)blockIdx.x * UP_WARPS + (int)threadIdx.x / HCT_LW;
  const int t = (int)blockIdx.y;
  if (i >= D || t >= T) return;
  hcr_up_row(t, i, (int)threadIdx.x & (HCT_LW - 1), w_up, lo, gate);
}

/* Grid (cdiv(T*C, 256)), block 256. */
HCT_ENTRY void __launch_bounds__(256)
    hc_v3_mix(const float *resid, const float *gate, float *mixed, hct_u16 *mixed_bf16,
              hct_u16 *mixed_f16, int T) {
  const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
  if (idx >= (long long)T * C) return;
  const int t = (int)(idx / C), c = (int)(idx % C);
  hcr_mix(t, c, resid, gate, mixed, mixed_bf16, mixed_f16);
}
