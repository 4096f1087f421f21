/*
 * test_wgmma.c: hc_read_prefill's Hopper variants wgmma_pu and wgmma_pb
 * (kernels-src/hc_read_prefill/wgmma_fn.cu, wgmma.cu and the up kernel of
 * wgmma_pu.h) stage by stage on an sm_90 card, so that one GPU run tells a
 * wrong operand layout (a descriptor, a swizzle, a fragment map) from a
 * wrong pipeline, and where: it runs the variant's launches as the tuner
 * does (tuner/run.c, tensor maps and all), then checks each intermediate
 * against float64 computed here from the previous stage's *device* result:
 *   R'  resid after the read == fl(R + P), every element (with pending);
 *   xn  the norm, bf16, against the exact norm of R' (sampled rows);
 *   lo  xn . w_down^T from the device's xn, bf16 (sampled rows); for
 *       wgmma_pu, which has no xn, from the exact norm of R' (looser);
 *   mixed  the gate and the mix from the device's lo (sampled rows), and
 *       mixed_bf16 / mixed_f16 the exact images of mixed (every element).
 * A stage that fails prints its first wrong elements (row, column, got,
 * want), how many are wrong, and for the first one the (row, column) whose
 * exact value it holds, when some element of the sampled rows matches: a
 * transposed or permuted layout shows as a pattern there.  Then each
 * launch and the whole read are timed (hot, events) at T = 8192.
 *
 * Skips without an sm_90 card or NVRTC, saying which.  Environment:
 *   HCT_WGMMA_VARIANT  the variants checked (default "wgmma_pu wgmma_pb",
 *                    those the manifest has)
 *   HCT_WGMMA_POINT  one point as JSON ({"DBM":64,...}); default: points
 *                    covering every parameter value of each variant
 *   HCT_WGMMA_T      token counts checked (default "16 100 2048")
 *   HCT_WGMMA_BENCH  token count timed (default 8192; 0: none)
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tuner.h"

enum { S = 4, C = 2560, D = 10240, K = 320 };
#define MAX_ROWS 48

static const struct {
  const char *variant, *point;
} default_points[] = {
    /* Every value of the manifest's space. */
    {"wgmma_pu", "{\"FSTAGES\":3,\"MC\":1,\"FSPLIT\":4,\"PBM\":64,\"PBC\":32,\"NCW\":4,\"PST\":2}"},
    {"wgmma_pu", "{\"FSTAGES\":3,\"MC\":1,\"FSPLIT\":1,\"PBM\":64,\"PBC\":32,\"NCW\":2,\"PST\":2}"},
    {"wgmma_pb", "{\"DBM\":128,\"DSTAGES\":4,\"DNS\":2,\"PBM\":64,\"PBC\":32,\"NCW\":4,\"PST\":2}"},
    {"wgmma_pb", "{\"DBM\":64,\"DSTAGES\":4,\"DNS\":1,\"PBM\":64,\"PBC\":32,\"NCW\":2,\"PST\":2}"},
};

typedef struct {
  hct_device_t dev;
  hct_gpu_t *g;
  hct_op_t *op;
  const hct_variant_t *v;
} env_t;

static env_t E;

/* ---- inputs --------------------------------------------------------------- */

static uint16_t bf16_nonzero(hct_rng_t *r, double mean, double sd) {
  for (;;) {
    uint16_t h = hct__f32_to_bf16((float)(mean + sd * hct__rng_normal(r)));
    if ((h & 0x7fff) != 0) return h;
  }
}

static float f32_nonzero(hct_rng_t *r) {
  for (;;) {
    float f = (float)hct__rng_normal(r);
    if (f != 0.0f) return f;
  }
}

