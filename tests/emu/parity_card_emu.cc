/*
 * parity_card_emu.cc: test_parity_card, the comparison kernels of
 * kernels-src/common/parity_check.cu run on the CPU emulator (emu.h) with
 * the launch plan the GPU path uses (hct__pc_plan), against
 * tuner/parity.c's host figures on the same data: counts, indices and bits
 * exactly, float figures to 1e-12 relative (the card's sums are added in a
 * block tree, the host's in sequence).  Cases: equal outputs, flipped bits
 * (more than HCT_PC_FIRST, across blocks), unwritten elements, NaN and Inf,
 * bf16, f32, f16 and u32, sizes that are no multiple of a block, sampled
 * token rows and whole buffers, 16-bit images of an f32 output.
 *
 * C++ because the emulator is; the Makefile builds it into the tests'
 * folder as a cmocka program like the others, so make check runs it.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* cmocka's print_error has no C++ linkage of its own; test_main.h (the
 * filter every test program honours) comes inside the same block. */
extern "C" {
#include <cmocka.h>

#include "../test_main.h"
}

#define _Alignas alignas
extern "C" {
#include "tuner.h"
}

#include "emu.h"

/* CUDA's round-to-nearest product: a plain one here, where nothing fuses
 * (the test is built with -ffp-contract=off, as the host's figures are on
 * x86-64). */
inline double __dmul_rn(double a, double b) { return a * b; }

#include "parity_check.cu"

/* ---- the card's figures, through the emulator ----------------------------- */

/* Runs one launch of hct__pc_launches: its argument list read back in the
 * order and types of the kernel's parameters, so that a list the GPU path
 * would pass wrongly (order, width) gives wrong figures here. */
static void run_launch(const hct_pc_launch_t &L) {
  /* A 64-bit parameter must be passed as one, an int as an int. */
  auto U = [&](int k) {
    if (L.args[k] != &L.u[k]) fail_msg("kernel %d: argument %d is no 64-bit value", L.kernel, k);
    return (hct_u64)L.u[k];
  };
  auto P = [&](int k) { return (void *)(uintptr_t)U(k); };
  auto I = [&](int k) {
    if (L.args[k] != &L.i[k]) fail_msg("kernel %d: argument %d is no int", L.kernel, k);
    return L.i[k];
  };
  dim3 g, b;
  g.x = L.grid[0];
  b.x = L.block[0];
  switch (L.kernel) {
  case HCT_PC_K_ELEMS:
    assert_int_equal(L.nargs, 8);
    emu::launch(g, b, 0, hct_pc_elems, (const void *)P(0), (const void *)P(1), (const float *)P(2), U(3), I(4),
                I(5), U(6), (hct_pc_part_t *)P(7));
    break;
  case HCT_PC_K_REF:
    assert_int_equal(L.nargs, 8);
    emu::launch(g, b, 0, hct_pc_ref, (const void *)P(0), I(1), (const double *)P(2), (const int *)P(3), U(4),
                U(5), U(6), (hct_pc_part_t *)P(7));
    break;
  case HCT_PC_K_ROWS:
    assert_int_equal(L.nargs, 11);
    emu::launch(g, b, 0, hct_pc_rows, (const void *)P(0), I(1), (const double *)P(2), (const double *)P(3),
                (const int *)P(4), U(5), U(6), U(7), U(8), (double *)P(9), (hct_u32 *)P(10));
    break;
  case HCT_PC_K_REDUCE:
    assert_int_equal(L.nargs, 11);
    emu::launch(g, b, 0, hct_pc_reduce, (const hct_pc_part_t *)P(0), U(1), (const hct_pc_part_t *)P(2), U(3),
                (const double *)P(4), (const hct_u32 *)P(5), U(6), (const void *)P(7), (const void *)P(8), I(9),
                (hct_pc_result_t *)P(10));
    break;
  case HCT_PC_K_DIST:
    assert_int_equal(L.nargs, 5);
    emu::launch(g, b, 0, hct_pc_dist, (const float *)P(0), (const float *)P(1), U(2), U(3), (hct_pc_part_t *)P(4));
    break;
  default:
    fail_msg("launch of kernel %d", L.kernel);
  }
}

/* The figures as tuner/parity_card.c makes them, host pointers standing
 * for the card's: the same plan, launches and conversion. */
