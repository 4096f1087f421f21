/*
 * cuda_abi.h: the CUDA driver's and NVRTC's types and constants as hctune
 * uses them, declared here from their documented ABI so that building
 * needs no CUDA toolkit: the libraries are loaded with dlopen at run time
 * (jit/cuda_driver.c, jit/cuda.c), and only their binary interface
 * matters.  As dlopen loaders such as cuew do, with hctune's own subset.
 *
 * The rules of that interface: CUresult, nvrtcResult and every enum are
 * int-sized; CUdevice is an int and CUdeviceptr an unsigned long long
 * (64-bit hosts only); handles are pointers to opaque structs; a
 * CUtensorMap is 128 bytes aligned to 128 (the driver wants 64); the
 * launch attribute and configuration structs as cuda.h lays them out.
 *
 * Every value below is cuda.h's or nvrtc.h's exactly, and
 * tests/test_cuda_abi.c checks each one, and the sizes and offsets of
 * HCT_CUDA_LAYOUT, against the toolkit's headers where a toolkit is
 * installed (skipping, saying so, where none is).  To use a new constant:
 * add it to HCT_CUDA_VALUES with cuda.h's value; the test then checks it.
 *
 * Defining HCT_CUDA_VALUES_ONLY before including this gives the two lists
 * alone (the test includes cuda.h beside them).
 */
#ifndef HCT_CUDA_ABI_H
#define HCT_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

/* XX(name, value): the constants hctune names, with cuda.h's and
 * nvrtc.h's values (CUDA 13.0). */
#define HCT_CUDA_VALUES(XX) \
  XX(CUDA_SUCCESS, 0) \
  XX(CUDA_ERROR_INVALID_VALUE, 1) \
  XX(CUDA_ERROR_OUT_OF_MEMORY, 2) \
  XX(CUDA_ERROR_NOT_INITIALIZED, 3) \
  XX(CUDA_ERROR_STUB_LIBRARY, 34) \
  XX(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, 36) \
  XX(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803) \
  XX(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804) \
  XX(CUDA_ERROR_NO_DEVICE, 100) \
  XX(CUDA_ERROR_INVALID_DEVICE, 101) \
  XX(CUDA_ERROR_DEVICE_UNAVAILABLE, 46) \
  XX(CUDA_ERROR_NOT_READY, 600) \
  XX(CUDA_ERROR_INVALID_IMAGE, 200) \
  XX(CUDA_ERROR_INVALID_PTX, 218) \
  XX(CUDA_ERROR_NO_BINARY_FOR_GPU, 209) \
  XX(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222) \
  XX(CUDA_ERROR_NOT_SUPPORTED, 801) \
  XX(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221) \
  XX(CUDA_ERROR_FILE_NOT_FOUND, 301) \
  XX(CUDA_ERROR_NOT_FOUND, 500) \
  XX(CUDA_ERROR_OPERATING_SYSTEM, 304) \
  XX(CUDA_ERROR_INVALID_HANDLE, 400) \
  XX(CUDA_ERROR_INVALID_CONTEXT, 201) \
  XX(CUDA_ERROR_ILLEGAL_ADDRESS, 700) \
  XX(CUDA_ERROR_MISALIGNED_ADDRESS, 716) \
  XX(CUDA_ERROR_LAUNCH_FAILED, 719) \
  XX(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715) \
  XX(CUDA_ERROR_HARDWARE_STACK_ERROR, 714) \
  XX(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717) \
  XX(CUDA_ERROR_INVALID_PC, 718) \
  XX(CUDA_ERROR_ASSERT, 710) \
  XX(CUDA_ERROR_ECC_UNCORRECTABLE, 214) \
  XX(CUDA_ERROR_LAUNCH_TIMEOUT, 702) \
  XX(CUDA_ERROR_TIMEOUT, 909) \
  XX(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701) \
  XX(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720) \
  XX(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900) \
  XX(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 13) \
  XX(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16) \
  XX(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 10) \
  XX(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 38) \
  XX(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75) \
  XX(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76) \
  XX(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 97) \
  XX(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8) \
  XX(CU_STREAM_NON_BLOCKING, 1) \
  XX(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 1) \
  XX(CU_EVENT_DEFAULT, 0) \
  XX(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 6) \
  XX(CU_TENSOR_MAP_DATA_TYPE_UINT32, 2) \
  XX(CU_TENSOR_MAP_DATA_TYPE_INT32, 3) \
  XX(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 6) \
  XX(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 7) \
  XX(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 9) \
  XX(CU_TENSOR_MAP_INTERLEAVE_NONE, 0) \
  XX(CU_TENSOR_MAP_SWIZZLE_NONE, 0) \
  XX(CU_TENSOR_MAP_SWIZZLE_32B, 1) \
  XX(CU_TENSOR_MAP_SWIZZLE_64B, 2) \
  XX(CU_TENSOR_MAP_SWIZZLE_128B, 3) \
  XX(CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 3) \
  XX(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, 0) \
  XX(NVRTC_SUCCESS, 0) \
  XX(NVRTC_ERROR_OUT_OF_MEMORY, 1) \
  XX(NVRTC_ERROR_PROGRAM_CREATION_FAILURE, 2) \
  XX(NVRTC_ERROR_INVALID_INPUT, 3) \
  XX(NVRTC_ERROR_INVALID_PROGRAM, 4) \
  XX(NVRTC_ERROR_INVALID_OPTION, 5) \
  XX(NVRTC_ERROR_COMPILATION, 6) \
  XX(NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, 7) \
  XX(NVRTC_ERROR_INTERNAL_ERROR, 11)

