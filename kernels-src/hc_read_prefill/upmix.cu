/*
 * upmix: pair_mma with the mix as the up GEMM's epilogue: the gated tensor
 * is never written.  Three launches: the norm (prefill.h), pair_mma's down
 * GEMM (prefill_mma.h, as it is), and the up GEMM whose block holds the
 * same UBN/S channels of all S streams (w_up rows s*C + c), so that each
 * thread has, in registers, the 4 gates of its (token, channel) pairs and
 * mixes them with R' read from resid.
 *
 * Bitwise against pair_mma: u of every element is the same mma sequence
 * (k-steps ascending from 0, prefill_mma.h), the gate is hcr_sigmoid and
 * the mix hcr_mix_sum (hc_read.h), as in pair_mma's up and mix kernels; the
 * gate goes through no memory here, where pair_mma stores it as f32 and
 * reads it back (exact).  The point never changes the bits.
 *
 * Why it stays beside wgmma_pb, which gives the same bits faster on sm_90
 * (H200, 2026-12-06: 461.9 against 734.4 us a read at T = 8192): wgmma_pb
 * is sm_90a code and runs on sm_90 only, so on every other card from sm_80
 * up the bit family is pair_mma and upmix alone (measured on the H200:
 * upmix faster than pair_mma at every T, by 9-15% from T = 2048 up).
 *
 * Parameters: as pair_mma's: DBM, DBN, DWR, DST (down), UBM, UBN, UWR, UST
 * (up and mix).
 *
 * Expected on the H200 at T = 8192: norm about 130 us (R read, xn
 * written: bandwidth); down as pair_mma's, 110-140 us (L2 bandwidth and
 * mma issue); up and mix 150-190 us: R read (335 MB) and mixed written
 * (168 MB) at about 3.5 TB/s are about 145 us, overlapping the 53.7 GFLOP
 * of mma (about 90 us) when two or three blocks share an SM, with the
 * gate's expf and division (84 M of each) on the FMA pipes beside them.
 * About 390-460 us a read (the target: 450).
 */
#include "prefill_upmix.h"
