/*
 * hostset.c: host-side buffer sets of an op, the seedable generator every
 * check draws its inputs from, and the bf16/f16 conversions of the host.
 *
 * The conversions must give the same bits as the kernels' (kernels-src/
 * common/hct_convert.h) for every input; they are written again here, not
 * shared, so that tests/test_parity.c compares two implementations.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

/* ---- buffer sets -----------------------------------------------------------*/

int hct__hostset_init(hct_hostset_t *s, const hct_op_t *op, int T, int pending) {
  memset(s, 0, sizeof *s);
  s->op = op;
  s->T = T;
  s->pending = pending;
  if (T < 1) return hct__error(HCT_EINVAL, "op '%s': token count %d: must be at least 1", op->name, T);
  hct_symtab_t syms = op->constants;
  hct__symtab_set(&syms, "T", T);
  for (int i = 0; i < op->n_buffers; i++) {
    const hct_buffer_t *spec = &op->buffers[i];
    hct_hbuf_t *b = &s->bufs[i];
    b->spec = spec;
    s->n = i + 1;
    int64_t elems;
    int rc = hct__expr_eval(spec->elems, &syms, &elems);
    if (rc < 0) {
      hct__hostset_free(s);
      return rc;
    }
    if (elems <= 0) {
      hct__hostset_free(s);
      return hct__error(HCT_EMANIFEST, "buffer '%s': elems '%s' is %lld at T=%d: must be positive",
                        spec->name, spec->elems, (long long)elems, T);
    }
    b->elems = (size_t)elems;
    if (spec->role == HCT_BUF_OPTIONAL && !pending) continue;
    b->data = calloc(b->elems, hct__dtype_size(spec->dtype));
    if (b->data == NULL) {
      hct__hostset_free(s);
      return hct__error(HCT_ENOMEM, "buffer '%s': cannot allocate %zu elements", spec->name,
                        (size_t)elems);
    }
  }
  return 0;
}

void hct__hostset_free(hct_hostset_t *s) {
  for (int i = 0; i < s->n; i++) {
    free(s->bufs[i].data);
    free(s->bufs[i].ref);
    free(s->bufs[i].ref_p);
    s->bufs[i].ref_p = NULL;
    s->bufs[i].data = NULL;
    s->bufs[i].ref = NULL;
  }
  free(s->rows);
  s->rows = NULL;
  s->nrows = 0;
  s->n = 0;
}

hct_hbuf_t *hct__hostset_buf(hct_hostset_t *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->bufs[i].spec->name, name) == 0) return &s->bufs[i];
  return NULL;
}

/* ---- generator --------------------------------------------------------------*/

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void hct__rng_seed(hct_rng_t *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t hct__rng_next(hct_rng_t *r) {
  uint64_t *s = r->s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/* Uniform in (0, 1): never 0, so the logarithm below is finite. */
static double uniform_open(hct_rng_t *r) {
  return ((double)(hct__rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Box-Muller, one value per call: the generator has no room to keep the
 * second one, and a stateless draw keeps sequences easy to replay. */
double hct__rng_normal(hct_rng_t *r) {
  const double u1 = uniform_open(r), u2 = uniform_open(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- conversions --------------------------------------------------------------*/

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t hct__f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
  const uint32_t lsb = (u >> 16) & 1u;
  return (uint16_t)((u + 0x7fffu + lsb) >> 16);
}

float hct__bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/*
 * Rounds by the value rather than by exponent cases: the magnitude is
 * scaled to units of the f16 ulp of its binade, rounded to nearest even by
 * rint() (the default rounding mode), and reassembled.  Every step is exact
 * in double, so the result is the correctly rounded f16.
 */
uint16_t hct__f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (isnan(f)) return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  double a = fabs((double)f);
  if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u);
  if (a < 6.103515625e-05) { /* below 2^-14: subnormal units of 2^-24 */
    const double q = rint(a * 16777216.0);
    return (uint16_t)(sign | (uint16_t)q); /* q = 1024 is the smallest normal */
  }
  int e;
  (void)frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  const int ex = e - 1; /* a in [2^ex, 2^(ex+1)), ex in -14..15 */
  double q = rint(ldexp(a, 10 - ex)); /* 1024 .. 2048 */
  int biased = ex + 15;
  if (q >= 2048.0) {
    q /= 2.0;
    biased++;
  }
  if (biased >= 31) return (uint16_t)(sign | 0x7c00u);
  return (uint16_t)(sign | (uint16_t)(biased << 10) | (uint16_t)((uint32_t)q & 0x3ffu));
}

float hct__f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    /* Subnormal (or zero): exact in float32. */
    const float v = (float)m * 5.9604644775390625e-08f; /* 2^-24 */
    return sign ? -v : v;
  }
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