/* XX(expression): the sizes, alignments and offsets hctune relies on. */
#define HCT_CUDA_LAYOUT(XX)                                                                \
  XX(sizeof(CUresult)) XX(sizeof(nvrtcResult)) XX(sizeof(CUdevice)) XX(sizeof(CUdeviceptr)) \
  XX(sizeof(CUdevice_attribute)) XX(sizeof(CUfunction_attribute))                          \
  XX(sizeof(CUstreamCaptureMode)) XX(sizeof(CUtensorMapDataType))                          \
  XX(sizeof(CUtensorMapInterleave)) XX(sizeof(CUtensorMapSwizzle))                         \
  XX(sizeof(CUtensorMapL2promotion)) XX(sizeof(CUtensorMapFloatOOBfill))                   \
  XX(sizeof(cuuint32_t)) XX(sizeof(cuuint64_t)) XX(sizeof(CUuuid))                         \
  XX(sizeof(CUtensorMap)) XX(_Alignof(CUtensorMap))                                        \
  XX(sizeof(CUlaunchAttribute)) XX(offsetof(CUlaunchAttribute, value))                     \
  XX(offsetof(CUlaunchAttribute, value.programmaticStreamSerializationAllowed))            \
  XX(sizeof(CUlaunchConfig)) XX(offsetof(CUlaunchConfig, blockDimX))                       \
  XX(offsetof(CUlaunchConfig, sharedMemBytes)) XX(offsetof(CUlaunchConfig, hStream))       \
  XX(offsetof(CUlaunchConfig, attrs)) XX(offsetof(CUlaunchConfig, numAttrs))

#ifndef HCT_CUDA_VALUES_ONLY

#define HCT_CUDA_ENUM_ROW(name, value) name = value,
enum { HCT_CUDA_VALUES(HCT_CUDA_ENUM_ROW) };
#undef HCT_CUDA_ENUM_ROW

typedef int CUresult;
typedef int nvrtcResult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef int CUstreamCaptureMode;
typedef int CUlaunchAttributeID;
typedef int CUtensorMapDataType;
typedef int CUtensorMapInterleave;
typedef int CUtensorMapSwizzle;
typedef int CUtensorMapL2promotion;
typedef int CUtensorMapFloatOOBfill;
typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct _nvrtcProgram *nvrtcProgram;

typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

typedef struct CUtensorMap_st {
  _Alignas(128) cuuint64_t opaque[16];
} CUtensorMap;

/* The value of a launch attribute: a union padded to 64 bytes, of which
 * hctune sets one int. */
typedef union CUlaunchAttributeValue_union {
  char pad[64];
  int programmaticStreamSerializationAllowed;
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

#endif /* HCT_CUDA_VALUES_ONLY */
#endif /* HCT_CUDA_ABI_H */
