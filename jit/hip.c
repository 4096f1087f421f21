/*
 * hip.c: the AMD backend, hct__hip_backend: its table, and the GPU runtime
 * behind it: a device opened as a stream, memory, modules and their
 * kernels, launches, events, stream capture into graphs, and the shader
 * clock.  A hct_gpu_t and all made from it belong to the thread that
 * opened it (jit.h).  The other files of the backend (libraries, devices,
 * compiles, code objects) are listed in hip_internal.h.
 *
 * KNOWN-GAP: the GPU runtime (devices, memory, modules, launches, events,
 * graphs) has never run on AMD hardware (there is none here); it follows
 * the HIP API documentation and the CUDA backend's contract.  docs/amd.md
 * says what has and has not been checked.
 */
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

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
  int rc = hct__hip_load();
  if (rc < 0) return rc;
  hip_gpu_t *g = calloc(1, sizeof *g);
  if (g == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory opening device %d", dev->ordinal);
  g->base.ops = &hct__hip_backend;
  g->base.dev = *dev;
  /* HIP keeps the current device per thread; a hct_gpu_t belongs to the
   * thread that opened it, so setting it once here is enough. */
  hipError_t e = hct__hip.hipSetDevice(dev->ordinal);
  if (e == hipSuccess) e = hct__hip.hipStreamCreateWithFlags(&g->stream, hipStreamNonBlocking);
  if (e != hipSuccess) {
    free(g);
    return hct__hip_fail(e, "opening the device (hipSetDevice, hipStreamCreateWithFlags)");
  }
  *out = &g->base;
  return 0;
}

static void hip_close(hct_gpu_t *g) {
  if (g == NULL) return;
  hct__hip.hipStreamSynchronize(GPU(g)->stream);
  hct__hip.hipStreamDestroy(GPU(g)->stream);
  free(g);
}

static int hip_alloc(hct_gpu_t *g, size_t bytes, hct_dptr_t *out) {
  void *p = NULL;
  *out = 0;
  hipError_t e = hct__hip.hipMalloc(&p, bytes ? bytes : 1);
  if (e != hipSuccess) return hct__hip_fail(e, "hipMalloc");
  *out = (hct_dptr_t)(uintptr_t)p;
  return 0;
}

static void hip_free(hct_gpu_t *g, hct_dptr_t p) {
  if (p != 0) hct__hip.hipFree((void *)(uintptr_t)p);
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

/* Queued, not waited for: the caller times it between events. */
static int hip_copy(hct_gpu_t *g, hct_dptr_t dst, hct_dptr_t src, size_t bytes) {
  HIP_TRY(hipMemcpyAsync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes,
                         hipMemcpyDeviceToDevice, GPU(g)->stream));
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
  hipError_t e = hct__hip.hipModuleLoadData(&m->mod, image);
  if (e != hipSuccess) {
    free(m);
    return hct__hip_fail(e, "hipModuleLoadData");
  }
  m->gpu = GPU(g);
  *out = (hct_module_t *)m;
  return 0;
}

static void hip_module_unload(hct_gpu_t *g, hct_module_t *m) {
  if (m == NULL) return;
  hct__hip.hipModuleUnload(((hip_module_t *)m)->mod);
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
  hipError_t e = hct__hip.hipModuleGetFunction(&fn, m->mod, entry);
  if (e != hipSuccess)
    return hct__error(e == hipErrorNotFound ? HCT_ENOENT : HCT_EGPU,
                      "hip: kernel '%s' not in module: %s", entry, hct__hip.hipGetErrorName(e));
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
  hipError_t e = hct__hip.hipModuleLaunchKernel(((hip_function_t *)hf)->fn, grid[0], grid[1],
                                                grid[2], block[0], block[1], block[2], smem,
                                                GPU(g)->stream, args, NULL);
  return hct__hip_fail(e, "hipModuleLaunchKernel");
}

/* Free and total device memory, as cuda_mem_info. */
static int hip_mem_info(hct_gpu_t *g, size_t *free_bytes, size_t *total_bytes) {
  HIP_NEED(hipMemGetInfo);
  HIP_TRY(hipMemGetInfo(free_bytes, total_bytes));
  return 0;
}

/* Page-locked host memory, as cuda_host_register. */
static int hip_host_register(hct_gpu_t *g, void *p, size_t bytes) {
  HIP_NEED(hipHostRegister);
  HIP_NEED(hipHostUnregister);
  HIP_TRY(hipHostRegister(p, bytes, 0));
  return 0;
}

static void hip_host_unregister(hct_gpu_t *g, void *p) {
  if (hct__hip.hipHostUnregister != NULL) hct__hip.hipHostUnregister(p);
}

static int hip_sync(hct_gpu_t *g) {
  HIP_TRY(hipStreamSynchronize(GPU(g)->stream));
  return 0;
}

static int hip_event_create(hct_gpu_t *g, hct_event_t **out) {
  *out = NULL;
  hip_event_t *ev = calloc(1, sizeof *ev);
  if (ev == NULL) return hct__error(HCT_ENOMEM, "hip: out of memory for an event");
  hipError_t e = hct__hip.hipEventCreate(&ev->ev);
  if (e != hipSuccess) {
    free(ev);
    return hct__hip_fail(e, "hipEventCreate");
  }
  *out = (hct_event_t *)ev;
  return 0;
}

static void hip_event_destroy(hct_gpu_t *g, hct_event_t *e) {
  if (e == NULL) return;
  hct__hip.hipEventDestroy(((hip_event_t *)e)->ev);
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
  hipError_t e = hct__hip.hipStreamEndCapture(GPU(g)->stream, &gr->graph);
  if (e == hipSuccess) e = hct__hip.hipGraphInstantiate(&gr->exec, gr->graph, NULL, NULL, 0);
  if (e != hipSuccess) {
    if (gr->graph != NULL && hct__hip.hipGraphDestroy != NULL) hct__hip.hipGraphDestroy(gr->graph);
    free(gr);
    return hct__hip_fail(e, "ending a capture (hipStreamEndCapture, hipGraphInstantiate)");
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
  if (gr->exec != NULL && hct__hip.hipGraphExecDestroy != NULL) hct__hip.hipGraphExecDestroy(gr->exec);
  if (gr->graph != NULL && hct__hip.hipGraphDestroy != NULL) hct__hip.hipGraphDestroy(gr->graph);
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
  .load = hct__hip_load,
  .device_count = hct__hip_device_count,
  .device_get = hct__hip_device_get,
  .compiler_version = hct__hip_compiler_version,
  .compile = hct__hip_compile,
  .open = hip_open,
  .close = hip_close,
  .alloc = hip_alloc,
  .free = hip_free,
  .upload = hip_upload,
  .download = hip_download,
  .fill32 = hip_fill32,
  .copy = hip_copy,
  .fill16 = hip_fill16,
  .module_load = hip_module_load,
  .module_unload = hip_module_unload,
  .function = hip_function,
  .function_smem = hip_function_smem,
  .launch = hip_launch,
  .sync = hip_sync,
  .mem_info = hip_mem_info,
  .host_register = hip_host_register,
  .host_unregister = hip_host_unregister,
  .event_create = hip_event_create,
  .event_destroy = hip_event_destroy,
  .event_record = hip_event_record,
  .event_elapsed = hip_event_elapsed,
  .capture_begin = hip_capture_begin,
  .capture_end = hip_capture_end,
  .graph_launch = hip_graph_launch,
  .graph_destroy = hip_graph_destroy,
  .sm_clock = hip_sm_clock,
  .target_options = hct__hip_target_options,
};
