/*
 * slice_emu.cc: runs slice's arithmetic (kernels-src/hc_read/slice.h: the
 * functions the kernel calls for the weight tiles, the norm, the cluster's
 * exchanges, the chains, the row butterflies, the gather, the up stage and
 * the mix, with their indexing) on the CPU emulator (emu.h) at the shipped
 * sizes, and checks every output bit, and resid with pending, against the
 * spec's canonical order (hc_read_canon.h), for the token counts in EMU_TS,
 * with and without pending.  Build and run with tests/emu/run.sh (both NCL,
 * several T, and mutations of slice.h that must fail) or make check
 * (test_slice_emu, one point).
 *
 * What stands in for the sm_90 machinery of slice.cu: the kernel runs as
 * four launches, split where it waits on other blocks (the cluster's norm
 * sums, the cluster's row partials, the grid barrier); each block's shared
 * memory is saved at the end of a launch and restored at the start of the
 * next; a send into a peer's shared memory (st.async) is posted to that
 * peer and written into its shared memory when its next launch starts,
 * and the bytes each block receives are checked against the bytes its
 * mbarrier expects (slice.h's sl_ns_bytes, sl_rs_bytes: a mismatch would
 * hang the card), with no element written twice and none outside the
 * region it belongs to.  The copies (cp.async) are plain copies.  So the
 * bits of every sum, the thread-to-element mapping and the exchanges'
 * addressing are checked; the ordering of the real waits is the card's
 * probe's to check (parity against v1).
 */
#ifdef EMU_CMOCKA
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka's print_error has no C++ linkage of its own; test_main.h (the
 * filter every test program honours) comes inside the same block. */
extern "C" {
#include <cmocka.h>

#include "../test_main.h"
}
#endif

#include "emu.h"

#include <utility>

#include "hc_read.h"
#include "slice.h"
#include "hc_read_canon.h"

