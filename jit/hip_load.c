/*
 * hip_load.c: the AMD backend's two libraries, both loaded with dlopen at
 * run time (never linked), once each, and the map from hipError_t to
 * hctune's codes.
 *
 * Two libraries, loaded separately because a machine that only compiles
 * (CI, `hctune compile --backend hip`) needs hiprtc and no GPU:
 *   - the runtime, libamdhip64.so.6 / .5 / .so: devices, memory, modules,
 *     launches, events, graphs;
 *   - hiprtc: libhiprtc.so.6 / .5 / .so where the ROCm version ships it
 *     apart (ROCm 6), else the hiprtc symbols inside libamdhip64 (Debian's
 *     ROCm 5.2 has them there).
 * */
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "hip_internal.h"

/* ---- the libraries ------------------------------------------------------ */

#define HCT__SYM_ROW(req, ret, name, params) {(void **)&hct__hip.name, #name, req},
#define HCT__RTC_ROW(req, ret, name, params) {(void **)&hct__hiprtc.name, #name, req},

static const hct_vendor_sym_t hip_syms[] = {HCT_HIP_SYMS(HCT__SYM_ROW)};
static const hct_vendor_sym_t hiprtc_syms[] = {HCT_HIPRTC_SYMS(HCT__RTC_ROW)};

/* Newest first: a machine with several ROCm versions gets the newest. */
static const char *const hip_libs[] = {"libamdhip64.so.6", "libamdhip64.so.5",
                                       "libamdhip64.so"};
static const char *const hiprtc_libs[] = {"libhiprtc.so.6", "libhiprtc.so.5",
                                          "libhiprtc.so"};

hip_api_t hct__hip;
hiprtc_api_t hct__hiprtc;
char hct__hip_lib_name[64];
int hct__hiprtc_major, hct__hiprtc_minor;

/* The outcome of each one-time load: 0 or a negative code, and its
 * message, replayed to every caller (hct__error is per thread). */
typedef struct hip_once_result_s {
  int rc;
  char msg[512];
} hip_once_result_t;

static uv_once_t hip_once = UV_ONCE_INIT;
static uv_once_t rtc_once = UV_ONCE_INIT;
static hip_once_result_t hip_loaded, rtc_loaded;
static char rtc_lib_name[64];
/* Opens the first library of `names` that loads, its name into `which`;
 * `tried` gets the names that did not, for the error message. */
static void *open_first(const char *const *names, size_t n, char *which, size_t which_len,
                        char *tried, size_t tried_len) {
  size_t i = 0;
  tried[0] = '\0';
  void *h = hct__vendor_open(names, n, &i, tried, tried_len, NULL, 0);
  if (h != NULL) hct__strlcpy(which, names[i], which_len);
  return h;
}

/* Resolves `table`; a failure is kept as the load's outcome. */
static int resolve(void *h, const char *lib, const hct_vendor_sym_t *table, size_t n,
                   hip_once_result_t *res) {
  res->rc = hct__vendor_resolve(h, lib, table, n);
  if (res->rc < 0) hct__strlcpy(res->msg, hct_last_error(), sizeof res->msg);
  return res->rc;
}

static void hip_load_once(void) {
  char tried[256];
  void *h = open_first(hip_libs, HCT_ARRAY_SIZE(hip_libs), hct__hip_lib_name,
                       sizeof hct__hip_lib_name, tried, sizeof tried);
  if (h == NULL) {
    hip_loaded.rc = HCT_ENODRIVER;
    snprintf(hip_loaded.msg, sizeof hip_loaded.msg,
             "hip: cannot load %s", tried);
    return;
  }
  if (resolve(h, hct__hip_lib_name, hip_syms, HCT_ARRAY_SIZE(hip_syms), &hip_loaded) < 0)
    return;
  /* hipInit fails when the library is installed but the amdgpu kernel
   * driver is not (no /dev/kfd), which is a missing driver too. */
  hipError_t e = hct__hip.hipInit(0);
  if (e != hipSuccess) {
    hip_loaded.rc = e == hipErrorNoDevice ? HCT_ENODEV : HCT_ENODRIVER;
    snprintf(hip_loaded.msg, sizeof hip_loaded.msg,
             "hip: hipInit failed: %s%s", hct__hip.hipGetErrorName(e),
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
  if (resolve(h, rtc_lib_name, hiprtc_syms, HCT_ARRAY_SIZE(hiprtc_syms), &rtc_loaded) < 0) {
    if (rtc_loaded.rc == HCT_ENOSYM) rtc_loaded.rc = HCT_ENOCOMPILER;
    return;
  }
  /* hiprtcVersion of ROCm 5.x answers a fixed 9.0 (NVRTC's version when
   * hiprtc was modelled on it), and asking the runtime would start it in
   * this process for nothing (and start the GPU runtime).  The file
   * behind the soname carries the real version: libamdhip64.so.5.2.21153. */
  if (!lib_file_version(h, &hct__hiprtc_major, &hct__hiprtc_minor) &&
      hct__hiprtc.hiprtcVersion(&hct__hiprtc_major, &hct__hiprtc_minor) != HIPRTC_SUCCESS)
    hct__hiprtc_major = hct__hiprtc_minor = 0;
}

static int once_result(const hip_once_result_t *r) {
  return r->rc < 0 ? hct__error(r->rc, "%s", r->msg) : 0;
}

int hct__hip_load(void) {
  uv_once(&hip_once, hip_load_once);
  return once_result(&hip_loaded);
}

int hct__hiprtc_load(void) {
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
int hct__hip_fail(hipError_t e, const char *what) {
  if (e == hipSuccess) return 0;
  int code = HCT_EGPU;
  for (size_t i = 0; i < HCT_ARRAY_SIZE(hip_errmap); i++)
    if (hip_errmap[i].hip == e) code = hip_errmap[i].hct;
  return hct__error(code, "hip: %s failed: %s (%s)", what, hct__hip.hipGetErrorName(e),
                    hct__hip.hipGetErrorString(e));
}
