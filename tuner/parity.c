/*
 * parity.c: how a device result is compared: bit for bit with the result
 * of the variant it must equal, and in float64 with the op's reference
 * (normwise error, worst error, KL divergence of the softmax of each row,
 * argmax agreement).  Elements still holding the poison pattern are
 * unwritten; other NaN or Inf are non-finite.  Both make the float figures
 * infinite, so no bound can pass them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

/* Reads element i of a buffer of dtype dt: its raw bits (zero-extended)
 * and its value. */
static uint32_t raw_bits(hct_dtype_t dt, const void *p, size_t i) {
  if (hct__dtype_size(dt) == 2) return ((const uint16_t *)p)[i];
  return ((const uint32_t *)p)[i];
}

static double value(hct_dtype_t dt, const void *p, size_t i) {
  switch (dt) {
  case HCT_DT_F32:
    return ((const float *)p)[i];
  case HCT_DT_BF16:
    return hct__bf16_to_f32(((const uint16_t *)p)[i]);
  case HCT_DT_F16:
    return hct__f16_to_f32(((const uint16_t *)p)[i]);
  case HCT_DT_U32:
    return ((const uint32_t *)p)[i];
  case HCT_DT_I32:
    return ((const int32_t *)p)[i];
  }
  return NAN;
}

static uint32_t poison_of(hct_dtype_t dt) {
  return hct__dtype_size(dt) == 2 ? HCT_POISON_16 : HCT_POISON_F32;
}

static int is_float(hct_dtype_t dt) { return dt == HCT_DT_F32 || dt == HCT_DT_BF16 || dt == HCT_DT_F16; }

/* Elements per chunk of the bit compare and the image check: results are
 * summed chunk by chunk, so they do not depend on how many threads ran. */
#define CMP_CHUNK (1u << 20)

typedef struct cmp_chunk_s {
  size_t mismatches, unwritten, bad_images;
  size_t nfirst, first[HCT_PC_FIRST];   /* the chunk's first mismatches */
} cmp_chunk_t;

typedef struct cmp_ctx_s {
  const void *out, *ref;
  const float *src;        /* images: the f32 output they are images of */
  size_t elems;
  int wide;                /* 4-byte elements, else 2 */
  int bf16;                /* images: bf16, else f16 */
  cmp_chunk_t *res;
} cmp_ctx_t;

/* Typed loops without a branch per element, so the compiler vectorises
 * them; the first mismatch is looked for only in a chunk that has one. */
static void cmp_chunks(void *arg, int begin, int end) {
  cmp_ctx_t *c = arg;
  for (int ch = begin; ch < end; ch++) {
    size_t e0 = (size_t)ch * CMP_CHUNK, e1 = HCT_MIN(c->elems, e0 + CMP_CHUNK), mis = 0, unw = 0;
    if (c->wide) {
      const uint32_t *o = c->out, *r = c->ref;
      for (size_t e = e0; e < e1; e++) {
        unw += o[e] == (uint32_t)HCT_POISON_F32;
        mis += o[e] != r[e];
      }
    } else {
      const uint16_t *o = c->out, *r = c->ref;
      for (size_t e = e0; e < e1; e++) {
        unw += o[e] == HCT_POISON_16;
        mis += o[e] != r[e];
      }
    }
    cmp_chunk_t *res = &c->res[ch];
    *res = (cmp_chunk_t){.mismatches = mis, .unwritten = unw};
    const size_t w = c->wide ? 4 : 2;
    const char *o = c->out, *r = c->ref;
    for (size_t e = e0; mis > 0 && e < e1 && res->nfirst < HCT_PC_FIRST; e++)
      if (memcmp(o + e * w, r + e * w, w) != 0) res->first[res->nfirst++] = e;
  }
}

/* Runs fn over the chunks of elems elements, on every core when there is
 * more than one chunk; returns the per-chunk results (malloc'd, NULL when
 * out of memory) and their count. */
static cmp_chunk_t *cmp_run(cmp_ctx_t *c, hct_range_fn fn, int *nchunks) {
  *nchunks = (int)((c->elems + CMP_CHUNK - 1) / CMP_CHUNK);
  c->res = calloc(*nchunks > 0 ? (size_t)*nchunks : 1, sizeof *c->res);
  if (c->res == NULL) return NULL;
  if (*nchunks <= 1) fn(c, 0, *nchunks);
  else hct__par_for(*nchunks, fn, c);
  return c->res;
}