static void fill(hct_hostset_t *hs, uint64_t seed) {
  hct_rng_t r;
  hct__rng_seed(&r, seed);
  for (int i = 0; i < hs->n; i++) {
    hct_hbuf_t *b = &hs->bufs[i];
    const char *n = b->spec->name;
    if (b->data == NULL || b->spec->role == HCT_BUF_OUTPUT) continue;
    for (size_t e = 0; e < b->elems; e++) {
      if (strcmp(n, "w_norm") == 0) ((uint16_t *)b->data)[e] = bf16_nonzero(&r, 1.0, 0.1);
      else if (strcmp(n, "w_down") == 0) ((uint16_t *)b->data)[e] = bf16_nonzero(&r, 0, 1 / sqrt(D));
      else if (strcmp(n, "w_up") == 0) ((uint16_t *)b->data)[e] = bf16_nonzero(&r, 0, 1 / sqrt(K));
      else ((float *)b->data)[e] = f32_nonzero(&r);
    }
  }
}

/* The token rows checked: every row up to MAX_ROWS, else the first 20, the
 * rows around the 64 and 128 tile edges, the last, and a spread between. */
static int sample_rows(int T, int *rows) {
  int n = 0;
  if (T <= MAX_ROWS) {
    for (int t = 0; t < T; t++) rows[n++] = t;
    return n;
  }
  for (int t = 0; t < 20; t++) rows[n++] = t;
  static const int edges[] = {63, 64, 65, 127, 128, 129};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
    if (edges[i] < T && edges[i] >= 20) rows[n++] = edges[i];
  while (n < MAX_ROWS - 1) {
    int t = rows[n - 1] + 1 + (T - rows[n - 1]) / (MAX_ROWS - n + 1);
    if (t >= T - 1) break;
    rows[n++] = t;
  }
  rows[n++] = T - 1;
  return n;
}

/* ---- comparing a stage ------------------------------------------------------ */

/* got[n][cols] against want[n][cols] (rows[n] their token rows): prints the
 * first wrong ones and, for the first, where its value belongs. */
static int compare(const char *stage, const char *label, int T, const int *rows, int n, int cols,
                   const double *got, const double *want, double rel, double abs_tol) {
  size_t bad = 0, shown = 0, first = (size_t)-1;
  for (int r = 0; r < n; r++)
    for (int j = 0; j < cols; j++) {
      size_t e = (size_t)r * cols + j;
      double d = fabs(got[e] - want[e]);
      if (d <= rel * fabs(want[e]) + abs_tol) continue;
      if (bad++ == 0) first = e;
      if (shown < 8) {
        printf("  %s %s T=%d: %s[%d][%d] = %.6g, want %.6g\n", label, stage, T, stage, rows[r], j,
               got[e], want[e]);
        shown++;
      }
    }
  if (bad == 0) return 0;
  printf("  %s %s T=%d: %zu of %zu checked elements wrong\n", label, stage, T, bad,
         (size_t)n * cols);
  int found = 0;
  for (int r = 0; r < n && found < 3; r++)
    for (int j = 0; j < cols && found < 3; j++) {
      size_t e = (size_t)r * cols + j;
      if (e == first) continue;
      if (fabs(got[first] - want[e]) <= rel * fabs(want[e]) + abs_tol) {
        printf("  %s %s T=%d: %s[%d][%zu] holds the value of [%d][%d]\n", label, stage, T, stage,
               rows[first / cols], first % cols, rows[r], j);
        found++;
      }
    }
  if (found == 0)
    printf("  %s %s T=%d: the first wrong value is no element of the sampled rows\n", label, stage,
           T);
  return 1;
}

static double bf(uint16_t h) { return (double)hct__bf16_to_f32(h); }

/* A device 16-bit element still holding the scratch poison (0x7fc0dead as
 * two halves) or any NaN / huge value: never written. */
static int unwritten16(uint16_t h) {
  double v = bf(h);
  return h == 0xdead || h == 0x7fc0 || isnan(v) || fabs(v) > 1e6;
}

/* ---- one point at one T ----------------------------------------------------- */

/* Candidate c with only its launch l (the tensor maps and scratch of c). */
static hct_variant_t one_launch_variant[HCT_MAX_LAUNCHES];
static hct_cand_t only_launch(const hct_cand_t *c, int l) {
  hct_cand_t k = *c;
  hct_variant_t *one = &one_launch_variant[l];
  *one = *c->v;
  one->launches[0] = c->v->launches[l];
  one->n_launches = 1;
  k.v = one;
  k.fn[0] = c->fn[l];
  return k;
}

