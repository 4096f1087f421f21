/*
 * cuda_api.h: the CUDA driver as hctune loads it, one table for both of
 * its users: the tuner's backend (jit/cuda.c: its own contexts and
 * streams) and the engine's side of libhctune (client/cuda.c: the
 * caller's context and stream).  jit/cuda_driver.c loads libcuda.so.1
 * into it once, with dlopen, through jit/vendor_lib.c.  Apart from jit.h
 * because it needs the driver's types (jit/cuda_abi.h: no toolkit needed).
 */
#ifndef HCT_CUDA_API_H
#define HCT_CUDA_API_H

#include "cuda_abi.h"

#include "jit.h"

/* Whether a symbol's absence fails the load (hct_vendor_sym_t.required). */
enum { OPT = 0, REQ = 1 };

/*
 * The driver symbols: XX(return type, field, arguments, symbol, required).
 * cuda.h #defines many plain names to versioned ones (cuMemAlloc is
 * cuMemAlloc_v2); fields carry the versioned name itself so that what is
 * called is what is looked up.  Old unversioned symbols kept as fallbacks
 * get a _v1 field name.
 */
#define HCT_CU_SYMBOLS(XX)                                                                \
  XX(CUresult, cuInit, (unsigned int), "cuInit", REQ)                                     \
  XX(CUresult, cuDriverGetVersion, (int *), "cuDriverGetVersion", REQ)                    \
  XX(CUresult, cuGetErrorName, (CUresult, const char **), "cuGetErrorName", REQ)          \
  XX(CUresult, cuGetErrorString, (CUresult, const char **), "cuGetErrorString", REQ)      \
  XX(CUresult, cuDeviceGetCount, (int *), "cuDeviceGetCount", REQ)                        \
  XX(CUresult, cuDeviceGet, (CUdevice *, int), "cuDeviceGet", REQ)                        \
  XX(CUresult, cuDeviceGetName, (char *, int, CUdevice), "cuDeviceGetName", REQ)          \
  XX(CUresult, cuDeviceGetUuid_v2, (CUuuid *, CUdevice), "cuDeviceGetUuid_v2", OPT)       \
  XX(CUresult, cuDeviceGetUuid_v1, (CUuuid *, CUdevice), "cuDeviceGetUuid", OPT)          \
  XX(CUresult, cuDeviceGetAttribute, (int *, CUdevice_attribute, CUdevice),               \
     "cuDeviceGetAttribute", REQ)                                                         \
  XX(CUresult, cuDeviceTotalMem_v2, (size_t *, CUdevice), "cuDeviceTotalMem_v2", REQ)     \
  XX(CUresult, cuDeviceGetPCIBusId, (char *, int, CUdevice), "cuDeviceGetPCIBusId", REQ)  \
  XX(CUresult, cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice),                         \
     "cuDevicePrimaryCtxRetain", REQ)                                                     \
  XX(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice), "cuDevicePrimaryCtxRelease_v2",  \
     REQ)                                                                                 \
  XX(CUresult, cuCtxSetCurrent, (CUcontext), "cuCtxSetCurrent", REQ)                      \
  XX(CUresult, cuCtxGetCurrent, (CUcontext *), "cuCtxGetCurrent", REQ)                     \
  XX(CUresult, cuCtxGetDevice, (CUdevice *), "cuCtxGetDevice", REQ)                        \
  XX(CUresult, cuCtxPushCurrent_v2, (CUcontext), "cuCtxPushCurrent_v2", REQ)               \
  XX(CUresult, cuCtxPopCurrent_v2, (CUcontext *), "cuCtxPopCurrent_v2", REQ)               \
  XX(CUresult, cuCtxSynchronize, (void), "cuCtxSynchronize", REQ)                          \
  XX(CUresult, cuStreamCreate, (CUstream *, unsigned int), "cuStreamCreate", REQ)         \
  XX(CUresult, cuStreamDestroy_v2, (CUstream), "cuStreamDestroy_v2", REQ)                 \
  XX(CUresult, cuStreamSynchronize, (CUstream), "cuStreamSynchronize", REQ)               \
  XX(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t), "cuMemAlloc_v2", REQ)              \
  XX(CUresult, cuMemFree_v2, (CUdeviceptr), "cuMemFree_v2", REQ)                          \
  XX(CUresult, cuMemGetInfo_v2, (size_t *, size_t *), "cuMemGetInfo_v2", OPT)             \
  XX(CUresult, cuMemHostRegister_v2, (void *, size_t, unsigned int), "cuMemHostRegister_v2", \
     OPT)                                                                                   \
  XX(CUresult, cuMemHostUnregister, (void *), "cuMemHostUnregister", OPT)                 \
  XX(CUresult, cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, CUstream),       \
     "cuMemcpyHtoDAsync_v2", REQ)                                                         \
  XX(CUresult, cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, CUstream),             \
     "cuMemcpyDtoHAsync_v2", REQ)                                                         \
  XX(CUresult, cuMemsetD32_v2, (CUdeviceptr, unsigned int, size_t), "cuMemsetD32_v2", REQ)  \
  XX(CUresult, cuMemsetD32Async, (CUdeviceptr, unsigned int, size_t, CUstream),           \
     "cuMemsetD32Async", REQ)                                                             \
  XX(CUresult, cuMemsetD16Async, (CUdeviceptr, unsigned short, size_t, CUstream),         \
     "cuMemsetD16Async", REQ)                                                             \
  XX(CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, CUstream),        \
     "cuMemcpyDtoDAsync_v2", OPT)                                                         \
  XX(CUresult, cuModuleLoadData, (CUmodule *, const void *), "cuModuleLoadData", REQ)     \
  XX(CUresult, cuModuleUnload, (CUmodule), "cuModuleUnload", REQ)                         \
  XX(CUresult, cuModuleGetFunction, (CUfunction *, CUmodule, const char *),               \
     "cuModuleGetFunction", REQ)                                                          \
  XX(CUresult, cuFuncSetAttribute, (CUfunction, CUfunction_attribute, int),               \
     "cuFuncSetAttribute", REQ)                                                           \
  XX(CUresult, cuLaunchKernel,                                                            \
     (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,   \
      CUstream, void **, void **),                                                        \
     "cuLaunchKernel", REQ)                                                               \
  XX(CUresult, cuLaunchKernelEx, (const CUlaunchConfig *, CUfunction, void **, void **),  \
     "cuLaunchKernelEx", OPT)                                                             \
  XX(CUresult, cuEventCreate, (CUevent *, unsigned int), "cuEventCreate", REQ)            \
  XX(CUresult, cuEventDestroy_v2, (CUevent), "cuEventDestroy_v2", REQ)                    \
  XX(CUresult, cuEventRecord, (CUevent, CUstream), "cuEventRecord", REQ)                  \
  XX(CUresult, cuEventSynchronize, (CUevent), "cuEventSynchronize", REQ)                  \
  XX(CUresult, cuEventElapsedTime_v2, (float *, CUevent, CUevent),                        \
     "cuEventElapsedTime_v2", OPT)                                                        \
  XX(CUresult, cuEventElapsedTime_v1, (float *, CUevent, CUevent), "cuEventElapsedTime",  \
     OPT)                                                                                 \
  XX(CUresult, cuStreamBeginCapture_v2, (CUstream, CUstreamCaptureMode),                  \
     "cuStreamBeginCapture_v2", REQ)                                                      \
  XX(CUresult, cuStreamEndCapture, (CUstream, CUgraph *), "cuStreamEndCapture", REQ)      \
  XX(CUresult, cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long), \
     "cuGraphInstantiateWithFlags", REQ)                                                  \
  XX(CUresult, cuGraphLaunch, (CUgraphExec, CUstream), "cuGraphLaunch", REQ)              \
  XX(CUresult, cuGraphExecDestroy, (CUgraphExec), "cuGraphExecDestroy", REQ)              \
  XX(CUresult, cuGraphDestroy, (CUgraph), "cuGraphDestroy", REQ)                          \
  XX(CUresult, cuTensorMapEncodeTiled,                                                    \
     (CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,          \
      const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,   \
      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill),                \
     "cuTensorMapEncodeTiled", OPT)

