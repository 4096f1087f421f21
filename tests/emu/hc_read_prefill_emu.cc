/*
 * hc_read_prefill_emu.cc: runs one hc_read_prefill template (EMU_VARIANT:
 * 1 pair_simt, 2 pair_mma, 3 upmix) on the CPU emulator (emu.h) at
 * reduced sizes and checks every output bit against the prefill op's
 * canonical order computed here step by step in float32: the canonical
 * norm, xn rounded to bf16, each lo and u one fmaf chain in ascending k
 * from 0, lo rounded to bf16, the gate, the canonical mix.  At the first
 * token count the op's float64 reference (reference.cu) runs too, on three
 * rows, and the variant must be within the baseline's bound of it.
 *
 * The tensor-core variants run on emulations of ldmatrix.x4 and
 * mma.m16n8k16 written from the PTX ISA's fragment layouts (below): the
 * emulated mma sums its 16 products in ascending k with fmaf, so a right
 * tiling gives exactly the SIMT chain, and any error in the fragments, the
 * pipeline's stages, the row guards, the stream grouping of the up GEMM or
 * an epilogue shows as differing bits.  (The GPU's mma rounds otherwise:
 * the GPU test checks pair_mma against the float64 reference, upmix
 * against pair_mma.)  Built and run by tests/emu/run-prefill.sh.
 */
#define HCT_EMU_PTX 1
#include "emu.h"

#include "hct_kernel.h"

#include <stdint.h>

/* ---- the PTX wrappers of prefill_mma.h, emulated ------------------------ */

namespace pfemu {
struct Lane {
  hct_u32 addr;
  hct_u32 a[4], b0, b1;
};
inline std::vector<Lane> lanes(1024); /* one per thread of a block */

inline int me() { return emu::lin(emu::cur); }
inline Lane *warp_lanes() {
  return &lanes[(size_t)(me() / 32) * 32];
}
inline void warp_sync() { emu::arrive(emu::warp_bar[(size_t)(me() / 32)]); }
inline char *smem_at(hct_u32 a, size_t bytes) {
  if ((size_t)a + bytes > emu::dyn_smem.size()) {
    fprintf(stderr, "emu: shared access at %u + %zu past the %zu bytes of dynamic shared memory\n", a, bytes,
            emu::dyn_smem.size());
    exit(3);
  }
  return emu::dyn_smem.data() + a;
}
/* The bf16 at half h of a 32-bit fragment word, as a float. */
inline float half_of(hct_u32 w, int h) { return __uint_as_float(h ? (w & 0xffff0000u) : (w << 16)); }
}  // namespace pfemu

inline hct_u32 pm_smem_addr(const void *p) { return (hct_u32)((const char *)p - emu::dyn_smem.data()); }

/* The launch's dynamic shared memory (the manifest's formula, as run()
 * passes it) against what the tiles need. */
inline void pm_check_smem(hct_u32 need) {
  if (emu::dyn_smem.size() < need) {
    fprintf(stderr, "emu: %zu bytes of dynamic shared memory, the tiles need %u\n", emu::dyn_smem.size(), need);
    exit(3);
  }
}

/* cp.async with src-size 16 or 0: done at once here. */
inline void pm_cp16(hct_u32 dst, const void *src, bool valid) {
  char *d = pfemu::smem_at(dst, 16);
  if ((dst & 15) != 0) {
    fprintf(stderr, "emu: cp.async to an unaligned shared address %u\n", dst);
    exit(3);
  }
  if (valid) memcpy(d, src, 16);
  else memset(d, 0, 16);
}

/* ldmatrix.m8n8.x4.b16: lanes 8i..8i+7 give the row addresses of matrix i;
 * lane l receives in r[i] the 32-bit word (l % 4) of row l / 4 of matrix i. */