namespace {

size_t g_smem;                                        /* SL_SMEM(T) of the run */
std::vector<std::vector<char>> g_saved;               /* each block's shared memory between launches */
/* Sends posted to each block, a mailbox for each exchange (the cluster's
 * norm sums, the row partials): a block of the next launch may post the
 * second before its receiver has taken the first. */
std::vector<std::vector<std::pair<int, float>>> g_mail[2];
int g_bad;                                            /* exchange faults seen */

/* A send: the float at byte `off` of block `dst`'s shared memory, which
 * must lie in [lo, hi). */
void post(int box, int dst, int off, float v, int lo, int hi) {
  if (off < lo || off + 4 > hi || off % 4 != 0) {
    fprintf(stderr, "  a send to block %d lands at byte %d, outside [%d, %d)\n", dst, off, lo, hi);
    g_bad++;
    return;
  }
  g_mail[box][(size_t)dst].push_back({off, v});
}

/* By every thread of block b at a launch's start: its saved shared memory
 * and what was sent to it into mailbox `box` (-1: none), which must be
 * `bytes` and no float twice. */
void restore(char *sm, int b, int box, int bytes) {
  if (threadIdx.x == 0) {
    memcpy(sm, g_saved[(size_t)b].data(), g_smem);
    std::vector<std::pair<int, float>> none;
    auto &m = box < 0 ? none : g_mail[box][(size_t)b];
    if ((int)m.size() * 4 != bytes) {
      fprintf(stderr, "  block %d received %zu bytes, its mbarrier expects %d\n", b, m.size() * 4, bytes);
      g_bad++;
    }
    std::vector<char> seen(g_smem / 4, 0);
    for (const auto &e : m) {
      if (seen[(size_t)e.first / 4]++) {
        fprintf(stderr, "  block %d: byte %d sent twice\n", b, e.first);
        g_bad++;
      }
      memcpy(sm + e.first, &e.second, 4);
    }
    m.clear();
  }
  __syncthreads();
}

void save(const char *sm, int b) {
  __syncthreads();
  if (threadIdx.x == 0) memcpy(g_saved[(size_t)b].data(), sm, g_smem);
}

sl_geo geo() {
  const int b = (int)blockIdx.x;
  return sl_geometry(b / SL_CL, b % SL_CL, b);
}

/* slice.cu up to the cluster's norm sums sent. */
void emu_norm(const float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down, int T) {
  HCT_DYN_SHARED(hct_u4, smv);
  char *sm = (char *)smv;
  const int tid = (int)threadIdx.x;
  const sl_geo o = geo();
  const auto cp16 = [](void *d, const void *s) { memcpy(d, s, 16); };
  sl_load_wn(sm, w_norm, o, tid, cp16);
  sl_load_wd(sm, w_down, o, tid, cp16);
  sl_norm(T, resid, pending, sm, o, tid);
  __syncthreads();
  sl_norm_send(T, sm, o, tid, [&](int off, float v, int rank) {
    post(0, o.g * SL_CL + rank, off, v, SL_OFF_NS, SL_OFF_NS + T * S * SL_CL * 4);
  });
  sl_load_rm(T, resid, pending, sm, o, tid);
  save(sm, o.b);
}

/* From the norm sums' wait to the row partials sent. */
void emu_down(int T) {
  HCT_DYN_SHARED(hct_u4, smv);
  char *sm = (char *)smv;
  const int tid = (int)threadIdx.x;
  const sl_geo o = geo();
  restore(sm, o.b, 0, sl_ns_bytes(T));
  sl_scales(T, sm, tid);
  __syncthreads();
  sl_xn(T, sm, tid);
  __syncthreads();
  sl_down(T, sm, o, tid, [&](int off, float v, int rank) {
    post(1, o.g * SL_CL + rank, off, v, SL_OFF_RSUM, SL_OFF_RSUM + SL_NSLOT * HCT_LW * 4);
  });
  save(sm, o.b);
}

/* From the row partials' wait to lo stored (the grid barrier's arrival). */
void emu_rows(float *lo, int T) {
  HCT_DYN_SHARED(hct_u4, smv);
  char *sm = (char *)smv;
  const sl_geo o = geo();
  restore(sm, o.b, 1, sl_rs_bytes(T, o.nr, o.r));
  sl_rows(T, sm, lo, o, (int)threadIdx.x);
  save(sm, o.b);
}

/* w_up's copies, then what follows the grid barrier. */
void emu_up(float *resid, const float *pending, const hct_u16 *w_up, const float *lo, float *mixed, hct_u16 *mb,
            hct_u16 *mh, int T) {
  HCT_DYN_SHARED(hct_u4, smv);
  char *sm = (char *)smv;
  const int tid = (int)threadIdx.x;
  const sl_geo o = geo();
  restore(sm, o.b, -1, 0);
  sl_load_wup(sm, w_up, o, tid, [](void *d, const void *s) { memcpy(d, s, 16); });
  sl_store_resid(T, resid, pending, sm, o, tid);
  sl_gather(T, lo, sm, tid, [](const float *p) { return *(const hct_f4 *)p; });
  __syncthreads();
  sl_upmix(T, sm, o, tid, mixed, mb, mh);
}

/* Bits of got against want, n floats; prints a line naming `what` when
 * any differ. */
int differ(const char *what, const float *got, const float *want, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
  if (bad) fprintf(stderr, "  %s: %zu of %zu differ\n", what, bad, n);
  return bad != 0;
}

/* Runs the four launches; the intermediates on the way (each rank's norm
 * warp sums as sent, every block's rs, lo) are checked against `in`,
 * whose differences count into g_bad: they name the step at fault, and
 * they show an order change that the outputs may round away (a norm chain
 * of ten squares reordered moves its sum by an ulp that the warp's larger
 * sums often absorb). */
Outs run(int T, std::vector<float> R, const float *P, const std::vector<uint16_t> &wn,
         const std::vector<uint16_t> &wd, const std::vector<uint16_t> &wu, const Inter &in) {
  const float nan = __uint_as_float(0x7fc0dead);
  g_smem = (size_t)SL_SMEM(T);
  g_saved.assign(SL_NB, std::vector<char>(g_smem));
  for (auto &box : g_mail) box.assign(SL_NB, {});
  std::vector<float> lo((size_t)T * K, nan);
  Outs o;
  o.mixed.assign((size_t)T * C, nan);
  o.mb.assign((size_t)T * C, 0x7fd3);
  o.mh.assign((size_t)T * C, 0x7fd3);
  const dim3 grid{SL_NB, 1, 1}, block{SL_NT, 1, 1};
  emu::launch(grid, block, g_smem, emu_norm, (const float *)R.data(), P, wn.data(), wd.data(), T);
  {
    std::vector<float> got, want;
    for (const auto &m : g_mail[0])
      for (const auto &e : m) {
        got.push_back(e.second);
        want.push_back(in.w8[(size_t)(e.first - SL_OFF_NS) / 4]); /* [t][s][rank] is [t][s][warp] */
      }
    g_bad += differ("norm warp sums sent", got.data(), want.data(), got.size());
  }
  emu::launch(grid, block, g_smem, emu_down, T);
  for (int b = 0; b < SL_NB; b++)
    g_bad += differ("rs", (const float *)(g_saved[(size_t)b].data() + SL_OFF_RS), in.rs.data(), (size_t)T * S);
  emu::launch(grid, block, g_smem, emu_rows, lo.data(), T);
  g_bad += differ("lo", lo.data(), in.lo.data(), lo.size());
  emu::launch(grid, block, g_smem, emu_up, R.data(), P, wu.data(), (const float *)lo.data(), o.mixed.data(),
              o.mb.data(), o.mh.data(), T);
  o.resid = R;
  return o;
}

/* Every T of ts, with and without pending; prints a line each and returns
 * the number that differ (or whose exchanges were wrong). */
int check_all(const int *ts, int nt) {
  int failures = 0;
  for (int k = 0; k < nt; k++)
    for (int pending = 0; pending <= 1; pending++) {
      const int T = ts[k];
      std::vector<float> R((size_t)T * D), Pv((size_t)T * D);
      std::vector<uint16_t> wn((size_t)D), wd((size_t)K * D), wu((size_t)D * K);
      for (auto &x : R) x = (float)normal();
      for (auto &x : Pv) x = (float)normal();
      for (auto &x : wn) x = hct_bits_to_bf16(__float_as_uint((float)(1.0 + 0.1 * normal())));
      for (auto &x : wd) x = hct_bits_to_bf16(__float_as_uint((float)(normal() / sqrt((double)D))));
      for (auto &x : wu) x = hct_bits_to_bf16(__float_as_uint((float)(normal() / sqrt((double)K))));
      const float *P = pending ? Pv.data() : nullptr;
      Inter in;
      const Outs want = canonical(T, R, P, wn, wd, wu, &in);
      g_bad = 0;
      const Outs got = run(T, R, P, wn, wd, wu, in);
      const int f = compare("resid", got.resid, want.resid) + compare("mixed", got.mixed, want.mixed) +
                    compare("mixed_bf16", got.mb, want.mb) + compare("mixed_f16", got.mh, want.mh) + (g_bad != 0);
      printf("slice T=%d%s NCL=%d: %s\n", T, pending ? " pending" : "", NCL,
             f ? "DIFFERS from the canonical order" : "bitwise equal");
      failures += f != 0;
    }
  return failures;
}

}  // namespace

#ifndef EMU_TS
#define EMU_TS 1, 5, 8
#endif
static const int emu_ts[] = {EMU_TS};

#ifdef EMU_CMOCKA
/* make check's test_slice_emu: one point (the Makefile's NCL and EMU_TS):
 * uneven rows and channels, a partial token pair and up quad. */
static void test_slice_bits(void **state) {
  (void)state;
  assert_int_equal(check_all(emu_ts, (int)(sizeof emu_ts / sizeof emu_ts[0])), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_slice_bits)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main() { return check_all(emu_ts, (int)(sizeof emu_ts / sizeof emu_ts[0])) ? 1 : 0; }
#endif