void hct__parity_bitwise(const hct_hbuf_t *b, const void *out, const void *ref,
                         hct_parity_figs_t *f) {
  const hct_dtype_t dt = b->spec->dtype;
  f->elems = b->elems;
  f->mismatches = 0;
  f->first_mismatch = 0;
  f->n_first = 0;
  memset(f->first_idx, 0, sizeof f->first_idx);
  memset(f->first_got, 0, sizeof f->first_got);
  memset(f->first_want, 0, sizeof f->first_want);
  f->unwritten = 0;
  cmp_ctx_t c = {out, ref, NULL, b->elems, hct__dtype_size(dt) == 4, 0, NULL};
  int n;
  cmp_chunk_t *res = cmp_run(&c, cmp_chunks, &n);
  if (res == NULL) {
    /* No memory for the tally: every element counts as different, so no
     * bound can pass on figures that were not computed. */
    f->mismatches = b->elems;
    return;
  }
  for (int k = 0; k < n; k++) {
    f->mismatches += res[k].mismatches;
    f->unwritten += res[k].unwritten;
    for (size_t j = 0; j < res[k].nfirst && f->n_first < HCT_PC_FIRST; j++) {
      const size_t e = res[k].first[j];
      f->first_idx[f->n_first] = e;
      f->first_got[f->n_first] = raw_bits(dt, out, e);
      f->first_want[f->n_first++] = raw_bits(dt, ref, e);
    }
  }
  f->first_mismatch = f->n_first > 0 ? f->first_idx[0] : 0;
  free(res);
}

void hct__parity_take_bitwise(hct_parity_figs_t *f, const hct_parity_figs_t *fb) {
  f->mismatches = fb->mismatches;
  f->first_mismatch = fb->first_mismatch;
  f->n_first = fb->n_first;
  memcpy(f->first_idx, fb->first_idx, sizeof f->first_idx);
  memcpy(f->first_got, fb->first_got, sizeof f->first_got);
  memcpy(f->first_want, fb->first_want, sizeof f->first_want);
}

/*
 * KL(p || q) with p = softmax(r), q = softmax(o), for one row, in a form
 * that stays exact to float64 for tiny differences: with d = o - r and
 * mu = sum p d, KL = log(sum p exp(d - mu)) = log1p(sum p expm1(d - mu)).
 * Differences near 1e-7 give KL near 1e-15, which the textbook form would
 * lose to cancellation.
 */
static double row_kl(const double *p, const double *r, const double *o, size_t n) {
  double mu = 0.0;
  for (size_t i = 0; i < n; i++) mu += p[i] * (o[i] - r[i]);
  double acc = 0.0;
  for (size_t i = 0; i < n; i++) acc += p[i] * expm1((o[i] - r[i]) - mu);
  const double kl = log1p(acc);
  return kl > 0.0 ? kl : 0.0; /* rounding can leave -1e-20 */
}

/* p = softmax(r) of one row. */
static void row_softmax(const double *r, size_t n, double *p) {
  double mx = -INFINITY;
  for (size_t i = 0; i < n; i++) mx = fmax(mx, r[i]);
  double z = 0.0;
  for (size_t i = 0; i < n; i++) z += (p[i] = exp(r[i] - mx));
  for (size_t i = 0; i < n; i++) p[i] /= z;
}

/* Where a buffer's reference lies: `slices` runs of `slice` elements, run n
 * holding the elements from out_start(n) on (token rows[n] of the buffer;
 * one run of every element without rows). */
typedef struct layout_s {
  size_t slices, slice;
  size_t len;  /* elements per KL row */
} layout_t;

static layout_t layout_of(const hct_hbuf_t *b) {
  layout_t L;
  if (b->rows != NULL && b->token_elems > 0) {
    L.slices = (size_t)b->nrows;
    L.slice = b->token_elems;
  } else {
    L.slices = 1;
    L.slice = b->elems;
  }
  L.len = b->row_len > 0 ? (size_t)b->row_len : L.slice;
  return L;
}

static size_t out_start(const hct_hbuf_t *b, const layout_t *L, size_t n) {
  return b->rows != NULL && b->token_elems > 0 ? (size_t)b->rows[n] * L->slice : 0;
}

