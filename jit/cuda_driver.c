/*
 * cuda_driver.c: loads the CUDA driver (libcuda.so.1) into hct__cu, the one
 * table of driver entry points (jit/cuda_api.h) that the tuner's backend
 * (jit/cuda.c) and the client library (client/cuda.c) both call, and
 * turns a CUresult into an HCT_E* code and a one-line message.
 *
 * Thread rules: loading is guarded by pthread_once; the table is read-only
 * afterwards.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "cuda_api.h"

hct_cu_api_t hct__cu;

#define HCT_CU_ROW(ret, name, args, sym, req) {(void **)&hct__cu.name, sym, req},
static const hct_vendor_sym_t cu_syms[] = {HCT_CU_SYMBOLS(HCT_CU_ROW)};
#undef HCT_CU_ROW

/* ---- error codes -------------------------------------------------------- */

/*
 * What a CUresult means to the tuner: a fault of the kernel (quarantine the
 * candidate), a hang, a resource limit, or a broken setup.  Codes not
 * listed are HCT_EGPU.
 */
static const hct_code_map_t cu_codes[] = {
    {CUDA_ERROR_INVALID_VALUE, HCT_EINVAL},
    {CUDA_ERROR_OUT_OF_MEMORY, HCT_ENOMEM},
    {CUDA_ERROR_NOT_INITIALIZED, HCT_ENODRIVER},
    {CUDA_ERROR_STUB_LIBRARY, HCT_ENODRIVER},
    {CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, HCT_ENODRIVER},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, HCT_ENODRIVER},
    {CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, HCT_ENODRIVER},
    {CUDA_ERROR_NO_DEVICE, HCT_ENODEV},
    {CUDA_ERROR_INVALID_DEVICE, HCT_ENODEV},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, HCT_EBUSY},
    {CUDA_ERROR_NOT_READY, HCT_EBUSY},
    {CUDA_ERROR_INVALID_IMAGE, HCT_ECOMPILE},
    {CUDA_ERROR_INVALID_PTX, HCT_ECOMPILE},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, HCT_EUNSUPPORTED},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, HCT_EUNSUPPORTED},
    {CUDA_ERROR_NOT_SUPPORTED, HCT_EUNSUPPORTED},
    {CUDA_ERROR_JIT_COMPILER_NOT_FOUND, HCT_ENOCOMPILER},
    {CUDA_ERROR_FILE_NOT_FOUND, HCT_ENOENT},
    {CUDA_ERROR_NOT_FOUND, HCT_ENOENT},
    {CUDA_ERROR_OPERATING_SYSTEM, HCT_EIO},
    {CUDA_ERROR_INVALID_HANDLE, HCT_EINVAL},
    {CUDA_ERROR_INVALID_CONTEXT, HCT_EINVAL},
    {CUDA_ERROR_ILLEGAL_ADDRESS, HCT_EFAULT},
    {CUDA_ERROR_MISALIGNED_ADDRESS, HCT_EFAULT},
    {CUDA_ERROR_LAUNCH_FAILED, HCT_EFAULT},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, HCT_EFAULT},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, HCT_EFAULT},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, HCT_EFAULT},
    {CUDA_ERROR_INVALID_PC, HCT_EFAULT},
    {CUDA_ERROR_ASSERT, HCT_EFAULT},
    {CUDA_ERROR_ECC_UNCORRECTABLE, HCT_EFAULT},
    {CUDA_ERROR_LAUNCH_TIMEOUT, HCT_EHANG},
    {CUDA_ERROR_TIMEOUT, HCT_ETIMEDOUT},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, HCT_ELAUNCH},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, HCT_ELAUNCH},
};

int hct__cuda_result_code(int r) {
  if (r == CUDA_SUCCESS) return 0;
  return hct__code_map(cu_codes, HCT_ARRAY_SIZE(cu_codes), r, HCT_EGPU);
}

/* Records "cuda: <what>: <driver's message> (<CUDA_ERROR_NAME>)". */
int hct__cu_fail(CUresult r, const char *what) {
  const char *name = NULL, *msg = NULL;
  if (hct__cu.cuGetErrorName == NULL || hct__cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  if (hct__cu.cuGetErrorString == NULL || hct__cu.cuGetErrorString(r, &msg) != CUDA_SUCCESS) msg = NULL;
  return hct__error(hct__cuda_result_code(r), "cuda: %s: %s (%s, %d)", what,
                    msg ? msg : "unknown error", name ? name : "CUresult", (int)r);
}

/* ---- loading ------------------------------------------------------------ */

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static int cu_status;        /* 0 or the load error */
static char cu_message[512]; /* its message, replayed to every caller */
static int cu_no_device;     /* cuInit said there is no card */

static void cu_load_once(void) {
  static const char *const names[] = {"libcuda.so.1"};
  char tried[32] = "", why[256];
  void *lib = hct__vendor_open(names, 1, NULL, tried, sizeof tried, why, sizeof why);
  if (lib == NULL) {
    cu_status = hct__error(HCT_ENODRIVER, "cuda: cannot load libcuda.so.1 (%s)", why);
  } else if ((cu_status = hct__vendor_resolve(lib, "libcuda.so.1", cu_syms,
                                              HCT_ARRAY_SIZE(cu_syms))) == 0) {
    if (hct__cu.cuDeviceGetUuid_v2 == NULL && hct__cu.cuDeviceGetUuid_v1 == NULL)
      cu_status = hct__error(HCT_ENOSYM, "'libcuda.so.1' has no symbol 'cuDeviceGetUuid'");
    else if (hct__cu.cuEventElapsedTime_v2 == NULL && hct__cu.cuEventElapsedTime_v1 == NULL)
      cu_status = hct__error(HCT_ENOSYM, "'libcuda.so.1' has no symbol 'cuEventElapsedTime'");
    else {
      CUresult r = hct__cu.cuInit(0);
      /* A driver without cards is a driver: it lists none. */
      if (r == CUDA_ERROR_NO_DEVICE)
        cu_no_device = 1;
      else if (r != CUDA_SUCCESS)
        cu_status = hct__cu_fail(r, "cuInit");
    }
  }
  if (cu_status != 0) hct__strlcpy(cu_message, hct_last_error(), sizeof cu_message);
  /* The library stays loaded on failure too: unloading a half-initialised
   * driver is riskier than the memory. */
}

int hct__cu_load(int *no_device) {
  pthread_once(&cu_once, cu_load_once);
  if (no_device != NULL) *no_device = cu_no_device;
  if (cu_status != 0) return hct__error(cu_status, "%s", cu_message);
  return 0;
}

int hct__cu_device_uuid(CUdevice dev, char *buf, size_t len) {
  CUuuid u;
  CUresult r = hct__cu.cuDeviceGetUuid_v2 != NULL ? hct__cu.cuDeviceGetUuid_v2(&u, dev)
                                                  : hct__cu.cuDeviceGetUuid_v1(&u, dev);
  if (r != CUDA_SUCCESS) return hct__cu_fail(r, "cuDeviceGetUuid");
  const unsigned char *b = (const unsigned char *)u.bytes;
  snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
  return 0;
}