#define HCT_CU_FIELD(ret, name, args, sym, req) ret (*name) args;
typedef struct hct_cu_api_s {
  HCT_CU_SYMBOLS(HCT_CU_FIELD)
} hct_cu_api_t;
#undef HCT_CU_FIELD

/* The table, filled by hct__cu_load; a symbol marked OPT may be NULL. */
extern hct_cu_api_t hct__cu;

/* Loads libcuda.so.1 and calls cuInit(0), once per process (any thread):
 * 0, or the first call's error replayed (its message too).  *no_device
 * (may be NULL) is set to 1 when cuInit found no card: a driver without
 * cards still loads. */
int hct__cu_load(int *no_device);

/* Records "cuda: <what>: <driver's message> (<CUDA_ERROR_NAME>, n)" and
 * returns r as an HCT_E* code (hct__cuda_result_code). */
int hct__cu_fail(CUresult r, const char *what);

/* The card's UUID in NVIDIA's text form ("GPU-8d1c..."), the one
 * nvidia-smi prints, NVML looks up and the daemon keys decisions by:
 * cuDeviceGetUuid_v2 where the driver has it (drivers before 11.4 do not),
 * else the first one (the same bytes outside MIG). */
int hct__cu_device_uuid(CUdevice dev, char *buf, size_t len);

#endif /* HCT_CUDA_API_H */