int hct__parity_prepare(hct_hostset_t *hs) {
  for (int k = 0; k < hs->n; k++) {
    hct_hbuf_t *b = &hs->bufs[k];
    free(b->ref_p);
    b->ref_p = NULL;
    const layout_t L = layout_of(b);
    const size_t refn = L.slices * L.slice;
    if (b->ref == NULL || L.len == 0 || L.len > L.slice || refn / L.len == 0) continue;
    b->ref_p = malloc(refn / L.len * L.len * sizeof *b->ref_p);
    if (b->ref_p == NULL) return hct__error(HCT_ENOMEM, "out of memory for the softmax of '%s'", b->spec->name);
    for (size_t r = 0; r < refn / L.len; r++) row_softmax(b->ref + r * L.len, L.len, b->ref_p + r * L.len);
  }
  return 0;
}

/* KL rows of a layout (len elements; *per_slice of them a slice). */
static size_t kl_rows(const layout_t *L, size_t *per_slice) {
  *per_slice = L->len > 0 && L->len <= L->slice ? L->slice / L->len : 0;
  return *per_slice * L->slices;
}

/* The normwise and worst errors from their sums, and the KL and argmax
 * figures from the rows' (`have_ref` 0: no reference, so no row agrees):
 * the one place these formulas live, for the host's figures and the
 * card's (hct__parity_from_card). */
static void finish_errors(hct_parity_figs_t *f, double se, double sr, double maxe, double maxr) {
  const int bad = f->unwritten > 0 || f->nonfinite > 0;
  f->rel_err = bad ? INFINITY : sr > 0.0 ? sqrt(se / sr) : se > 0.0 ? INFINITY : 0.0;
  f->max_err_ratio = bad ? INFINITY : maxr > 0.0 ? maxe / maxr : maxe > 0.0 ? INFINITY : 0.0;
}

static void finish_rows(hct_parity_figs_t *f, size_t rows, int have_ref, double kl_sum,
                        double kl_max, size_t agree) {
  f->kl_mean = 0.0;
  f->kl_max = 0.0;
  f->argmax_agree = rows ? 0.0 : 1.0;
  if (rows == 0 || !have_ref) return;
  f->kl_mean = kl_sum / (double)rows;
  f->kl_max = kl_max;
  f->argmax_agree = (double)agree / (double)rows;
}

static size_t argmax(const double *v, size_t n) {
  size_t k = 0;
  for (size_t i = 1; i < n; i++)
    if (v[i] > v[k]) k = i;
  return k;
}

/*
 * Unwritten and non-finite elements are counted over every element; the
 * float64 figures (normwise, worst, KL, argmax) over the rows the
 * reference holds (all of them, or the sampled token rows).
 */
void hct__parity_metrics(const hct_hbuf_t *b, const void *out, hct_parity_figs_t *f) {
  const hct_dtype_t dt = b->spec->dtype;
  const uint32_t poison = poison_of(dt);
  const size_t n = b->elems;
  f->elems = n;
  f->unwritten = 0;
  f->nonfinite = 0;
  for (size_t i = 0; i < n; i++) {
    if (raw_bits(dt, out, i) == poison) f->unwritten++;
    else if (is_float(dt) && !isfinite(value(dt, out, i))) f->nonfinite++;
  }
  const layout_t L = layout_of(b);
  double se = 0.0, sr = 0.0, maxe = 0.0, maxr = 0.0;
  for (size_t sl = 0; b->ref != NULL && sl < L.slices; sl++) {
    const size_t o0 = out_start(b, &L, sl);
    for (size_t j = 0; j < L.slice; j++) {
      const size_t i = o0 + j;
      if (raw_bits(dt, out, i) == poison) continue;
      const double o = value(dt, out, i);
      if (is_float(dt) && !isfinite(o)) continue;
      const double r = b->ref[sl * L.slice + j];
      se += (o - r) * (o - r);
      sr += r * r;
      maxe = fmax(maxe, fabs(o - r));
      maxr = fmax(maxr, fabs(r));
    }
  }
  finish_errors(f, se, sr, maxe, maxr);

  /* Rows: KL and argmax need the row in float64; a bad row counts as
   * infinite KL and as an argmax disagreement. */
  const size_t len = L.len;
  size_t per_slice;
  const size_t rows = kl_rows(&L, &per_slice);
  finish_rows(f, rows, 0, 0.0, 0.0, 0);
  if (rows == 0 || b->ref == NULL) return;
  double *ov = malloc(2 * len * sizeof *ov), *pv = ov + len;
  if (ov == NULL) {
    f->kl_mean = f->kl_max = INFINITY;
    return;
  }
  size_t agree = 0;
  double sum = 0.0, kmax = 0.0;
  for (size_t r = 0; r < rows; r++) {
    const size_t sl = r / per_slice, within = (r % per_slice) * len;
    const double *rv = b->ref + r * len;
    const size_t o0 = out_start(b, &L, sl) + within;
    int row_bad = 0;
    for (size_t i = 0; i < len; i++) {
      const size_t e = o0 + i;
      ov[i] = value(dt, out, e);
      if (raw_bits(dt, out, e) == poison || !isfinite(ov[i])) row_bad = 1;
    }
    /* The reference's softmax: kept by hct__parity_prepare, else made. */
    const double *p = b->ref_p ? b->ref_p + r * len : pv;
    if (b->ref_p == NULL && !row_bad) row_softmax(rv, len, pv);
    const double kl = row_bad ? INFINITY : row_kl(p, rv, ov, len);
    sum += kl;
    kmax = fmax(kmax, kl);
    if (!row_bad && argmax(ov, len) == argmax(rv, len)) agree++;
  }
  free(ov);
  finish_rows(f, rows, 1, sum, kmax, agree);
}

