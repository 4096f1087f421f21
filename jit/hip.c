/*
 * hip.c: the AMD backend: the HIP runtime and hiprtc, both loaded with
 * dlopen at run time (never linked), behind hct_backend_ops_t.
 *
 * Two libraries, loaded separately because a machine that only compiles
 * (CI, `hctune compile --backend hip`) needs hiprtc and no GPU:
 *   - the runtime, libamdhip64.so.6 / .5 / .so: devices, memory, modules,
 *     launches, events, graphs;
 *   - hiprtc: libhiprtc.so.6 / .5 / .so where the ROCm version ships it
 *     apart (ROCm 6), else the hiprtc symbols inside libamdhip64 (Debian's
 *     ROCm 5.2 has them there).
 *
 * Compiles run hiprtc in a child process: the hiprtc of ROCm 5.2 aborts
 * the whole process (`munmap_chunk(): invalid pointer`) for a target it
 * does not know (gfx940, gfx942, gfx1100 ...), so hctune never calls it in
 * its own address space.  hip_rtc_run() says how, and why not fork().
 *
 * KNOWN-GAP: the GPU runtime half (devices, memory, modules, launches,
 * events, graphs) has never run on AMD hardware (there is none here); it
 * follows the HIP API documentation and the CUDA backend's contract.
 * docs/amd.md says what has and has not been checked.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "jit.h"

/* Types and enum values only: every function is called through the
 * pointers below.  The values used (hipDeviceAttribute_t, hipError_t,
 * hiprtcResult, stream flags) are the same in ROCm 5.x and 6.x: ROCm 6
 * renamed retired attributes to hipDeviceAttributeUnusedN in place rather
 * than renumbering. */
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

/* ---- the runtime library ------------------------------------------------ */

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
#define HCT__SYM_ROW(req, ret, name, params) {#name, req, offsetof(hip_api_t, name)},
#define HCT__RTC_ROW(req, ret, name, params) {#name, req, offsetof(hiprtc_api_t, name)},

typedef struct hip_api_s {
  HCT_HIP_SYMS(HCT__SYM_FIELD)
} hip_api_t;

typedef struct hiprtc_api_s {
  HCT_HIPRTC_SYMS(HCT__SYM_FIELD)
} hiprtc_api_t;

typedef struct hip_sym_s {
  const char *name;
  int required;
  size_t offset;
} hip_sym_t;

static const hip_sym_t hip_syms[] = {HCT_HIP_SYMS(HCT__SYM_ROW)};
static const hip_sym_t hiprtc_syms[] = {HCT_HIPRTC_SYMS(HCT__RTC_ROW)};

/* Newest first: a machine with several ROCm versions gets the newest. */
static const char *const hip_libs[] = {"libamdhip64.so.6", "libamdhip64.so.5",
                                       "libamdhip64.so"};
static const char *const hiprtc_libs[] = {"libhiprtc.so.6", "libhiprtc.so.5",
                                          "libhiprtc.so"};

static hip_api_t hip;
static hiprtc_api_t rtc;

/* The outcome of each one-time load: 0 or a negative code, and its
 * message, replayed to every caller (hct__error is per thread). */
typedef struct hip_once_result_s {
  int rc;
  char msg[512];
} hip_once_result_t;

static uv_once_t hip_once = UV_ONCE_INIT;
static uv_once_t rtc_once = UV_ONCE_INIT;
static hip_once_result_t hip_loaded, rtc_loaded;
static char hip_lib_name[64], rtc_lib_name[64];
static int rtc_major, rtc_minor;

/* Opens the first library of `names` that loads; fills `tried` with what
 * was tried and why each failed, for the error message. */
static void *open_first(const char *const *names, size_t n, char *which, size_t which_len,
                        char *tried, size_t tried_len) {
  tried[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
      hct__strlcpy(which, names[i], which_len);
      return h;
    }
    size_t used = strlen(tried);
    snprintf(tried + used, tried_len - used, "%s%s", used ? ", " : "", names[i]);
  }
  return NULL;
}

/* Resolves every symbol of `table` into `api`; a missing required one is an
 * error naming it, a missing optional one stays NULL. */
static int resolve(void *h, const char *lib, const hip_sym_t *table, size_t n, void *api,
                   hip_once_result_t *res) {
  for (size_t i = 0; i < n; i++) {
    void *p = dlsym(h, table[i].name);
    if (p == NULL && table[i].required) {
      res->rc = HCT_ENOSYM;
      snprintf(res->msg, sizeof res->msg, "'%s' has no symbol '%s'", lib, table[i].name);
      return res->rc;
    }
    memcpy((char *)api + table[i].offset, &p, sizeof p);
  }
  return 0;
}

static void hip_load_once(void) {
  char tried[256];
  void *h = open_first(hip_libs, HCT_ARRAY_SIZE(hip_libs), hip_lib_name,
                       sizeof hip_lib_name, tried, sizeof tried);
  if (h == NULL) {
    hip_loaded.rc = HCT_ENODRIVER;
    snprintf(hip_loaded.msg, sizeof hip_loaded.msg,
             "hip: cannot load %s", tried);
    return;
  }
  if (resolve(h, hip_lib_name, hip_syms, HCT_ARRAY_SIZE(hip_syms), &hip, &hip_loaded) < 0)
    return;
  /* hipInit fails when the library is installed but the amdgpu kernel
   * driver is not (no /dev/kfd), which is a missing driver too. */
  hipError_t e = hip.hipInit(0);
  if (e != hipSuccess) {
    hip_loaded.rc = e == hipErrorNoDevice ? HCT_ENODEV : HCT_ENODRIVER;
    snprintf(hip_loaded.msg, sizeof hip_loaded.msg,
             "hip: hipInit failed: %s%s", hip.hipGetErrorName(e),
             access("/dev/kfd", F_OK) != 0 ? " (/dev/kfd is absent: no amdgpu kernel driver)"
                                           : "");
  }
}

/* MAJOR.MINOR from the name of the file a library handle was loaded from,
 * symbolic links followed ("libhiprtc.so.6.1.40091"); 0 when it has none. */
static int lib_file_version(void *h, int *major, int *minor) {
  struct link_map *lm = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL || lm->l_name == NULL) return 0;
  char *real = realpath(lm->l_name, NULL);
  if (real == NULL) return 0;
  const char *so = strstr(real, ".so.");
  int ok = so != NULL && sscanf(so + 4, "%d.%d", major, minor) == 2;
  free(real);
  return ok;
}

static void rtc_load_once(void) {
  char tried[200], tried_hip[200];
  void *h = open_first(hiprtc_libs, HCT_ARRAY_SIZE(hiprtc_libs), rtc_lib_name,
                       sizeof rtc_lib_name, tried, sizeof tried);
  /* ROCm 5.x before hiprtc moved out: the symbols live in libamdhip64. */
  if (h == NULL)
    h = open_first(hip_libs, HCT_ARRAY_SIZE(hip_libs), rtc_lib_name, sizeof rtc_lib_name,
                   tried_hip, sizeof tried_hip);
  if (h == NULL) {
    rtc_loaded.rc = HCT_ENOCOMPILER;
    snprintf(rtc_loaded.msg, sizeof rtc_loaded.msg,
             "hiprtc: cannot load %s, nor %s", tried, tried_hip);
    return;
  }
  if (resolve(h, rtc_lib_name, hiprtc_syms, HCT_ARRAY_SIZE(hiprtc_syms), &rtc,
              &rtc_loaded) < 0) {
    if (rtc_loaded.rc == HCT_ENOSYM) rtc_loaded.rc = HCT_ENOCOMPILER;
    return;
  }
  /* hiprtcVersion of ROCm 5.x answers a fixed 9.0 (NVRTC's version when
   * hiprtc was modelled on it), and asking the runtime would start it in
   * this process for nothing (and start the GPU runtime).  The file
   * behind the soname carries the real version: libamdhip64.so.5.2.21153. */
  if (!lib_file_version(h, &rtc_major, &rtc_minor) &&
      rtc.hiprtcVersion(&rtc_major, &rtc_minor) != HIPRTC_SUCCESS)
    rtc_major = rtc_minor = 0;
}

static int once_result(const hip_once_result_t *r) {
  return r->rc < 0 ? hct__error(r->rc, "%s", r->msg) : 0;
}

