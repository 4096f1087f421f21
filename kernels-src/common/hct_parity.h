/*
 * hct_parity.h: what the comparison kernels (kernels-src/common/
 * parity_check.cu) hand the host, in the common subset of C and C++ so that
 * the kernels and tuner/parity.c compile the very same layout (no
 * <stdint.h>: NVRTC and hiprtc compile without toolkit headers).
 *
 * The host turns an hct_pc_result_t into the tuner's one representation of
 * the figures, hct_parity_figs_t (hct__parity_from_card), with the same
 * formulas hct__parity_metrics ends with: only sums, counts and maxima come
 * back from the card, never the outputs.
 */
#ifndef HCT_PARITY_H
#define HCT_PARITY_H

/* The first mismatches a check reports, by index. */
#define HCT_PC_FIRST 8
/* Threads of a block of the element kernels; a power of two (the block's
 * tree reduction halves it). */
#ifndef HCT_PC_THREADS
#define HCT_PC_THREADS 256
#endif
/* Threads of a block of the row kernel (one KL row a thread). */
#define HCT_PC_ROW_THREADS 64
/* Most blocks an element kernel runs: the reduction walks their partials
 * one after another on one thread, so their number stays small. */
#define HCT_PC_MAX_BLOCKS 1024

/* Dtype codes: hct_dtype_t's values (tuner/parity.c checks they agree). */
#define HCT_PC_F32 0
#define HCT_PC_BF16 1
#define HCT_PC_F16 2
#define HCT_PC_U32 3
#define HCT_PC_I32 4

/* Image kinds of hct_pc_elems: the output is the round-to-nearest-even
 * image of an f32 source of the same run (tuner/parity.c's rule). */
#define HCT_PC_IMAGE_NONE 0
#define HCT_PC_IMAGE_BF16 1
#define HCT_PC_IMAGE_F16 2

/* One block's share of the element passes; the reduction adds them in
 * block order, so the sums do not depend on which block ran first. */
typedef struct hct_pc_part_s {
  unsigned long long mismatches, unwritten, nonfinite, image_bad;
  unsigned long long nfirst;                    /* of first_idx, at most HCT_PC_FIRST */
  unsigned long long first_idx[HCT_PC_FIRST];   /* ascending */
  double se, sr, maxe, maxr;                    /* against the float64 reference */
} hct_pc_part_t;

/* What comes back: counts over every element, the float64 sums over the
 * reference's rows, the KL rows' sum and maximum in row order, and the
 * first mismatches with their bits. */
typedef struct hct_pc_result_s {
  unsigned long long mismatches, unwritten, nonfinite, image_bad;
  unsigned long long nfirst;
  unsigned long long first_idx[HCT_PC_FIRST];
  unsigned int first_got[HCT_PC_FIRST], first_want[HCT_PC_FIRST];
  double se, sr, maxe, maxr;
  double kl_sum, kl_max;
  unsigned long long kl_rows, agree;
} hct_pc_result_t;

#endif /* HCT_PARITY_H */
