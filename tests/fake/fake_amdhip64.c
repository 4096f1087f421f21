/*
 * fake_amdhip64.c: a stand-in for the HIP runtime, so that the device
 * discovery of jit/hip_device.c can be tested without an AMD GPU.  tests/test_hip.c
 * compiles it at run time into a folder on LD_LIBRARY_PATH, twice:
 *   -DFAKE_ROCM=6  libamdhip64.so.6 with ROCm 6's hipGetDevicePropertiesR0600
 *                  and its struct layout (gcnArchName at byte 1160);
 *   -DFAKE_ROCM=5  libamdhip64.so.5 with ROCm 5's hipGetDeviceProperties and
 *                  the layout of the ROCm 5 headers it is compiled against.
 * Two cards: an MI210-like gfx90a with a UUID and a gfx1030 with neither a
 * marketing name nor a UUID.  Everything else succeeds and does nothing.
 * It has no hiprtc symbols: hctune reports its compiler as "none".
 */
#include <string.h>

#include <hip/hip_runtime_api.h>

typedef struct {
  const char *name, *gcn, *pci, *uuid;
  int cus, warp, l2, lds, clock_khz;
  size_t mem;
} fake_card_t;

static const fake_card_t cards[] = {
  {"AMD Instinct MI210", "gfx90a:sramecc+:xnack-", "0000:C1:00.0", "0123456789ABCDEF", 104, 64,
   8 << 20, 65536, 1700000, (size_t)64 << 30},
  {"", "gfx1030", "0000:03:00.0", NULL, 36, 32, 4 << 20, 65536, 2500000, (size_t)16 << 30},
};

#define N_CARDS ((int)(sizeof cards / sizeof cards[0]))

static int bad(int d) { return d < 0 || d >= N_CARDS; }

hipError_t hipInit(unsigned int flags) { return hipSuccess; }

hipError_t hipDriverGetVersion(int *v) {
  *v = FAKE_ROCM == 6 ? 60140091 : 50221153;
  return hipSuccess;
}

hipError_t hipRuntimeGetVersion(int *v) { return hipDriverGetVersion(v); }

hipError_t hipGetDeviceCount(int *n) {
  *n = N_CARDS;
  return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int *v, hipDeviceAttribute_t a, int d) {
  if (bad(d)) return hipErrorInvalidDevice;
  const fake_card_t *c = &cards[d];
  switch (a) {
    case hipDeviceAttributeMultiprocessorCount: *v = c->cus; break;
    case hipDeviceAttributeWarpSize: *v = c->warp; break;
    case hipDeviceAttributeL2CacheSize: *v = c->l2; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *v = c->lds; break;
    case hipDeviceAttributeSharedMemPerBlockOptin: *v = 0; break;
    case hipDeviceAttributeClockRate: *v = c->clock_khz; break;
    default: return hipErrorInvalidValue;
  }
  return hipSuccess;
}

hipError_t hipDeviceGetName(char *name, int len, hipDevice_t d) {
  if (bad(d)) return hipErrorInvalidDevice;
  strncpy(name, cards[d].name, (size_t)len - 1);
  name[len - 1] = '\0';
  return hipSuccess;
}

hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t d) {
  if (bad(d)) return hipErrorInvalidDevice;
  *bytes = cards[d].mem;
  return hipSuccess;
}

hipError_t hipDeviceGetPCIBusId(char *bus, int len, int d) {
  if (bad(d)) return hipErrorInvalidDevice;
  strncpy(bus, cards[d].pci, (size_t)len - 1);
  bus[len - 1] = '\0';
  return hipSuccess;
}

hipError_t hipDeviceGetUuid(hipUUID *u, hipDevice_t d) {
  if (bad(d)) return hipErrorInvalidDevice;
  memset(u->bytes, 0, sizeof u->bytes);
  if (cards[d].uuid != NULL) memcpy(u->bytes, cards[d].uuid, 16);
  return hipSuccess;
}

#if FAKE_ROCM == 6
/* Only the field hctune reads, at its ROCm 6 offset; the rest stays as the
 * caller left it (zeros). */
hipError_t hipGetDevicePropertiesR0600(void *p, int d) {
  if (bad(d)) return hipErrorInvalidDevice;
  strcpy((char *)p, cards[d].name);
  strcpy((char *)p + 1160, cards[d].gcn);
  return hipSuccess;
}
#else
hipError_t hipGetDeviceProperties(hipDeviceProp_t *p, int d) {
  if (bad(d)) return hipErrorInvalidDevice;
  strcpy(p->name, cards[d].name);
  strcpy(p->gcnArchName, cards[d].gcn);
  return hipSuccess;
}
#endif

const char *hipGetErrorName(hipError_t e) { return e == hipSuccess ? "hipSuccess" : "hipErrorFake"; }
const char *hipGetErrorString(hipError_t e) { return "fake"; }

/* The runtime calls: present, succeeding, doing nothing. */
hipError_t hipSetDevice(int d) { return bad(d) ? hipErrorInvalidDevice : hipSuccess; }
hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned int f) {
  *s = NULL;
  return hipSuccess;
}
hipError_t hipStreamDestroy(hipStream_t s) { return hipSuccess; }
hipError_t hipStreamSynchronize(hipStream_t s) { return hipSuccess; }
hipError_t hipMalloc(void **p, size_t n) {
  *p = NULL;
  return hipErrorOutOfMemory;
}
hipError_t hipFree(void *p) { return hipSuccess; }
hipError_t hipMemcpyAsync(void *d, const void *s, size_t n, hipMemcpyKind k, hipStream_t st) {
  return hipSuccess;
}
hipError_t hipMemsetD32Async(hipDeviceptr_t d, int v, size_t n, hipStream_t s) { return hipSuccess; }
hipError_t hipMemsetD16Async(hipDeviceptr_t d, unsigned short v, size_t n, hipStream_t s) {
  return hipSuccess;
}
hipError_t hipModuleLoadData(hipModule_t *m, const void *image) { return hipErrorInvalidImage; }
hipError_t hipModuleUnload(hipModule_t m) { return hipSuccess; }
hipError_t hipModuleGetFunction(hipFunction_t *f, hipModule_t m, const char *n) {
  return hipErrorNotFound;
}
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                 hipStream_t s, void **params, void **extra) {
  return hipErrorInvalidDeviceFunction;
}
hipError_t hipEventCreate(hipEvent_t *e) {
  *e = NULL;
  return hipSuccess;
}
hipError_t hipEventDestroy(hipEvent_t e) { return hipSuccess; }
hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) { return hipSuccess; }
hipError_t hipEventSynchronize(hipEvent_t e) { return hipSuccess; }
hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b) {
  *ms = 0;
  return hipSuccess;
}