/* JSON has no Inf or NaN: those print as null. */
static int put_num(char *buf, size_t len, const char *key, double v) {
  if (!isfinite(v)) return snprintf(buf, len, ",\"%s\":null", key);
  return snprintf(buf, len, ",\"%s\":%.6g", key, v);
}

void hct__parity_json(const hct_parity_figs_t *f, char *buf, size_t len) {
  if (len == 0) return;
  size_t off = 0;
  int w = snprintf(buf, len, "{\"elems\":%zu,\"mismatches\":%zu", f->elems, f->mismatches);
  off = w > 0 ? (size_t)w : 0;
#define HCT_PUT(expr)                                        \
  do {                                                       \
    if (off < len) {                                         \
      int k = (expr);                                        \
      off += k > 0 ? (size_t)k : 0;                          \
    }                                                        \
  } while (0)
  if (f->mismatches > 0) HCT_PUT(snprintf(buf + off, len - off, ",\"first_mismatch\":%zu", f->first_mismatch));
  HCT_PUT(snprintf(buf + off, len - off, ",\"unwritten\":%zu,\"nonfinite\":%zu", f->unwritten, f->nonfinite));
  HCT_PUT(put_num(buf + off, len - off, "rel_err", f->rel_err));
  HCT_PUT(put_num(buf + off, len - off, "max_err_ratio", f->max_err_ratio));
  HCT_PUT(put_num(buf + off, len - off, "kl_mean", f->kl_mean));
  HCT_PUT(put_num(buf + off, len - off, "kl_max", f->kl_max));
  HCT_PUT(put_num(buf + off, len - off, "argmax_agree", f->argmax_agree));
  HCT_PUT(snprintf(buf + off, len - off, "}"));
#undef HCT_PUT
}

/* Index of the f32 buffer buffer i is an image of, or -1. */
static int image_source(const hct_hostset_t *hs, int i) {
  const hct_buffer_t *b = hs->bufs[i].spec;
  if (b->dtype != HCT_DT_BF16 && b->dtype != HCT_DT_F16) return -1;
  const char *suffix = b->dtype == HCT_DT_BF16 ? "_bf16" : "_f16";
  size_t n = strlen(b->name), k = strlen(suffix);
  if (n <= k || strcmp(b->name + n - k, suffix) != 0) return -1;
  for (int j = 0; j < hs->n; j++) {
    const hct_buffer_t *src = hs->bufs[j].spec;
    if (src->dtype == HCT_DT_F32 && strlen(src->name) == n - k &&
        strncmp(src->name, b->name, n - k) == 0)
      return j;
  }
  return -1;
}

static void image_chunks(void *arg, int begin, int end) {
  cmp_ctx_t *c = arg;
  const uint16_t *img = c->out;
  const float *x = c->src;
  for (int ch = begin; ch < end; ch++) {
    size_t e0 = (size_t)ch * CMP_CHUNK, e1 = HCT_MIN(c->elems, e0 + CMP_CHUNK), bad = 0;
    for (size_t e = e0; e < e1; e++) {
      if (img[e] == HCT_POISON_16) continue; /* counted as unwritten */
      uint16_t want = c->bf16 ? hct__f32_to_bf16(x[e]) : hct__f32_to_f16(x[e]);
      /* NaN images of NaN sources may differ in payload. */
      if (img[e] != want && !(x[e] != x[e])) bad++;
    }
    c->res[ch].bad_images = bad;
  }
}

