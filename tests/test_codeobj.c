/*
 * test_codeobj.c: jit/hip_codeobj.c, the reader of registers, LDS, scratch
 * and spills from an AMDGPU code object, fed hostile bytes: every prefix of
 * a good file, offsets and sizes out of range (and ones whose sums wrap),
 * overlapping sections, deep and odd MessagePack, figures that would
 * overflow, and random corruption.  Each input lives in a buffer of exactly
 * its size, so that under ASan (make check's second pass) a read one byte
 * past the end fails the test.  The reader must answer 0 with the figures,
 * or HCT_EINVAL with a one-line reason and -1 for every figure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

/* ---- building code objects ---------------------------------------------- */

typedef struct {
  unsigned char b[65536];
  size_t n;
} bytes_t;

static void put(bytes_t *o, const void *p, size_t n) {
  assert_true(o->n + n <= sizeof o->b);
  memcpy(o->b + o->n, p, n);
  o->n += n;
}

static void put_le(bytes_t *o, uint64_t v, size_t w) {
  for (size_t i = 0; i < w; i++) {
    unsigned char c = (unsigned char)(v >> (8 * i));
    put(o, &c, 1);
  }
}

static void put_be(bytes_t *o, uint64_t v, size_t w) {
  for (size_t i = w; i-- > 0;) {
    unsigned char c = (unsigned char)(v >> (8 * i));
    put(o, &c, 1);
  }
}

static void set_le(bytes_t *o, size_t at, uint64_t v, size_t w) {
  for (size_t i = 0; i < w; i++) o->b[at + i] = (unsigned char)(v >> (8 * i));
}

static void mp_str(bytes_t *o, const char *s) {
  size_t n = strlen(s);
  unsigned char c = (unsigned char)(0xa0 | n);
  assert_true(n < 32);
  put(o, &c, 1);
  put(o, s, n);
}

static void mp_int(bytes_t *o, int64_t v) {
  unsigned char c = 0xd3; /* int64 */
  put(o, &c, 1);
  put_be(o, (uint64_t)v, 8);
}

/* {"amdhsa.kernels": [{".vgpr_count": vgpr, ...}]} */
static void good_metadata(bytes_t *m, int64_t vgpr, int64_t lds, int64_t stack, int64_t vspill,
                          int64_t sspill) {
  unsigned char c;
  m->n = 0;
  c = 0x81;
  put(m, &c, 1);
  mp_str(m, "amdhsa.kernels");
  c = 0x91;
  put(m, &c, 1);
  c = 0x86;
  put(m, &c, 1);
  mp_str(m, ".name");
  mp_str(m, "tiny");
  mp_str(m, ".vgpr_count");
  mp_int(m, vgpr);
  mp_str(m, ".group_segment_fixed_size");
  mp_int(m, lds);
  mp_str(m, ".private_segment_fixed_size");
  mp_int(m, stack);
  mp_str(m, ".vgpr_spill_count");
  mp_int(m, vspill);
  mp_str(m, ".sgpr_spill_count");
  mp_int(m, sspill);
}

/* Offsets of the parts of what build() makes, for the tests that break
 * one of them. */
enum { NOTE_OFF = 64, SH_ENTSIZE = 64 };
static size_t sh_off_of; /* where the section headers start */

/* An ELF64 header, one note section holding the "AMDGPU" note with
 * `desc`, then three section headers: null, the note, and a second note
 * header (`extra`: 0 none, else a copy pointing at the same bytes). */
static void build(bytes_t *o, const bytes_t *desc, int extra) {
  o->n = 0;
  static const unsigned char ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  put(o, ident, 16);
  while (o->n < 64) put_le(o, 0, 1);
  /* The note. */
  put_le(o, 7, 4);
  put_le(o, desc->n, 4);
  put_le(o, 32, 4);
  put(o, "AMDGPU\0\0", 8);
  put(o, desc->b, desc->n);
  while (o->n % 8) put_le(o, 0, 1);
  size_t note_len = o->n - NOTE_OFF;
  sh_off_of = o->n;
  int shnum = extra ? 3 : 2;
  for (int i = 0; i < shnum; i++) {
    size_t at = o->n;
    for (int k = 0; k < SH_ENTSIZE; k++) put_le(o, 0, 1);
    if (i > 0) {
      set_le(o, at + 4, 7, 4); /* SHT_NOTE */
      set_le(o, at + 0x18, NOTE_OFF, 8);
      set_le(o, at + 0x20, note_len, 8);
    }
  }
  set_le(o, 0x28, sh_off_of, 8);
  set_le(o, 0x3a, SH_ENTSIZE, 2);
  set_le(o, 0x3c, (uint64_t)shnum, 2);
}

typedef struct {
  int rc, regs, spill, smem, stack;
} got_t;

