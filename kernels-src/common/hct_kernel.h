/*
 * hct_kernel.h: what every kernel template includes.  Templates are compiled
 * at run time by NVRTC (HCT_CUDA=1) or hiprtc (HCT_HIP=1), without toolkit
 * headers, so this file provides the few things they need: fixed-width
 * types, bf16/f16 conversions, a warp shuffle, the entry point marker, and a
 * cp.async copy that falls back to a plain copy where it does not exist.
 *
 * Defines every template gets: the op constants (S, C, D, K), each
 * parameter of the point, HCT_WARP (hardware warp or wave width), HCT_ARCH
 * (90 for sm_90; the gfx number on HIP), and HCT_CUDA or HCT_HIP.
 *
 * Warps in the templates are *logical* warps of 32 lanes (HCT_LW): the
 * canonical summation orders of the ops are written for 32 lanes.  On a
 * 64-wide wave two logical warps share one wave; xor shuffles with masks
 * below 32 never cross between them.
 *
 * Math: rsqrtf, expf, fmaf, plain * + /.  Never fast-math intrinsics, and
 * never write a*b+c where the bits matter: with contraction on, the
 * compiler may fuse it; write fmaf or keep the product in its own statement
 * that no add follows.
 */
#ifndef HCT_KERNEL_H
#define HCT_KERNEL_H

#if !defined(HCT_CUDA) && !defined(HCT_HIP)
#error "hct_kernel.h: define HCT_CUDA or HCT_HIP"
#endif
#ifndef HCT_WARP
#error "hct_kernel.h: define HCT_WARP (32 on NVIDIA, 32 or 64 on AMD)"
#endif
#ifndef HCT_ARCH
#define HCT_ARCH 0
#endif

typedef signed char hct_i8;
typedef unsigned char hct_u8;
typedef short hct_i16;
typedef unsigned short hct_u16;
typedef int hct_i32;
typedef unsigned int hct_u32;
typedef long long hct_i64;
typedef unsigned long long hct_u64;

/* 16-byte vectors of our own, so no vector_types header is needed; loads
 * and stores of these are single 128-bit accesses. */
struct alignas(16) hct_f4 {
  float x, y, z, w;
};
struct alignas(16) hct_u4 {
  hct_u32 x, y, z, w;
};

#define HCT_EPS 1e-6f
#define HCT_LW 32
#define HCT_DEV __device__ __forceinline__
#define HCT_ENTRY extern "C" __global__
#define HCT_RESTRICT __restrict__

#include "hct_convert.h"

/* The block's dynamic shared memory as an array `name` of `type`.  A
 * macro so that the CPU emulator of the kernels (tests/emu/) can supply
 * it; use it rather than writing extern __shared__ directly. */
#ifndef HCT_DYN_SHARED
#define HCT_DYN_SHARED(type, name) extern __shared__ type name[]
#endif

/* ---- conversions ---------------------------------------------------------*/

HCT_DEV float hct_bf16_to_f32(hct_u16 h) { return __uint_as_float(((hct_u32)h) << 16); }
/* The low and high bf16 of a 32-bit word: elements 2i and 2i+1 of a
 * little-endian bf16 array. */
HCT_DEV float hct_bf16_lo(hct_u32 w) { return __uint_as_float(w << 16); }
HCT_DEV float hct_bf16_hi(hct_u32 w) { return __uint_as_float(w & 0xffff0000u); }
HCT_DEV hct_u16 hct_f32_to_bf16(float f) { return hct_bits_to_bf16(__float_as_uint(f)); }
HCT_DEV hct_u16 hct_f32_to_f16(float f) { return hct_bits_to_f16(__float_as_uint(f)); }

/* ---- warps ---------------------------------------------------------------*/

/* Every lane of the (hardware) warp must call it. */
HCT_DEV float hct_shfl_xor(float v, int lane_mask) {
#if defined(HCT_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

/* The canonical butterfly of a logical warp: offsets 16, 8, 4, 2, 1.  Every
 * lane ends with the same sum (a + b == b + a exactly). */
HCT_DEV float hct_warp_sum(float a) {
  a += hct_shfl_xor(a, 16);
  a += hct_shfl_xor(a, 8);
  a += hct_shfl_xor(a, 4);
  a += hct_shfl_xor(a, 2);
  a += hct_shfl_xor(a, 1);
  return a;
}

/* ---- asynchronous copies to shared memory --------------------------------*/

/* Copies 16 bytes from global to shared memory: cp.async on sm_80 and
 * later (lands after hct_cp_async_wait), a plain copy elsewhere (done at
 * once).  Both pointers 16-byte aligned.  Callers make the result visible
 * to other threads with __syncthreads() after the wait either way. */
HCT_DEV void hct_cp_async16(void *smem_dst, const void *gmem_src) {
#if defined(HCT_CUDA) && HCT_ARCH >= 80
  hct_u32 s;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }"
               : "=r"(s)
               : "l"(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem_src) : "memory");
#else
  *(hct_f4 *)smem_dst = *(const hct_f4 *)gmem_src;
#endif
}

HCT_DEV void hct_cp_async_commit(void) {
#if defined(HCT_CUDA) && HCT_ARCH >= 80
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* Waits until at most N committed groups are still in flight. */
template <int N>
HCT_DEV void hct_cp_async_wait(void) {
#if defined(HCT_CUDA) && HCT_ARCH >= 80
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

#endif /* HCT_KERNEL_H */
