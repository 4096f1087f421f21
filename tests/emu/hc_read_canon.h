/*
 * hc_read_canon.h: what the hc_read emulator tests share: test data
 * (normal draws), and the spec's canonical order computed step by step in
 * float32 on the host (canonical), against which every template's outputs
 * are compared bit for bit (compare).  Include after emu.h and hc_read.h.
 */
#ifndef HC_READ_CANON_H
#define HC_READ_CANON_H

#include <stdint.h>

#include <vector>

static uint64_t rng_state = 0x1234567;
static double normal() {
  /* Box-Muller on splitmix64: enough for test data. */
  auto next = []() {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  double u1 = ((double)(next() >> 11) + 0.5) / 9007199254740992.0;
  double u2 = ((double)(next() >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static float bf(uint16_t h) { return __uint_as_float((unsigned)h << 16); }

/* The butterfly over n lanes; lane 0's value. */
static float butterfly(float *v, int n) {
  float nv[32];
  for (int off = n / 2; off >= 1; off /= 2) {
    for (int l = 0; l < n; l++) nv[l] = v[l] + v[l ^ off];
    memcpy(v, nv, sizeof(float) * (size_t)n);
  }
  return v[0];
}

struct Outs {
  std::vector<float> resid, mixed;
  std::vector<uint16_t> mb, mh;
};

/* Steps on the way, for a test that checks them too: the norm's warp
 * sums [t][s][warp] and scales [t][s], and lo [t][K]. */
struct Inter {
  std::vector<float> w8, rs, lo;
};

/* The spec, step by step (and its intermediates into *in when given). */
static Outs canonical(int T, const std::vector<float> &R, const float *P, const std::vector<uint16_t> &wn,
                      const std::vector<uint16_t> &wd, const std::vector<uint16_t> &wu, Inter *in = nullptr) {
  std::vector<float> rp((size_t)T * D), xn((size_t)T * D), lo((size_t)T * K), g((size_t)T * D);
  if (in) {
    in->w8.assign((size_t)T * S * 8, 0.0f);
    in->rs.assign((size_t)T * S, 0.0f);
  }
  for (size_t e = 0; e < rp.size(); e++) rp[e] = P ? R[e] + P[e] : R[e];
  for (int t = 0; t < T; t++)
    for (int s = 0; s < S; s++) {
      const float *x = &rp[(size_t)t * D + (size_t)s * C];
      float a[256], w8[32];
      for (int i = 0; i < 256; i++) {
        a[i] = 0.0f;
        for (int c = i; c < C; c += 256) a[i] = fmaf(x[c], x[c], a[i]);
      }
      for (int w = 0; w < 8; w++) w8[w] = butterfly(a + 32 * w, 32);
      if (in) memcpy(&in->w8[((size_t)t * S + s) * 8], w8, sizeof(float) * 8);
      const float ss = butterfly(w8, 8);
      const float rs = 1.0f / sqrtf(ss / (float)C + 1e-6f);
      if (in) in->rs[(size_t)t * S + s] = rs;
      for (int c = 0; c < C; c++) {
        const float y = x[c] * bf(wn[(size_t)s * C + c]);
        xn[(size_t)t * D + (size_t)s * C + c] = y * rs;
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
            acc[L] = fmaf(bf(wd[(size_t)j * D + k]), xn[(size_t)t * D + k], acc[L]);
          }
      }
      lo[(size_t)t * K + j] = butterfly(acc, 32);
    }
  if (in) in->lo = lo;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < D; i++) {
      float acc[32];
      for (int L = 0; L < 32; L++) {
        acc[L] = 0.0f;
        for (int ch = L; ch < K / 8; ch += 32)
          for (int e = 0; e < 8; e++) {
            const int k = 8 * ch + e;
            acc[L] = fmaf(bf(wu[(size_t)i * K + k]), lo[(size_t)t * K + k], acc[L]);
          }
      }
      const float u = butterfly(acc, 32);
      g[(size_t)t * D + i] = 1.0f / (1.0f + expf(-u));
    }
  Outs o;
  o.resid = rp;
  o.mixed.resize((size_t)T * C);
  o.mb.resize((size_t)T * C);
  o.mh.resize((size_t)T * C);
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      const float *gt = &g[(size_t)t * D], *r = &rp[(size_t)t * D];
      float m = gt[c] * r[c];
      for (int s = 1; s < S; s++) m = fmaf(gt[s * C + c], r[s * C + c], m);
      o.mixed[(size_t)t * C + c] = m;
      o.mb[(size_t)t * C + c] = hct_bits_to_bf16(__float_as_uint(m));
      o.mh[(size_t)t * C + c] = hct_bits_to_f16(__float_as_uint(m));
    }
  return o;
}

template <class V>
static int compare(const char *what, const V &got, const V &want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (memcmp(&got[i], &want[i], sizeof want[i]) != 0 && bad++ == 0) first = i;
  if (bad) fprintf(stderr, "  %s: %zu of %zu elements differ, first at %zu\n", what, bad, want.size(), first);
  return bad != 0;
}

#endif /* HC_READ_CANON_H */
