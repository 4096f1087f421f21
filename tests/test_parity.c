/*
 * test_parity.c: the parity figures of tuner/parity.c (bitwise compare,
 * poison, normwise error, KL, argmax) and the host bf16/f16 conversions of
 * tuner/hostset.c, which must give the kernels' bits
 * (kernels-src/common/hct_convert.h, compiled here as C) for every input.
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

#include "../kernels-src/common/hct_convert.h"

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A buffer description of n elements of dtype dt with a float64 ref. */
static hct_buffer_t spec_f32 = {.name = "out", .dtype = HCT_DT_F32, .role = HCT_BUF_OUTPUT, .elems = "N"};
static hct_buffer_t spec_bf16 = {.name = "out16", .dtype = HCT_DT_BF16, .role = HCT_BUF_OUTPUT, .elems = "N"};

/* ---- bitwise ---------------------------------------------------------------*/

static void test_bitwise_finds_one_ulp_and_poison(void **state) {
  (void)state;
  enum { N = 300 };
  float ref[N], out[N];
  for (int i = 0; i < N; i++) ref[i] = out[i] = sinf((float)i) * 3.0f + 0.5f;
  hct_hbuf_t b = {.spec = &spec_f32, .elems = N};
  hct_parity_figs_t f;
  memset(&f, 0xff, sizeof f);
  hct__parity_bitwise(&b, out, ref, &f);
  assert_int_equal(f.mismatches, 0);
  assert_int_equal(f.unwritten, 0);
  assert_int_equal(f.elems, N);

  out[137] = bitsf(fbits(out[137]) + 1); /* one ulp */
  hct__parity_bitwise(&b, out, ref, &f);
  assert_int_equal(f.mismatches, 1);
  assert_int_equal(f.first_mismatch, 137);
  assert_int_equal(f.unwritten, 0);

  uint32_t poison = HCT_POISON_F32;
  memcpy(&out[20], &poison, 4);
  hct__parity_bitwise(&b, out, ref, &f);
  assert_int_equal(f.mismatches, 2);
  assert_int_equal(f.first_mismatch, 20);
  assert_int_equal(f.unwritten, 1);

  /* -0.0 and +0.0 are equal numbers but not equal bits. */
  out[137] = ref[137];
  out[20] = ref[20];
  ref[7] = 0.0f;
  out[7] = -0.0f;
  hct__parity_bitwise(&b, out, ref, &f);
  assert_int_equal(f.mismatches, 1);
  assert_int_equal(f.first_mismatch, 7);
}

static void test_bitwise_16bit(void **state) {
  (void)state;
  enum { N = 64 };
  uint16_t ref[N], out[N];
  for (int i = 0; i < N; i++) ref[i] = out[i] = hct__f32_to_bf16((float)i * 0.37f - 3.0f);
  hct_hbuf_t b = {.spec = &spec_bf16, .elems = N};
  hct_parity_figs_t f;
  hct__parity_bitwise(&b, out, ref, &f);
  assert_int_equal(f.mismatches, 0);
  out[63] ^= 1;
  out[2] = HCT_POISON_16;
  hct__parity_bitwise(&b, out, ref, &f);
  assert_int_equal(f.mismatches, 2);
  assert_int_equal(f.first_mismatch, 2);
  assert_int_equal(f.unwritten, 1);
}

/* Large buffers are compared in 1M-element chunks on every core: the
 * figures are the ones a single pass gives, whichever chunk holds what,
 * and do not depend on the number of threads. */
