/*
 * test_reference.c: the hc_read inputs (tuner/inputs.c, by the rules of
 * kernels-src/hc_read/manifest.json) and float64 reference, against the
 * shipped manifest:
 *  - the inputs are a function of the seed, never zero, at the scales the
 *    spec asks (weights by 1/sqrt(fan-in)); the token rows checked against
 *    float64 follow the manifest's rows rule;
 *  - the GPU reference (kernels-src/hc_read/reference.cu) agrees with the
 *    CPU cross-check of tests/ref_hc_read.c to 1e-12 per element at T = 1,
 *    8, 64 and 100 (sampled rows), with and without pending (skipped
 *    without a GPU; test_gpu_reference_matches_cpu says how "relative");
 *  - one output element recomputed by the direct formula from the inputs
 *    (an implementation that shares no code with the reference);
 *  - a float32 emulation of the canonical v1 order (fmaf, the butterflies,
 *    the CPU's 1/sqrt and exp) agrees with the reference to normwise
 *    relative error below 1e-5, the accuracy the tuner demands of v1 on
 *    the GPU.
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

#include "ref_hc_read.h"
#include "tuner.h"

static hct_op_t *op;
enum { S = 4, C = 2560, D = 10240, K = 320 };

static int setup(void **state) {
  (void)state;
  const char *dir = getenv("HCTUNE_KERNELS");
  int rc = hct__manifest_load(dir ? dir : "kernels-src", "hc_read", &op);
  if (rc != 0) {
    fprintf(stderr, "cannot load the hc_read manifest: %s\n", hct_last_error());
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  hct__manifest_free(op);
  return 0;
}

static void make_set(hct_hostset_t *s, int T, int pending, uint64_t seed) {
  int rc = hct__hostset_init(s, op, T, pending);
  if (rc != 0) fail_msg("hostset: %s", hct_last_error());
  rc = hct__inputs_fill(s, seed);
  if (rc != 0) fail_msg("fill: %s", hct_last_error());
}

static hct_hbuf_t *buf(hct_hostset_t *s, const char *name) {
  hct_hbuf_t *b = hct__hostset_buf(s, name);
  if (b == NULL) fail_msg("no buffer '%s'", name);
  return b;
}

static double elem(const hct_hbuf_t *b, size_t i) {
  switch (b->spec->dtype) {
  case HCT_DT_F32:
    return ((const float *)b->data)[i];
  case HCT_DT_BF16:
    return hct__bf16_to_f32(((const uint16_t *)b->data)[i]);
  case HCT_DT_F16:
    return hct__f16_to_f32(((const uint16_t *)b->data)[i]);
  default:
    fail_msg("unexpected dtype");
  }
  return 0;
}

static void test_inputs_shapes(void **state) {
  (void)state;
  hct_hostset_t s;
  make_set(&s, 3, 0, 1);
  assert_int_equal(buf(&s, "resid")->elems, 3 * S * C);
  assert_null(buf(&s, "pending")->data);
  assert_int_equal(buf(&s, "w_down")->elems, K * D);
  assert_int_equal(buf(&s, "mixed_f16")->elems, 3 * C);
  /* The reference is shaped when computed: T rows of C for mixed. */
  assert_null(buf(&s, "mixed")->ref);
  assert_int_equal(ref_hc_read_cpu(&s), 0);
  assert_non_null(buf(&s, "mixed")->ref);
  assert_int_equal(buf(&s, "mixed")->nrows, 3);
  assert_int_equal(buf(&s, "mixed")->token_elems, C);
  assert_int_equal(buf(&s, "mixed")->row_len, C);
  assert_int_equal(buf(&s, "resid")->token_elems, D);
  assert_int_equal(buf(&s, "resid")->row_len, C);
  hct__hostset_free(&s);
  assert_int_equal(hct__hostset_init(&s, op, 0, 0), HCT_EINVAL);
}