/* Reads n bytes from a buffer of exactly that size. */
static got_t read_exact(const void *p, size_t n) {
  void *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  memcpy(copy, p, n);
  got_t g;
  g.rc = hct__hip_code_resources(copy, n, &g.regs, &g.spill, &g.smem, &g.stack);
  free(copy);
  if (g.rc < 0) {
    assert_int_equal(g.rc, HCT_EINVAL);
    const char *e = hct_last_error();
    assert_true(e[0] != '\0' && strchr(e, '\n') == NULL);
    assert_non_null(strstr(e, "code object"));
    assert_int_equal(g.regs, -1);
    assert_int_equal(g.spill, -1);
    assert_int_equal(g.smem, -1);
    assert_int_equal(g.stack, -1);
  } else {
    assert_int_equal(g.rc, 0);
  }
  return g;
}

static bytes_t file, meta;

/* ---- tests -------------------------------------------------------------- */

static void test_good(void **state) {
  (void)state;
  good_metadata(&meta, 20, 256, 16, 2, 1);
  build(&file, &meta, 0);
  got_t g = read_exact(file.b, file.n);
  assert_int_equal(g.rc, 0);
  assert_int_equal(g.regs, 20);
  assert_int_equal(g.smem, 256);
  assert_int_equal(g.stack, 16);
  assert_int_equal(g.spill, 12);
}

static void test_every_prefix(void **state) {
  (void)state;
  good_metadata(&meta, 20, 256, 16, 2, 1);
  build(&file, &meta, 0);
  for (size_t n = 0; n < file.n; n++) {
    got_t g = read_exact(file.b, n);
    /* The section headers are last: every prefix loses them. */
    if (g.rc != HCT_EINVAL) print_message("prefix of %zu bytes read as valid\n", n);
    assert_int_equal(g.rc, HCT_EINVAL);
  }
}

static void test_offsets_out_of_range(void **state) {
  (void)state;
  good_metadata(&meta, 20, 256, 16, 2, 1);
  static const struct {
    const char *what;
    size_t at, width;
    uint64_t value;
    int valid; /* still a file whose note can be read */
  } breaks[] = {
    {"section headers past the end", 0x28, 8, 1u << 20, 0},
    {"section headers at the last byte", 0x28, 8, 0, 0}, /* set below */
    {"section header offset wraps", 0x28, 8, UINT64_MAX - 8, 0},
    {"entry size too small", 0x3a, 2, 8, 0},
    {"count times size past the end", 0x3c, 2, 65535, 0},
    {"entry size huge", 0x3a, 2, 65535, 0},
    {"note offset past the end", 0, 8, 1u << 30, 0},        /* sh[1].offset */
    {"note length past the end", 1, 8, 1u << 30, 0},        /* sh[1].size */
    {"note offset + length wraps", 1, 8, UINT64_MAX, 0},    /* sh[1].size */
    {"name size huge", NOTE_OFF, 4, 0xffffffffu, 0},
    {"desc size huge", NOTE_OFF + 4, 4, 0xffffffffu, 0},
    {"desc size one past the section", NOTE_OFF + 4, 4, 0, 0}, /* set below */
    {"name size wrong", NOTE_OFF, 4, 6, 0},
    {"not a note section", 2, 4, 1, 0},                     /* sh[1].type */
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(breaks); i++) {
    build(&file, &meta, 0);
    size_t at = breaks[i].at;
    uint64_t v = breaks[i].value;
    size_t sh1 = sh_off_of + SH_ENTSIZE;
    if (at == 0) at = sh1 + 0x18;
    if (at == 1) at = sh1 + 0x20;
    if (at == 2) at = sh1 + 4;
    if (i == 1) v = file.n - 1;
    if (i == 11) v = sh_off_of - NOTE_OFF - 20 + 1;
    set_le(&file, at, v, breaks[i].width);
    got_t g = read_exact(file.b, file.n);
    print_message("%s: %s\n", breaks[i].what, g.rc < 0 ? hct_last_error() : "read");
    assert_int_equal(g.rc, breaks[i].valid ? 0 : HCT_EINVAL);
  }
}

/* Two section headers over the same note, and a note section that also
 * covers the section headers: nothing is written, so both read. */
static void test_overlapping_sections(void **state) {
  (void)state;
  good_metadata(&meta, 20, 256, 16, 2, 1);
  build(&file, &meta, 1);
  got_t g = read_exact(file.b, file.n);
  assert_int_equal(g.rc, 0);
  assert_int_equal(g.regs, 20);
  size_t sh1 = sh_off_of + SH_ENTSIZE;
  set_le(&file, sh1 + 0x20, file.n - NOTE_OFF, 8); /* the note section runs to the end */
  g = read_exact(file.b, file.n);
  assert_int_equal(g.rc, 0);
  assert_int_equal(g.smem, 256);
}