/* The index of scratch `name`, -1 when the variant has none. */
static int scratch_index(const hct_variant_t *v, const char *name) {
  for (int i = 0; i < v->n_scratch; i++)
    if (strcmp(v->scratch[i].name, name) == 0) return i;
  return -1;
}

static int check_point(const hct_cand_t *c, int T, int pending) {
  char label[400];
  snprintf(label, sizeof label, "%s %s%s", c->v->name, c->params, pending ? " pending" : "");
  hct_hostset_t hs;
  assert_int_equal(hct__hostset_init(&hs, E.op, T, pending), 0);
  fill(&hs, 1000 + (uint64_t)T * 2 + (uint64_t)pending);
  hct_devset_t d;
  hct_scratchset_t s;
  if (hct__devset_alloc(E.g, &hs, &d) != 0 || hct__devset_upload(E.g, &hs, &d) != 0 ||
      hct__scratch_alloc(E.g, c, T, &s) != 0)
    fail_msg("%s T=%d: buffers: %s", label, T, hct_last_error());
  for (int i = 0; i < c->v->n_scratch; i++)
    assert_int_equal(hct__gpu_fill32(E.g, s.ptr[i], HCT_POISON_F32, s.bytes[i] / 4), 0);
  /* One launch at a time, each synchronised, so a failing one is named
   * (a wait that times out leaves its outputs unwritten: wgmma.h). */
  for (int l = 0; l < c->v->n_launches; l++) {
    hct_cand_t k = only_launch(c, l);
    uint64_t t0 = hct__now_ns();
    if (hct__run_launches(E.g, &k, &hs, &d, &s) != 0 || hct__gpu_sync(E.g) != 0)
      fail_msg("%s T=%d: launch %d (%s) failed: %s", label, T, l, c->v->launches[l].entry,
               hct_last_error());
    double ms = (double)(hct__now_ns() - t0) / 1e6;
    if (ms > 1000)
      printf("  %s T=%d: launch %d (%s) took %.0f ms: a wait timed out?\n", label, T, l,
             c->v->launches[l].entry, ms);
  }

  const hct_hbuf_t *bR = hct__hostset_buf(&hs, "resid"), *bP = hct__hostset_buf(&hs, "pending"),
                   *bW = hct__hostset_buf(&hs, "w_norm"), *bWd = hct__hostset_buf(&hs, "w_down"),
                   *bWu = hct__hostset_buf(&hs, "w_up");
  const size_t nR = (size_t)T * D, nM = (size_t)T * C;
  float *resid = malloc(nR * 4), *mixed = malloc(nM * 4);
  uint16_t *xn = malloc(nR * 2), *lo = malloc((size_t)T * K * 2), *mb = malloc(nM * 2),
           *mh = malloc(nM * 2);
  assert_true(resid && mixed && xn && lo && mb && mh);
  const int ix = scratch_index(c->v, "xn"), il = scratch_index(c->v, "lo");
  if (il < 0) fail_msg("%s: no scratch 'lo'", label);
  int rc = hct__gpu_download(E.g, resid, d.ptr[bR - hs.bufs], nR * 4);
  if (rc == 0) rc = hct__gpu_download(E.g, mixed, d.ptr[hct__hostset_buf(&hs, "mixed") - hs.bufs], nM * 4);
  if (rc == 0) rc = hct__gpu_download(E.g, mb, d.ptr[hct__hostset_buf(&hs, "mixed_bf16") - hs.bufs], nM * 2);
  if (rc == 0) rc = hct__gpu_download(E.g, mh, d.ptr[hct__hostset_buf(&hs, "mixed_f16") - hs.bufs], nM * 2);
  if (rc == 0 && ix >= 0) rc = hct__gpu_download(E.g, xn, s.ptr[ix], nR * 2);
  if (rc == 0) rc = hct__gpu_download(E.g, lo, s.ptr[il], (size_t)T * K * 2);
  if (rc != 0) fail_msg("%s T=%d: download: %s", label, T, hct_last_error());

  int failed = 0;
  const float *R = bR->data, *P = pending ? bP->data : NULL;
  /* R': bit for bit, every element. */
  size_t rbad = 0;
  for (size_t e = 0; e < nR; e++) {
    float want = P ? R[e] + P[e] : R[e];
    if (memcmp(&want, &resid[e], 4) != 0 && rbad++ < 4)
      printf("  %s R' T=%d: resid[%zu][%zu] = %.9g, want %.9g\n", label, T, e / D, e % D,
             resid[e], want);
  }
  if (rbad) printf("  %s R' T=%d: %zu elements wrong\n", label, T, rbad), failed = 1;
  /* Every element of xn and lo written. */
  size_t ux = 0, ul = 0;
  for (size_t e = 0; ix >= 0 && e < nR; e++) ux += unwritten16(xn[e]);
  for (size_t e = 0; e < (size_t)T * K; e++) ul += unwritten16(lo[e]);
  if (ux || ul) printf("  %s T=%d: %zu of xn, %zu of lo unwritten\n", label, T, ux, ul), failed = 1;

  int rows[MAX_ROWS];
  const int n = sample_rows(T, rows);
  double *got = malloc((size_t)n * D * 8), *want = malloc((size_t)n * D * 8);
  assert_true(got && want);
  const uint16_t *wn = bW->data, *wd = bWd->data, *wu = bWu->data;
  /* xn: the exact norm of the device's R' (want), and the device's (got;
   * the exact one again without an xn scratch, for lo below). */
  for (int r = 0; r < n; r++) {
    const float *x = resid + (size_t)rows[r] * D;
    for (int st = 0; st < S; st++) {
      double ss = 0;
      for (int ch = 0; ch < C; ch++) ss += (double)x[st * C + ch] * x[st * C + ch];
      const double rs = 1.0 / sqrt(ss / C + 1e-6);
      for (int ch = 0; ch < C; ch++) {
        const size_t e = (size_t)r * D + st * C + ch;
        want[e] = (double)x[st * C + ch] * bf(wn[st * C + ch]) * rs;
        got[e] = ix >= 0 ? bf(xn[(size_t)rows[r] * D + st * C + ch]) : want[e];
      }
    }
  }
  if (ix >= 0) failed |= compare("xn", label, T, rows, n, D, got, want, 1.0 / 128, 1e-6);
  /* lo from the device's xn (or the exact norm), then its rms per row for
   * the tolerance of a variant that rounds elsewhere. */
  double *lo_want = malloc((size_t)n * K * 8), *lo_got = malloc((size_t)n * K * 8);
  assert_true(lo_want && lo_got);
  double lo_ms = 0;
  for (int r = 0; r < n; r++)
    for (int j = 0; j < K; j++) {
      double a = 0;
      const double *xr = got + (size_t)r * D;
      const uint16_t *wr = wd + (size_t)j * D;
      for (int k = 0; k < D; k++) a += xr[k] * bf(wr[k]);
      lo_want[(size_t)r * K + j] = a;
      lo_got[(size_t)r * K + j] = bf(lo[(size_t)rows[r] * K + j]);
      lo_ms += a * a;
    }
  const double lo_rms = sqrt(lo_ms / ((double)n * K));
  failed |= compare("lo", label, T, rows, n, K, lo_got, lo_want, 1.0 / 128,
                    ix >= 0 ? 1e-3 : 0.02 * lo_rms);
  free(lo_want), free(lo_got);
  /* mixed from the device's lo and R'. */
  for (int r = 0; r < n; r++) {
    const uint16_t *lr = lo + (size_t)rows[r] * K;
    const float *x = resid + (size_t)rows[r] * D;
    for (int ch = 0; ch < C; ch++) {
      double m = 0;
      for (int st = 0; st < S; st++) {
        const uint16_t *wr = wu + (size_t)(st * C + ch) * K;
        double u = 0;
        for (int k = 0; k < K; k++) u += bf(lr[k]) * bf(wr[k]);
        m += x[st * C + ch] / (1.0 + exp(-u));
      }
      want[(size_t)r * C + ch] = m;
      got[(size_t)r * C + ch] = mixed[(size_t)rows[r] * C + ch];
    }
  }
  failed |= compare("mixed", label, T, rows, n, C, got, want, 1e-4, 1e-5);
  /* The images, every element. */
  size_t ib = 0;
  for (size_t e = 0; e < nM; e++)
    ib += mb[e] != hct__f32_to_bf16(mixed[e]) || mh[e] != hct__f32_to_f16(mixed[e]);
  if (ib) printf("  %s T=%d: %zu image elements not the rounding of mixed\n", label, T, ib), failed = 1;
  printf("%s %s T=%d: %s\n", failed ? "FAIL" : "ok  ", label, T,
         failed ? "see above" : "R', xn, lo, mixed and its images right");

  free(got), free(want), free(resid), free(mixed), free(xn), free(lo), free(mb), free(mh);
  hct__scratch_free(E.g, &s);
  hct__devset_free(E.g, &d);
  hct__hostset_free(&hs);
  return failed;
}