static void test_chunked_large(void **state) {
  (void)state;
  const size_t N = (3u << 20) + 12345; /* four chunks, the last short */
  float *ref = malloc(N * sizeof *ref), *out = malloc(N * sizeof *out);
  assert_non_null(ref);
  assert_non_null(out);
  for (size_t i = 0; i < N; i++) ref[i] = out[i] = (float)(i % 977) * 0.25f - 7.0f;
  hct_hbuf_t b = {.spec = &spec_f32, .elems = N};
  const uint32_t poison = HCT_POISON_F32, inf = 0x7f800000u;
  out[N - 1] = bitsf(fbits(out[N - 1]) + 1);    /* last chunk */
  out[(2u << 20) + 5] = bitsf(fbits(out[(2u << 20) + 5]) ^ 1); /* third */
  memcpy(&out[(1u << 20) + 3], &poison, 4);     /* second: unwritten */
  memcpy(&out[(3u << 20) + 7], &inf, 4);        /* last: not finite */
  for (int threads = 1; threads <= 3; threads += 2) {
    char t[16];
    snprintf(t, sizeof t, "%d", threads);
    setenv("HCTUNE_THREADS", t, 1);
    hct_parity_figs_t f;
    hct__parity_bitwise(&b, out, ref, &f);
    assert_int_equal(f.mismatches, 4);
    assert_int_equal(f.first_mismatch, (1u << 20) + 3);
    assert_int_equal(f.unwritten, 1);
    assert_int_equal(hct__parity_nonfinite(&b, out), 1);
    /* The distance is infinite with a NaN (the poison), else the largest
     * difference over the largest reference value. */
    assert_true(isinf(hct__parity_distance(&b, out, ref)));
  }
  unsetenv("HCTUNE_THREADS");
  memcpy(out, ref, N * sizeof *out);
  out[(2u << 20) + 9] += 0.5f;
  double want = 0.5 / (976 * 0.25 - 7.0); /* the largest |ref| is 976 * 0.25 - 7 */
  assert_true(fabs(hct__parity_distance(&b, out, ref) - want) < 1e-12);
  assert_int_equal(hct__parity_nonfinite(&b, out), 0);
  free(ref);
  free(out);
}

/* ---- float figures -----------------------------------------------------------*/

static void test_metrics_identical_perturbed_poisoned(void **state) {
  (void)state;
  enum { ROWS = 4, LEN = 256, N = ROWS * LEN };
  float out[N];
  double ref[N];
  for (int i = 0; i < N; i++) {
    out[i] = cosf((float)i * 0.7f) * 2.0f;
    ref[i] = out[i];
  }
  hct_hbuf_t b = {.spec = &spec_f32, .elems = N, .ref = ref, .row_len = LEN};
  hct_parity_figs_t f;
  hct__parity_metrics(&b, out, &f);
  assert_true(f.rel_err == 0.0);
  assert_true(f.max_err_ratio == 0.0);
  assert_true(f.kl_mean == 0.0);
  assert_true(f.kl_max == 0.0);
  assert_true(f.argmax_agree == 1.0);
  assert_int_equal(f.unwritten, 0);
  assert_int_equal(f.nonfinite, 0);

  /* A relative perturbation of 1e-6 on one row: small, but not zero. */
  for (int i = LEN; i < 2 * LEN; i++) out[i] = (float)(ref[i] * (1.0 + 1e-6 * sin(i)));
  hct__parity_metrics(&b, out, &f);
  assert_true(f.rel_err > 0.0 && f.rel_err < 1e-5);
  assert_true(f.kl_max > 0.0 && f.kl_max < 1e-9);
  assert_true(f.kl_mean > 0.0 && fabs(f.kl_mean - f.kl_max / ROWS) < 1e-6 * f.kl_max);
  assert_true(f.max_err_ratio > 0.0);

  /* A larger one moves the argmax of row 0. */
  size_t am = 0;
  for (int i = 1; i < LEN; i++)
    if (ref[i] > ref[am]) am = (size_t)i;
  out[(am + 1) % LEN] = (float)(ref[am] + 1.0);
  hct__parity_metrics(&b, out, &f);
  assert_true(fabs(f.argmax_agree - 0.75) < 1e-12);

  /* Poison: unwritten, and every float figure infinite. */
  uint32_t poison = HCT_POISON_F32;
  memcpy(&out[3 * LEN + 5], &poison, 4);
  hct__parity_metrics(&b, out, &f);
  assert_int_equal(f.unwritten, 1);
  assert_int_equal(f.nonfinite, 0);
  assert_true(isinf(f.rel_err) && isinf(f.kl_max) && isinf(f.kl_mean));

  /* A NaN that is not the poison, and an Inf: non-finite. */
  out[3 * LEN + 5] = (float)ref[3 * LEN + 5];
  out[9] = NAN;
  out[10] = INFINITY;
  hct__parity_metrics(&b, out, &f);
  assert_int_equal(f.unwritten, 0);
  assert_int_equal(f.nonfinite, 2);
  assert_true(isinf(f.max_err_ratio));
}

