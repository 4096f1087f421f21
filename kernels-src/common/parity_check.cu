/*
 * parity_check.cu: a check's comparisons on the card, so that a check
 * copies figures back and not the outputs (issue 29: at T = 32,768 a
 * check's outputs are about 10 GB).  The same rules as tuner/parity.c,
 * which stays the host path and the oracle of the tests:
 *
 *   hct_pc_elems   over every element: bits against the variant the output
 *                  must equal (mismatches, the first HCT_PC_FIRST by
 *                  index), poison (unwritten), NaN or Inf that are not the
 *                  poison (nonfinite), and for a 16-bit image of an f32
 *                  output the elements that are not its exact image;
 *   hct_pc_ref     over the reference's token rows: the float64 sums of
 *                  the normwise and worst errors;
 *   hct_pc_rows    one thread a KL row: KL of the row softmax and argmax
 *                  agreement, in the host's order, element by element;
 *   hct_pc_dist    over every element of an f32 output and the same
 *                  output of another run (issue 34: the verification of
 *                  timed launches on the card): the largest |out - base|
 *                  (infinite where either is NaN) and the largest |base|,
 *                  tuner/parity.c's hct__parity_distance;
 *   hct_pc_reduce  one thread: the blocks' partials and the rows' figures
 *                  added in a fixed order, and the first mismatches' bits.
 *
 * Deterministic: each block owns a contiguous chunk and writes its own
 * partial; a block reduces its threads in a fixed tree; the partials and
 * the rows are added in index order by one thread.  The figures depend on
 * the inputs and the grid (which the host derives from the sizes,
 * hct__pc_plan), never on which block ran first.  Counts are exact; the
 * sums differ from the host's sequential ones by rounding only (the tests
 * hold them to 1e-12 relative).  Products whose bits matter are __dmul_rn,
 * so the compiler cannot fuse them into the adds that follow.
 *
 * One compiled module serves every dtype: the dtype is an argument.
 */
#include "hct_kernel.h"
#include "hct_parity.h"

#if defined(HCT_CUDA)
#define HCT_PC_INF __longlong_as_double(0x7ff0000000000000LL)
#else
#define HCT_PC_INF __builtin_inf()
#endif

HCT_DEV int pc_wide(int dt) { return dt == HCT_PC_F32 || dt == HCT_PC_U32 || dt == HCT_PC_I32; }
HCT_DEV int pc_is_float(int dt) { return dt == HCT_PC_F32 || dt == HCT_PC_BF16 || dt == HCT_PC_F16; }
HCT_DEV hct_u32 pc_poison(int dt) { return pc_wide(dt) ? 0x7fc0deadu : 0x7fd3u; }

/* Raw bits of element i, zero-extended. */
HCT_DEV hct_u32 pc_bits(const void *p, hct_u64 i, int wide) {
  return wide ? ((const hct_u32 *)p)[i] : (hct_u32)((const hct_u16 *)p)[i];
}

/* NaN or Inf (the poison is tested before). */
HCT_DEV int pc_nonfinite(int dt, hct_u32 u) {
  if (dt == HCT_PC_F32) return (u & 0x7f800000u) == 0x7f800000u;
  if (dt == HCT_PC_BF16) return (u & 0x7f80u) == 0x7f80u;
  if (dt == HCT_PC_F16) return (u & 0x7c00u) == 0x7c00u;
  return 0;
}

/* f16 bits to f32 bits, exactly (every f16 is a float32). */
HCT_DEV hct_u32 pc_f16_bits(hct_u32 h) {
  const hct_u32 s = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
  if (e == 31u) return s | 0x7f800000u | (m << 13);
  if (e != 0u) return s | ((e + 112u) << 23) | (m << 13);
  if (m == 0u) return s;
  /* Subnormal: m * 2^-24, normalised. */
  int k = 0;
  hct_u32 mm = m;
  while ((mm & 1024u) == 0u) {
    mm <<= 1;
    k++;
  }
  return s | ((hct_u32)(113 - k) << 23) | ((mm & 1023u) << 13);
}

/* The element's value, as tuner/parity.c's value(). */
HCT_DEV double pc_value(int dt, hct_u32 u) {
  switch (dt) {
  case HCT_PC_F32:
    return (double)__uint_as_float(u);
  case HCT_PC_BF16:
    return (double)__uint_as_float(u << 16);
  case HCT_PC_F16:
    return (double)__uint_as_float(pc_f16_bits(u));
  case HCT_PC_U32:
    return (double)u;
  default:
    return (double)(int)u;
  }
}