void hct__parity_images(const hct_hostset_t *hs, void *const outs[], hct_parity_figs_t figs[]) {
  for (int i = 0; i < hs->n; i++) {
    int src = image_source(hs, i);
    if (src < 0 || outs[i] == NULL || outs[src] == NULL) continue;
    cmp_ctx_t c = {outs[i], NULL, outs[src], hs->bufs[i].elems, 0,
                   hs->bufs[i].spec->dtype == HCT_DT_BF16, NULL};
    int n;
    cmp_chunk_t *res = cmp_run(&c, image_chunks, &n);
    size_t bad = res == NULL ? hs->bufs[i].elems : 0; /* no memory: not exact */
    for (int k = 0; res != NULL && k < n; k++) bad += res[k].bad_images;
    free(res);
    figs[i].is_image = 1;
    figs[i].image_mismatches = bad;
  }
}

int hct__parity_image_of(const hct_hostset_t *hs, int i, int *src) {
  *src = image_source(hs, i);
  if (*src < 0) return HCT_PC_IMAGE_NONE;
  return hs->bufs[i].spec->dtype == HCT_DT_BF16 ? HCT_PC_IMAGE_BF16 : HCT_PC_IMAGE_F16;
}

/* ---- the same figures from the card (kernels-src/common/parity_check.cu) - */

/* The kernels take hct_dtype_t's values as their dtype codes. */
_Static_assert(HCT_DT_F32 == HCT_PC_F32 && HCT_DT_BF16 == HCT_PC_BF16 && HCT_DT_F16 == HCT_PC_F16 &&
                   HCT_DT_U32 == HCT_PC_U32 && HCT_DT_I32 == HCT_PC_I32,
               "hct_parity.h's dtype codes must be hct_dtype_t's");

/* Blocks for n elements: about four elements a thread, at most
 * HCT_PC_MAX_BLOCKS; at least one, so the reduction always has a partial. */
static unsigned pc_blocks(uint64_t n, uint64_t *chunk) {
  const uint64_t per = (uint64_t)HCT_PC_THREADS * 4;
  uint64_t blocks = (n + per - 1) / per;
  blocks = blocks < 1 ? 1 : blocks > HCT_PC_MAX_BLOCKS ? HCT_PC_MAX_BLOCKS : blocks;
  *chunk = (n + blocks - 1) / blocks;
  return (unsigned)blocks;
}

void hct__pc_plan(const hct_hbuf_t *b, int image, hct_pc_plan_t *p) {
  memset(p, 0, sizeof *p);
  p->dt = (int)b->spec->dtype;
  p->image = image;
  p->n = b->elems;
  p->e_blocks = pc_blocks(p->n, &p->e_chunk);
  const layout_t L = layout_of(b);
  p->have_ref = b->ref != NULL;
  p->slices = L.slices;
  p->slice = L.slice;
  p->len = L.len;
  size_t per_slice;
  const size_t rows = kl_rows(&L, &per_slice);
  p->per_slice = per_slice;
  if (!p->have_ref) return;
  p->r_blocks = pc_blocks(p->slices * p->slice, &p->r_chunk);
  p->nkl = rows;
  p->kl_blocks = (unsigned)((rows + HCT_PC_ROW_THREADS - 1) / HCT_PC_ROW_THREADS);
}