/* Sampled token rows: the float64 figures cover the rows the reference
 * holds (tokens 0, 3 and 5 of 6, two KL rows each), whatever the others
 * hold; unwritten and non-finite elements count in every row. */
static void test_metrics_sampled_rows(void **state) {
  (void)state;
  enum { T = 6, TOK = 64, LEN = 32, NR = 3 };
  static const int32_t rows[NR] = {0, 3, 5};
  float out[T * TOK];
  double ref[NR * TOK];
  for (int i = 0; i < T * TOK; i++) out[i] = 1000.0f + (float)i; /* far from any reference */
  for (int n = 0; n < NR; n++)
    for (int j = 0; j < TOK; j++) {
      ref[n * TOK + j] = sin(0.37 * (n * TOK + j)) * 3.0;
      out[rows[n] * TOK + j] = (float)ref[n * TOK + j];
    }
  hct_hbuf_t b = {.spec = &spec_f32, .elems = T * TOK, .ref = ref, .row_len = LEN,
                  .rows = rows, .nrows = NR, .token_elems = TOK};
  hct_parity_figs_t f;
  hct__parity_metrics(&b, out, &f);
  assert_int_equal(f.elems, T * TOK);
  /* Each output equals float(ref) on the sampled rows: the figures are
   * float32 rounding alone, though tokens 1, 2, 4 are off by 1000. */
  if (!(f.rel_err < 1e-7 && f.max_err_ratio < 1e-7 && f.kl_max < 1e-12))
    fail_msg("sampled rows: rel_err %g max_err_ratio %g kl_max %g", f.rel_err, f.max_err_ratio, f.kl_max);
  assert_true(f.argmax_agree == 1.0);

  /* Without rows the same reference read as tokens 0..2 is far off: the
   * figures do come from where the rows say. */
  hct_hbuf_t whole = b;
  whole.rows = NULL;
  whole.elems = NR * TOK;
  hct__parity_metrics(&whole, out, &f);
  assert_true(f.rel_err > 1.0);

  /* Token 3's second KL row moved: KL of that row alone over 6 rows. */
  float row_out[LEN];
  for (int j = 0; j < LEN; j++) {
    float v = (float)(ref[1 * TOK + LEN + j] + 0.01 * cos(j));
    out[3 * TOK + LEN + j] = v;
    row_out[j] = v;
  }
  hct__parity_metrics(&b, out, &f);
  hct_hbuf_t one = {.spec = &spec_f32, .elems = LEN, .ref = ref + 1 * TOK + LEN, .row_len = LEN};
  hct_parity_figs_t g;
  hct__parity_metrics(&one, row_out, &g);
  assert_true(g.kl_max > 1e-9);
  if (fabs(f.kl_max - g.kl_max) > 1e-12 * g.kl_max || fabs(f.kl_mean - g.kl_max / (NR * TOK / LEN)) > 1e-6 * g.kl_max)
    fail_msg("kl over rows %g/%g, want %g/%g", f.kl_max, f.kl_mean, g.kl_max, g.kl_max / (NR * TOK / LEN));
  assert_true(f.rel_err > 1e-4);

  /* The softmax kept by hct__parity_prepare gives the same figures. */
  hct_hostset_t hs;
  memset(&hs, 0, sizeof hs);
  hs.n = 1;
  hs.bufs[0] = b;
  assert_int_equal(hct__parity_prepare(&hs), 0);
  assert_non_null(hs.bufs[0].ref_p);
  hct__parity_metrics(&hs.bufs[0], out, &g);
  if (fabs(g.kl_max - f.kl_max) > 1e-9 * f.kl_max) fail_msg("prepared kl %g, want %g", g.kl_max, f.kl_max);
  free(hs.bufs[0].ref_p);

  /* Poison in a row the reference does not hold: unwritten all the same. */
  uint32_t poison = HCT_POISON_F32;
  memcpy(&out[1 * TOK + 7], &poison, 4);
  hct__parity_metrics(&b, out, &f);
  assert_int_equal(f.unwritten, 1);
  assert_true(isinf(f.rel_err) && isinf(f.max_err_ratio));
  out[1 * TOK + 7] = 0.0f;
  out[4 * TOK + 2] = NAN;
  hct__parity_metrics(&b, out, &f);
  assert_int_equal(f.unwritten, 0);
  assert_int_equal(f.nonfinite, 1);
  assert_true(isinf(f.rel_err));
}