static int hip_load(void) {
  uv_once(&hip_once, hip_load_once);
  return once_result(&hip_loaded);
}

static int rtc_load(void) {
  uv_once(&rtc_once, rtc_load_once);
  return once_result(&rtc_loaded);
}

/* ---- errors ------------------------------------------------------------- */

/* hipError_t to hctune's codes; anything else is HCT_EGPU. */
static const struct {
  hipError_t hip;
  int hct;
} hip_errmap[] = {
  {hipErrorOutOfMemory, HCT_ENOMEM},
  {hipErrorNoDevice, HCT_ENODEV},
  {hipErrorInvalidDevice, HCT_ENODEV},
  {hipErrorInsufficientDriver, HCT_ENODRIVER},
  {hipErrorNotInitialized, HCT_ENODRIVER},
  {hipErrorInvalidValue, HCT_EINVAL},
  {hipErrorInvalidConfiguration, HCT_ELAUNCH},
  {hipErrorLaunchOutOfResources, HCT_ELAUNCH},
  {hipErrorInvalidDeviceFunction, HCT_ELAUNCH},
  {hipErrorLaunchTimeOut, HCT_EHANG},
  {hipErrorIllegalAddress, HCT_EFAULT},
  {hipErrorLaunchFailure, HCT_EFAULT},
  {hipErrorAssert, HCT_EFAULT},
  {hipErrorNotSupported, HCT_EUNSUPPORTED},
  {hipErrorStreamCaptureUnsupported, HCT_EUNSUPPORTED},
};

/* Records "hip: <what> failed: <name> (<text>)" and returns the mapped
 * code; 0 when e is hipSuccess. */
static int hip_fail(hipError_t e, const char *what) {
  if (e == hipSuccess) return 0;
  int code = HCT_EGPU;
  for (size_t i = 0; i < HCT_ARRAY_SIZE(hip_errmap); i++)
    if (hip_errmap[i].hip == e) code = hip_errmap[i].hct;
  return hct__error(code, "hip: %s failed: %s (%s)", what, hip.hipGetErrorName(e),
                    hip.hipGetErrorString(e));
}

