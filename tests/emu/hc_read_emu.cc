/*
 * hc_read_emu.cc: runs the hc_read templates v1, v2 and v3 on the CPU (see
 * emu.h) at reduced sizes and checks, bit for bit, that each gives exactly
 * the canonical order of the spec, computed here step by step in float32,
 * with and without pending, for several token counts.  Build and run with
 * tests/emu/run.sh, which compiles it for several parameter points.
 */
#include "emu.h"

#include "v1.cu"
#include "v2.cu"
#include "v3.cu"

#include <stdint.h>

#include <string>

#include "hc_read_canon.h"

static dim3 d3(unsigned x, unsigned y = 1) { return dim3{x, y, 1}; }
static unsigned cdiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

/* Runs variant v (1, 2 or 3) with its launch sequence from the manifest. */
static Outs run(int v, int T, std::vector<float> R, const float *P, const std::vector<uint16_t> &wn,
                const std::vector<uint16_t> &wd, const std::vector<uint16_t> &wu) {
  /* Scratch and outputs start as NaN patterns, as the tuner poisons them. */
  std::vector<float> xn((size_t)T * D, __uint_as_float(0x7fc0dead)), lo((size_t)T * K, __uint_as_float(0x7fc0dead)),
      gate((size_t)T * D, __uint_as_float(0x7fc0dead));
  Outs o;
  o.mixed.assign((size_t)T * C, __uint_as_float(0x7fc0dead));
  o.mb.assign((size_t)T * C, 0x7fd3);
  o.mh.assign((size_t)T * C, 0x7fd3);
  float *r = R.data();
  const hct_u16 *pn = wn.data(), *pd = wd.data(), *pu = wu.data();
  switch (v) {
  case 1:
    emu::launch(d3(T), d3(256), 0, hc_v1_norm, r, P, pn, xn.data(), T);
    emu::launch(d3(cdiv(K, DOWN_WARPS), T), d3(DOWN_WARPS * 32), 0, hc_v1_down, pd, (const float *)xn.data(), lo.data(), T);
    emu::launch(d3(cdiv(D, UP_WARPS), T), d3(UP_WARPS * 32), 0, hc_v1_up, pu, (const float *)lo.data(), gate.data(), T);
    emu::launch(d3(cdiv(T * C, 256)), d3(256), 0, hc_v1_mix, (const float *)r, (const float *)gate.data(),
                o.mixed.data(), o.mb.data(), o.mh.data(), T);
    break;
  case 2:
    emu::launch(d3(S, T), d3(256), 0, hc_v2_norm, r, P, pn, xn.data(), T);
    emu::launch(d3(cdiv(K, DOWN_WARPS), T), d3(DOWN_WARPS * 32), 0, hc_v2_down, pd, (const float *)xn.data(), lo.data(), T);
    emu::launch(d3(cdiv(D, UP_WARPS), T), d3(UP_WARPS * 32), 0, hc_v2_up, pu, (const float *)lo.data(), gate.data(), T);
    emu::launch(d3(cdiv(T * C, 256)), d3(256), 0, hc_v2_mix, (const float *)r, (const float *)gate.data(),
                o.mixed.data(), o.mb.data(), o.mh.data(), T);
    break;
  case 3:
    emu::launch(d3(S, T), d3(256), 0, hc_v3_norm, r, P, pn, xn.data(), T);
    emu::launch(d3(cdiv(K, DOWN_WARPS), cdiv(T, TPL)), d3(DOWN_WARPS * 32), (size_t)TPL * 64 * (C / 16 + 4), /* TPL*10496 at C = 2560 */
                hc_v3_down, pd, (const float *)xn.data(), lo.data(), T);
    emu::launch(d3(cdiv(D, UP_WARPS), T), d3(UP_WARPS * 32), 0, hc_v3_up, pu, (const float *)lo.data(), gate.data(), T);
    emu::launch(d3(cdiv(T * C, 256)), d3(256), 0, hc_v3_mix, (const float *)r, (const float *)gate.data(),
                o.mixed.data(), o.mb.data(), o.mh.data(), T);
    break;
  }
  o.resid = R;
  return o;
}

int main() {
  int failures = 0;
#ifndef EMU_TS
#define EMU_TS 1, 3, 8
#endif
  const int Ts[] = {EMU_TS};
  for (int T : Ts)
    for (int pending = 0; pending <= 1; pending++) {
      std::vector<float> R((size_t)T * D), Pv((size_t)T * D);
      std::vector<uint16_t> wn((size_t)D), wd((size_t)K * D), wu((size_t)D * K);
      for (auto &x : R) x = (float)normal();
      for (auto &x : Pv) x = (float)normal();
      for (auto &x : wn) x = hct_bits_to_bf16(__float_as_uint((float)(1.0 + 0.1 * normal())));
      for (auto &x : wd) x = hct_bits_to_bf16(__float_as_uint((float)(normal() / sqrt((double)D))));
      for (auto &x : wu) x = hct_bits_to_bf16(__float_as_uint((float)(normal() / sqrt((double)K))));
      const float *P = pending ? Pv.data() : nullptr;
      const Outs want = canonical(T, R, P, wn, wd, wu);
      for (int v = 1; v <= 3; v++) {
        const Outs got = run(v, T, R, P, wn, wd, wu);
        int f = compare("resid", got.resid, want.resid) + compare("mixed", got.mixed, want.mixed) +
                compare("mixed_bf16", got.mb, want.mb) + compare("mixed_f16", got.mh, want.mh);
        printf("v%d T=%d%s DOWN_WARPS=%d UP_WARPS=%d TPL=%d: %s\n", v, T, pending ? " pending" : "",
               DOWN_WARPS, UP_WARPS, TPL, f ? "DIFFERS from the canonical order" : "bitwise equal");
        failures += f != 0;
      }
    }
  return failures ? 1 : 0;
}
