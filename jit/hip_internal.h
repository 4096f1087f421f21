/*
 * hip_internal.h: what the files of the AMD backend share, and nothing
 * else includes: the HIP and hiprtc symbol tables (loaded by
 * jit/hip_load.c), the error helpers, and the entry points of the other
 * files that jit/hip.c puts into hct__hip_backend.  A header of its own
 * because it needs ROCm's headers (with __HIP_PLATFORM_AMD__, which the
 * Makefile gives jit/hip*.o only), and the rest of jit/ must build
 * without them.
 *
 * Files:
 *   jit/hip.c          the backend table and the runtime: memory, modules,
 *                      launches, events, graphs, clock
 *   jit/hip_load.c     the libraries (dlopen, symbols, versions), the
 *                      hipError_t map
 *   jit/hip_device.c   device discovery (gfx target name, attributes, UUID)
 *   jit/hip_rtc.c      hiprtc compiles in a child process, target probing,
 *                      the target's compile options
 *   jit/hip_codeobj.c  registers and spills from a code object (declared in
 *                      jit.h: it needs no ROCm header, and tests call it)
 */
#ifndef HCT_HIP_INTERNAL_H
#define HCT_HIP_INTERNAL_H

#include "jit.h"

/* Types and enum values only: every function is called through the
 * pointers below.  The values used (hipDeviceAttribute_t, hipError_t,
 * hiprtcResult, stream flags) are the same in ROCm 5.x and 6.x: ROCm 6
 * renamed retired attributes to hipDeviceAttributeUnusedN in place rather
 * than renumbering. */
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

/*
 * XX(required, return type, name, parameters).  Optional symbols are
 * those a ROCm version may lack; the op that needs one reports it by name.
 */
#define HCT_HIP_SYMS(XX)                                                        \
  XX(1, hipError_t, hipInit, (unsigned int))                                    \
  XX(1, hipError_t, hipDriverGetVersion, (int *))                               \
  XX(1, hipError_t, hipRuntimeGetVersion, (int *))                              \
  XX(1, hipError_t, hipGetDeviceCount, (int *))                                 \
  XX(1, hipError_t, hipDeviceGetAttribute, (int *, hipDeviceAttribute_t, int))  \
  XX(1, hipError_t, hipDeviceGetName, (char *, int, hipDevice_t))               \
  XX(1, hipError_t, hipDeviceTotalMem, (size_t *, hipDevice_t))                 \
  XX(1, hipError_t, hipDeviceGetPCIBusId, (char *, int, int))                   \
  XX(0, hipError_t, hipDeviceGetUuid, (hipUUID *, hipDevice_t))                 \
  XX(0, hipError_t, hipGetDevicePropertiesR0600, (void *, int))                 \
  XX(0, hipError_t, hipGetDevicePropertiesR0000, (void *, int))                 \
  XX(0, hipError_t, hipGetDeviceProperties, (void *, int))                      \
  XX(1, const char *, hipGetErrorName, (hipError_t))                            \
  XX(1, const char *, hipGetErrorString, (hipError_t))                          \
  XX(1, hipError_t, hipSetDevice, (int))                                        \
  XX(1, hipError_t, hipStreamCreateWithFlags, (hipStream_t *, unsigned int))    \
  XX(1, hipError_t, hipStreamDestroy, (hipStream_t))                            \
  XX(1, hipError_t, hipStreamSynchronize, (hipStream_t))                        \
  XX(1, hipError_t, hipMalloc, (void **, size_t))                               \
  XX(1, hipError_t, hipFree, (void *))                                          \
  XX(0, hipError_t, hipMemGetInfo, (size_t *, size_t *))                        \
  XX(0, hipError_t, hipHostRegister, (void *, size_t, unsigned int))            \
  XX(0, hipError_t, hipHostUnregister, (void *))                                \
  XX(1, hipError_t, hipMemcpyAsync,                                             \
     (void *, const void *, size_t, hipMemcpyKind, hipStream_t))                \
  XX(1, hipError_t, hipMemsetD32Async, (hipDeviceptr_t, int, size_t, hipStream_t)) \
  XX(1, hipError_t, hipMemsetD16Async,                                          \
     (hipDeviceptr_t, unsigned short, size_t, hipStream_t))                     \
  XX(1, hipError_t, hipModuleLoadData, (hipModule_t *, const void *))           \
  XX(1, hipError_t, hipModuleUnload, (hipModule_t))                             \
  XX(1, hipError_t, hipModuleGetFunction, (hipFunction_t *, hipModule_t, const char *)) \
  XX(1, hipError_t, hipModuleLaunchKernel,                                      \
     (hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
      unsigned, hipStream_t, void **, void **))                                 \
  XX(1, hipError_t, hipEventCreate, (hipEvent_t *))                             \
  XX(1, hipError_t, hipEventDestroy, (hipEvent_t))                              \
  XX(1, hipError_t, hipEventRecord, (hipEvent_t, hipStream_t))                  \
  XX(1, hipError_t, hipEventSynchronize, (hipEvent_t))                          \
  XX(1, hipError_t, hipEventElapsedTime, (float *, hipEvent_t, hipEvent_t))     \
  XX(0, hipError_t, hipStreamBeginCapture, (hipStream_t, hipStreamCaptureMode)) \
  XX(0, hipError_t, hipStreamEndCapture, (hipStream_t, hipGraph_t *))           \
  XX(0, hipError_t, hipGraphInstantiate,                                        \
     (hipGraphExec_t *, hipGraph_t, hipGraphNode_t *, char *, size_t))          \
  XX(0, hipError_t, hipGraphLaunch, (hipGraphExec_t, hipStream_t))              \
  XX(0, hipError_t, hipGraphExecDestroy, (hipGraphExec_t))                      \
  XX(0, hipError_t, hipGraphDestroy, (hipGraph_t))