#define HIP_TRY(call)                                  \
  do {                                                 \
    hipError_t hct__e = hip.call;                      \
    if (hct__e != hipSuccess) return hip_fail(hct__e, #call); \
  } while (0)

/* An optional symbol the op needs: its absence is named. */
#define HIP_NEED(sym)                                                              \
  do {                                                                             \
    if (hip.sym == NULL)                                                           \
      return hct__error(HCT_EUNSUPPORTED, "hip: '%s' has no symbol '%s'", hip_lib_name, \
                        #sym);                                                     \
  } while (0)

/* ---- devices ------------------------------------------------------------ */

static int hip_device_count(int *n) {
  int rc = hip_load();
  if (rc < 0) return rc;
  hipError_t e = hip.hipGetDeviceCount(n);
  if (e == hipErrorNoDevice) {
    *n = 0;
    return 0;
  }
  return hip_fail(e, "hipGetDeviceCount");
}

/*
 * The full target name ("gfx90a:sramecc+:xnack-") exists only in
 * hipDeviceProp_t.gcnArchName, and that struct's layout differs between
 * ROCm versions: ROCm 6 put fields before gcnArchName (uuid, luid, ...) and
 * renamed the entry point to hipGetDevicePropertiesR0600, keeping the old
 * layout as hipGetDevicePropertiesR0000 (ROCm 5's plain
 * hipGetDeviceProperties).  Since we are built against one ROCm's headers
 * but run against whatever ROCm is installed, we never read the struct
 * through a C type: we pass a zeroed buffer far larger than any layout,
 * pick the offset that matches the symbol we called (R0600: 1160 bytes on
 * LP64, counted from ROCm 6.0's hip_runtime_api.h; R0000: offsetof from the
 * ROCm 5 header we build with), and check that a "gfx" name is there.  If
 * it is not (a future layout), we scan the buffer for the one string that
 * starts with "gfx".  Numeric fields come from hipDeviceGetAttribute, whose
 * numbering is stable.
 */
#define HCT_HIP_PROPS_BYTES 16384
#define HCT_HIP_R0600_GCN_OFFSET 1160

static int looks_like_gfx(const char *s, size_t room) {
  if (room < 5 || strncmp(s, "gfx", 3) != 0 || !isxdigit((unsigned char)s[3])) return 0;
  for (size_t i = 0; i < room && i < 256; i++) {
    if (s[i] == '\0') return 1;
    if (!isprint((unsigned char)s[i])) return 0;
  }
  return 0;
}

static int hip_gcn_arch_name(int ordinal, char *out, size_t len) {
  static const struct {
    size_t sym_offset;
    const char *name;
    size_t gcn_offset;
  } getters[] = {
    {offsetof(hip_api_t, hipGetDevicePropertiesR0600), "hipGetDevicePropertiesR0600",
     HCT_HIP_R0600_GCN_OFFSET},
    {offsetof(hip_api_t, hipGetDevicePropertiesR0000), "hipGetDevicePropertiesR0000",
     offsetof(hipDeviceProp_t, gcnArchName)},
    {offsetof(hip_api_t, hipGetDeviceProperties), "hipGetDeviceProperties",
     offsetof(hipDeviceProp_t, gcnArchName)},
  };
  char *buf = calloc(1, HCT_HIP_PROPS_BYTES);
  if (buf == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory reading device properties");
  int rc = hct__error(HCT_ENOSYM, "hip: '%s' has none of hipGetDeviceProperties{R0600,R0000,}",
                      hip_lib_name);
  for (size_t i = 0; i < HCT_ARRAY_SIZE(getters); i++) {
    hipError_t (*fn)(void *, int);
    memcpy(&fn, (char *)&hip + getters[i].sym_offset, sizeof fn);
    if (fn == NULL) continue;
    hipError_t e = fn(buf, ordinal);
    if (e != hipSuccess) {
      rc = hip_fail(e, getters[i].name);
      break;
    }
    const char *name = NULL;
    if (looks_like_gfx(buf + getters[i].gcn_offset, HCT_HIP_PROPS_BYTES - getters[i].gcn_offset))
      name = buf + getters[i].gcn_offset;
    for (size_t off = 256; name == NULL && off + 5 < HCT_HIP_PROPS_BYTES; off += 8)
      if (looks_like_gfx(buf + off, HCT_HIP_PROPS_BYTES - off)) name = buf + off;
    if (name == NULL) {
      rc = hct__error(HCT_EGPU, "hip: %s gave no gfx target name for device %d",
                      getters[i].name, ordinal);
    } else {
      hct__strlcpy(out, name, len);
      rc = 0;
    }
    break;
  }
  free(buf);
  return rc;
}

static int hip_attr(int ordinal, hipDeviceAttribute_t a, const char *what, int *out) {
  *out = 0;
  hipError_t e = hip.hipDeviceGetAttribute(out, a, ordinal);
  return e == hipSuccess ? 0 : hip_fail(e, what);
}

/* hipDriverGetVersion's 50221153 as "5.2.21153". */
static void hip_version_text(int v, char *buf, size_t len) {
  snprintf(buf, len, "%d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
}

/*
 * A UUID that stays the same across reboots.  ROCm fills hipUUID with the
 * 16 hex digits of the card's unique id as text (rocm-smi shows them as
 * "GPU-<hex>"); cards without one (older parts, some drivers) give zeros,
 * and then the PCI bus id, stable on a host, stands in: "AMD-PCI-<busid>".
 */
static void hip_uuid(int ordinal, const char *pci_bus_id, char *out, size_t len) {
  hipUUID u;
  memset(&u, 0, sizeof u);
  if (hip.hipDeviceGetUuid != NULL && hip.hipDeviceGetUuid(&u, ordinal) == hipSuccess) {
    int hex = 1, zero = 1;
    for (int i = 0; i < 16; i++) {
      if (!isxdigit((unsigned char)u.bytes[i])) hex = 0;
      if (u.bytes[i] != 0 && u.bytes[i] != '0') zero = 0;
    }
    if (hex && !zero) {
      snprintf(out, len, "GPU-%.16s", u.bytes);
      for (char *p = out + 4; *p; p++) *p = (char)tolower((unsigned char)*p);
      return;
    }
    if (!zero) {
      const unsigned char *b = (const unsigned char *)u.bytes;
      snprintf(out, len,
               "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
               b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
               b[12], b[13], b[14], b[15]);
      return;
    }
  }
  snprintf(out, len, "AMD-PCI-%s", pci_bus_id);
}

static int hip_device_get(int ordinal, hct_device_t *d) {
  int rc = hip_load();
  if (rc < 0) return rc;
  memset(d, 0, sizeof *d);
  d->backend = HCT_BACKEND_HIP;
  d->ordinal = ordinal;
  hct__strlcpy(d->vendor, "amd", sizeof d->vendor);

  if ((rc = hip_gcn_arch_name(ordinal, d->arch, sizeof d->arch)) < 0) return rc;
  HIP_TRY(hipDeviceGetName(d->name, (int)sizeof d->name, ordinal));
  /* Some ROCm versions leave the marketing name empty. */
  if (d->name[0] == '\0') snprintf(d->name, sizeof d->name, "AMD %.100s", d->arch);
  HIP_TRY(hipDeviceGetPCIBusId(d->pci_bus_id, (int)sizeof d->pci_bus_id, ordinal));
  for (char *p = d->pci_bus_id; *p; p++) *p = (char)tolower((unsigned char)*p);
  hip_uuid(ordinal, d->pci_bus_id, d->uuid, sizeof d->uuid);

  size_t mem = 0;
  HIP_TRY(hipDeviceTotalMem(&mem, ordinal));
  d->mem_bytes = (int64_t)mem;

  int cus, warp, l2, smem, optin, clock;
  if ((rc = hip_attr(ordinal, hipDeviceAttributeMultiprocessorCount, "cu count", &cus)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeWarpSize, "warp size", &warp)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeL2CacheSize, "l2 size", &l2)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeMaxSharedMemoryPerBlock, "lds per block",
                     &smem)) < 0 ||
      (rc = hip_attr(ordinal, hipDeviceAttributeClockRate, "clock rate", &clock)) < 0)
    return rc;
  /* AMD has no opt-in above the default: the whole LDS (64 KB on most
   * parts) is open to one block.  Take whichever figure is larger. */
  if (hip_attr(ordinal, hipDeviceAttributeSharedMemPerBlockOptin, "lds opt-in", &optin) < 0)
    optin = 0;
  hct__error_clear();
  d->sm_count = cus;
  d->warp_size = warp;
  d->l2_bytes = l2;
  d->smem_optin = HCT_MAX(smem, optin);
  d->clock_khz = clock;
  /* The gfx number read as hex (0x90a), the same as HCT_ARCH and the ARCH
   * of constraints when compiling; min_arch (NVIDIA) is not applied to HIP. */
  d->arch_num = (int)strtol(d->arch + 3, NULL, 16);

  int v = 0;
  HIP_TRY(hipDriverGetVersion(&v));
  hip_version_text(v, d->driver_version, sizeof d->driver_version);
  if (rtc_load() == 0)
    snprintf(d->compiler_version, sizeof d->compiler_version, "hiprtc %d.%d", rtc_major,
             rtc_minor);
  else
    hct__strlcpy(d->compiler_version, "none", sizeof d->compiler_version);
  hct__error_clear();
  return 0;
}

static int hip_compiler_version(char *buf, size_t len) {
  int rc = rtc_load();
  if (rc < 0) return rc;
  snprintf(buf, len, "hiprtc %d.%d", rtc_major, rtc_minor);
  return 0;
}

/* ---- compiling ---------------------------------------------------------- */

/* Keeps this thread's last message as the job's one-line error. */
static int job_keep(hct_compile_job_t *job, int code) {
  hct__strlcpy(job->error, hct_last_error(), sizeof job->error);
  job->status = code;
  return code;
}

/*
 * A gfx target as hiprtc takes it: "gfx" and hex digits, then any number of
 * ":feature+" / ":feature-" (sramecc, xnack).  Anything else is refused
 * before hiprtc sees it.
 */
static int hip_target_valid(const char *t) {
  if (strncmp(t, "gfx", 3) != 0) return 0;
  const char *p = t + 3;
  if (!isxdigit((unsigned char)*p)) return 0;
  while (isxdigit((unsigned char)*p)) p++;
  while (*p == ':') {
    const char *f = ++p;
    while (isalnum((unsigned char)*p)) p++;
    if (p == f || (*p != '+' && *p != '-')) return 0;
    p++;
  }
  return *p == '\0';
}

/* The wave size the compiled code assumes: GCN and CDNA (gfx6 to gfx9)
 * run 64-wide waves only; RDNA (gfx10 and later) compiles for wave32 unless
 * told otherwise, and we never tell it otherwise.  The major version is
 * every digit but the last two: gfx90a -> 9, gfx1030 -> 10. */
static int hip_target_warp(const char *t) {
  size_t digits = strspn(t + 3, "0123456789abcdefABCDEF");
  char major[8] = {0};
  if (digits > 2) memcpy(major, t + 3, HCT_MIN(digits - 2, sizeof major - 1));
  return atoi(major) >= 10 ? 32 : 64;
}

/* What the child sends back over its result pipe, then the log bytes, then
 * the code bytes. */
typedef struct hip_reply_s {
  uint32_t magic;
  int32_t stage; /* the hiprtc call that failed, or HIP_STAGE_DONE */
  int32_t result;
  uint32_t pad;
  uint64_t log_len, code_len;
} hip_reply_t;

#define HIP_REPLY_MAGIC 0x48435452u /* "HCTR" */
enum { HIP_STAGE_CREATE, HIP_STAGE_COMPILE, HIP_STAGE_CODE, HIP_STAGE_DONE };
static const char *const hip_stage_names[] = {"hiprtcCreateProgram", "hiprtcCompileProgram",
                                              "hiprtcGetCode", "done"};

/* Seconds a child may take; past it the child is killed.  Generous: the
 * largest hc_read template compiles in well under a second. */
#define HCT_HIPRTC_TIMEOUT_S 300

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The compile process (see hip_rtc_run): compiles, writes the reply to fd,
 * exits.  Calls nothing but hiprtc, malloc, write and _exit. */
static void hip_child(int fd, const char *source, const char *name, int argc,
                      const char *const *argv) {
  hip_reply_t r = {HIP_REPLY_MAGIC, HIP_STAGE_CREATE, 0, 0, 0, 0};
  hiprtcProgram prog = NULL;
  char *log = NULL, *code = NULL;
  hiprtcResult e = rtc.hiprtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (e == HIPRTC_SUCCESS) {
    r.stage = HIP_STAGE_COMPILE;
    e = rtc.hiprtcCompileProgram(prog, argc, (const char **)argv);
    size_t n = 0;
    if (rtc.hiprtcGetProgramLogSize(prog, &n) == HIPRTC_SUCCESS && n > 0 &&
        (log = malloc(n)) != NULL && rtc.hiprtcGetProgramLog(prog, log) == HIPRTC_SUCCESS)
      r.log_len = strnlen(log, n);
    if (e == HIPRTC_SUCCESS) {
      r.stage = HIP_STAGE_CODE;
      n = 0;
      e = rtc.hiprtcGetCodeSize(prog, &n);
      if (e == HIPRTC_SUCCESS && (code = malloc(n ? n : 1)) == NULL)
        e = HIPRTC_ERROR_OUT_OF_MEMORY;
      if (e == HIPRTC_SUCCESS) e = rtc.hiprtcGetCode(prog, code);
      if (e == HIPRTC_SUCCESS) {
        r.stage = HIP_STAGE_DONE;
        r.code_len = n;
      }
    }
  }
  r.result = e;
  int bad = write_all(fd, &r, sizeof r) < 0 || write_all(fd, log, r.log_len) < 0 ||
            write_all(fd, code, r.code_len) < 0;
  _exit(bad ? 3 : 0);
}

/* A growable byte buffer filled from a pipe; bytes past `limit` are
 * dropped (the child's stderr could be endless). */
typedef struct hip_buf_s {
  char *p;
  size_t n, cap, limit;
} hip_buf_t;

/* Reads what is there; 1 when more may come, 0 at EOF, negative on error. */
static int buf_read(hip_buf_t *b, int fd) {
  char tmp[65536];
  ssize_t r = read(fd, tmp, sizeof tmp);
  if (r < 0) return errno == EINTR || errno == EAGAIN ? 1 : -errno;
  if (r == 0) return 0;
  size_t take = HCT_MIN((size_t)r, b->limit - b->n);
  if (b->n + take + 1 > b->cap) {
    size_t cap = HCT_MAX(b->cap * 2, b->n + take + 1);
    char *p = realloc(b->p, cap);
    if (p == NULL) return -ENOMEM;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, tmp, take);
  b->n += take;
  b->p[b->n] = '\0';
  return 1;
}

/* Closes every descriptor from `from` up: other threads' pipes must not
 * stay open in the child, or their readers would wait for it too. */
static void close_from(int from) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)from, ~0u, 0u) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (int fd = from; fd < max; fd++) close(fd);
}