inline void pm_ldsm4(hct_u32 (&r)[4], hct_u32 addr) {
  pfemu::Lane *w = pfemu::warp_lanes();
  const int lane = pfemu::me() % 32;
  if ((addr & 15) != 0) {
    fprintf(stderr, "emu: ldmatrix row address %u not 16-byte aligned\n", addr);
    exit(3);
  }
  w[lane].addr = addr;
  pfemu::warp_sync();
  for (int i = 0; i < 4; i++) memcpy(&r[i], pfemu::smem_at(w[8 * i + lane / 4].addr + 4 * (lane % 4), 4), 4);
  pfemu::warp_sync();
}

/* mma.m16n8k16.row.col.f32.bf16.bf16.f32, d += A B.  Fragments (lane l,
 * g = l / 4, q = l % 4): A's a0 = (row g, k 2q..2q+1), a1 = (row g+8, same
 * k), a2 = (row g, k 2q+8..), a3 = (row g+8, k 2q+8..); B's b0 = (k
 * 2q..2q+1, column g), b1 = (k 2q+8.., column g); d0, d1 = (row g, columns
 * 2q, 2q+1), d2, d3 = (row g+8, the same columns).  The low half of a word
 * is the lower k. */
inline void pm_mma(float (&d)[4], const hct_u32 (&a)[4], hct_u32 b0, hct_u32 b1) {
  pfemu::Lane *w = pfemu::warp_lanes();
  const int lane = pfemu::me() % 32;
  for (int i = 0; i < 4; i++) w[lane].a[i] = a[i];
  w[lane].b0 = b0;
  w[lane].b1 = b1;
  pfemu::warp_sync();
  for (int e = 0; e < 4; e++) {
    const int row = lane / 4 + (e >= 2 ? 8 : 0), col = 2 * (lane % 4) + (e & 1);
    float acc = d[e];
    for (int k = 0; k < 16; k++) {
      const pfemu::Lane &ha = w[(row % 8) * 4 + (k % 8) / 2];
      const pfemu::Lane &hb = w[col * 4 + (k % 8) / 2];
      const float av = pfemu::half_of(ha.a[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
      const float bv = pfemu::half_of(k >= 8 ? hb.b1 : hb.b0, k % 2);
      acc = fmaf(av, bv, acc);
    }
    d[e] = acc;
  }
  pfemu::warp_sync();
}

#if EMU_VARIANT == 1
#include "pair_simt.cu"
static const char *const variant = "pair_simt";
#elif EMU_VARIANT == 2
#include "pair_mma.cu"
static const char *const variant = "pair_mma";
#elif EMU_VARIANT == 3
#include "upmix.cu"
static const char *const variant = "upmix";
#else
#error "EMU_VARIANT must be 1, 2 or 3"
#endif
/* The op's float64 reference (hc_pf_ref_*), checked against the variant. */
#include "reference.cu"


/* ---- inputs and the canonical order ---------------------------------------*/

static uint64_t rng_state = 0x5eed2023;
static double normal() {
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
static uint16_t to_bf(float f) { return hct_bits_to_bf16(__float_as_uint(f)); }

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

static Outs canonical(int T, const std::vector<float> &R, const float *P, const std::vector<uint16_t> &wn,
                      const std::vector<uint16_t> &wd, const std::vector<uint16_t> &wu) {
  std::vector<float> rp((size_t)T * D), g((size_t)T * D);
  std::vector<uint16_t> xn((size_t)T * D), lo((size_t)T * K);
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
      const float ss = butterfly(w8, 8);
      const float rs = 1.0f / sqrtf(ss / (float)C + 1e-6f);
      for (int c = 0; c < C; c++) {
        const float y = x[c] * bf(wn[(size_t)s * C + c]);
        xn[(size_t)t * D + (size_t)s * C + c] = to_bf(y * rs);
      }
    }
  for (int t = 0; t < T; t++)
    for (int j = 0; j < K; j++) {
      float acc = 0.0f;
      for (int k = 0; k < D; k++) acc = fmaf(bf(xn[(size_t)t * D + k]), bf(wd[(size_t)j * D + k]), acc);
      lo[(size_t)t * K + j] = to_bf(acc);
    }
  for (int t = 0; t < T; t++)
    for (int i = 0; i < D; i++) {
      float acc = 0.0f;
      for (int k = 0; k < K; k++) acc = fmaf(bf(lo[(size_t)t * K + k]), bf(wu[(size_t)i * K + k]), acc);
      g[(size_t)t * D + i] = 1.0f / (1.0f + expf(-acc));
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

static dim3 d3(unsigned x, unsigned y = 1) { return dim3{x, y, 1}; }
static unsigned cdiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

/* The variant's launches as its manifest entry lists them. */
static Outs run(int T, std::vector<float> R, const float *P, const std::vector<uint16_t> &wn,
                const std::vector<uint16_t> &wd, const std::vector<uint16_t> &wu) {
  std::vector<uint16_t> xn((size_t)T * D, 0x7fd3), lo((size_t)T * K, 0x7fd3);
  Outs o;
  o.mixed.assign((size_t)T * C, __uint_as_float(0x7fc0dead));
  o.mb.assign((size_t)T * C, 0x7fd3);
  o.mh.assign((size_t)T * C, 0x7fd3);
  float *r = R.data();
  const hct_u16 *pn = wn.data(), *pd = wd.data(), *pu = wu.data();
  emu::launch(d3(S, T), d3(256), 0, hc_pf_norm, r, P, pn, xn.data(), T);
#if EMU_VARIANT == 1
  std::vector<float> gated((size_t)T * D, __uint_as_float(0x7fc0dead));
  emu::launch(d3(K / DBN, cdiv(T, DBM)), d3(DBM * DBN / 32), 0, hc_ps_down, pd, (const hct_u16 *)xn.data(),
              lo.data(), T);
  emu::launch(d3(D / UBN, cdiv(T, UBM)), d3(UBM * UBN / 32), 0, hc_ps_up, pu, (const hct_u16 *)lo.data(),
              gated.data(), T);
  emu::launch(d3(cdiv(T * C, 256)), d3(256), 0, hc_pf_mix, (const float *)r, (const float *)gated.data(),
              o.mixed.data(), o.mb.data(), o.mh.data(), T);
#else
  emu::launch(d3(K / DBN, cdiv(T, DBM)), d3((DBM / DWR) * 2 * 32), (size_t)DST * (DBM + DBN) * 80, hc_pm_down, pd,
              (const hct_u16 *)xn.data(), lo.data(), T);
  const size_t up_smem = (size_t)UST * (UBM + UBN) * 80;
  const unsigned up_threads = (UBM / UWR) * (UBN / 64) * 32;
#if EMU_VARIANT == 2
  std::vector<float> gated((size_t)T * D, __uint_as_float(0x7fc0dead));
  emu::launch(d3(D / UBN, cdiv(T, UBM)), d3(up_threads), up_smem, hc_pm_up, pu, (const hct_u16 *)lo.data(),
              gated.data(), T);
  emu::launch(d3(cdiv(T * C, 256)), d3(256), 0, hc_pf_mix, (const float *)r, (const float *)gated.data(),
              o.mixed.data(), o.mb.data(), o.mh.data(), T);
#else
  emu::launch(d3(D / UBN, cdiv(T, UBM)), d3(up_threads), up_smem, hc_um_upmix, (const float *)r, pu,
              (const hct_u16 *)lo.data(), o.mixed.data(), o.mb.data(), o.mh.data(), T);
#endif
#endif
  o.resid = R;
  return o;
}

/*
 * The float64 reference on rows {0, T/2, T-1}: its resid must be R' exactly
 * and the variant's mixed within the baseline's bound of it (normwise,
 * 5e-3; the bf16 roundings put the variants about 1e-3 off): a reference
 * that reads or writes the wrong row or element is off by O(1).
 */
static int check_reference(int T, const std::vector<float> &R, const float *P, const std::vector<uint16_t> &wn,
                           const std::vector<uint16_t> &wd, const std::vector<uint16_t> &wu, const Outs &got) {
  const std::vector<int> rows = {0, T / 2, T - 1};
  const int n = (int)rows.size();
  std::vector<double> xn((size_t)n * D), lo((size_t)n * K), rr((size_t)n * D), rm((size_t)n * C),
      rb((size_t)n * C), rh((size_t)n * C);
  emu::launch(d3(S, n), d3(256), 0, hc_pf_ref_norm, R.data(), P, wn.data(), rows.data(), xn.data(), rr.data(), n);
  emu::launch(d3(K, n), d3(256), 0, hc_pf_ref_down, wd.data(), (const double *)xn.data(), lo.data(), n);
  emu::launch(d3((C + 255) / 256, n), d3(256), 0, hc_pf_ref_upmix, R.data(), P, wu.data(), rows.data(),
              (const double *)lo.data(), rm.data(), rb.data(), rh.data(), n);
  int bad = 0;
  double num = 0, den = 0;
  for (int i = 0; i < n; i++) {
    for (int e = 0; e < D; e++)
      bad += rr[(size_t)i * D + e] != (double)got.resid[(size_t)rows[i] * D + e];
    for (int c = 0; c < C; c++) {
      const double d = got.mixed[(size_t)rows[i] * C + c] - rm[(size_t)i * C + c];
      num += d * d;
      den += rm[(size_t)i * C + c] * rm[(size_t)i * C + c];
      bad += rb[(size_t)i * C + c] != (double)bf(hct_bits_to_bf16(__float_as_uint((float)rm[(size_t)i * C + c])));
    }
  }
  const double rel = sqrt(num / den);
  printf("  reference on rows 0, %d, %d: relative error of mixed %.2e, %d wrong resid or bf16 images\n", T / 2,
         T - 1, rel, bad);
  return bad != 0 || !(rel < 5e-3);
}

template <class V>
static int compare(const char *what, const V &got, const V &want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (memcmp(&got[i], &want[i], sizeof want[i]) != 0 && bad++ == 0) first = i;
  if (bad) fprintf(stderr, "  %s: %zu of %zu elements differ, first at %zu\n", what, bad, want.size(), first);
  return bad != 0;
}

int main() {
  int failures = 0;
#ifndef EMU_TS
#define EMU_TS 16, 40
#endif
  const int Ts[] = {EMU_TS};
  for (int T : Ts)
    for (int pending = 0; pending <= 1; pending++) {
      std::vector<float> R((size_t)T * D), Pv((size_t)T * D);
      std::vector<uint16_t> wn((size_t)D), wd((size_t)K * D), wu((size_t)D * K);
      for (auto &x : R) x = (float)normal();
      for (auto &x : Pv) x = (float)normal();
      for (auto &x : wn) x = to_bf((float)(1.0 + 0.1 * normal()));
      for (auto &x : wd) x = to_bf((float)(normal() / sqrt((double)D)));
      for (auto &x : wu) x = to_bf((float)(normal() / sqrt((double)K)));
      const float *P = pending ? Pv.data() : nullptr;
      const Outs want = canonical(T, R, P, wn, wd, wu);
      const Outs got = run(T, R, P, wn, wd, wu);
      int f = compare("resid", got.resid, want.resid) + compare("mixed", got.mixed, want.mixed) +
              compare("mixed_bf16", got.mb, want.mb) + compare("mixed_f16", got.mh, want.mh);
      if (T == Ts[0]) f += check_reference(T, R, P, wn, wd, wu, got);
      printf("%s T=%d%s DBM=%d DBN=%d DWR=%d UBM=%d UBN=%d UWR=%d: %s\n", variant, T, pending ? " pending" : "", DBM,
             DBN, DWR, UBM, UBN, UWR, f ? "DIFFERS from the canonical order" : "bitwise equal");
      failures += f != 0;
    }
  return failures ? 1 : 0;
}