static void test_inputs_deterministic(void **state) {
  (void)state;
  hct_hostset_t a, b, c, d;
  /* The same values on 3 threads and on 1 (hct__par_for's split): each
   * chunk of a buffer draws from its own stream. */
  setenv("HCTUNE_THREADS", "3", 1);
  make_set(&a, 2, 1, 42);
  setenv("HCTUNE_THREADS", "1", 1);
  make_set(&b, 2, 1, 42);
  unsetenv("HCTUNE_THREADS");
  make_set(&c, 2, 1, 43);
  make_set(&d, 2, 0, 42);
  for (int i = 0; i < a.n; i++) {
    if (a.bufs[i].data == NULL || a.bufs[i].spec->role == HCT_BUF_OUTPUT) continue;
    const size_t bytes = a.bufs[i].elems * hct__dtype_size(a.bufs[i].spec->dtype);
    if (memcmp(a.bufs[i].data, b.bufs[i].data, bytes) != 0)
      fail_msg("'%s' differs for the same seed (on 3 threads and on 1)", a.bufs[i].spec->name);
    if (memcmp(a.bufs[i].data, c.bufs[i].data, bytes) == 0)
      fail_msg("'%s' is the same for another seed", a.bufs[i].spec->name);
    /* The other buffers do not move when pending is absent. */
    if (d.bufs[i].data != NULL && memcmp(a.bufs[i].data, d.bufs[i].data, bytes) != 0)
      fail_msg("'%s' depends on whether pending is present", a.bufs[i].spec->name);
  }
  hct__hostset_free(&a);
  hct__hostset_free(&b);
  hct__hostset_free(&c);
  hct__hostset_free(&d);
}

/* Never a zero; mean and standard deviation as asked, within sampling
 * error. */
static void test_inputs_scale(void **state) {
  (void)state;
  static const struct {
    const char *name;
    double mean, sd;
  } want[] = {
      {"resid", 0.0, 1.0},
      {"pending", 0.0, 1.0},
      {"w_norm", 1.0, 0.1},
      {"w_down", 0.0, 0.009882117688026186}, /* 1/sqrt(10240) */
      {"w_up", 0.0, 0.05590169943749474},    /* 1/sqrt(320) */
  };
  hct_hostset_t s;
  make_set(&s, 4, 1, 7);
  for (size_t w = 0; w < HCT_ARRAY_SIZE(want); w++) {
    hct_hbuf_t *b = buf(&s, want[w].name);
    double sum = 0, sum2 = 0;
    for (size_t i = 0; i < b->elems; i++) {
      const double v = elem(b, i);
      if (v == 0.0) fail_msg("'%s'[%zu] is zero", want[w].name, i);
      sum += v;
      sum2 += v * v;
    }
    const double n = (double)b->elems, mean = sum / n, sd = sqrt(sum2 / n - mean * mean);
    /* 6 standard errors, plus the bf16 rounding of a weight (2^-9). */
    const double tol_mean = 6 * want[w].sd / sqrt(n) + fabs(want[w].mean) * 0.004;
    if (fabs(mean - want[w].mean) > tol_mean || fabs(sd / want[w].sd - 1.0) > 0.03)
      fail_msg("'%s': mean %g sd %g, want %g and %g", want[w].name, mean, sd, want[w].mean,
               want[w].sd);
  }
  hct__hostset_free(&s);
}