/* The first line of the log that says "error", for the one-line message. */
static void first_error_line(const char *log, char *out, size_t len) {
  out[0] = '\0';
  if (log == NULL) return;
  const char *line = log;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    const char *hit = strstr(line, "error");
    if (hit != NULL && hit < line + n) {
      snprintf(out, len, "%.*s", (int)HCT_MIN(n, 300), line);
      return;
    }
    if (end == NULL) break;
    line = end + 1;
  }
}

/* What one run of hiprtc in a child gave: the code object, the log (hiprtc's
 * own, then whatever the child printed), and the time it took. */
typedef struct hip_rtc_out_s {
  void *code;
  size_t code_len;
  char *log;
  double ms;
} hip_rtc_out_t;

/*
 * Runs hiprtc on `source` with argv in a child process; 0 with res->code,
 * or a negative code with a one-line message (res->log may be set either
 * way: the caller frees both).
 *
 * The child is a fresh copy of this very executable (/proc/self/exe),
 * started with posix_spawn and HCT_HIPRTC_CHILD=3 in its environment; the
 * constructor hip_child_main() below sees that before main() runs, reads
 * the request on stdin, compiles, answers on fd 3 and exits.  Why this and
 * not a plain fork():
 *   - a forked child of a threaded process inherits the other threads'
 *     locks.  glibc resets its malloc's, but not those of other
 *     allocators: under AddressSanitizer, forked compiles hung (seen in
 *     this test suite), and a forked child would also inherit a HIP runtime
 *     the parent had started (hctune probe opens the card), with its
 *     threads gone and its /dev/kfd state tied to the parent;
 *   - exec gives a new process image: nothing inherited but the file
 *     descriptors we pass;
 *   - every program that links libhctune.a (hctune, hctuned, the tests)
 *     carries the constructor, so no hidden command and no search for an
 *     executable is needed; the cost is one exec per compile (a few ms
 *     against a hiprtc compile of 0.1 to 10 s).
 * A child that crashes (hiprtc of ROCm 5.2 aborts on a target it does not
 * know) becomes a one-line HCT_ECOMPILE ("hiprtc 5.2 crashed compiling for
 * gfx1100 (signal 6)"); one that hangs is killed after
 * HCT_HIPRTC_TIMEOUT_S.  The child's stdout and stderr come back as the
 * tail of the log, so hiprtc's crash text never reaches hctune's stderr.
 */
#define HCT_HIPRTC_CHILD_ENV "HCT_HIPRTC_CHILD"
#define HIP_REQUEST_MAGIC 0x48435451u /* "HCTQ" */

extern char **environ;

/* The request: magic, argc, then name, source and each option as a 64-bit
 * length and its bytes. */
static int request_put(hip_buf_t *b, const void *p, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = HCT_MAX(b->cap * 2, b->n + n + 1);
    char *q = realloc(b->p, cap);
    if (q == NULL) return -1;
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
  return 0;
}

static int request_str(hip_buf_t *b, const char *s) {
  uint64_t n = strlen(s);
  return request_put(b, &n, sizeof n) < 0 || request_put(b, s, (size_t)n) < 0 ? -1 : 0;
}