/* Adds column t of the k rows of s into column 0, halving: a fixed tree.
 * Every thread of the block calls it. */
template <class V, int K>
HCT_DEV void pc_tree_sum(V (*s)[HCT_PC_THREADS], int t) {
  for (int w = HCT_PC_THREADS / 2; w > 0; w >>= 1) {
    __syncthreads();
    if (t < w)
      for (int k = 0; k < K; k++) s[k][t] += s[k][t + w];
  }
  __syncthreads();
}

/* Block b compares elements [b * chunk, (b + 1) * chunk) of out with want
 * (NULL: no bitwise comparison) and, with `image`, with the image of the
 * f32 src; writes parts[b]. */
HCT_ENTRY void __launch_bounds__(HCT_PC_THREADS)
hct_pc_elems(const void *out, const void *want, const float *src, hct_u64 n, int dt, int image,
             hct_u64 chunk, hct_pc_part_t *parts) {
  __shared__ hct_u64 s_cnt[4][HCT_PC_THREADS];
  __shared__ hct_u64 s_first[HCT_PC_FIRST][HCT_PC_THREADS];
  __shared__ hct_u64 s_nf[HCT_PC_THREADS];
  const int t = (int)threadIdx.x, wide = pc_wide(dt);
  const hct_u32 poison = pc_poison(dt);
  const hct_u64 b0 = (hct_u64)blockIdx.x * chunk, b1 = b0 + chunk < n ? b0 + chunk : n;
  hct_u64 mis = 0, unw = 0, nonf = 0, bad = 0, nf = 0;
  for (hct_u64 e = b0 + (hct_u64)t; e < b1; e += HCT_PC_THREADS) {
    const hct_u32 o = pc_bits(out, e, wide);
    const int po = o == poison;
    unw += po;
    nonf += !po && pc_nonfinite(dt, o);
    if (want != 0 && o != pc_bits(want, e, wide)) {
      if (nf < HCT_PC_FIRST) s_first[nf++][t] = e;
      mis++;
    }
    if (image != HCT_PC_IMAGE_NONE && !po) {
      const float x = src[e];
      const hct_u32 w = image == HCT_PC_IMAGE_BF16 ? hct_f32_to_bf16(x) : hct_f32_to_f16(x);
      /* NaN images of NaN sources may differ in payload. */
      bad += o != w && !(x != x);
    }
  }
  s_cnt[0][t] = mis;
  s_cnt[1][t] = unw;
  s_cnt[2][t] = nonf;
  s_cnt[3][t] = bad;
  s_nf[t] = nf;
  pc_tree_sum<hct_u64, 4>(s_cnt, t);
  if (t != 0) return;
  hct_pc_part_t *p = &parts[blockIdx.x];
  p->mismatches = s_cnt[0][0];
  p->unwritten = s_cnt[1][0];
  p->nonfinite = s_cnt[2][0];
  p->image_bad = s_cnt[3][0];
  /* The block's first mismatches: a merge of each thread's first ones
   * (ascending within a thread), done only when there is one. */
  hct_u64 got = 0;
  unsigned char pos[HCT_PC_THREADS];
  for (int k = 0; k < HCT_PC_THREADS; k++) pos[k] = 0;
  while (p->mismatches > 0 && got < HCT_PC_FIRST) {
    int best = -1;
    for (int k = 0; k < HCT_PC_THREADS; k++)
      if (pos[k] < s_nf[k] && (best < 0 || s_first[pos[k]][k] < s_first[pos[best]][best])) best = k;
    if (best < 0) break;
    p->first_idx[got++] = s_first[pos[best]++][best];
  }
  p->nfirst = got;
}

/* Block b sums over elements [b * chunk, (b + 1) * chunk) of the
 * reference (slices of `slice` elements; slice sl is token rows[sl] of
 * out, or all of out without rows), skipping unwritten and non-finite
 * outputs as the host does; writes se, sr, maxe, maxr of parts[b]. */