/* Each launch alone and the whole read, hot: the mean of 20 after a warm-up. */
static void bench(const hct_cand_t *c, int T) {
  hct_hostset_t hs;
  assert_int_equal(hct__hostset_init(&hs, E.op, T, 0), 0);
  fill(&hs, 7);
  hct_devset_t d;
  hct_scratchset_t s;
  if (hct__devset_alloc(E.g, &hs, &d) != 0 || hct__devset_upload(E.g, &hs, &d) != 0 ||
      hct__scratch_alloc(E.g, c, T, &s) != 0)
    fail_msg("bench T=%d: buffers: %s", T, hct_last_error());
  hct_event_t *e0, *e1;
  assert_int_equal(hct__gpu_event_create(E.g, &e0), 0);
  assert_int_equal(hct__gpu_event_create(E.g, &e1), 0);
  for (int l = -1; l < c->v->n_launches; l++) {
    hct_cand_t k = l < 0 ? *c : only_launch(c, l);
    float ms = 0;
    int rc = hct__run_launches(E.g, &k, &hs, &d, &s);
    if (rc == 0) rc = hct__gpu_event_record(E.g, e0);
    for (int i = 0; rc == 0 && i < 20; i++) rc = hct__run_launches(E.g, &k, &hs, &d, &s);
    if (rc == 0) rc = hct__gpu_event_record(E.g, e1);
    if (rc == 0) rc = hct__gpu_event_elapsed(E.g, e0, e1, &ms);
    if (rc != 0) fail_msg("bench T=%d: %s", T, hct_last_error());
    printf("wgmma-time T=%d %s %s %s: %.1f us\n", T, c->v->name, c->params,
           l < 0 ? "read" : c->v->launches[l].entry, ms * 1000 / 20);
  }
  hct__gpu_event_destroy(E.g, e0);
  hct__gpu_event_destroy(E.g, e1);
  hct__scratch_free(E.g, &s);
  hct__devset_free(E.g, &d);
  hct__hostset_free(&hs);
}