static int hip_rtc_run(const char *source, const char *name, const char *target, int argc,
                       const char *const *argv, hip_rtc_out_t *res) {
  memset(res, 0, sizeof *res);
  hip_buf_t req = {NULL, 0, 0, 0};
  uint32_t head[2] = {HIP_REQUEST_MAGIC, (uint32_t)argc};
  int bad = request_put(&req, head, sizeof head) < 0 || request_str(&req, name) < 0 ||
            request_str(&req, source) < 0;
  for (int i = 0; i < argc && !bad; i++) bad = request_str(&req, argv[i]) < 0;
  if (bad) {
    free(req.p);
    return hct__error(HCT_ENOMEM, "hiprtc: out of memory building a compile request");
  }

  /* Every end is moved to 10 and up (and close-on-exec) first, so that the
   * dup2 calls into 0..3 below never overwrite one another. */
  int qp[2] = {-1, -1}, rp[2] = {-1, -1}, ep[2] = {-1, -1}, e = 0;
  int *ends[6] = {&qp[0], &qp[1], &rp[0], &rp[1], &ep[0], &ep[1]};
  if (pipe2(qp, O_CLOEXEC) < 0 || pipe2(rp, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
    e = errno;
  for (int i = 0; i < 6 && e == 0; i++) {
    int fd = fcntl(*ends[i], F_DUPFD_CLOEXEC, 10);
    if (fd < 0) {
      e = errno;
      break;
    }
    close(*ends[i]);
    *ends[i] = fd;
  }
  char **envp = NULL;
  size_t n_env = 0;
  while (environ != NULL && environ[n_env] != NULL) n_env++;
  if (e == 0 && (envp = malloc((n_env + 2) * sizeof *envp)) == NULL) e = ENOMEM;
  pid_t pid = -1;
  uint64_t t0 = hct__now_ns();
  if (e == 0) {
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++)
      if (strncmp(environ[i], HCT_HIPRTC_CHILD_ENV "=", sizeof HCT_HIPRTC_CHILD_ENV) != 0)
        envp[k++] = environ[i];
    envp[k++] = HCT_HIPRTC_CHILD_ENV "=3";
    envp[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGABRT);
    sigaddset(&dfl, SIGSEGV);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, qp[0], 0);
    posix_spawn_file_actions_adddup2(&fa, ep[1], 1);
    posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
    posix_spawn_file_actions_adddup2(&fa, rp[1], 3);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *child_argv[] = {"hctune-hiprtc", NULL};
    e = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, child_argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
  }
  free(envp);
  for (int i = 0; i < 6; i++)
    if (*ends[i] >= 0 && (e != 0 || ends[i] == &qp[0] || ends[i] == &rp[1] || ends[i] == &ep[1]))
      close(*ends[i]);
  if (e != 0) {
    free(req.p);
    return hct__error(HCT_EIO, "hiprtc: cannot start a compile process: %s", strerror(e));
  }
  fcntl(qp[1], F_SETFL, O_NONBLOCK);

  hip_buf_t out = {NULL, 0, 0, (size_t)1 << 30}, errtext = {NULL, 0, 0, 65536};
  /* The request goes in as the child reads it, while its output is read:
   * neither side can fill a pipe and wait on the other. */
  struct pollfd pf[3] = {{rp[0], POLLIN, 0}, {ep[0], POLLIN, 0}, {qp[1], POLLOUT, 0}};
  size_t sent = 0;
  int open_fds = 2, timed_out = 0, read_error = 0;
  uint64_t deadline = t0 + (uint64_t)HCT_HIPRTC_TIMEOUT_S * 1000000000ull;
  while (open_fds > 0 && !read_error) {
    uint64_t now = hct__now_ns();
    if (now >= deadline) {
      timed_out = 1;
      break;
    }
    int n = poll(pf, 3, (int)HCT_MIN((deadline - now) / 1000000ull + 1, 1000ull));
    if (n < 0 && errno != EINTR) read_error = errno;
    if (n > 0 && pf[2].fd >= 0 && pf[2].revents != 0) {
      ssize_t w = (pf[2].revents & POLLOUT) ? write(pf[2].fd, req.p + sent, req.n - sent) : -1;
      if (w > 0) sent += (size_t)w;
      /* Done, or the child stopped reading (it died: its status says why). */
      if (sent == req.n || (w < 0 && errno != EAGAIN && errno != EINTR)) {
        close(pf[2].fd);
        pf[2].fd = -1;
      }
    }
    for (int i = 0; i < 2 && n > 0; i++) {
      if (pf[i].fd < 0 || pf[i].revents == 0) continue;
      int r = buf_read(i == 0 ? &out : &errtext, pf[i].fd);
      if (r < 0) read_error = -r;
      if (r <= 0) {
        close(pf[i].fd);
        pf[i].fd = -1;
        open_fds--;
      }
    }
  }
  free(req.p);
  if (timed_out || read_error) kill(pid, SIGKILL);
  for (int i = 0; i < 3; i++)
    if (pf[i].fd >= 0) close(pf[i].fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  res->ms = (double)(hct__now_ns() - t0) / 1e6;

  char version[32];
  snprintf(version, sizeof version, "hiprtc %d.%d", rtc_major, rtc_minor);
  hip_reply_t r;
  memset(&r, 0, sizeof r);
  if (out.n >= sizeof r) memcpy(&r, out.p, sizeof r);
  int complete = out.n >= sizeof r && r.magic == HIP_REPLY_MAGIC &&
                 r.log_len <= out.n - sizeof r && r.code_len == out.n - sizeof r - r.log_len;

  const char *hlog = complete ? out.p + sizeof r : "";
  size_t hlog_len = complete ? (size_t)r.log_len : 0;
  if (hlog_len + errtext.n > 0 && (res->log = malloc(hlog_len + errtext.n + 2)) != NULL) {
    memcpy(res->log, hlog, hlog_len);
    size_t at = hlog_len;
    if (hlog_len > 0 && errtext.n > 0 && hlog[hlog_len - 1] != '\n') res->log[at++] = '\n';
    if (errtext.n > 0) memcpy(res->log + at, errtext.p, errtext.n);
    res->log[at + errtext.n] = '\0';
  }

  int rc;
  if (timed_out) {
    rc = hct__error(HCT_ECOMPILE, "%s did not finish compiling '%s' for %s in %d s", version,
                    name, target, HCT_HIPRTC_TIMEOUT_S);
  } else if (read_error) {
    rc = hct__error(HCT_EIO, "hiprtc: cannot read from the compile process: %s",
                    strerror(read_error));
  } else if (WIFSIGNALED(status)) {
    rc = hct__error(HCT_ECOMPILE, "%s crashed compiling for %s (signal %d)", version, target,
                    WTERMSIG(status));
  } else if (!complete || WEXITSTATUS(status) != 0) {
    /* A sanitizer that catches hiprtc's bad free exits rather than
     * letting the abort happen: the same crash. */
    rc = hct__error(HCT_ECOMPILE, "%s crashed compiling for %s (exit status %d)", version,
                    target, WEXITSTATUS(status));
  } else if (r.stage != HIP_STAGE_DONE) {
    char line[320];
    first_error_line(res->log, line, sizeof line);
    rc = hct__error(HCT_ECOMPILE, "%s: '%s' for %s: %s: %s%s%s", version, name, target,
                    r.stage >= 0 && r.stage < HIP_STAGE_DONE ? hip_stage_names[r.stage] : "?",
                    rtc.hiprtcGetErrorString((hiprtcResult)r.result), line[0] ? ": " : "",
                    line);
  } else if (r.code_len == 0) {
    rc = hct__error(HCT_ECOMPILE, "%s: '%s' for %s: empty code object", version, name, target);
  } else if ((res->code = malloc(r.code_len)) == NULL) {
    rc = hct__error(HCT_ENOMEM, "hiprtc: out of memory for a %llu-byte code object",
                    (unsigned long long)r.code_len);
  } else {
    memcpy(res->code, out.p + sizeof r + r.log_len, r.code_len);
    res->code_len = r.code_len;
    rc = 0;
  }
  free(out.p);
  free(errtext.p);
  return rc;
}

/* Reads all of fd into a malloc'd buffer. */
static char *read_all(int fd, size_t *len) {
  hip_buf_t b = {NULL, 0, 0, (size_t)1 << 28};
  int r;
  while ((r = buf_read(&b, fd)) > 0) {
  }
  if (r < 0) {
    free(b.p);
    return NULL;
  }
  *len = b.n;
  return b.p != NULL ? b.p : calloc(1, 1);
}

static const char *request_next(const char **p, const char *end) {
  uint64_t n;
  if ((size_t)(end - *p) < sizeof n) return NULL;
  memcpy(&n, *p, sizeof n);
  *p += sizeof n;
  if ((uint64_t)(end - *p) < n) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s == NULL) return NULL;
  memcpy(s, *p, (size_t)n);
  s[n] = '\0';
  *p += n;
  return s;
}

/*
 * The child side of hip_rtc_run(): runs before main() in every program
 * that links this file, and does nothing unless HCT_HIPRTC_CHILD=3 is set
 * and fd 3 is a pipe.  Then it compiles the request read on stdin,
 * answers on fd 3 and exits without returning to the program.
 */
__attribute__((constructor)) static void hip_child_main(void) {
  const char *mode = getenv(HCT_HIPRTC_CHILD_ENV);
  struct stat st;
  if (mode == NULL || strcmp(mode, "3") != 0 || fstat(3, &st) != 0 || !S_ISFIFO(st.st_mode))
    return;
  unsetenv(HCT_HIPRTC_CHILD_ENV);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core); /* a known abort is not worth a core file */
  close_from(4);
  size_t len = 0;
  char *req = read_all(0, &len);
  if (req == NULL) _exit(5);
  const char *p = req, *end = req + len;
  uint32_t head[2];
  if (len < sizeof head) _exit(5);
  memcpy(head, p, sizeof head);
  p += sizeof head;
  if (head[0] != HIP_REQUEST_MAGIC || head[1] > 4096) _exit(5);
  const char *name = request_next(&p, end), *source = request_next(&p, end);
  const char **argv = calloc(head[1] + 1, sizeof *argv);
  if (name == NULL || source == NULL || argv == NULL) _exit(5);
  for (uint32_t i = 0; i < head[1]; i++)
    if ((argv[i] = request_next(&p, end)) == NULL) _exit(5);
  if (rtc_load() < 0) _exit(6);
  hip_child(3, source, name, (int)head[1], argv);
}

/*
 * Whether this hiprtc compiles for `target` at all, asked once per target
 * by compiling a small kernel (shuffles, expf, rsqrtf) in a child.  A
 * hiprtc that does not know a target aborts rather than saying so, and no
 * call lists the targets it knows; trying is the only reliable check, and
 * it lets `hctune compile --arch gfx1100` fail with one line before any
 * variant is tried.  Only definite answers are kept (not a timeout).
 */
#define HCT_HIP_PROBED_MAX 32

typedef struct hip_probe_s {
  char target[64];
  int rc;
  char msg[400];
} hip_probe_t;

static uv_once_t probe_once = UV_ONCE_INIT;
static uv_mutex_t probe_mutex;
static hip_probe_t probed[HCT_HIP_PROBED_MAX];
static int n_probed;

static void probe_init(void) {
  if (uv_mutex_init(&probe_mutex) != 0) abort();
}

static const char hip_probe_source[] =
  "extern \"C\" __global__ void hct_probe(float *x) {\n"
  "  float v = x[threadIdx.x];\n"
  "  v += __shfl_xor(v, 1);\n"
  "  x[threadIdx.x] = rsqrtf(expf(v));\n"
  "}\n";

static int hip_target_probe(const char *target) {
  uv_once(&probe_once, probe_init);
  /* One probe at a time: the compile pool's threads all ask about the
   * same target at first, and one child answers them all. */
  uv_mutex_lock(&probe_mutex);
  for (int i = 0; i < n_probed; i++)
    if (strcmp(probed[i].target, target) == 0) {
      int rc = probed[i].rc < 0 ? hct__error(probed[i].rc, "%s", probed[i].msg) : 0;
      uv_mutex_unlock(&probe_mutex);
      return rc;
    }
  char arch_opt[96];
  snprintf(arch_opt, sizeof arch_opt, "--offload-arch=%s", target);
  const char *argv[] = {arch_opt, "-O3"};
  hip_rtc_out_t res;
  int rc = hip_rtc_run(hip_probe_source, "hct_probe.hip", target, 2, argv, &res);
  int definite = rc == 0 || rc == HCT_ECOMPILE;
  if (rc == HCT_ECOMPILE) {
    char cause[300];
    hct__strlcpy(cause, hct_last_error(), sizeof cause);
    rc = hct__error(HCT_EUNSUPPORTED, "arch '%s' is not supported by this hiprtc: %s", target,
                    cause);
  }
  free(res.code);
  free(res.log);
  if (definite && n_probed < HCT_HIP_PROBED_MAX) {
    hip_probe_t *p = &probed[n_probed++];
    hct__strlcpy(p->target, target, sizeof p->target);
    p->rc = rc;
    hct__strlcpy(p->msg, rc < 0 ? hct_last_error() : "", sizeof p->msg);
  }
  uv_mutex_unlock(&probe_mutex);
  return rc;
}