/* KL of softmax([0,0]) against softmax([ln 2, 0]): p = (1/2, 1/2),
 * q = (2/3, 1/3), KL = ln(9/8) / 2. */
static void test_kl_known_value(void **state) {
  (void)state;
  float out[2] = {(float)log(2.0), 0.0f};
  double ref[2] = {0.0, 0.0};
  hct_hbuf_t b = {.spec = &spec_f32, .elems = 2, .ref = ref, .row_len = 2};
  hct_parity_figs_t f;
  hct__parity_metrics(&b, out, &f);
  const double want = 0.5 * log(9.0 / 8.0);
  if (fabs(f.kl_mean - want) > 1e-7) fail_msg("kl %.10g, want %.10g", f.kl_mean, want);
  /* rel_err and max_err_ratio are undefined against a zero ref: infinite. */
  assert_true(isinf(f.rel_err));
}

static void test_json(void **state) {
  (void)state;
  hct_parity_figs_t f = {.elems = 10, .mismatches = 2, .first_mismatch = 4, .rel_err = INFINITY,
                         .kl_mean = 1.5e-12, .argmax_agree = 1.0};
  char buf[512];
  hct__parity_json(&f, buf, sizeof buf);
  assert_non_null(strstr(buf, "\"mismatches\":2"));
  assert_non_null(strstr(buf, "\"first_mismatch\":4"));
  assert_non_null(strstr(buf, "\"rel_err\":null"));
  assert_non_null(strstr(buf, "\"kl_mean\":1.5e-12"));
  assert_true(buf[0] == '{' && buf[strlen(buf) - 1] == '}');
  char small[16];
  hct__parity_json(&f, small, sizeof small); /* truncates, never overflows */
  assert_int_equal(strlen(small), sizeof small - 1);
}

/* The image rule: a 16-bit output beside an f32 output of the same stem
 * must be exactly its conversion; poison is left to the unwritten count. */
static void test_images(void **state) {
  (void)state;
  enum { N = 500 };
  static hct_buffer_t specs[] = {{.name = "mixed", .dtype = HCT_DT_F32, .role = HCT_BUF_OUTPUT, .elems = "N"},
                                 {.name = "mixed_bf16", .dtype = HCT_DT_BF16, .role = HCT_BUF_OUTPUT, .elems = "N"},
                                 {.name = "mixed_f16", .dtype = HCT_DT_F16, .role = HCT_BUF_OUTPUT, .elems = "N"},
                                 {.name = "other_bf16", .dtype = HCT_DT_BF16, .role = HCT_BUF_OUTPUT, .elems = "N"}};
  hct_hostset_t hs;
  memset(&hs, 0, sizeof hs);
  hs.n = 4;
  for (int i = 0; i < 4; i++) {
    hs.bufs[i].spec = &specs[i];
    hs.bufs[i].elems = N;
  }
  static float x[N];
  static uint16_t b[N], h[N], o[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)(sin(i * 0.3) * 70000.0); /* f16 overflows to inf for some */
    b[i] = hct__f32_to_bf16(x[i]);
    h[i] = hct__f32_to_f16(x[i]);
    o[i] = 0x1234;
  }
  void *outs[4] = {x, b, h, o};
  hct_parity_figs_t figs[4];
  memset(figs, 0, sizeof figs);
  hct__parity_images(&hs, outs, figs);
  assert_int_equal(figs[0].is_image, 0);
  assert_int_equal(figs[1].is_image, 1);
  assert_int_equal(figs[2].is_image, 1);
  assert_int_equal(figs[3].is_image, 0); /* no f32 "other" beside it */
  assert_int_equal(figs[1].image_mismatches, 0);
  assert_int_equal(figs[2].image_mismatches, 0);
  b[17] ^= 1;       /* one ulp off */
  h[400] = HCT_POISON_16; /* unwritten, not a mismatch */
  h[401] ^= 0x8000; /* sign */
  memset(figs, 0, sizeof figs);
  hct__parity_images(&hs, outs, figs);
  assert_int_equal(figs[1].image_mismatches, 1);
  assert_int_equal(figs[2].image_mismatches, 1);
}

