/*
 * relay_t_emu.cc: runs relay_t's arithmetic (kernels-src/hc_read/relay_t.h,
 * the functions the kernel calls for the norm, the relayed chains, the row
 * butterflies, the gather, the up stage and the mix, with their indexing)
 * on the CPU emulator (emu.h) at the shipped sizes, and checks every output
 * bit, and resid with pending, against the spec's canonical order
 * (hc_read_canon.h), for the token counts in EMU_TS, with and without
 * pending.  Build and run with tests/emu/run.sh (several TG, UPT) or make
 * check (test_relay_t_emu, one point).
 *
 * What it does not run: the sm_90 machinery of relay_t.cu around those
 * functions (bulk copies and their mbarriers, st.async between the blocks
 * of a cluster, the grid barrier, PDL).  Here a block of stream s runs
 * after the block of stream s - 1 of its cluster, and its hand-offs go
 * through a plain array (hand, [cluster][t][thread]); the up stage is a
 * second launch, after every block's lo.  So the bits of every sum and the
 * thread-to-element mapping are checked; the synchronisation is the GPU
 * probe's to check (parity against v1 on the card).
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

#include <algorithm>
using std::min;

#include "hc_read.h"
#define PF 0
#include "fast_common.h"
#include "relay_t.h"
#include "hc_read_canon.h"

static_assert(RT_TMAX * RT_NT * 4 % 16 == 0, "relay_t_emu: 16-byte aligned regions");

/* Shared memory of the down launch: w_norm, rcv [t][tid], red [t][8],
 * then xs [T][C]. */
#define ED_RCV (C * 2)
#define ED_RED (ED_RCV + RT_TMAX * RT_NT * 4)
#define ED_X (ED_RED + RT_TMAX * 8 * 4)
/* Of the up launch: rcv [t][80], los [2][t][K/8] f4, gt [t][80], w_up [80][K]. */
#define EU_LOS (RT_TMAX * RT_NR * 4)
#define EU_GT (EU_LOS + RT_TMAX * K * 4)
#define EU_WU (EU_GT + RT_TMAX * RT_NR * 4)
#define EU_END (EU_WU + RT_NR * K * 2)

/* Block (s, c) of the down stage, relay_t.cu's first half. */
static void emu_rt_down(const float *resid, const float *pending, const hct_u16 *w_norm, const hct_u16 *w_down,
                        float *hand, float *lo, int T) {
  HCT_DYN_SHARED(hct_u4, smv);
  char *sm = (char *)smv;
  hct_u16 *wn = (hct_u16 *)sm;
  float *rcv = (float *)(sm + ED_RCV), *red = (float *)(sm + ED_RED), *xs = (float *)(sm + ED_X);
  const int tid = (int)threadIdx.x, s = (int)blockIdx.x, c = (int)blockIdx.y;
  const int dl = tid / RT_RPC, dj = tid % RT_RPC;
  /* The bulk copies: R of token tid, and w_norm. */
  if (tid < T) memcpy(xs + (size_t)tid * C, resid + ((size_t)tid * S + s) * C, C * 4);
  if (tid == 0) memcpy(wn, w_norm + (size_t)s * C, C * 2);
  hct_u4 wr[RT_QS];
  rt_load_wr(wr, w_down, c, s, dl, dj);
  __syncthreads(); /* stands for the copies' mbarriers */
  float *hc = hand + (size_t)c * RT_TMAX * RT_NT;
  rt_down(
      T, c, s, xs, pending, wn, red, rcv, wr, tid, [](int) {}, []() {},
      [&](int gi) {
        /* What stream s - 1 sent into this block's rcv. */
        for (int t = gi * TG; t < min(T, gi * TG + TG); ++t) rcv[t * RT_NT + tid] = hc[t * RT_NT + tid];
      },
      [&](float *dst, float v, int) { hc[dst - rcv] = v; });
  __syncthreads();
  if (s == S - 1 && tid < T * RT_RPC) {
    const int t = tid / RT_RPC, j = tid % RT_RPC;
    lo[(size_t)t * K + RT_RPC * c + j] = rt_row_sum(rcv, t, j);
  }
}