void hct__parity_from_card(const hct_hbuf_t *b, const hct_pc_plan_t *p, const hct_pc_result_t *r,
                           int bitwise, hct_parity_figs_t *f) {
  memset(f, 0, sizeof *f);
  f->elems = b->elems;
  if (bitwise) {
    f->mismatches = (size_t)r->mismatches;
    f->n_first = (size_t)HCT_MIN(r->nfirst, (uint64_t)HCT_PC_FIRST);
    for (size_t j = 0; j < f->n_first; j++) {
      f->first_idx[j] = (size_t)r->first_idx[j];
      f->first_got[j] = r->first_got[j];
      f->first_want[j] = r->first_want[j];
    }
    f->first_mismatch = f->n_first > 0 ? f->first_idx[0] : 0;
  }
  f->unwritten = (size_t)r->unwritten;
  f->nonfinite = (size_t)r->nonfinite;
  finish_errors(f, r->se, r->sr, r->maxe, r->maxr);
  size_t per_slice;
  const layout_t L = layout_of(b);
  finish_rows(f, kl_rows(&L, &per_slice), p->have_ref, r->kl_sum, r->kl_max, (size_t)r->agree);
  if (p->image != HCT_PC_IMAGE_NONE) {
    f->is_image = 1;
    f->image_mismatches = (size_t)r->image_bad;
  }
}

/* ---- what the verification of timed outputs needs on every set ---------- */

typedef struct dist_ctx_s {
  const hct_hbuf_t *b;
  const void *a, *base;
  size_t *nonfinite;       /* per chunk */
  double *num, *den;       /* per chunk: max |a - base|, max |base| */
} dist_ctx_t;

static void nonfinite_chunks(void *arg, int begin, int end) {
  dist_ctx_t *c = arg;
  const hct_dtype_t dt = c->b->spec->dtype;
  for (int ch = begin; ch < end; ch++) {
    size_t e0 = (size_t)ch * CMP_CHUNK, e1 = HCT_MIN(c->b->elems, e0 + CMP_CHUNK), n = 0;
    if (dt == HCT_DT_F32) {
      const uint32_t *x = c->a;
      for (size_t e = e0; e < e1; e++) n += (x[e] & 0x7f800000u) == 0x7f800000u && x[e] != (uint32_t)HCT_POISON_F32;
    } else if (dt == HCT_DT_BF16 || dt == HCT_DT_F16) {
      const uint16_t *x = c->a, mask = dt == HCT_DT_BF16 ? 0x7f80 : 0x7c00;
      for (size_t e = e0; e < e1; e++) n += (x[e] & mask) == mask && x[e] != HCT_POISON_16;
    }
    c->nonfinite[ch] = n;
  }
}

size_t hct__parity_nonfinite(const hct_hbuf_t *b, const void *out) {
  const int n = (int)((b->elems + CMP_CHUNK - 1) / CMP_CHUNK);
  size_t *per = calloc(n > 0 ? (size_t)n : 1, sizeof *per);
  if (per == NULL) return b->elems; /* no memory: nothing may pass on it */
  dist_ctx_t c = {b, out, NULL, per, NULL, NULL};
  if (n <= 1) nonfinite_chunks(&c, 0, n);
  else hct__par_for(n, nonfinite_chunks, &c);
  size_t total = 0;
  for (int k = 0; k < n; k++) total += per[k];
  free(per);
  return total;
}

static void distance_chunks(void *arg, int begin, int end) {
  dist_ctx_t *c = arg;
  const float *x = c->a, *y = c->base;
  for (int ch = begin; ch < end; ch++) {
    size_t e0 = (size_t)ch * CMP_CHUNK, e1 = HCT_MIN(c->b->elems, e0 + CMP_CHUNK);
    /* A NaN (poison, or a NaN output) makes the distance infinite. */
    double num = 0, den = 0;
    int nan = 0;
    for (size_t e = e0; e < e1; e++) {
      double d = fabs((double)x[e] - (double)y[e]), r = fabs((double)y[e]);
      nan |= d != d;
      num = d > num ? d : num;
      den = r > den ? r : den;
    }
    c->num[ch] = nan ? INFINITY : num;
    c->den[ch] = den;
  }
}

double hct__parity_distance(const hct_hbuf_t *b, const void *a, const void *base) {
  if (b->spec->dtype != HCT_DT_F32) return 0;
  const int n = (int)((b->elems + CMP_CHUNK - 1) / CMP_CHUNK);
  double *num = calloc(2 * (n > 0 ? (size_t)n : 1), sizeof *num);
  if (num == NULL) return INFINITY;
  dist_ctx_t c = {b, a, base, NULL, num, num + n};
  if (n <= 1) distance_chunks(&c, 0, n);
  else hct__par_for(n, distance_chunks, &c);
  double mx = 0, den = 0;
  for (int k = 0; k < n; k++) {
    mx = fmax(mx, num[k]);
    den = fmax(den, c.den[k]);
  }
  free(num);
  return den > 0 ? mx / den : mx;
}