/* Metadata that is not what a compiler writes. */
static void test_odd_msgpack(void **state) {
  (void)state;
  const struct {
    const char *what;
    const unsigned char *b;
    size_t n;
    int rc;
  } odd[] = {
#define ODD(what, rc, ...) \
  {what, (const unsigned char[]){__VA_ARGS__}, sizeof((const unsigned char[]){__VA_ARGS__}), rc}
    ODD("the never-used byte 0xc1", HCT_EINVAL, 0xc1),
    ODD("array32 of 4 billion, empty", HCT_EINVAL, 0xdd, 0xff, 0xff, 0xff, 0xff),
    ODD("map32 of 4 billion, one pair", HCT_EINVAL, 0xdf, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02),
    ODD("str32 of 4 GB", HCT_EINVAL, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'),
    ODD("bin32 of 4 GB", HCT_EINVAL, 0xc6, 0xff, 0xff, 0xff, 0xff),
    ODD("ext32 of 4 GB", HCT_EINVAL, 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01),
    ODD("fixext16 cut short", HCT_EINVAL, 0xd8, 0x01, 0x02),
    ODD("float64 cut short", HCT_EINVAL, 0xcb, 0x00),
    ODD("uint64 cut short", HCT_EINVAL, 0xcf, 0x00, 0x00),
    ODD("a map with integer keys", 0, 0x82, 0x01, 0x02, 0xc3, 0xc0),
    ODD("a lone nil", 0, 0xc0),
    ODD("a key without its value", HCT_EINVAL, 0x81, 0xab, '.', 'v', 'g', 'p', 'r', '_', 'c',
        'o', 'u', 'n', 't'),
    ODD("a count given as a string", 0, 0x81, 0xab, '.', 'v', 'g', 'p', 'r', '_', 'c', 'o', 'u',
        'n', 't', 0xa1, '9'),
#undef ODD
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(odd); i++) {
    meta.n = 0;
    put(&meta, odd[i].b, odd[i].n);
    build(&file, &meta, 0);
    got_t g = read_exact(file.b, file.n);
    print_message("%s: %s\n", odd[i].what, g.rc < 0 ? hct_last_error() : "read");
    assert_int_equal(g.rc, odd[i].rc);
    if (g.rc == 0) assert_int_equal(g.regs, 0);
  }
}

/* 10,000 nested arrays: refused at the depth limit, not by the stack. */
static void test_deep_msgpack(void **state) {
  (void)state;
  meta.n = 0;
  for (int i = 0; i < 10000; i++) {
    unsigned char c = 0x91;
    put(&meta, &c, 1);
  }
  put_le(&meta, 0x01, 1);
  build(&file, &meta, 0);
  got_t g = read_exact(file.b, file.n);
  assert_int_equal(g.rc, HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "nested too deep"));
  /* Thirty levels are fine. */
  meta.n = 0;
  for (int i = 0; i < 30; i++) {
    unsigned char c = 0x91;
    put(&meta, &c, 1);
  }
  put_le(&meta, 0x01, 1);
  build(&file, &meta, 0);
  assert_int_equal(read_exact(file.b, file.n).rc, 0);
}

/* Figures a 32-bit int cannot hold are clamped, never overflowed (UBSan
 * would stop the test on a signed overflow); negative ones read as 0. */
static void test_huge_figures(void **state) {
  (void)state;
  good_metadata(&meta, INT64_MAX, (int64_t)1 << 40, -5, INT64_MAX, INT64_MAX);
  build(&file, &meta, 0);
  got_t g = read_exact(file.b, file.n);
  assert_int_equal(g.rc, 0);
  assert_int_equal(g.regs, INT32_MAX);
  assert_int_equal(g.smem, INT32_MAX);
  assert_int_equal(g.stack, 0);
  assert_int_equal(g.spill, INT32_MAX);
  good_metadata(&meta, 1, 1, 1, 0x40000000, 0x40000000);
  build(&file, &meta, 0);
  g = read_exact(file.b, file.n);
  assert_int_equal(g.spill, INT32_MAX);
}

/* Random corruption of a good file: any answer but a crash. */
static void test_random_corruption(void **state) {
  (void)state;
  good_metadata(&meta, 20, 256, 16, 2, 1);
  build(&file, &meta, 1);
  bytes_t *bad = malloc(sizeof *bad);
  assert_non_null(bad);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int read_ok = 0, refused = 0;
  for (int round = 0; round < 5000; round++) {
    *bad = file;
    int flips = 1 + (int)(x % 8);
    for (int k = 0; k < flips; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      bad->b[x % bad->n] = (unsigned char)(x >> 32);
    }
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t n = x % 4 == 0 ? (size_t)(x >> 8) % bad->n : bad->n;
    got_t g = read_exact(bad->b, n);
    if (g.rc == 0)
      read_ok++;
    else
      refused++;
  }
  print_message("5000 corrupted files: %d read, %d refused\n", read_ok, refused);
  assert_true(read_ok > 0 && refused > 0);
  free(bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_good),
    cmocka_unit_test(test_every_prefix),
    cmocka_unit_test(test_offsets_out_of_range),
    cmocka_unit_test(test_overlapping_sections),
    cmocka_unit_test(test_odd_msgpack),
    cmocka_unit_test(test_deep_msgpack),
    cmocka_unit_test(test_huge_figures),
    cmocka_unit_test(test_random_corruption),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
