/*
 * hct_convert.h: float32 to bf16 and f16, round to nearest even, with
 * integer bit operations only.  Written in the common subset of C and C++ so
 * that the kernels (through hct_kernel.h) and the host tests compile the very
 * same text: tests/test_parity.c checks the tuner's host conversions against
 * it over a sweep of every float32 class.
 *
 * Functions take and return raw bits (unsigned int for a float32), so no
 * type punning intrinsic is needed here; hct_kernel.h wraps them for floats.
 */
#ifndef HCT_CONVERT_H
#define HCT_CONVERT_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__) || defined(__HIPCC__) || \
    defined(__HIPCC_RTC__)
#define HCT_CONV_FN __device__ __forceinline__
#else
#define HCT_CONV_FN static inline
#endif

/* bf16 is the top half of a float32: add half an ulp of bf16 minus one,
 * plus the lowest kept bit, so that ties go to the even neighbour.  NaNs
 * stay NaN (quieted) rather than rounding into infinity. */
HCT_CONV_FN unsigned short hct_bits_to_bf16(unsigned int u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

/* f16: 5 exponent bits (bias 15), 10 mantissa bits, subnormals below 2^-14
 * in units of 2^-24. */
HCT_CONV_FN unsigned short hct_bits_to_f16(unsigned int u) {
  unsigned int sign = (u >> 16) & 0x8000u;
  unsigned int a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  /* 65520 is halfway between 65504 (odd mantissa) and 65536: it and every
   * larger value, infinity included, round to infinity. */
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    /* Normal: rebias the exponent (127 - 15 = 112), then round away the
     * low 13 mantissa bits; a carry into the exponent is right. */
    unsigned int r = a - 0x38000000u;
    r += 0x0fffu + ((r >> 13) & 1u);
    return (unsigned short)(sign | (r >> 13));
  }
  /* Below half the smallest subnormal (2^-25, itself a tie to 0): zero. */
  if (a <= 0x33000000u) return (unsigned short)sign;
  {
    unsigned int e = a >> 23;                     /* 102..112 */
    unsigned int m = (a & 0x7fffffu) | 0x800000u; /* 24 significant bits */
    unsigned int shift = 126u - e;                /* 14..24 */
    unsigned int q = m >> shift;
    unsigned int rem = m & ((1u << shift) - 1u);
    unsigned int half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q += 1u;
    return (unsigned short)(sign | q);
  }
}

#endif /* HCT_CONVERT_H */