/* ---- conversions ---------------------------------------------------------------*/

static void test_conversion_vectors(void **state) {
  (void)state;
  static const struct {
    uint32_t in;
    uint16_t bf16, f16;
  } v[] = {
      {0x3f800000u, 0x3f80, 0x3c00},  /* 1 */
      {0x3f808000u, 0x3f80, 0x3c04},  /* 1 + 2^-8: bf16 tie to even (down) */
      {0x3f818000u, 0x3f82, 0x3c0c},  /* 1 + 3*2^-8: bf16 tie to even (up) */
      {0x3f801000u, 0x3f80, 0x3c00},  /* 1 + 2^-11: f16 tie to even (down) */
      {0x3f803000u, 0x3f80, 0x3c02},  /* 1 + 3*2^-11: f16 tie to even (up) */
      {0xc0000000u, 0xc000, 0xc000},  /* -2 */
      {0x477fe000u, 0x4780, 0x7bff},  /* 65504, the largest f16 (bf16 rounds up) */
      {0x477fefffu, 0x4780, 0x7bff},  /* just below 65520 */
      {0x477ff000u, 0x4780, 0x7c00},  /* 65520: to infinity */
      {0x7f800000u, 0x7f80, 0x7c00},  /* inf */
      {0xff800000u, 0xff80, 0xfc00},  /* -inf */
      {0x7f7fffffu, 0x7f80, 0x7c00},  /* FLT_MAX: bf16 rounds to inf */
      {0x38800000u, 0x3880, 0x0400},  /* 2^-14, the smallest normal f16 */
      {0x33800000u, 0x3380, 0x0001},  /* 2^-24, the smallest subnormal */
      {0x33000000u, 0x3300, 0x0000},  /* 2^-25: tie to even, zero */
      {0x33000001u, 0x3300, 0x0001},  /* just above 2^-25 */
      {0x33c00000u, 0x33c0, 0x0002},  /* 1.5 * 2^-24: tie to even (up) */
      {0x387fc000u, 0x3880, 0x03ff},  /* 1023 * 2^-24, the largest subnormal */
      {0x387fe000u, 0x3880, 0x0400},  /* 1023.5 * 2^-24: ties up into the smallest normal */
      {0x80000000u, 0x8000, 0x8000},  /* -0 */
      {0x00000001u, 0x0000, 0x0000},  /* the smallest float32 subnormal */
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(v); i++) {
    const float f = bitsf(v[i].in);
    uint16_t b = hct__f32_to_bf16(f), h = hct__f32_to_f16(f);
    if (b != v[i].bf16) fail_msg("bf16(0x%08x) = 0x%04x, want 0x%04x", v[i].in, b, v[i].bf16);
    if (h != v[i].f16) fail_msg("f16(0x%08x) = 0x%04x, want 0x%04x", v[i].in, h, v[i].f16);
    if (hct_bits_to_bf16(v[i].in) != v[i].bf16) fail_msg("kernel bf16(0x%08x) differs", v[i].in);
    if (hct_bits_to_f16(v[i].in) != v[i].f16) fail_msg("kernel f16(0x%08x) differs", v[i].in);
  }
  assert_true(hct__bf16_to_f32(0x3f80) == 1.0f);
  assert_true(hct__f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  assert_true(hct__f16_to_f32(0xfbff) == -65504.0f);
  assert_true(isinf(hct__f16_to_f32(0x7c00)));
  assert_true(isnan(hct__f16_to_f32(0x7e00)) && isnan(hct__bf16_to_f32(0x7fc0)));
  /* NaN stays NaN through both. */
  assert_true(isnan(hct__bf16_to_f32(hct__f32_to_bf16(NAN))));
  assert_true(isnan(hct__f16_to_f32(hct__f32_to_f16(NAN))));
  assert_true(hct_bits_to_bf16(fbits(NAN)) == hct__f32_to_bf16(NAN));
}

/* Compares host and kernel conversions (and the compiler's _Float16 where
 * it has one) on one float32 bit pattern. */
static unsigned long long checked;
static void check_one(uint32_t u) {
  const float f = bitsf(u);
  if (isnan(f)) return;
  const uint16_t hb = hct__f32_to_bf16(f), kb = hct_bits_to_bf16(u);
  const uint16_t hh = hct__f32_to_f16(f), kh = hct_bits_to_f16(u);
  if (hb != kb) fail_msg("bf16(0x%08x): host 0x%04x, kernel 0x%04x", u, hb, kb);
  if (hh != kh) fail_msg("f16(0x%08x): host 0x%04x, kernel 0x%04x", u, hh, kh);
#ifdef __FLT16_MAX__
  _Float16 c = (_Float16)f;
  uint16_t ch;
  memcpy(&ch, &c, 2);
  if (ch != hh) fail_msg("f16(0x%08x): host 0x%04x, compiler 0x%04x", u, hh, ch);
#endif
  checked++;
}

/*
 * The sweep: every value of the upper bits with the low bits at and around
 * the rounding boundaries of both formats, all f16 subnormals and the
 * region below them densely, and random patterns.
 */
static void test_conversion_sweep(void **state) {
  (void)state;
  static const uint32_t low13[] = {0, 1, 0x7ff, 0x800, 0xfff, 0x1000, 0x1001, 0x17ff, 0x1fff};
  for (uint32_t hi = 0; hi < (1u << 19); hi++)
    for (size_t i = 0; i < HCT_ARRAY_SIZE(low13); i++) check_one(hi << 13 | low13[i]);
  static const uint32_t low16[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x3fff, 0xc000};
  for (uint32_t hi = 0; hi < (1u << 16); hi++)
    for (size_t i = 0; i < HCT_ARRAY_SIZE(low16); i++) check_one(hi << 16 | low16[i]);
  for (uint32_t u = 0x32800000u; u < 0x38900000u; u += 7) check_one(u);
  hct_rng_t r;
  hct__rng_seed(&r, 12345);
  for (int i = 0; i < 4000000; i++) check_one((uint32_t)hct__rng_next(&r));
  assert_true(checked > 20000000ull);
}

/* Every 16-bit pattern that is a number comes back unchanged. */
static void test_conversion_round_trip(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    const float fb = hct__bf16_to_f32((uint16_t)h), fh = hct__f16_to_f32((uint16_t)h);
    if (!isnan(fb) && hct__f32_to_bf16(fb) != h) fail_msg("bf16 0x%04x does not round-trip", h);
    if (!isnan(fh) && hct__f32_to_f16(fh) != h) fail_msg("f16 0x%04x does not round-trip", h);
  }
}