static void card_figs(const hct_hbuf_t *b, const void *out, const void *want, const float *src,
                      int image, hct_parity_figs_t *f) {
  hct_pc_plan_t p;
  hct__pc_plan(b, image, &p);
  size_t res_off;
  const size_t bytes = hct__pc_work_bytes(&p, &res_off);
  std::vector<uint64_t> work((bytes + 7) / 8);
  memset(work.data(), 0x5a, bytes); /* garbage where nothing writes */
  /* Every other call, the result in a slot of its own (x.res), as
   * hct__pcheck_set_figs places each buffer's: the reduction must write
   * there and nowhere else. */
  static int slot;
  slot = !slot;
  std::vector<uint64_t> own((sizeof(hct_pc_result_t) + 7) / 8 + 1);
  memset(own.data(), 0x5a, own.size() * 8);
  const hct_pc_ptrs_t x = {(uintptr_t)out, (uintptr_t)want, (uintptr_t)src, (uintptr_t)b->ref,
                           (uintptr_t)b->ref_p, (uintptr_t)b->rows, (uintptr_t)work.data(),
                           slot ? (uintptr_t)own.data() : 0};
  hct_pc_launch_t L[4];
  const int n = hct__pc_launches(&p, &x, L);
  for (int k = 0; k < n; k++) run_launch(L[k]);
  hct_pc_result_t res;
  memcpy(&res, slot ? (const char *)own.data() : (const char *)work.data() + res_off, sizeof res);
  hct__parity_from_card(b, &p, &res, want != nullptr, f);
}

/* ---- comparing them -------------------------------------------------------- */

static void same_double(const char *what, const char *field, double host, double card) {
  if (isinf(host) || isinf(card) || host == 0.0) {
    if (!(host == card)) fail_msg("%s: %s: host %.17g, card %.17g", what, field, host, card);
    return;
  }
  if (!(fabs(host - card) <= 1e-12 * fabs(host)))
    fail_msg("%s: %s: host %.17g, card %.17g (relative %.3g)", what, field, host, card,
             fabs(host - card) / fabs(host));
}

static void same_count(const char *what, const char *field, size_t host, size_t card) {
  if (host != card) fail_msg("%s: %s: host %zu, card %zu", what, field, host, card);
}

static void same_figs(const char *what, const hct_parity_figs_t *h, const hct_parity_figs_t *c) {
  same_count(what, "elems", h->elems, c->elems);
  same_count(what, "mismatches", h->mismatches, c->mismatches);
  same_count(what, "first_mismatch", h->first_mismatch, c->first_mismatch);
  same_count(what, "n_first", h->n_first, c->n_first);
  for (size_t j = 0; j < h->n_first && j < HCT_PC_FIRST; j++) {
    same_count(what, "first_idx", h->first_idx[j], c->first_idx[j]);
    same_count(what, "first_got", h->first_got[j], c->first_got[j]);
    same_count(what, "first_want", h->first_want[j], c->first_want[j]);
  }
  same_count(what, "unwritten", h->unwritten, c->unwritten);
  same_count(what, "nonfinite", h->nonfinite, c->nonfinite);
  same_count(what, "is_image", h->is_image, c->is_image);
  same_count(what, "image_mismatches", h->image_mismatches, c->image_mismatches);
  same_double(what, "rel_err", h->rel_err, c->rel_err);
  same_double(what, "max_err_ratio", h->max_err_ratio, c->max_err_ratio);
  same_double(what, "kl_mean", h->kl_mean, c->kl_mean);
  same_double(what, "kl_max", h->kl_max, c->kl_max);
  same_double(what, "argmax_agree", h->argmax_agree, c->argmax_agree);
}

/* ---- data ------------------------------------------------------------------ */