/* One element of mixed by the formula, straight from the inputs. */
static double direct_mixed(hct_hostset_t *s, int t, int c) {
  hct_hbuf_t *R = buf(s, "resid"), *P = buf(s, "pending"), *wn = buf(s, "w_norm"),
             *wd = buf(s, "w_down"), *wu = buf(s, "w_up");
  double *xn = malloc(D * sizeof *xn), *lo = malloc(K * sizeof *lo);
  assert_non_null(xn);
  assert_non_null(lo);
  float rp[S][C];
  for (int st = 0; st < S; st++) {
    double ss = 0;
    for (int k = 0; k < C; k++) {
      const size_t e = (size_t)t * D + (size_t)st * C + k;
      rp[st][k] = P->data ? (float)elem(R, e) + (float)elem(P, e) : (float)elem(R, e);
      ss += (double)rp[st][k] * rp[st][k];
    }
    const double inv = 1.0 / sqrt(ss / C + 1e-6);
    for (int k = 0; k < C; k++) xn[st * C + k] = rp[st][k] * elem(wn, (size_t)st * C + k) * inv;
  }
  for (int j = 0; j < K; j++) {
    lo[j] = 0;
    for (int k = 0; k < D; k++) lo[j] += elem(wd, (size_t)j * D + k) * xn[k];
  }
  double m = 0;
  for (int st = 0; st < S; st++) {
    double u = 0;
    for (int j = 0; j < K; j++) u += elem(wu, (size_t)(st * C + c) * K + j) * lo[j];
    m += rp[st][c] / (1.0 + exp(-u));
  }
  free(xn);
  free(lo);
  return m;
}

static void check_reference(int pending) {
  hct_hostset_t s;
  make_set(&s, 3, pending, 99 + (uint64_t)pending);
  assert_int_equal(ref_hc_read_cpu(&s), 0);
  static const int probes[][2] = {{0, 0}, {1, 1234}, {2, C - 1}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(probes); i++) {
    const int t = probes[i][0], c = probes[i][1];
    const double want = direct_mixed(&s, t, c);
    const char *outs[] = {"mixed", "mixed_bf16", "mixed_f16"};
    for (int o = 0; o < 3; o++) {
      const hct_hbuf_t *b = buf(&s, outs[o]);
      assert_int_equal(b->row_len, C);
      const double got = b->ref[(size_t)t * C + c];
      /* The 16-bit outputs' reference is the image of the exact value. */
      const double image = o == 0 ? want
                           : o == 1 ? hct__bf16_to_f32(hct__f32_to_bf16((float)want))
                                    : hct__f16_to_f32(hct__f32_to_f16((float)want));
      if (o > 0 && got != image)
        fail_msg("%s ref[%d][%d] = %.17g, image of the direct formula %.17g", outs[o], t, c, got, image);
      else if (o == 0 && fabs(got - want) > 1e-12 * (1 + fabs(want)))
        fail_msg("%s ref[%d][%d] = %.17g, direct formula %.17g", outs[o], t, c, got, want);
    }
  }
  /* resid's reference is R' = fl(R + P) exactly (R without pending). */
  hct_hbuf_t *R = buf(&s, "resid"), *P = buf(&s, "pending");
  for (size_t e = 0; e < R->elems; e++) {
    const float want = P->data ? ((float *)R->data)[e] + ((float *)P->data)[e] : ((float *)R->data)[e];
    if (R->ref[e] != (double)want) fail_msg("resid ref[%zu] = %.9g, want %.9g", e, R->ref[e], want);
  }
  hct__hostset_free(&s);
}

static void test_reference_direct(void **state) {
  (void)state;
  check_reference(0);
  check_reference(1);
}

/* ---- the canonical order in float32 --------------------------------------------*/

/* The xor butterfly over n lanes (offsets n/2 .. 1), as the GPU runs it;
 * returns lane 0's value (all lanes agree). */
static float butterfly(float *v, int n) {
  float nv[32];
  for (int off = n / 2; off >= 1; off /= 2) {
    for (int l = 0; l < n; l++) nv[l] = v[l] + v[l ^ off];
    memcpy(v, nv, (size_t)n * sizeof *v);
  }
  return v[0];
}