/* ---- the generator -------------------------------------------------------------*/

static void test_rng(void **state) {
  (void)state;
  hct_rng_t a, b;
  hct__rng_seed(&a, 7);
  hct__rng_seed(&b, 7);
  for (int i = 0; i < 100; i++) assert_true(hct__rng_next(&a) == hct__rng_next(&b));
  hct__rng_seed(&b, 8);
  assert_true(hct__rng_next(&a) != hct__rng_next(&b));
  double s = 0, s2 = 0;
  enum { N = 200000 };
  for (int i = 0; i < N; i++) {
    double x = hct__rng_normal(&a);
    assert_true(isfinite(x));
    s += x;
    s2 += x * x;
  }
  const double mean = s / N, var = s2 / N - mean * mean;
  if (fabs(mean) > 0.01 || fabs(var - 1.0) > 0.02) fail_msg("normal: mean %g var %g", mean, var);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bitwise_finds_one_ulp_and_poison),
      cmocka_unit_test(test_bitwise_16bit),
      cmocka_unit_test(test_chunked_large),
      cmocka_unit_test(test_metrics_identical_perturbed_poisoned),
      cmocka_unit_test(test_metrics_sampled_rows),
      cmocka_unit_test(test_kl_known_value),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_images),
      cmocka_unit_test(test_conversion_vectors),
      cmocka_unit_test(test_conversion_sweep),
      cmocka_unit_test(test_conversion_round_trip),
      cmocka_unit_test(test_rng),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