#define HCT_HIPRTC_SYMS(XX)                                                     \
  XX(1, hiprtcResult, hiprtcVersion, (int *, int *))                            \
  XX(1, const char *, hiprtcGetErrorString, (hiprtcResult))                     \
  XX(1, hiprtcResult, hiprtcCreateProgram,                                      \
     (hiprtcProgram *, const char *, const char *, int, const char **,          \
      const char **))                                                           \
  XX(1, hiprtcResult, hiprtcCompileProgram, (hiprtcProgram, int, const char **)) \
  XX(1, hiprtcResult, hiprtcGetProgramLogSize, (hiprtcProgram, size_t *))       \
  XX(1, hiprtcResult, hiprtcGetProgramLog, (hiprtcProgram, char *))             \
  XX(1, hiprtcResult, hiprtcGetCodeSize, (hiprtcProgram, size_t *))             \
  XX(1, hiprtcResult, hiprtcGetCode, (hiprtcProgram, char *))                   \
  XX(1, hiprtcResult, hiprtcDestroyProgram, (hiprtcProgram *))

#define HCT__SYM_FIELD(req, ret, name, params) ret(*name) params;

typedef struct hip_api_s {
  HCT_HIP_SYMS(HCT__SYM_FIELD)
} hip_api_t;

typedef struct hiprtc_api_s {
  HCT_HIPRTC_SYMS(HCT__SYM_FIELD)
} hiprtc_api_t;

/* ---- the libraries (jit/hip_load.c) ------------------------------------- */

/* Filled once by hct__hip_load / hct__hiprtc_load; read-only after. */
extern hip_api_t hct__hip;
extern hiprtc_api_t hct__hiprtc;
extern char hct__hip_lib_name[64];   /* the runtime file that loaded */
extern int hct__hiprtc_major, hct__hiprtc_minor;

/* Load once (uv_once), any thread; the first outcome is replayed to every
 * caller: 0, or HCT_ENODRIVER / HCT_ENOSYM (runtime), HCT_ENOCOMPILER
 * (hiprtc) with the message. */
int hct__hip_load(void);
int hct__hiprtc_load(void);

/* Records "hip: <what> failed: <name> (<text>)" and returns the mapped
 * code; 0 when e is hipSuccess. */
int hct__hip_fail(hipError_t e, const char *what);

#define HIP_TRY(call)                                                    \
  do {                                                                   \
    hipError_t hct__e = hct__hip.call;                                   \
    if (hct__e != hipSuccess) return hct__hip_fail(hct__e, #call);       \
  } while (0)

/* An optional symbol the op needs: its absence is named. */
#define HIP_NEED(sym)                                                              \
  do {                                                                             \
    if (hct__hip.sym == NULL)                                                      \
      return hct__error(HCT_EUNSUPPORTED, "hip: '%s' has no symbol '%s'",          \
                        hct__hip_lib_name, #sym);                                  \
  } while (0)

/* ---- devices (jit/hip_device.c) ----------------------------------------- */

int hct__hip_device_count(int *n);
int hct__hip_device_get(int ordinal, hct_device_t *d);

/* ---- compiling (jit/hip_rtc.c) ------------------------------------------ */

int hct__hip_compiler_version(char *buf, size_t len);
int hct__hip_compile(const hct_backend_ops_t *ops, hct_compile_job_t *job, const char *source,
                     const char *include_dir);
int hct__hip_target_options(const char *arch, hct_compile_opts_t *o);

#endif /* HCT_HIP_INTERNAL_H */