/* The spec's v1, step by step, on the host in float32. */
static void emulate_v1(hct_hostset_t *s, float *mixed) {
  const int T = s->T;
  float *R = buf(s, "resid")->data, *P = buf(s, "pending")->data;
  const uint16_t *wn = buf(s, "w_norm")->data, *wd = buf(s, "w_down")->data,
                 *wu = buf(s, "w_up")->data;
  float *rp = malloc((size_t)T * D * sizeof *rp), *xn = malloc((size_t)T * D * sizeof *xn);
  float *lo = malloc((size_t)T * K * sizeof *lo), *g = malloc((size_t)T * D * sizeof *g);
  assert_true(rp && xn && lo && g);
  for (size_t e = 0; e < (size_t)T * D; e++) rp[e] = P ? R[e] + P[e] : R[e];
  for (int t = 0; t < T; t++)
    for (int st = 0; st < S; st++) {
      const float *x = rp + (size_t)t * D + (size_t)st * C;
      float a[256], w8[32];
      for (int i = 0; i < 256; i++) {
        a[i] = 0.0f;
        for (int c = i; c < C; c += 256) a[i] = fmaf(x[c], x[c], a[i]);
      }
      for (int w = 0; w < 8; w++) w8[w] = butterfly(a + 32 * w, 32);
      const float ss = butterfly(w8, 8);
      const float rs = 1.0f / sqrtf(ss / 2560.0f + 1e-6f);
      for (int c = 0; c < C; c++) {
        const float y = x[c] * hct__bf16_to_f32(wn[st * C + c]);
        xn[(size_t)t * D + (size_t)st * C + c] = y * rs;
      }
    }
  for (int t = 0; t < T; t++)
    for (int j = 0; j < K; j++) {
      float acc[32];
      for (int L = 0; L < 32; L++) {
        acc[L] = 0.0f;
        for (int q = 0; q < D / 256; q++)
          for (int e = 0; e < 8; e++) {
            const int k = 8 * (L + 32 * q) + e;
            acc[L] = fmaf(hct__bf16_to_f32(wd[(size_t)j * D + k]), xn[(size_t)t * D + k], acc[L]);
          }
      }
      lo[t * K + j] = butterfly(acc, 32);
    }
  for (int t = 0; t < T; t++)
    for (int i = 0; i < D; i++) {
      float acc[32];
      for (int L = 0; L < 32; L++) {
        acc[L] = 0.0f;
        for (int ch = L; ch < K / 8; ch += 32)
          for (int e = 0; e < 8; e++) {
            const int k = 8 * ch + e;
            acc[L] = fmaf(hct__bf16_to_f32(wu[(size_t)i * K + k]), lo[t * K + k], acc[L]);
          }
      }
      const float u = butterfly(acc, 32);
      g[(size_t)t * D + i] = 1.0f / (1.0f + expf(-u));
    }
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      const float *gt = g + (size_t)t * D, *r = rp + (size_t)t * D;
      float m = gt[c] * r[c];
      for (int st = 1; st < S; st++) m = fmaf(gt[st * C + c], r[st * C + c], m);
      mixed[t * C + c] = m;
    }
  free(rp), free(xn), free(lo), free(g);
}

static void check_emulation(int T, int pending) {
  hct_hostset_t s;
  make_set(&s, T, pending, 2024 + (uint64_t)T);
  assert_int_equal(ref_hc_read_cpu(&s), 0);
  float *mixed = malloc((size_t)T * C * sizeof *mixed);
  uint16_t *m16 = malloc((size_t)T * C * sizeof *m16);
  assert_true(mixed && m16);
  emulate_v1(&s, mixed);
  hct_parity_figs_t f;
  memset(&f, 0, sizeof f);
  hct__parity_metrics(buf(&s, "mixed"), mixed, &f);
  char js[512];
  hct__parity_json(&f, js, sizeof js);
  printf("v1 in float32 on the CPU, T=%d%s: mixed %s\n", T, pending ? " with pending" : "", js);
  if (!(f.rel_err < 1e-5)) fail_msg("normwise relative error %g, want < 1e-5", f.rel_err);
  assert_int_equal(f.unwritten, 0);
  assert_int_equal(f.nonfinite, 0);
  assert_true(f.kl_mean < 1e-9);
  /* The 16-bit images: error of the format's rounding, not more. */
  static const struct {
    const char *name;
    uint16_t (*cvt)(float);
    double eps;
  } imgs[] = {{"mixed_bf16", hct__f32_to_bf16, 1.0 / 256}, {"mixed_f16", hct__f32_to_f16, 1.0 / 1024}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(imgs); i++) {
    for (int e = 0; e < T * C; e++) m16[e] = imgs[i].cvt(mixed[e]);
    hct__parity_metrics(buf(&s, imgs[i].name), m16, &f);
    hct__parity_json(&f, js, sizeof js);
    printf("  %s %s\n", imgs[i].name, js);
    if (!(f.rel_err < imgs[i].eps)) fail_msg("%s: error %g", imgs[i].name, f.rel_err);
  }
  free(mixed);
  free(m16);
  hct__hostset_free(&s);
}