HCT_ENTRY void __launch_bounds__(HCT_PC_THREADS)
hct_pc_ref(const void *out, int dt, const double *ref, const int *rows, hct_u64 slices, hct_u64 slice,
           hct_u64 chunk, hct_pc_part_t *parts) {
  __shared__ double s_sum[2][HCT_PC_THREADS];
  __shared__ double s_max[2][HCT_PC_THREADS];
  const int t = (int)threadIdx.x, wide = pc_wide(dt);
  const hct_u32 poison = pc_poison(dt);
  const hct_u64 m = slices * slice;
  const hct_u64 b0 = (hct_u64)blockIdx.x * chunk, b1 = b0 + chunk < m ? b0 + chunk : m;
  double se = 0.0, sr = 0.0, maxe = 0.0, maxr = 0.0;
  for (hct_u64 q = b0 + (hct_u64)t; q < b1; q += HCT_PC_THREADS) {
    const hct_u64 sl = q / slice, j = q - sl * slice;
    const hct_u64 i = (rows != 0 ? (hct_u64)rows[sl] * slice : 0) + j;
    const hct_u32 u = pc_bits(out, i, wide);
    if (u == poison || pc_nonfinite(dt, u)) continue;
    const double o = pc_value(dt, u), r = ref[q], d = o - r;
    se += __dmul_rn(d, d);
    sr += __dmul_rn(r, r);
    maxe = fmax(maxe, fabs(d));
    maxr = fmax(maxr, fabs(r));
  }
  s_sum[0][t] = se;
  s_sum[1][t] = sr;
  s_max[0][t] = maxe;
  s_max[1][t] = maxr;
  pc_tree_sum<double, 2>(s_sum, t);
  /* Maxima: any order gives the same bits. */
  if (t != 0) return;
  for (int k = 1; k < HCT_PC_THREADS; k++) {
    s_max[0][0] = fmax(s_max[0][0], s_max[0][k]);
    s_max[1][0] = fmax(s_max[1][0], s_max[1][k]);
  }
  hct_pc_part_t *p = &parts[blockIdx.x];
  p->se = s_sum[0][0];
  p->sr = s_sum[1][0];
  p->maxe = s_max[0][0];
  p->maxr = s_max[1][0];
}

/* KL row r (len elements; per_slice of them in each slice of the
 * reference): kl[r] and agree[r], as tuner/parity.c's loop does for one
 * row, in the same order.  refp holds the softmax of each reference row. */
HCT_ENTRY void __launch_bounds__(HCT_PC_ROW_THREADS)
hct_pc_rows(const void *out, int dt, const double *ref, const double *refp, const int *rows,
            hct_u64 slice, hct_u64 per_slice, hct_u64 len, hct_u64 nkl, double *kl, hct_u32 *agree) {
  const hct_u64 r = (hct_u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= nkl) return;
  const int wide = pc_wide(dt);
  const hct_u32 poison = pc_poison(dt);
  const hct_u64 sl = r / per_slice, within = (r % per_slice) * len;
  const hct_u64 o0 = (rows != 0 ? (hct_u64)rows[sl] * slice : 0) + within;
  const double *rv = ref + r * len, *p = refp + r * len;
  int bad = 0;
  for (hct_u64 i = 0; i < len && !bad; i++) {
    const hct_u32 u = pc_bits(out, o0 + i, wide);
    bad = u == poison || pc_nonfinite(dt, u);
  }
  if (bad) {
    /* A bad row counts as infinite KL and as an argmax disagreement. */
    kl[r] = HCT_PC_INF;
    agree[r] = 0;
    return;
  }
  /* KL = log1p(sum p expm1(d - mu)), mu = sum p d (tuner/parity.c's
   * row_kl says why this form). */
  double mu = 0.0, acc = 0.0;
  for (hct_u64 i = 0; i < len; i++) mu += __dmul_rn(p[i], pc_value(dt, pc_bits(out, o0 + i, wide)) - rv[i]);
  for (hct_u64 i = 0; i < len; i++)
    acc += __dmul_rn(p[i], expm1((pc_value(dt, pc_bits(out, o0 + i, wide)) - rv[i]) - mu));
  const double k = log1p(acc);
  kl[r] = k > 0.0 ? k : 0.0;
  hct_u64 ao = 0, ar = 0;
  double vo = pc_value(dt, pc_bits(out, o0, wide));
  for (hct_u64 i = 1; i < len; i++) {
    const double v = pc_value(dt, pc_bits(out, o0 + i, wide));
    if (v > vo) {
      vo = v;
      ao = i;
    }
    if (rv[i] > rv[ar]) ar = i;
  }
  agree[r] = ao == ar;
}

/* One thread: the partials of hct_pc_elems (ne blocks) and hct_pc_ref (nr
 * blocks) and the nkl rows added in index order into *res, with the bits
 * of the first mismatches. */