/*
 * The options that depend on the target, for hct__compile_options():
 * --offload-arch, HCT_HIP, HCT_WARP (the target's wave size) and HCT_ARCH
 * (the gfx number read as hex: 0x90a for gfx90a, 0x1030 for gfx1030; it
 * only matters inside HIP guards).  A malformed name is HCT_EINVAL; a name
 * this hiprtc cannot compile for is HCT_EUNSUPPORTED.  Without hiprtc the
 * name is only checked for form, so cache keys can still be computed.
 */
static int hip_target_options(const char *arch, hct_compile_opts_t *o) {
  if (!hip_target_valid(arch))
    return hct__error(HCT_EINVAL,
                      "unknown arch '%s': expected a gfx target such as gfx90a, gfx1030 or "
                      "gfx90a:sramecc+:xnack-",
                      arch);
  if (rtc_load() == 0) {
    int rc = hip_target_probe(arch);
    if (rc < 0) return rc;
  }
  hct__error_clear();
  o->is_ptx = 0;
  o->warp = hip_target_warp(arch);
  o->arch_num = (int)strtol(arch + 3, NULL, 16);
  int rc = hct__compile_opt_add(o, "--offload-arch=%s", arch);
  if (rc == 0) rc = hct__compile_opt_add(o, "-O3");
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_WARP=%d", o->warp);
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_ARCH=0x%x", (unsigned)o->arch_num);
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_HIP=1");
  return rc;
}

/* ---- resources from the code object -------------------------------------- */

/*
 * hiprtc has no `ptxas -v`: the per-kernel resources are in the code
 * object's AMDGPU metadata note (ELF note "AMDGPU", type 32), a MessagePack
 * map whose "amdhsa.kernels" entries carry ".vgpr_count",
 * ".group_segment_fixed_size" and so on.  The keys are unique to kernel
 * descriptors, so the walk below needs no notion of where it is: every
 * such key anywhere in the tree updates the maximum over kernels.
 */
typedef struct mp_s {
  const unsigned char *p, *end;
  hct_compile_job_t *job;
  int vgpr_spill, sgpr_spill;
} mp_t;

static int mp_uint(mp_t *m, size_t n, uint64_t *out) {
  if ((size_t)(m->end - m->p) < n) return -1;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v = (v << 8) | m->p[i];
  m->p += n;
  *out = v;
  return 0;
}

/* Reads one value.  *is_int / *ival report an integer, *str / *slen a
 * string (pointing into the buffer). */
static int mp_value(mp_t *m, int depth, int *is_int, int64_t *ival, const char **str,
                    size_t *slen);

static void mp_note_key(mp_t *m, const char *k, size_t kn, int64_t v) {
  static const struct {
    const char *key;
    size_t off;
  } keys[] = {
    {".vgpr_count", offsetof(hct_compile_job_t, regs)},
    {".group_segment_fixed_size", offsetof(hct_compile_job_t, smem_static)},
    {".private_segment_fixed_size", offsetof(hct_compile_job_t, stack_bytes)},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(keys); i++)
    if (strlen(keys[i].key) == kn && memcmp(keys[i].key, k, kn) == 0) {
      int *field = (int *)((char *)m->job + keys[i].off);
      if (v > *field) *field = (int)HCT_MIN(v, INT32_MAX);
    }
  if (kn == 17 && memcmp(k, ".vgpr_spill_count", kn) == 0) m->vgpr_spill = HCT_MAX(m->vgpr_spill, (int)v);
  if (kn == 17 && memcmp(k, ".sgpr_spill_count", kn) == 0) m->sgpr_spill = HCT_MAX(m->sgpr_spill, (int)v);
}

static int mp_container(mp_t *m, int depth, uint64_t n, int is_map) {
  for (uint64_t i = 0; i < n; i++) {
    int ki = 0, vi = 0;
    int64_t kv = 0, vv = 0;
    const char *ks = NULL, *vs = NULL;
    size_t kn = 0, vn = 0;
    if (mp_value(m, depth + 1, &ki, &kv, &ks, &kn) < 0) return -1;
    if (!is_map) continue;
    if (mp_value(m, depth + 1, &vi, &vv, &vs, &vn) < 0) return -1;
    if (ks != NULL && vi) mp_note_key(m, ks, kn, vv);
  }
  return 0;
}

static int mp_value(mp_t *m, int depth, int *is_int, int64_t *ival, const char **str,
                    size_t *slen) {
  if (depth > 32 || m->p >= m->end) return -1;
  unsigned c = *m->p++;
  uint64_t n = 0;
  *is_int = 0;
  *str = NULL;
  if (c <= 0x7f || c >= 0xe0) { /* positive and negative fixint */
    *is_int = 1;
    *ival = c <= 0x7f ? (int64_t)c : (int64_t)(int8_t)c;
    return 0;
  }
  if (c >= 0x80 && c <= 0x8f) return mp_container(m, depth, c & 0x0f, 1);
  if (c >= 0x90 && c <= 0x9f) return mp_container(m, depth, c & 0x0f, 0);
  if ((c >= 0xa0 && c <= 0xbf) || (c >= 0xd9 && c <= 0xdb)) { /* strings */
    if (c <= 0xbf)
      n = c & 0x1f;
    else if (mp_uint(m, (size_t)1 << (c - 0xd9), &n) < 0)
      return -1;
    if ((uint64_t)(m->end - m->p) < n) return -1;
    *str = (const char *)m->p;
    *slen = (size_t)n;
    m->p += n;
    return 0;
  }
  if (c >= 0xcc && c <= 0xd3) { /* uint8..64, int8..64 */
    size_t w = (size_t)1 << ((c - 0xcc) & 3);
    if (mp_uint(m, w, &n) < 0) return -1;
    *is_int = 1;
    if (c <= 0xcf)
      *ival = (int64_t)HCT_MIN(n, (uint64_t)INT64_MAX);
    else
      *ival = w == 1 ? (int8_t)n : w == 2 ? (int16_t)n : w == 4 ? (int32_t)n : (int64_t)n;
    return 0;
  }
  switch (c) {
    case 0xc0: case 0xc2: case 0xc3: return 0;  /* nil, false, true */
    case 0xca: return mp_uint(m, 4, &n);        /* float32 */
    case 0xcb: return mp_uint(m, 8, &n);        /* float64 */
    case 0xc4: case 0xc5: case 0xc6:            /* bin */
    case 0xc7: case 0xc8: case 0xc9: {          /* ext: length, type, data */
      size_t w = (size_t)1 << ((c - 0xc4) % 3);
      if (mp_uint(m, w, &n) < 0) return -1;
      n += c >= 0xc7;
      if ((uint64_t)(m->end - m->p) < n) return -1;
      m->p += n;
      return 0;
    }
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: { /* fixext */
      n = 1 + ((uint64_t)1 << (c - 0xd4));
      if ((uint64_t)(m->end - m->p) < n) return -1;
      m->p += n;
      return 0;
    }
    case 0xdc: case 0xdd:
      if (mp_uint(m, c == 0xdc ? 2 : 4, &n) < 0) return -1;
      return mp_container(m, depth, n, 0);
    case 0xde: case 0xdf:
      if (mp_uint(m, c == 0xde ? 2 : 4, &n) < 0) return -1;
      return mp_container(m, depth, n, 1);
    default: return -1; /* 0xc1 is never used */
  }
}

#define HCT_NT_AMDGPU_METADATA 32

/* Fills job->regs (VGPRs), smem_static (LDS), stack_bytes (scratch) and
 * spill_bytes (spilled registers x 4) from the code object; -1 each when
 * the metadata cannot be read. */
