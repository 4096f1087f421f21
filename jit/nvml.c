/*
 * nvml.c: the SM clock of an NVIDIA card through NVML (libnvidia-ml.so.1,
 * loaded with dlopen).  The tuner reads it beside its timings, because a
 * card that throttles makes a slow variant look fast or a fast one slow.
 *
 * The toolkit ships no nvml.h, so the few types used are declared here, as
 * NVML documents them; they have not changed since NVML 1.0.
 */
#include <string.h>

#include <pthread.h>

#include "jit.h"

typedef int nvml_return_t;  /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device_s *nvml_device_t;
enum { NVML_CLOCK_SM = 1 }; /* nvmlClockType_t */

#define HCT_NVML_SYMBOLS(XX)                                                                  \
  XX(nvml_return_t, nvmlInit_v2, (void), "nvmlInit_v2")                                        \
  XX(const char *, nvmlErrorString, (nvml_return_t), "nvmlErrorString")                        \
  XX(nvml_return_t, nvmlDeviceGetHandleByUUID, (const char *, nvml_device_t *),                \
     "nvmlDeviceGetHandleByUUID")                                                              \
  XX(nvml_return_t, nvmlDeviceGetClockInfo, (nvml_device_t, int, unsigned *),                  \
     "nvmlDeviceGetClockInfo")                                                                 \
  XX(nvml_return_t, nvmlDeviceGetMaxClockInfo, (nvml_device_t, int, unsigned *),               \
     "nvmlDeviceGetMaxClockInfo")

#define HCT_FIELD(ret, name, args, sym) ret (*name) args;
static struct { HCT_NVML_SYMBOLS(HCT_FIELD) } nvml;
#undef HCT_FIELD
#define HCT_ROW(ret, name, args, sym) {(void **)&nvml.name, sym, 1},
static const hct_vendor_sym_t nvml_syms[] = {HCT_NVML_SYMBOLS(HCT_ROW)};
#undef HCT_ROW

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int status;
static char message[512];

static void load_once(void) {
  static const char *const names[] = {"libnvidia-ml.so.1"};
  char tried[32] = "", why[256];
  void *lib = hct__vendor_open(names, 1, NULL, tried, sizeof tried, why, sizeof why);
  if (lib == NULL)
    status = hct__error(HCT_ENODRIVER, "nvml: cannot load libnvidia-ml.so.1 (%s)", why);
  else
    status = hct__vendor_resolve(lib, "libnvidia-ml.so.1", nvml_syms, HCT_ARRAY_SIZE(nvml_syms));
  if (status == 0) {
    nvml_return_t r = nvml.nvmlInit_v2();
    if (r != 0)
      status = hct__error(HCT_ENODRIVER, "nvml: nvmlInit: %s", nvml.nvmlErrorString(r));
  }
  if (status != 0) {
    hct__strlcpy(message, hct_last_error(), sizeof message);
    /* Once: the clock is read beside every timing. */
    hct__log(HCT_LOG_WARN, "%s; sm clocks will not be recorded", message);
  }
}

int hct__nvml_sm_clock(const char *uuid, int max, int *mhz) {
  pthread_once(&once, load_once);
  if (status != 0) return hct__error(status, "%s", message);
  nvml_device_t dev;
  nvml_return_t r = nvml.nvmlDeviceGetHandleByUUID(uuid, &dev);
  if (r != 0)
    return hct__error(HCT_ENODEV, "nvml: card '%s': %s", uuid, nvml.nvmlErrorString(r));
  unsigned v = 0;
  r = max ? nvml.nvmlDeviceGetMaxClockInfo(dev, NVML_CLOCK_SM, &v)
          : nvml.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &v);
  if (r != 0)
    return hct__error(HCT_EUNSUPPORTED, "nvml: sm clock of '%s': %s", uuid, nvml.nvmlErrorString(r));
  *mhz = (int)v;
  return 0;
}