HCT_ENTRY void __launch_bounds__(1)
hct_pc_reduce(const hct_pc_part_t *eparts, hct_u64 ne, const hct_pc_part_t *rparts, hct_u64 nr,
              const double *kl, const hct_u32 *agree, hct_u64 nkl, const void *out, const void *want,
              int dt, hct_pc_result_t *res) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  hct_pc_result_t R;
  R.mismatches = R.unwritten = R.nonfinite = R.image_bad = R.nfirst = 0;
  for (hct_u64 b = 0; b < ne; b++) {
    const hct_pc_part_t *p = &eparts[b];
    R.mismatches += p->mismatches;
    R.unwritten += p->unwritten;
    R.nonfinite += p->nonfinite;
    R.image_bad += p->image_bad;
    for (hct_u64 j = 0; j < p->nfirst && R.nfirst < HCT_PC_FIRST; j++) R.first_idx[R.nfirst++] = p->first_idx[j];
  }
  const int wide = pc_wide(dt);
  for (int j = 0; j < HCT_PC_FIRST; j++) {
    const int have = (hct_u64)j < R.nfirst;
    if (!have) R.first_idx[j] = 0;
    R.first_got[j] = have ? pc_bits(out, R.first_idx[j], wide) : 0u;
    R.first_want[j] = have ? pc_bits(want, R.first_idx[j], wide) : 0u;
  }
  R.se = R.sr = R.maxe = R.maxr = 0.0;
  for (hct_u64 b = 0; b < nr; b++) {
    R.se += rparts[b].se;
    R.sr += rparts[b].sr;
    R.maxe = fmax(R.maxe, rparts[b].maxe);
    R.maxr = fmax(R.maxr, rparts[b].maxr);
  }
  R.kl_sum = R.kl_max = 0.0;
  R.agree = 0;
  for (hct_u64 r = 0; r < nkl; r++) {
    R.kl_sum += kl[r];
    R.kl_max = fmax(R.kl_max, kl[r]);
    R.agree += agree[r];
  }
  R.kl_rows = nkl;
  *res = R;
}

/* Block b over elements [b * chunk, (b + 1) * chunk) of two f32 outputs:
 * the largest |out - base| into maxe (infinite where the difference is NaN:
 * a NaN output, or the poison), the largest |base| into maxr of parts[b];
 * the reduction's rparts then give hct__parity_distance's two maxima. */
HCT_ENTRY void __launch_bounds__(HCT_PC_THREADS)
hct_pc_dist(const float *out, const float *base, hct_u64 n, hct_u64 chunk, hct_pc_part_t *parts) {
  __shared__ double s_max[2][HCT_PC_THREADS];
  const int t = (int)threadIdx.x;
  const hct_u64 b0 = (hct_u64)blockIdx.x * chunk, b1 = b0 + chunk < n ? b0 + chunk : n;
  double maxe = 0.0, maxr = 0.0;
  for (hct_u64 e = b0 + (hct_u64)t; e < b1; e += HCT_PC_THREADS) {
    const double d = fabs((double)out[e] - (double)base[e]), r = fabs((double)base[e]);
    maxe = d != d ? HCT_PC_INF : fmax(maxe, d);
    maxr = fmax(maxr, r);
  }
  s_max[0][t] = maxe;
  s_max[1][t] = maxr;
  __syncthreads();
  if (t != 0) return;
  for (int k = 1; k < HCT_PC_THREADS; k++) {
    s_max[0][0] = fmax(s_max[0][0], s_max[0][k]);
    s_max[1][0] = fmax(s_max[1][0], s_max[1][k]);
  }
  hct_pc_part_t *p = &parts[blockIdx.x];
  p->se = p->sr = 0.0;
  p->maxe = s_max[0][0];
  p->maxr = s_max[1][0];
}

/* dst = src, n 16-bit words (every dtype is a whole number of them): the
 * worker keeps a run's outputs on the card with it (the reference's, for
 * the candidates after it; a candidate's first run, for its twin). */
HCT_ENTRY void __launch_bounds__(HCT_PC_THREADS)
hct_pc_copy(hct_u16 *dst, const hct_u16 *src, hct_u64 n) {
  const hct_u64 step = (hct_u64)gridDim.x * blockDim.x;
  for (hct_u64 e = (hct_u64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) dst[e] = src[e];
}