static void hip_code_resources(hct_compile_job_t *job) {
  const unsigned char *img = job->image;
  size_t size = job->image_size;
  job->regs = job->spill_bytes = job->smem_static = job->stack_bytes = -1;
  /* ELF64, little-endian: the section headers, then every SHT_NOTE. */
  if (size < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 || img[5] != 1) return;
  uint64_t shoff;
  uint16_t shentsize, shnum;
  memcpy(&shoff, img + 0x28, 8);
  memcpy(&shentsize, img + 0x3a, 2);
  memcpy(&shnum, img + 0x3c, 2);
  if (shentsize < 64 || shoff > size || (uint64_t)shnum * shentsize > size - shoff) return;
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *sh = img + shoff + (uint64_t)i * shentsize;
    uint32_t type;
    uint64_t off, len;
    memcpy(&type, sh + 4, 4);
    memcpy(&off, sh + 0x18, 8);
    memcpy(&len, sh + 0x20, 8);
    if (type != 7 /* SHT_NOTE */ || off > size || len > size - off) continue;
    for (uint64_t at = 0; at + 12 <= len;) {
      uint32_t namesz, descsz, ntype;
      memcpy(&namesz, img + off + at, 4);
      memcpy(&descsz, img + off + at + 4, 4);
      memcpy(&ntype, img + off + at + 8, 4);
      uint64_t name_at = at + 12, desc_at = name_at + (((uint64_t)namesz + 3) & ~3ull);
      if (desc_at > len || descsz > len - desc_at) break;
      if (ntype == HCT_NT_AMDGPU_METADATA && namesz == 7 &&
          memcmp(img + off + name_at, "AMDGPU", 7) == 0) {
        mp_t m = {img + off + desc_at, img + off + desc_at + descsz, job, 0, 0};
        job->regs = job->smem_static = job->stack_bytes = 0;
        int ii;
        int64_t iv;
        const char *sv;
        size_t sn;
        if (mp_value(&m, 0, &ii, &iv, &sv, &sn) < 0) {
          job->regs = job->spill_bytes = job->smem_static = job->stack_bytes = -1;
          return;
        }
        job->spill_bytes = 4 * (m.vgpr_spill + m.sgpr_spill);
        return;
      }
      at = desc_at + (((uint64_t)descsz + 3) & ~3ull);
    }
  }
}

/*
 * Compiles job->variant's template (`source`) with hiprtc in a child
 * process (hip_rtc_run); thread-safe.  Headers come through the -I options
 * of hct__compile_options.  The code object (an ELF file that
 * hipModuleLoadData takes) goes to job->image.
 */
static int hip_compile(hct_compile_job_t *job, const char *source, const char *include_dir) {
  (void)include_dir; /* in the option list already */
  int rc = rtc_load();
  if (rc < 0) return job_keep(job, rc);
  hct_compile_opts_t *o = malloc(sizeof *o);
  if (o == NULL)
    return job_keep(job, hct__error(HCT_ENOMEM, "hiprtc: out of memory building options"));
  rc = hct__compile_options(job, o);
  if (rc < 0) {
    free(o);
    return job_keep(job, rc);
  }
  const char *name = job->variant != NULL && job->variant->template_file[0]
                         ? job->variant->template_file
                         : "kernel.hip";
  hip_rtc_out_t res;
  rc = hip_rtc_run(source, name, job->arch, o->n, o->argv, &res);
  free(o);
  job->compile_ms = res.ms;
  job->log = res.log;
  if (rc < 0) {
    free(res.code);
    return job_keep(job, rc);
  }
  job->image = res.code;
  job->image_size = res.code_len;
  job->is_ptx = 0;
  job->status = 0;
  job->error[0] = '\0';
  hip_code_resources(job);
  return 0;
}

/* ---- the runtime -------------------------------------------------------- */

typedef struct hip_gpu_s {
  struct hct_gpu_s base; /* first: backend.c reads ops and dev from it */
  hipStream_t stream;
} hip_gpu_t;

typedef struct hip_function_s {
  hipFunction_t fn;
  hip_gpu_t *gpu;
  char entry[64];
} hip_function_t;

/* The interface has no call to free a function: they live in their module,
 * one slot per entry point, and go with it. */
typedef struct hip_module_s {
  hipModule_t mod;
  hip_gpu_t *gpu;
  hip_function_t fns[2 * HCT_MAX_LAUNCHES];
  int n_fns;
} hip_module_t;

typedef struct hip_event_s {
  hipEvent_t ev;
} hip_event_t;

typedef struct hip_graph_s {
  hipGraph_t graph;
  hipGraphExec_t exec;
} hip_graph_t;

#define GPU(g) ((hip_gpu_t *)(g))