/* Compiles E.v at the point `ptext` and checks it at every T of tlist (then
 * times it at bench_T when right): 0 right, 1 wrong, -1 not a point of
 * E.v (skipped, said). */
static int check_variant_point(const char *ptext, const char *tlist, int bench_T) {
  hct_point_t pt;
  if (hct__point_parse(E.v, ptext, &pt) != 0) {
    printf("skip %s %s: %s\n", E.v->name, ptext, hct_last_error());
    return -1;
  }
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  job.backend = HCT_BACKEND_CUDA;
  hct__strlcpy(job.arch, E.dev.arch, sizeof job.arch);
  job.op = E.op;
  job.variant = E.v;
  job.point = pt;
  if (hct__compile_one(&job) != 0) fail_msg("compile: %s", job.error);
  printf("compiled %s %s: %d registers, %d spill bytes\n", E.v->name, ptext, job.regs,
         job.spill_bytes);
  hct_cand_t c;
  if (hct__run_load(E.g, E.op, E.v, &pt, job.image, job.image_size, &c) != 0)
    fail_msg("load: %s", hct_last_error());
  int failed = 0;
  char ts[256];
  hct__strlcpy(ts, tlist ? tlist : "16 100 2048", sizeof ts);
  for (char *tok = strtok(ts, " ,"); tok; tok = strtok(NULL, " ,")) {
    const int T = atoi(tok);
    char why[256];
    if (!hct__run_supports(&c, &E.dev, T, why, sizeof why)) {
      printf("skip %s %s T=%d: %s\n", E.v->name, c.params, T, why);
      continue;
    }
    for (int pend = T <= 128 ? 0 : 1; pend <= 1; pend++) failed |= check_point(&c, T, pend);
  }
  if (bench_T > 0 && !failed) bench(&c, bench_T);
  hct__run_unload(E.g, &c);
  hct__compile_job_clear(&job);
  return failed;
}