/* Block b of the up stage, relay_t.cu's second half. */
static void emu_rt_up(float *resid, const float *pending, const hct_u16 *w_up, const float *lo, float *mixed,
                      hct_u16 *mb, hct_u16 *mh, int T) {
  HCT_DYN_SHARED(hct_u4, smv);
  char *sm = (char *)smv;
  float *rcv = (float *)sm, *los = (float *)(sm + EU_LOS), *gt = (float *)(sm + EU_GT);
  hct_u16 *wub = (hct_u16 *)(sm + EU_WU);
  const int tid = (int)threadIdx.x, cu0 = (int)blockIdx.x * RT_NCU;
  rt_gather(resid, pending, lo, los, rcv, T, tid, cu0, [](const float *p) { return *(const hct_f4 *)p; });
  if (tid == 0) /* hct_bulk_copy_runs: S runs of 20 rows */
    for (int i = 0; i < S; ++i)
      memcpy(wub + (size_t)i * RT_NCU * K, w_up + (size_t)cu0 * K + (size_t)i * C * K, RT_NCU * K * 2);
  __syncthreads();
  rt_upmix(T, wub, los, gt, rcv, tid, cu0, mixed, mb, mh);
}

static Outs run(int T, std::vector<float> R, const float *P, const std::vector<uint16_t> &wn,
                const std::vector<uint16_t> &wd, const std::vector<uint16_t> &wu) {
  const float nan = __uint_as_float(0x7fc0dead);
  std::vector<float> hand((size_t)(K / RT_RPC) * RT_TMAX * RT_NT, nan), lo((size_t)T * K, nan);
  Outs o;
  o.mixed.assign((size_t)T * C, nan);
  o.mb.assign((size_t)T * C, 0x7fd3);
  o.mh.assign((size_t)T * C, 0x7fd3);
  emu::launch(dim3{S, K / RT_RPC, 1}, dim3{RT_NT, 1, 1}, (size_t)ED_X + (size_t)T * C * 4, emu_rt_down,
              (const float *)R.data(), P, wn.data(), wd.data(), hand.data(), lo.data(), T);
  emu::launch(dim3{RT_NB, 1, 1}, dim3{RT_NT, 1, 1}, (size_t)EU_END, emu_rt_up, R.data(), P, wu.data(),
              (const float *)lo.data(), o.mixed.data(), o.mb.data(), o.mh.data(), T);
  o.resid = R;
  return o;
}

/* Every T of ts, with and without pending; prints a line each and returns
 * the number that differ. */
static int check_all(const int *ts, int nt) {
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
      const Outs want = canonical(T, R, P, wn, wd, wu);
      const Outs got = run(T, R, P, wn, wd, wu);
      int f = compare("resid", got.resid, want.resid) + compare("mixed", got.mixed, want.mixed) +
              compare("mixed_bf16", got.mb, want.mb) + compare("mixed_f16", got.mh, want.mh);
      printf("relay_t T=%d%s TG=%d UPT=%d: %s\n", T, pending ? " pending" : "", TG, UPT,
             f ? "DIFFERS from the canonical order" : "bitwise equal");
      failures += f != 0;
    }
  return failures;
}

#ifndef EMU_TS
#define EMU_TS 1, 3, 8
#endif
static const int emu_ts[] = {EMU_TS};

#ifdef EMU_CMOCKA
/* make check's test_relay_t_emu: one point (the Makefile's TG, UPT and
 * EMU_TS), a partial token group and a partial up pass among them. */
static void test_relay_t_bits(void **state) {
  (void)state;
  assert_int_equal(check_all(emu_ts, (int)(sizeof emu_ts / sizeof emu_ts[0])), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_relay_t_bits)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main() { return check_all(emu_ts, (int)(sizeof emu_ts / sizeof emu_ts[0])) ? 1 : 0; }
#endif