static int hip_open(const hct_device_t *dev, hct_gpu_t **out) {
  *out = NULL;
  int rc = hip_load();
  if (rc < 0) return rc;
  hip_gpu_t *g = calloc(1, sizeof *g);
  if (g == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory opening device %d", dev->ordinal);
  g->base.ops = &hct__hip_backend;
  g->base.dev = *dev;
  /* HIP keeps the current device per thread; a hct_gpu_t belongs to the
   * thread that opened it, so setting it once here is enough. */
  hipError_t e = hip.hipSetDevice(dev->ordinal);
  if (e == hipSuccess) e = hip.hipStreamCreateWithFlags(&g->stream, hipStreamNonBlocking);
  if (e != hipSuccess) {
    free(g);
    return hip_fail(e, "opening the device (hipSetDevice, hipStreamCreateWithFlags)");
  }
  *out = &g->base;
  return 0;
}

static void hip_close(hct_gpu_t *g) {
  if (g == NULL) return;
  hip.hipStreamSynchronize(GPU(g)->stream);
  hip.hipStreamDestroy(GPU(g)->stream);
  free(g);
}

static int hip_alloc(hct_gpu_t *g, size_t bytes, hct_dptr_t *out) {
  void *p = NULL;
  *out = 0;
  hipError_t e = hip.hipMalloc(&p, bytes ? bytes : 1);
  if (e != hipSuccess) return hip_fail(e, "hipMalloc");
  *out = (hct_dptr_t)(uintptr_t)p;
  return 0;
}

static void hip_free(hct_gpu_t *g, hct_dptr_t p) {
  if (p != 0) hip.hipFree((void *)(uintptr_t)p);
}

/* Copies go on the gpu's stream, then wait for it: the stream is
 * non-blocking, so a copy on the null stream would not be ordered after
 * the work queued on it. */
static int hip_upload(hct_gpu_t *g, hct_dptr_t dst, const void *src, size_t bytes) {
  HIP_TRY(hipMemcpyAsync((void *)(uintptr_t)dst, src, bytes, hipMemcpyHostToDevice,
                         GPU(g)->stream));
  HIP_TRY(hipStreamSynchronize(GPU(g)->stream));
  return 0;
}

static int hip_download(hct_gpu_t *g, void *dst, hct_dptr_t src, size_t bytes) {
  HIP_TRY(hipMemcpyAsync(dst, (const void *)(uintptr_t)src, bytes, hipMemcpyDeviceToHost,
                         GPU(g)->stream));
  HIP_TRY(hipStreamSynchronize(GPU(g)->stream));
  return 0;
}

static int hip_fill32(hct_gpu_t *g, hct_dptr_t dst, uint32_t value, size_t count) {
  HIP_TRY(hipMemsetD32Async((hipDeviceptr_t)(uintptr_t)dst, (int)value, count,
                            GPU(g)->stream));
  return 0;
}

static int hip_fill16(hct_gpu_t *g, hct_dptr_t dst, uint16_t value, size_t count) {
  HIP_TRY(hipMemsetD16Async((hipDeviceptr_t)(uintptr_t)dst, value, count, GPU(g)->stream));
  return 0;
}

static int hip_module_load(hct_gpu_t *g, const void *image, size_t size,
                           hct_module_t **out) {
  (void)size; /* a code object is an ELF file: it carries its own size */
  *out = NULL;
  hip_module_t *m = calloc(1, sizeof *m);
  if (m == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory loading a module");
  hipError_t e = hip.hipModuleLoadData(&m->mod, image);
  if (e != hipSuccess) {
    free(m);
    return hip_fail(e, "hipModuleLoadData");
  }
  m->gpu = GPU(g);
  *out = (hct_module_t *)m;
  return 0;
}

static void hip_module_unload(hct_gpu_t *g, hct_module_t *m) {
  if (m == NULL) return;
  hip.hipModuleUnload(((hip_module_t *)m)->mod);
  free(m);
}

static int hip_function(hct_module_t *hm, const char *entry, hct_function_t **out) {
  hip_module_t *m = (hip_module_t *)hm;
  *out = NULL;
  for (int i = 0; i < m->n_fns; i++)
    if (strcmp(m->fns[i].entry, entry) == 0) {
      *out = (hct_function_t *)&m->fns[i];
      return 0;
    }
  if (m->n_fns >= (int)HCT_ARRAY_SIZE(m->fns))
    return hct__error(HCT_ERANGE, "hip: more than %d kernels asked of one module",
                      (int)HCT_ARRAY_SIZE(m->fns));
  hipFunction_t fn;
  hipError_t e = hip.hipModuleGetFunction(&fn, m->mod, entry);
  if (e != hipSuccess)
    return hct__error(e == hipErrorNotFound ? HCT_ENOENT : HCT_EGPU,
                      "hip: kernel '%s' not in module: %s", entry, hip.hipGetErrorName(e));
  hip_function_t *f = &m->fns[m->n_fns++];
  f->fn = fn;
  f->gpu = m->gpu;
  hct__strlcpy(f->entry, entry, sizeof f->entry);
  *out = (hct_function_t *)f;
  return 0;
}

/* AMD has no dynamic-LDS opt-in: a block may use all the LDS the device
 * reports, so this only checks the request against it.  KNOWN-GAP: not
 * tried on a card. */
static int hip_function_smem(hct_function_t *hf, int bytes) {
  hip_function_t *f = (hip_function_t *)hf;
  int64_t limit = f->gpu->base.dev.smem_optin;
  if (limit > 0 && bytes > limit)
    return hct__error(HCT_EUNSUPPORTED,
                      "hip: %d bytes of shared memory asked, the device has %lld per block",
                      bytes, (long long)limit);
  return 0;
}

static int hip_launch(hct_gpu_t *g, hct_function_t *hf, const unsigned grid[3],
                      const unsigned block[3], unsigned smem, void **args) {
  hipError_t e = hip.hipModuleLaunchKernel(((hip_function_t *)hf)->fn, grid[0], grid[1],
                                           grid[2], block[0], block[1], block[2], smem,
                                           GPU(g)->stream, args, NULL);
  return hip_fail(e, "hipModuleLaunchKernel");
}

static int hip_sync(hct_gpu_t *g) {
  HIP_TRY(hipStreamSynchronize(GPU(g)->stream));
  return 0;
}

static int hip_event_create(hct_gpu_t *g, hct_event_t **out) {
  *out = NULL;
  hip_event_t *ev = calloc(1, sizeof *ev);
  if (ev == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory for an event");
  hipError_t e = hip.hipEventCreate(&ev->ev);
  if (e != hipSuccess) {
    free(ev);
    return hip_fail(e, "hipEventCreate");
  }
  *out = (hct_event_t *)ev;
  return 0;
}

static void hip_event_destroy(hct_gpu_t *g, hct_event_t *e) {
  if (e == NULL) return;
  hip.hipEventDestroy(((hip_event_t *)e)->ev);
  free(e);
}

static int hip_event_record(hct_gpu_t *g, hct_event_t *e) {
  HIP_TRY(hipEventRecord(((hip_event_t *)e)->ev, GPU(g)->stream));
  return 0;
}

static int hip_event_elapsed(hct_gpu_t *g, hct_event_t *a, hct_event_t *b, float *ms) {
  HIP_TRY(hipEventSynchronize(((hip_event_t *)b)->ev));
  HIP_TRY(hipEventElapsedTime(ms, ((hip_event_t *)a)->ev, ((hip_event_t *)b)->ev));
  return 0;
}

static int hip_capture_begin(hct_gpu_t *g) {
  HIP_NEED(hipStreamBeginCapture);
  HIP_NEED(hipStreamEndCapture);
  HIP_NEED(hipGraphInstantiate);
  HIP_NEED(hipGraphLaunch);
  /* Thread-local: launches by other threads on other streams (another
   * gpu of the same process) are not pulled into this capture. */
  HIP_TRY(hipStreamBeginCapture(GPU(g)->stream, hipStreamCaptureModeThreadLocal));
  return 0;
}

static int hip_capture_end(hct_gpu_t *g, hct_graph_t **out) {
  *out = NULL;
  HIP_NEED(hipStreamEndCapture);
  hip_graph_t *gr = calloc(1, sizeof *gr);
  if (gr == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory for a graph");
  hipError_t e = hip.hipStreamEndCapture(GPU(g)->stream, &gr->graph);
  if (e == hipSuccess) e = hip.hipGraphInstantiate(&gr->exec, gr->graph, NULL, NULL, 0);
  if (e != hipSuccess) {
    if (gr->graph != NULL && hip.hipGraphDestroy != NULL) hip.hipGraphDestroy(gr->graph);
    free(gr);
    return hip_fail(e, "ending a capture (hipStreamEndCapture, hipGraphInstantiate)");
  }
  *out = (hct_graph_t *)gr;
  return 0;
}

static int hip_graph_launch(hct_gpu_t *g, hct_graph_t *graph) {
  HIP_TRY(hipGraphLaunch(((hip_graph_t *)graph)->exec, GPU(g)->stream));
  return 0;
}

static void hip_graph_destroy(hct_gpu_t *g, hct_graph_t *graph) {
  hip_graph_t *gr = (hip_graph_t *)graph;
  if (gr == NULL) return;
  if (gr->exec != NULL && hip.hipGraphExecDestroy != NULL) hip.hipGraphExecDestroy(gr->exec);
  if (gr->graph != NULL && hip.hipGraphDestroy != NULL) hip.hipGraphDestroy(gr->graph);
  free(gr);
}

/*
 * The current shader clock, from the amdgpu driver's sysfs file
 * (pp_dpm_sclk lists the levels and marks the current one with '*'): HIP
 * itself only reports the peak clock.  KNOWN-GAP: absent on some drivers
 * and containers; the tuner then gets "clock unknown".
 */
static int hip_sm_clock(hct_gpu_t *g, int *mhz) {
  char path[128];
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/pp_dpm_sclk", g->dev.pci_bus_id);
  char *text = NULL;
  size_t len = 0;
  int rc = hct__read_file(path, &text, &len);
  if (rc < 0) return hct__error(HCT_EUNSUPPORTED, "hip: cannot read '%s': clock unknown", path);
  rc = hct__error(HCT_EUNSUPPORTED, "hip: no current level marked in '%s'", path);
  for (char *line = text; line != NULL && *line;) {
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    int level, value;
    if (strchr(line, '*') != NULL && sscanf(line, "%d: %d", &level, &value) == 2) {
      *mhz = value;
      rc = 0;
      hct__error_clear();
      break;
    }
    line = end ? end + 1 : NULL;
  }
  free(text);
  return rc;
}

const hct_backend_ops_t hct__hip_backend = {
  .name = "hip",
  .kind = HCT_BACKEND_HIP,
  .load = hip_load,
  .device_count = hip_device_count,
  .device_get = hip_device_get,
  .compiler_version = hip_compiler_version,
  .compile = hip_compile,
  .open = hip_open,
  .close = hip_close,
  .alloc = hip_alloc,
  .free = hip_free,
  .upload = hip_upload,
  .download = hip_download,
  .fill32 = hip_fill32,
  .fill16 = hip_fill16,
  .module_load = hip_module_load,
  .module_unload = hip_module_unload,
  .function = hip_function,
  .function_smem = hip_function_smem,
  .launch = hip_launch,
  .sync = hip_sync,
  .event_create = hip_event_create,
  .event_destroy = hip_event_destroy,
  .event_record = hip_event_record,
  .event_elapsed = hip_event_elapsed,
  .capture_begin = hip_capture_begin,
  .capture_end = hip_capture_end,
  .graph_launch = hip_graph_launch,
  .graph_destroy = hip_graph_destroy,
  .sm_clock = hip_sm_clock,
  .target_options = hip_target_options,
};