static void test_wgmma_stages(void **state) {
  (void)state;
  hct_device_t devs[8];
  int n = hct__devices(devs, 8), found = -1;
  for (int i = 0; i < n && found < 0; i++)
    if (devs[i].backend == HCT_BACKEND_CUDA && devs[i].arch_num == 90) found = i;
  if (found < 0) {
    printf("SKIP: no sm_90 card here (%s): wgmma is sm_90a code\n",
           n < 0 ? hct_last_error() : "none listed");
    skip();
  }
  char ver[64];
  if (hct__compiler_version(HCT_BACKEND_CUDA, ver, sizeof ver) != 0) {
    printf("SKIP: NVRTC cannot be loaded: %s\n", hct_last_error());
    skip();
  }
  E.dev = devs[found];
  char dir[1024];
  assert_int_equal(hct__kernels_dir(dir, sizeof dir), 0);
  if (hct__manifest_load(dir, "hc_read_prefill", &E.op) != 0) fail_msg("%s", hct_last_error());
  if (hct__gpu_open(&E.dev, &E.g) != 0) fail_msg("open: %s", hct_last_error());
  printf("card: %s %s, %s\n", E.dev.name, E.dev.arch, ver);

  const char *one = getenv("HCT_WGMMA_POINT"), *vars = getenv("HCT_WGMMA_VARIANT");
  if (vars == NULL) vars = "wgmma_pu wgmma_pb";
  const char *tlist = getenv("HCT_WGMMA_T");
  const char *bt = getenv("HCT_WGMMA_BENCH");
  const int bench_T = bt ? atoi(bt) : 8192;
  int npts = (int)(sizeof default_points / sizeof default_points[0]);
  int failed = 0, ran = 0;
  char vlist[128];
  hct__strlcpy(vlist, vars, sizeof vlist);
  const char *vnames[8];
  int nv = 0;
  for (char *tok = strtok(vlist, " ,"); tok && nv < 8; tok = strtok(NULL, " ,")) vnames[nv++] = tok;
  for (int vi = 0; vi < nv; vi++) {
    E.v = hct__variant_find(E.op, vnames[vi]);
    if (E.v == NULL) {
      printf("skip %s: not a variant of hc_read_prefill here (paste its manifest entry)\n",
             vnames[vi]);
      continue;
    }
    for (int p = 0; p < (one ? 1 : npts); p++) {
      if (!one && strcmp(default_points[p].variant, E.v->name) != 0) continue;
      int rc = check_variant_point(one ? one : default_points[p].point, tlist, bench_T);
      if (rc >= 0) ran++;
      if (rc > 0) failed = 1;
    }
  }
  hct__gpu_close(E.g);
  hct__manifest_free(E.op);
  if (ran == 0) fail_msg("no variant of '%s' to check", vars);
  if (failed) fail_msg("a stage is wrong (the lines above say which and where)");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_wgmma_stages)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