static uint64_t rng_state = 88172645463325252ull;
static double rnd() {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* One output buffer of T tokens of `tok` elements, KL rows of row_len, its
 * reference on token rows `rows` (NULL: every element) drawn near the
 * values, and a copy (`want`) to compare bits with. */
struct Buf {
  hct_buffer_t spec;
  hct_hostset_t hs;
  std::vector<uint8_t> out, want;
  std::vector<int32_t> rows;
  size_t n, w;

  Buf(const char *name, hct_dtype_t dt, int T, size_t tok, int row_len, std::vector<int32_t> r)
      : rows(r) {
    memset(&spec, 0, sizeof spec);
    snprintf(spec.name, sizeof spec.name, "%s", name);
    spec.dtype = dt;
    spec.role = HCT_BUF_OUTPUT;
    memset(&hs, 0, sizeof hs);
    hs.n = 1;
    hct_hbuf_t *b = &hs.bufs[0];
    b->spec = &spec;
    n = (size_t)T * tok;
    w = hct__dtype_size(dt);
    b->elems = n;
    b->row_len = row_len;
    b->token_elems = tok;
    out.resize(n * w);
    for (size_t i = 0; i < n; i++) put(i, 3.0 * rnd());
    want = out;
    size_t refn = n;
    if (!rows.empty()) {
      b->rows = rows.data();
      b->nrows = (int)rows.size();
      refn = rows.size() * tok;
    }
    b->ref = (double *)malloc(refn * sizeof(double));
    for (size_t q = 0; q < refn; q++) {
      const size_t i = rows.empty() ? q : (size_t)rows[q / tok] * tok + q % tok;
      b->ref[q] = get(i) * (1.0 + 1e-3 * rnd()) + 1e-4 * rnd();
    }
    assert_int_equal(hct__parity_prepare(&hs), 0);
  }
  ~Buf() {
    free(hs.bufs[0].ref);
    free(hs.bufs[0].ref_p);
  }
  hct_hbuf_t *b() { return &hs.bufs[0]; }
  double get(size_t i) const {
    uint32_t u = 0;
    memcpy(&u, &out[i * w], w);
    switch (spec.dtype) {
    case HCT_DT_F32: {
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    case HCT_DT_BF16:
      return hct__bf16_to_f32((uint16_t)u);
    case HCT_DT_F16:
      return hct__f16_to_f32((uint16_t)u);
    default:
      return (double)u;
    }
  }
  void put(size_t i, double v) {
    uint32_t u;
    switch (spec.dtype) {
    case HCT_DT_F32: {
      float f = (float)v;
      memcpy(&u, &f, 4);
      break;
    }
    case HCT_DT_BF16:
      u = hct__f32_to_bf16((float)v);
      break;
    case HCT_DT_F16:
      u = hct__f32_to_f16((float)v);
      break;
    default:
      u = (uint32_t)(int64_t)(v * 1000.0 + 5000.0);
    }
    setbits(i, u);
  }
  void setbits(size_t i, uint32_t u) { memcpy(&out[i * w], &u, w); }
  uint32_t bits(size_t i) const {
    uint32_t u = 0;
    memcpy(&u, &out[i * w], w);
    return u;
  }
};

/* Host figures (bitwise against want, then float64), as the worker's
 * figures_of puts them together, beside the card's. */
static void compare(const char *what, Buf &B, int bitwise) {
  hct_parity_figs_t h, c, fb;
  memset(&h, 0, sizeof h);
  memset(&fb, 0, sizeof fb);
  if (bitwise) hct__parity_bitwise(B.b(), B.out.data(), B.want.data(), &fb);
  hct__parity_metrics(B.b(), B.out.data(), &h);
  hct__parity_take_bitwise(&h, &fb);
  card_figs(B.b(), B.out.data(), bitwise ? B.want.data() : nullptr, nullptr, HCT_PC_IMAGE_NONE, &c);
  same_figs(what, &h, &c);
}

static const hct_dtype_t float_dts[] = {HCT_DT_F32, HCT_DT_BF16, HCT_DT_F16};

/* ---- tests ----------------------------------------------------------------- */

static void test_equal(void **state) {
  (void)state;
  for (hct_dtype_t dt : float_dts) {
    /* 37 tokens of 130 (4810 elements: five blocks, the last partial),
     * sampled rows, KL rows of 65; then every row of a small buffer. */
    Buf a("out", dt, 37, 130, 65, {0, 5, 17, 36});
    compare("equal, sampled rows", a, 1);
    Buf s("out", dt, 3, 5, 0, {});
    compare("equal, 15 elements", s, 1);
  }
}

static void test_flipped_bits(void **state) {
  (void)state;
  for (hct_dtype_t dt : float_dts) {
    Buf a("out", dt, 37, 130, 65, {0, 5, 17, 36});
    /* 11 flips, more than HCT_PC_FIRST, over every block and its edges. */
    const size_t at[] = {4809, 3, 700, 1023, 1024, 1500, 2047, 2048, 3000, 4000, 4500};
    for (size_t i : at) a.setbits(i, a.bits(i) ^ 1u);
    compare("flipped low bits", a, 1);
    a.setbits(5 * 130 + 7, a.bits(5 * 130 + 7) ^ (a.w == 4 ? 0x00400000u : 0x0040u));
    compare("and one in a sampled row", a, 1);
    compare("without a bitwise reference", a, 0);
  }
}

/* Past HCT_PC_MAX_BLOCKS blocks of four elements a thread, a block's chunk
 * grows: 2.4 M elements give each thread 9 of its block's, so one thread
 * holds all of the first mismatches there, and the merge of the threads'
 * own first ones must keep HCT_PC_FIRST of each. */
static void test_many_in_one_thread(void **state) {
  (void)state;
  Buf a("out", HCT_DT_BF16, 2400, 1000, 0, {0, 2399});
  hct_pc_plan_t p;
  hct__pc_plan(a.b(), HCT_PC_IMAGE_NONE, &p);
  assert_true(p.e_chunk >= (uint64_t)HCT_PC_THREADS * (HCT_PC_FIRST + 1));
  for (size_t k = 0; k <= HCT_PC_FIRST; k++) a.setbits(5 + k * HCT_PC_THREADS, a.bits(5 + k * HCT_PC_THREADS) ^ 1u);
  a.setbits(p.e_chunk + 3, a.bits(p.e_chunk + 3) ^ 1u); /* the next block */
  compare("nine in one thread", a, 1);
}

static void test_unwritten(void **state) {
  (void)state;
  for (hct_dtype_t dt : float_dts) {
    Buf a("out", dt, 37, 130, 65, {0, 5, 17, 36});
    const uint32_t poison = a.w == 4 ? (uint32_t)HCT_POISON_F32 : HCT_POISON_16;
    a.setbits(1, poison);    /* outside the sampled rows */
    a.setbits(4000, poison);
    compare("unwritten outside the sampled rows", a, 1);
    a.setbits(17 * 130 + 64, poison);
    compare("unwritten in a sampled row", a, 1);
  }
}

static void test_nonfinite(void **state) {
  (void)state;
  for (hct_dtype_t dt : float_dts) {
    Buf a("out", dt, 37, 130, 65, {0, 5, 17, 36});
    const uint32_t inf = dt == HCT_DT_F32 ? 0x7f800000u : dt == HCT_DT_BF16 ? 0x7f80u : 0x7c00u;
    const uint32_t nan = dt == HCT_DT_F32 ? 0xffc00001u : dt == HCT_DT_BF16 ? 0xffc1u : 0xfe01u;
    a.setbits(2222, inf);
    a.setbits(2223, nan);
    compare("Inf and NaN outside the rows", a, 1);
    Buf b("out", dt, 37, 130, 65, {0, 5, 17, 36});
    b.setbits(36 * 130 + 129, inf | (a.w == 4 ? 0x80000000u : 0x8000u));
    compare("-Inf in the last row", b, 1);
  }
}

static void test_whole_buffer_and_kl(void **state) {
  (void)state;
  for (hct_dtype_t dt : float_dts) {
    /* No token rows: the reference holds every element; KL rows of 100
     * over 5000 elements (50 rows: one row block, partly used). */
    Buf a("out", dt, 50, 100, 0, {});
    compare("whole buffer", a, 1);
    a.put(333, a.get(333) + 0.5); /* moves one row's argmax or its KL */
    a.put(4999, 40.0);
    compare("whole buffer, changed values", a, 1);
  }
  /* Integers: bits and poison only mean bits; float figures on values. */
  Buf u("out", HCT_DT_U32, 9, 131, 131, {1, 8});
  u.setbits(130, u.bits(130) + 1);
  u.setbits(8 * 131 + 3, (uint32_t)HCT_POISON_F32);
  compare("u32", u, 1);
}

static void test_images(void **state) {
  (void)state;
  for (int kind = HCT_PC_IMAGE_BF16; kind <= HCT_PC_IMAGE_F16; kind++) {
    const hct_dtype_t dt = kind == HCT_PC_IMAGE_BF16 ? HCT_DT_BF16 : HCT_DT_F16;
    Buf x("x", HCT_DT_F32, 23, 100, 0, {});
    Buf img(kind == HCT_PC_IMAGE_BF16 ? "x_bf16" : "x_f16", dt, 23, 100, 0, {});
    float *xs = (float *)x.out.data();
    for (size_t i = 0; i < img.n; i++)
      img.setbits(i, kind == HCT_PC_IMAGE_BF16 ? hct__f32_to_bf16(xs[i]) : hct__f32_to_f16(xs[i]));
    img.setbits(10, img.bits(10) + 1);     /* wrong rounding */
    img.setbits(2299, img.bits(2299) ^ 0x8000u);
    img.setbits(1500, HCT_POISON_16);      /* unwritten, not an image error */
    x.setbits(77, 0x7fc00123u);            /* a NaN source: any NaN image is right */
    img.setbits(77, 0x7fffu);
    /* The host's rule over a set holding both buffers. */
    hct_hostset_t hs;
    memset(&hs, 0, sizeof hs);
    hs.n = 2;
    hs.bufs[0] = x.hs.bufs[0];
    hs.bufs[1] = img.hs.bufs[0];
    void *outs[HCT_MAX_BUFFERS] = {x.out.data(), img.out.data()};
    hct_parity_figs_t h[HCT_MAX_BUFFERS];
    memset(h, 0, sizeof h);
    hct__parity_metrics(&hs.bufs[1], img.out.data(), &h[1]);
    hct__parity_images(&hs, outs, h);
    int src;
    assert_int_equal(hct__parity_image_of(&hs, 1, &src), kind);
    assert_int_equal(src, 0);
    hct_parity_figs_t c;
    card_figs(img.b(), img.out.data(), nullptr, xs, kind, &c);
    assert_true(h[1].image_mismatches >= 2);
    same_figs(kind == HCT_PC_IMAGE_BF16 ? "bf16 image" : "f16 image", &h[1], &c);
  }
}

/* The copy that keeps a run's outputs on the card: every word, none past
 * the end, whatever the grid. */
static void test_copy(void **state) {
  (void)state;
  const hct_u64 n = 1000;
  std::vector<hct_u16> src(n), dst(n + 8, 0xbeef);
  for (hct_u64 i = 0; i < n; i++) src[i] = (hct_u16)(i * 2654435761u >> 7);
  dim3 grid, block;
  grid.x = 3;
  block.x = 64;
  emu::launch(grid, block, 0, hct_pc_copy, dst.data(), (const hct_u16 *)src.data(), n);
  assert_memory_equal(dst.data(), src.data(), n * 2);
  for (int k = 0; k < 8; k++) assert_int_equal(dst[n + k], 0xbeef);
}

/* Issue 34: the normwise distance of two f32 outputs (the verification of
 * timed launches on the card) through hct__pc_dist_launches, against
 * hct__parity_distance: equal to the bit (maxima in any order are), for
 * close outputs, a far element, a NaN (infinite) and the poison, over
 * sizes that are no multiple of a block. */
static void test_distance(void **state) {
  (void)state;
  static const hct_u64 sizes[] = {1, 1000, 70001};
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
    const hct_u64 n = sizes[z];
    for (int kase = 0; kase < 4; kase++) {
      std::vector<float> a(n), base(n);
      for (hct_u64 i = 0; i < n; i++) {
        base[i] = (float)((double)((i * 2654435761u) % 1000) / 250.0 - 2.0);
        a[i] = base[i] + (float)((double)((i * 40503u) % 7) * 1e-6);
      }
      if (kase == 1) a[n / 2] = base[n / 2] + 3.5f;
      uint32_t u = kase == 2 ? 0x7fc00000u : (uint32_t)HCT_POISON_F32;
      if (kase >= 2) memcpy(&a[n - 1], &u, 4);
      hct_buffer_t spec;
      memset(&spec, 0, sizeof spec);
      spec.dtype = HCT_DT_F32;
      hct_hbuf_t hb;
      memset(&hb, 0, sizeof hb);
      hb.spec = &spec;
      hb.elems = n;
      const double host = hct__parity_distance(&hb, a.data(), base.data());
      std::vector<uint64_t> work((hct__pc_dist_work_bytes(n) + 7) / 8 + 1), res((sizeof(hct_pc_result_t) + 7) / 8);
      memset(work.data(), 0x5a, work.size() * 8);
      hct_pc_launch_t L[2];
      const int nl = hct__pc_dist_launches(n, (uintptr_t)a.data(), (uintptr_t)base.data(), (uintptr_t)work.data(),
                                           (uintptr_t)res.data(), L);
      assert_int_equal(nl, 2);
      for (int k = 0; k < nl; k++) run_launch(L[k]);
      hct_pc_result_t r;
      memcpy(&r, res.data(), sizeof r);
      const double card = hct__pc_distance_of(&r);
      if (!(host == card)) fail_msg("n %llu, case %d: host %.17g, card %.17g", (unsigned long long)n, kase, host, card);
      if (kase >= 2 && !isinf(card)) fail_msg("n %llu: a NaN output must be infinitely far", (unsigned long long)n);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_distance),
      cmocka_unit_test(test_equal),     cmocka_unit_test(test_flipped_bits),
      cmocka_unit_test(test_many_in_one_thread), cmocka_unit_test(test_unwritten), cmocka_unit_test(test_nonfinite),
      cmocka_unit_test(test_whole_buffer_and_kl), cmocka_unit_test(test_images),
      cmocka_unit_test(test_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