static void test_v1_float32_accuracy(void **state) {
  (void)state;
  check_emulation(1, 0);
  check_emulation(2, 1);
}

/* The rows rule of the manifest (sample 64): every row up to T = 64;
 * above, the first, the last and 62 others from the seed, distinct and
 * ascending, the same for the same seed. */
static void test_rows_rule(void **state) {
  (void)state;
  assert_int_equal(op->reference.sample, 64);
  assert_true(strlen(op->reference.why) > 10);
  static int32_t a[40000], b[40000], c[40000];
  for (int T = 1; T <= 64; T += 21) {
    assert_int_equal(hct__inputs_rows(op, T, 5, a), T);
    for (int t = 0; t < T; t++) assert_int_equal(a[t], t);
  }
  const int Ts[] = {65, 66, 200, 32768};
  for (size_t k = 0; k < HCT_ARRAY_SIZE(Ts); k++) {
    const int T = Ts[k];
    assert_int_equal(hct__inputs_rows(op, T, 77, a), 64);
    assert_int_equal(hct__inputs_rows(op, T, 77, b), 64);
    assert_int_equal(hct__inputs_rows(op, T, 78, c), 64);
    assert_memory_equal(a, b, 64 * sizeof *a);
    assert_int_equal(a[0], 0);
    assert_int_equal(a[63], T - 1);
    for (int n = 1; n < 64; n++)
      if (a[n] <= a[n - 1]) fail_msg("T=%d: rows[%d] = %d after %d: not distinct ascending", T, n, a[n], a[n - 1]);
    if (T > 70 && memcmp(a, c, 64 * sizeof *a) == 0) fail_msg("T=%d: another seed drew the same rows", T);
  }
  /* hct__inputs_fill draws them with the inputs. */
  hct_hostset_t s;
  assert_int_equal(hct__hostset_init(&s, op, 100, 0), 0);
  assert_int_equal(hct__inputs_fill(&s, 9), 0);
  assert_int_equal(s.nrows, 64);
  assert_int_equal(hct__inputs_rows(op, 100, 9, a), 64);
  assert_memory_equal(s.rows, a, 64 * sizeof *a);
  hct__hostset_free(&s);
}

/*
 * The GPU reference against the CPU one: inputs drawn by tuner/inputs.c at
 * T = 1, 8, 64 (every row) and 100 (64 sampled rows), with and without
 * pending; the template compiled by the product's path
 * (hct__reference_job, hct__compile_one) and run by hct__reference_run.
 * Both compute in float64 in the same order with products and sums apart,
 * so they differ only where the GPU's exp differs from the CPU's in the
 * last ulp: every element must be within 1e-12 of the CPU's, relative to
 * its magnitude, or, for an element that cancels to below 1/100 of its
 * KL row's largest, relative to that hundredth (a gate's last ulp moves
 * such an element by ~1e-15 of the row's scale, which is no error of the
 * reference).  resid's reference (a float32 sum) must be exact.  Skipped
 * without a GPU.
 */
