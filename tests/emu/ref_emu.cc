/*
 * ref_emu.cc: runs hc_read's float64 reference template
 * (kernels-src/hc_read/reference.cu over kernels-src/common/hc_read_ref.h)
 * on the CPU (tests/emu/emu.h) for a list of token rows, and checks it bit
 * for bit against the math written as plain loops over every token: the
 * rows, the indexing and the barriers of the template, without a GPU.
 * Both use the host's exp, so they must agree exactly.  tests/emu/run.sh
 * builds it at reduced sizes.
 */
#include "emu.h"

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __double2float_rn(double x) { return (float)x; }

#include "reference.cu"

static float bf(uint16_t h) { return hct_bf16_to_f32(h); }

int main() {
  const int T = 7, NROWS = 3;
  const int rows[NROWS] = {0, 4, 6};
  const size_t TD = (size_t)T * D;
  std::vector<float> R(TD), P(TD);
  std::vector<uint16_t> wn(D), wd((size_t)K * D), wu((size_t)D * K);
  uint64_t x = 88172645463325252ull;
  auto rnd = [&]() {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return (double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  };
  for (auto &v : R) v = (float)rnd();
  for (auto &v : P) v = (float)rnd();
  for (auto &v : wn) v = hct_f32_to_bf16((float)(1.0 + 0.1 * rnd()));
  for (auto &v : wd) v = hct_f32_to_bf16((float)(rnd() / 50));
  for (auto &v : wu) v = hct_f32_to_bf16((float)(rnd() / 10));
  int fail = 0;
  for (int pending = 0; pending <= 1; pending++) {
    std::vector<double> rr((size_t)NROWS * D), xn((size_t)NROWS * D), lo((size_t)NROWS * K),
        gate((size_t)NROWS * D), m((size_t)NROWS * C), mb((size_t)NROWS * C), mf((size_t)NROWS * C);
    const float *pp = pending ? P.data() : nullptr;
    auto d3 = [](unsigned a, unsigned b) { dim3 d; d.x = a; d.y = b; return d; };
    emu::launch(d3(S, NROWS), d3(256, 1), 0, hc_ref_norm, rows, (const float *)R.data(), pp,
                (const hct_u16 *)wn.data(), rr.data(), xn.data());
    emu::launch(d3((K + 63) / 64, NROWS), d3(64, 1), 0, hc_ref_down, (const hct_u16 *)wd.data(),
                (const double *)xn.data(), lo.data());
    emu::launch(d3((D + 127) / 128, NROWS), d3(128, 1), 0, hc_ref_up, (const hct_u16 *)wu.data(),
                (const double *)lo.data(), gate.data());
    emu::launch(d3((C + 255) / 256, NROWS), d3(256, 1), 0, hc_ref_mix, (const double *)rr.data(),
                (const double *)gate.data(), m.data(), mb.data(), mf.data());
    /* The math as loops, over every token; the sampled rows compared. */
    for (int n = 0; n < NROWS; n++) {
      const int t = rows[n];
      std::vector<double> rp(D), xv(D), lv(K), g(D);
      for (int d = 0; d < D; d++) {
        float v = R[(size_t)t * D + d];
        if (pending) v = v + P[(size_t)t * D + d];
        rp[d] = v;
      }
      for (int s = 0; s < S; s++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += rp[s * C + c] * rp[s * C + c];
        const double rs = 1.0 / sqrt(ss / C + (double)1e-6f);
        for (int c = 0; c < C; c++) xv[s * C + c] = rp[s * C + c] * (double)bf(wn[s * C + c]) * rs;
      }
      for (int k = 0; k < K; k++) {
        double a = 0;
        for (int d = 0; d < D; d++) a += (double)bf(wd[(size_t)k * D + d]) * xv[d];
        lv[k] = a;
      }
      for (int d = 0; d < D; d++) {
        double a = 0;
        for (int k = 0; k < K; k++) a += (double)bf(wu[(size_t)d * K + k]) * lv[k];
        g[d] = 1.0 / (1.0 + exp(-a));
      }
      for (int d = 0; d < D; d++)
        if (memcmp(&rr[(size_t)n * D + d], &rp[d], 8) != 0 || memcmp(&xn[(size_t)n * D + d], &xv[d], 8) != 0 ||
            memcmp(&gate[(size_t)n * D + d], &g[d], 8) != 0) {
          if (fail++ < 5) printf("pending=%d row %d (token %d) d=%d: resid/xn/gate differ\n", pending, n, t, d);
        }
      for (int k = 0; k < K; k++)
        if (memcmp(&lo[(size_t)n * K + k], &lv[k], 8) != 0 && fail++ < 5)
          printf("pending=%d row %d k=%d: lo %.17g, want %.17g\n", pending, n, k, lo[(size_t)n * K + k], lv[k]);
      for (int c = 0; c < C; c++) {
        double want = 0;
        for (int s = 0; s < S; s++) want += g[s * C + c] * rp[s * C + c];
        const float f = (float)want;
        const double wb = bf(hct_f32_to_bf16(f));
        const size_t o = (size_t)n * C + c;
        if ((memcmp(&m[o], &want, 8) != 0 || mb[o] != wb) && fail++ < 5)
          printf("pending=%d row %d c=%d: mixed %.17g, want %.17g\n", pending, n, c, m[o], want);
        /* f16: the value of the f16 conversion, decoded here apart. */
        const uint16_t h = hct_f32_to_f16(f);
        const int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
        double wf = e == 0 ? ldexp(mant, -24) : e == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, e - 25);
        if (h & 0x8000) wf = -wf;
        if (memcmp(&mf[o], &wf, 8) != 0 && fail++ < 5)
          printf("pending=%d row %d c=%d: f16 image %.17g, want %.17g\n", pending, n, c, mf[o], wf);
      }
    }
  }
  if (fail) {
    printf("emu: the reference template FAILED in %d places\n", fail);
    return 1;
  }
  printf("emu: hc_read's reference template is bitwise the math for rows {0, 4, 6} of T = 7\n");
  return 0;
}