static void test_gpu_reference_matches_cpu(void **state) {
  (void)state;
  hct_device_t dev;
  if (hct__device_find("0", &dev) != 0) {
    printf("skipped: no GPU: %s (this test shows the GPU reference of hc_read within 1e-12 of the CPU's)\n",
           hct_last_error());
    skip();
  }
  hct_compile_job_t job;
  assert_int_equal(hct__reference_job(op, dev.backend, dev.arch, &job), 0);
  if (hct__compile_one(&job) != 0 || job.status != 0) fail_msg("reference compile: %s", job.error);
  hct_gpu_t *g;
  assert_int_equal(hct__gpu_open(&dev, &g), 0);
  hct_cand_t ref;
  if (hct__reference_load(g, op, job.image, job.image_size, &ref) != 0) fail_msg("load: %s", hct_last_error());
  static const int Ts[] = {1, 8, 64, 100};
  for (size_t k = 0; k < HCT_ARRAY_SIZE(Ts); k++)
    for (int pending = 0; pending <= 1; pending++) {
      const int T = Ts[k];
      hct_hostset_t s;
      make_set(&s, T, pending, 31337 + (uint64_t)T * 2 + (uint64_t)pending);
      hct_devset_t d;
      assert_int_equal(hct__devset_alloc(g, &s, &d), 0);
      assert_int_equal(hct__devset_upload(g, &s, &d), 0);
      uint64_t t0 = hct__now_ns();
      if (hct__reference_run(g, &ref, &s, &d, 1) != 0) fail_msg("T=%d: %s", T, hct_last_error());
      const double gpu_ms = (double)(hct__now_ns() - t0) / 1e6;
      double *gpu[HCT_MAX_BUFFERS] = {0};
      for (int i = 0; i < s.n; i++) {
        gpu[i] = s.bufs[i].ref;
        s.bufs[i].ref = NULL;
      }
      assert_int_equal(ref_hc_read_cpu(&s), 0);
      size_t same = 0, total = 0;
      double worst = 0;
      for (int i = 0; i < s.n; i++) {
        const hct_hbuf_t *b = &s.bufs[i];
        if (b->ref == NULL) continue;
        assert_non_null(gpu[i]);
        const int exact = strcmp(b->spec->name, "resid") == 0;
        const size_t len = (size_t)b->row_len;
        double rowmax = 0;
        for (size_t e = 0; e < (size_t)b->nrows * b->token_elems; e++) {
          if (e % len == 0) {
            rowmax = 0;
            for (size_t j = e; j < e + len; j++) rowmax = fmax(rowmax, fabs(b->ref[j]));
          }
          const double cpu = b->ref[e], x = gpu[i][e], diff = fabs(x - cpu);
          total++;
          same += memcmp(&x, &cpu, sizeof x) == 0;
          const double rel = diff / fmax(fabs(cpu), 1e-2 * rowmax);
          worst = fmax(worst, rel);
          if (exact ? diff != 0 : !(rel <= 1e-12))
            fail_msg("T=%d%s: %s ref row %zu elem %zu: GPU %.17g, CPU %.17g (relative %.3g)", T,
                     pending ? " with pending" : "", b->spec->name, e / b->token_elems, e % b->token_elems,
                     x, cpu, rel);
        }
        free(gpu[i]);
      }
      printf("T=%d%s: %d rows, GPU reference %.1f ms; %zu of %zu elements bitwise equal to the CPU's, worst relative %.3g\n",
             T, pending ? " with pending" : "", s.nrows, gpu_ms, same, total, worst);
      hct__devset_free(g, &d);
      hct__hostset_free(&s);
    }
  hct__run_unload(g, &ref);
  hct__gpu_close(g);
  hct__compile_job_clear(&job);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inputs_shapes),     cmocka_unit_test(test_inputs_deterministic),
      cmocka_unit_test(test_inputs_scale),      cmocka_unit_test(test_reference_direct),
      cmocka_unit_test(test_v1_float32_accuracy), cmocka_unit_test(test_rows_rule),
      cmocka_unit_test(test_gpu_reference_matches_cpu),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
