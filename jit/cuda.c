/*
 * cuda.c: the CUDA backend: the driver API (libcuda.so.1) for devices,
 * memory, modules, launches, events and graphs, and NVRTC for compiles.
 * Both are loaded with dlopen, separately, so that a machine without a GPU
 * still compiles and a machine without NVRTC still lists its cards.
 * Their types come from jit/cuda_abi.h: nothing of the toolkit is needed
 * to build, and at run time only the two libraries.
 *
 * Thread rules: loading is guarded by pthread_once.  Compiles are independent
 * NVRTC programs and run on any thread.  A hct_gpu_t belongs to the thread
 * that opened it; each call makes its context current on that thread
 * first, so one thread may drive several cards.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "cuda_api.h"

/* The NVRTC symbols, as the driver's (jit/cuda_api.h): XX(return type,
 * field, arguments, symbol, required).  nvrtcGetSupportedArchs appeared in
 * 11.2 and nvrtcGetCUBIN in 11.1: without them every arch gets PTX. */
#define HCT_NVRTC_SYMBOLS(XX)                                                            \
  XX(nvrtcResult, nvrtcVersion, (int *, int *), "nvrtcVersion", REQ)                     \
  XX(const char *, nvrtcGetErrorString, (nvrtcResult), "nvrtcGetErrorString", REQ)      \
  XX(nvrtcResult, nvrtcCreateProgram,                                                    \
     (nvrtcProgram *, const char *, const char *, int, const char *const *,              \
      const char *const *),                                                              \
     "nvrtcCreateProgram", REQ)                                                          \
  XX(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram *), "nvrtcDestroyProgram", REQ)     \
  XX(nvrtcResult, nvrtcCompileProgram, (nvrtcProgram, int, const char *const *),         \
     "nvrtcCompileProgram", REQ)                                                         \
  XX(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram, size_t *),                      \
     "nvrtcGetProgramLogSize", REQ)                                                      \
  XX(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram, char *), "nvrtcGetProgramLog", REQ) \
  XX(nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram, size_t *), "nvrtcGetPTXSize", REQ)     \
  XX(nvrtcResult, nvrtcGetPTX, (nvrtcProgram, char *), "nvrtcGetPTX", REQ)               \
  XX(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram, size_t *), "nvrtcGetCUBINSize", OPT) \
  XX(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram, char *), "nvrtcGetCUBIN", OPT)           \
  XX(nvrtcResult, nvrtcGetNumSupportedArchs, (int *), "nvrtcGetNumSupportedArchs", OPT)  \
  XX(nvrtcResult, nvrtcGetSupportedArchs, (int *), "nvrtcGetSupportedArchs", OPT)

#define HCT_FIELD(ret, name, args, sym, req) ret (*name) args;
static struct { HCT_NVRTC_SYMBOLS(HCT_FIELD) } nv;
#undef HCT_FIELD

#define HCT_NV_ROW(ret, name, args, sym, req) {(void **)&nv.name, sym, req},
static const hct_vendor_sym_t nv_syms[] = {HCT_NVRTC_SYMBOLS(HCT_NV_ROW)};

/* ---- error codes ------------------------------------------------------- */

static const hct_code_map_t nvrtc_codes[] = {
    {NVRTC_ERROR_OUT_OF_MEMORY, HCT_ENOMEM},
    {NVRTC_ERROR_INVALID_INPUT, HCT_EINVAL},
    {NVRTC_ERROR_INVALID_PROGRAM, HCT_EINVAL},
    {NVRTC_ERROR_INVALID_OPTION, HCT_EINVAL},
    {NVRTC_ERROR_COMPILATION, HCT_ECOMPILE},
    {NVRTC_ERROR_PROGRAM_CREATION_FAILURE, HCT_ECOMPILE},
    {NVRTC_ERROR_INTERNAL_ERROR, HCT_ECOMPILE},
    /* the builtins library (libnvrtc-builtins) could not be loaded */
    {NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, HCT_ENOCOMPILER},
};

int hct__nvrtc_result_code(int r) {
  if (r == NVRTC_SUCCESS) return 0;
  return hct__code_map(nvrtc_codes, HCT_ARRAY_SIZE(nvrtc_codes), r, HCT_ECOMPILE);
}

static int nv_fail(nvrtcResult r, const char *what) {
  return hct__error(hct__nvrtc_result_code(r), "nvrtc: %s: %s", what,
                    nv.nvrtcGetErrorString ? nv.nvrtcGetErrorString(r) : "error");
}

#define CU_TRY(call, what)                        \
  do {                                            \
    CUresult r_ = hct__cu.call;                        \
    if (r_ != CUDA_SUCCESS) return hct__cu_fail(r_, what); \
  } while (0)

/* ---- loading the driver ------------------------------------------------- */

static int cu_no_device; /* cuInit said there is no card: count 0 */

static int cuda_load(void) { return hct__cu_load(&cu_no_device); }

/* ---- loading NVRTC ------------------------------------------------------ */

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;
static int nv_status;
static char nv_message[768];
static int nv_major, nv_minor;
static int nv_archs[64]; /* supported sm_XX numbers, ascending */
static int nv_n_archs;

static const char *const nv_names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

/*
 * NVRTC loads its builtins (libnvrtc-builtins.so.X.Y) by name.  When NVRTC
 * itself came from a folder off the loader path, load the builtins of that
 * folder first: a later dlopen by name then finds them already loaded.
 */
static void preload_builtins(const char *dir) {
  char pattern[1024];
  glob_t g;
  snprintf(pattern, sizeof pattern, "%s/libnvrtc-builtins.so.*", dir);
  if (glob(pattern, 0, NULL, &g) != 0) return;
  for (size_t i = 0; i < g.gl_pathc; i++) dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL);
  globfree(&g);
}

/* Opens NVRTC by name (the loader's path), else from the toolkit's
 * library folders; `tried` gets what was tried and the loader's last
 * reason. */
static void *nv_open(char *tried, size_t len) {
  const char *dirs[4] = {getenv("CUDA_HOME"), "/usr/local/cuda/lib64", "/usr/local/cuda/lib",
                         "/usr/local/cuda/targets/x86_64-linux/lib"};
  char why[256];
  tried[0] = '\0';
  void *lib = hct__vendor_open(nv_names, HCT_ARRAY_SIZE(nv_names), NULL, tried, len, why,
                               sizeof why);
  if (lib) return lib;
  for (size_t d = 0; d < HCT_ARRAY_SIZE(dirs); d++) {
    if (dirs[d] == NULL || dirs[d][0] == '\0') continue;
    char dir[512];
    /* $CUDA_HOME names the toolkit, not its library folder. */
    snprintf(dir, sizeof dir, "%s%s", dirs[d], d == 0 ? "/lib64" : "");
    char paths[HCT_ARRAY_SIZE(nv_names)][700];
    const char *p[HCT_ARRAY_SIZE(nv_names)];
    for (size_t i = 0; i < HCT_ARRAY_SIZE(nv_names); i++) {
      snprintf(paths[i], sizeof paths[i], "%s/%s", dir, nv_names[i]);
      p[i] = paths[i];
    }
    lib = hct__vendor_open(p, HCT_ARRAY_SIZE(p), NULL, NULL, 0, NULL, 0);
    if (lib) {
      preload_builtins(dir);
      return lib;
    }
    size_t off = strnlen(tried, len);
    /* Truncation is fine: the list only explains a failure. */
    if (off + 1 < len && snprintf(tried + off, len - off, "%s%s/", off ? ", " : "", dir) < 0)
      tried[off] = '\0';
  }
  size_t off = strnlen(tried, len);
  if (why[0] && off + 1 < len) snprintf(tried + off, len - off, "; %s", why);
  return NULL;
}

static void nv_load_once(void) {
  char tried[512] = "";
  void *lib = nv_open(tried, sizeof tried);
  if (lib == NULL) {
    nv_status = hct__error(HCT_ENOCOMPILER, "nvrtc: cannot load the library (tried %s)", tried);
  } else if ((nv_status = hct__vendor_resolve(lib, "libnvrtc", nv_syms,
                                              HCT_ARRAY_SIZE(nv_syms))) == 0) {
    nvrtcResult r = nv.nvrtcVersion(&nv_major, &nv_minor);
    if (r != NVRTC_SUCCESS) nv_status = nv_fail(r, "nvrtcVersion");
    int n = 0;
    if (nv_status == 0 && nv.nvrtcGetNumSupportedArchs && nv.nvrtcGetSupportedArchs &&
        nv.nvrtcGetCUBIN && nv.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 &&
        n <= (int)HCT_ARRAY_SIZE(nv_archs) && nv.nvrtcGetSupportedArchs(nv_archs) == NVRTC_SUCCESS)
      nv_n_archs = n;
  }
  if (nv_status != 0) hct__strlcpy(nv_message, hct_last_error(), sizeof nv_message);
}

static int nvrtc_load(void) {
  pthread_once(&nv_once, nv_load_once);
  if (nv_status != 0) return hct__error(nv_status, "%s", nv_message);
  return 0;
}

static int cuda_compiler_version(char *buf, size_t len) {
  int rc = nvrtc_load();
  if (rc < 0) return rc;
  snprintf(buf, len, "nvrtc %d.%d", nv_major, nv_minor);
  return 0;
}

/* ---- devices ------------------------------------------------------------ */

static int cuda_device_count(int *n) {
  int rc = cuda_load();
  if (rc < 0) return rc;
  *n = 0;
  if (cu_no_device) return 0;
  CU_TRY(cuDeviceGetCount(n), "cuDeviceGetCount");
  return 0;
}

/* The integer attributes of the fingerprint. */
static const struct {
  CUdevice_attribute attr;
  size_t offset;
  int is64;
} dev_attrs[] = {
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(hct_device_t, sm_count), 0},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, offsetof(hct_device_t, warp_size), 0},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(hct_device_t, l2_bytes), 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(hct_device_t, smem_optin), 1},
};

static int cuda_device_get(int ordinal, hct_device_t *d) {
  int rc = cuda_load();
  if (rc < 0) return rc;
  CUdevice dev;
  char what[64];
  snprintf(what, sizeof what, "cuDeviceGet(%d)", ordinal);
  CU_TRY(cuDeviceGet(&dev, ordinal), what);
  memset(d, 0, sizeof *d);
  d->backend = HCT_BACKEND_CUDA;
  d->ordinal = ordinal;
  hct__strlcpy(d->vendor, "nvidia", sizeof d->vendor);
  CU_TRY(cuDeviceGetName(d->name, (int)sizeof d->name, dev), "cuDeviceGetName");

  if ((rc = hct__cu_device_uuid(dev, d->uuid, sizeof d->uuid)) < 0) return rc;
  CU_TRY(cuDeviceGetPCIBusId(d->pci_bus_id, (int)sizeof d->pci_bus_id, dev),
         "cuDeviceGetPCIBusId");

  int major = 0, minor = 0;
  CU_TRY(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
         "cuDeviceGetAttribute");
  CU_TRY(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
         "cuDeviceGetAttribute");
  d->arch_num = major * 10 + minor;
  snprintf(d->arch, sizeof d->arch, "sm_%d", d->arch_num);
  for (size_t i = 0; i < HCT_ARRAY_SIZE(dev_attrs); i++) {
    int v = 0;
    CU_TRY(cuDeviceGetAttribute(&v, dev_attrs[i].attr, dev), "cuDeviceGetAttribute");
    char *field = (char *)d + dev_attrs[i].offset;
    if (dev_attrs[i].is64)
      *(int64_t *)(void *)field = v;
    else
      *(int *)(void *)field = v;
  }
  size_t mem = 0;
  CU_TRY(cuDeviceTotalMem_v2(&mem, dev), "cuDeviceTotalMem_v2");
  d->mem_bytes = (int64_t)mem;

  /* The clock attribute is deprecated in CUDA 13; NVML's maximum is the
   * same figure where the driver no longer answers. */
  int khz = 0, mhz = 0;
  if (hct__cu.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) == CUDA_SUCCESS && khz > 0)
    d->clock_khz = khz;
  else if (hct__nvml_sm_clock(d->uuid, 1, &mhz) == 0)
    d->clock_khz = mhz * 1000;

  int ver = 0;
  CU_TRY(cuDriverGetVersion(&ver), "cuDriverGetVersion");
  snprintf(d->driver_version, sizeof d->driver_version, "%d.%d", ver / 1000, (ver % 1000) / 10);
  /* A card without a compiler can still run stored binaries. */
  if (cuda_compiler_version(d->compiler_version, sizeof d->compiler_version) < 0) {
    d->compiler_version[0] = '\0';
    hct__error_clear();
  }
  return 0;
}

/* ---- compiling ---------------------------------------------------------- */

/* NVIDIA archs by compute capability x10, so that a typo ("sm_91") is an
 * error rather than a PTX fallback.  Archs above the last are accepted as
 * future cards. */
static const int known_archs[] = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88,
                                  89, 90, 100, 101, 103, 110, 120, 121};

static int unknown_arch(const char *arch) {
  char list[256];
  size_t off = 0;
  for (size_t i = 0; i < HCT_ARRAY_SIZE(known_archs) && off < sizeof list; i++)
    off += (size_t)snprintf(list + off, sizeof list - off, "%ssm_%d", i ? ", " : "",
                            known_archs[i]);
  return hct__error(HCT_EINVAL, "unknown arch '%s': expected sm_XX, one of %s", arch, list);
}

/*
 * -arch=sm_XX gives a binary (cubin) when NVRTC knows the arch.  Otherwise
 * the highest arch it knows below XX gives PTX, which the driver compiles
 * for the card when the module is loaded; HCT_ARCH is then that lower arch,
 * because the code may only use its features.
 */
static int cuda_target_options(const char *arch, hct_compile_opts_t *o) {
  if (strncmp(arch, "sm_", 3) != 0 || !isdigit((unsigned char)arch[3])) return unknown_arch(arch);
  char *end;
  long num = strtol(arch + 3, &end, 10);
  /* sm_90a, sm_100f: arch-specific and family-specific targets */
  if ((*end == 'a' || *end == 'f') && end[1] == '\0') end++;
  if (*end != '\0' || num < 10 || num > 999) return unknown_arch(arch);
  int known = (int)num > known_archs[HCT_ARRAY_SIZE(known_archs) - 1];
  for (size_t i = 0; i < HCT_ARRAY_SIZE(known_archs); i++)
    if (known_archs[i] == num) known = 1;
  if (!known) return unknown_arch(arch);

  int rc = nvrtc_load();
  if (rc < 0) return rc;
  int target = 0, exact = 0;
  for (int i = 0; i < nv_n_archs; i++) {
    if (nv_archs[i] == num) exact = 1;
    if (nv_archs[i] <= num && nv_archs[i] > target) target = nv_archs[i];
  }
  /* Without nvrtcGetSupportedArchs, ask for the arch and trust NVRTC. */
  if (nv_n_archs == 0) target = (int)num;
  /* sm_90a code runs on sm_90 only: PTX for a lower arch would drop what
   * the suffix allows (wgmma, setmaxnreg). */
  if (end[-1] == 'a' && nv_n_archs > 0 && !exact)
    return hct__error(HCT_EUNSUPPORTED,
                      "arch '%s': arch-specific, and nvrtc %d.%d does not compile for sm_%ld", arch,
                      nv_major, nv_minor, num);
  if (target == 0)
    return hct__error(HCT_EUNSUPPORTED, "arch '%s': nvrtc %d.%d compiles for sm_%d and newer only",
                      arch, nv_major, nv_minor, nv_archs[0]);
  o->arch_num = (int)num;
  o->warp = 32;
  o->is_ptx = !exact;
  if (exact)
    rc = hct__compile_opt_add(o, "-arch=%s", arch);
  else
    rc = hct__compile_opt_add(o, "--gpu-architecture=compute_%d", target);
  if (rc == 0) rc = hct__compile_opt_add(o, "--ptxas-options=-v");
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_WARP=%d", o->warp);
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_ARCH=%d", exact ? (int)num : target);
  if (rc == 0) rc = hct__compile_opt_add(o, "-DHCT_CUDA=1");
  return rc;
}

/*
 * Compiles job->variant's template (`source`) with NVRTC; thread-safe.  The
 * headers are found through the -I options of hct__compile_options, never
 * through the toolkit's include folder, so a machine with only the NVRTC
 * libraries compiles the same code.
 */
static int cuda_compile(const hct_backend_ops_t *ops, hct_compile_job_t *job, const char *source,
                        const char *include_dir) {
  (void)include_dir; /* in the option list already */
  int rc = nvrtc_load();
  if (rc < 0) return rc;
  hct_compile_opts_t *o = malloc(sizeof *o);
  if (o == NULL) return hct__error(HCT_ENOMEM, "out of memory compiling '%s'", job->variant->name);
  rc = hct__compile_options(ops, job, o);
  if (rc < 0) {
    free(o);
    return rc;
  }
  nvrtcProgram prog = NULL;
  nvrtcResult r = nv.nvrtcCreateProgram(&prog, source, job->variant->template_file, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) {
    free(o);
    return nv_fail(r, "nvrtcCreateProgram");
  }
  nvrtcResult cr = nv.nvrtcCompileProgram(prog, o->n, o->argv);
  int is_ptx = o->is_ptx;
  free(o);

  size_t log_size = 0;
  if (nv.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    job->log = malloc(log_size);
    if (job->log && nv.nvrtcGetProgramLog(prog, job->log) != NVRTC_SUCCESS) job->log[0] = '\0';
  }
  if (cr != NVRTC_SUCCESS) {
    nv.nvrtcDestroyProgram(&prog);
    if (cr == NVRTC_ERROR_COMPILATION && job->log) {
      char line[400];
      if (!hct__log_error_line(job->log, line, sizeof line) && line[0] == '\0')
        hct__strlcpy(line, "compile failed with an empty log", sizeof line);
      return hct__error(HCT_ECOMPILE, "%s", line);
    }
    return nv_fail(cr, "nvrtcCompileProgram");
  }

  size_t size = 0;
  r = is_ptx ? nv.nvrtcGetPTXSize(prog, &size) : nv.nvrtcGetCUBINSize(prog, &size);
  if (r == NVRTC_SUCCESS && size > 0) {
    job->image = malloc(size);
    if (job->image == NULL) {
      nv.nvrtcDestroyProgram(&prog);
      return hct__error(HCT_ENOMEM, "out of memory for a %zu-byte image", size);
    }
    r = is_ptx ? nv.nvrtcGetPTX(prog, job->image) : nv.nvrtcGetCUBIN(prog, job->image);
  }
  nv.nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) return nv_fail(r, is_ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN");
  if (size == 0) return hct__error(HCT_ECOMPILE, "nvrtc produced an empty image");
  job->image_size = size;
  job->is_ptx = is_ptx;
  if (is_ptx) {
    job->regs = job->spill_bytes = job->smem_static = job->stack_bytes = -1;
  } else {
    job->regs = job->spill_bytes = job->smem_static = job->stack_bytes = 0;
    hct__log_resources(job->log, job);
  }
  return 0;
}

/* ---- the GPU runtime ---------------------------------------------------- */

typedef struct {
  struct hct_gpu_s base; /* first: the dispatch reads base.ops */
  CUdevice dev;
  CUcontext ctx;
  CUstream stream;
} cuda_gpu_t;

/* A graph and its executable instance, behind hct_graph_t. */
typedef struct {
  CUgraph graph;
  CUgraphExec exec;
} cuda_graph_t;

static _Thread_local CUcontext current_ctx;

/* Makes g's context current on this thread, once per switch. */
static int enter(hct_gpu_t *gpu) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  if (current_ctx == g->ctx) return 0;
  CU_TRY(cuCtxSetCurrent(g->ctx), "cuCtxSetCurrent");
  current_ctx = g->ctx;
  return 0;
}

#define ENTER(g)                 \
  do {                           \
    int e_ = enter(g);           \
    if (e_ < 0) return e_;       \
  } while (0)

static int cuda_open(const hct_device_t *dev, hct_gpu_t **out) {
  int rc = cuda_load();
  if (rc < 0) return rc;
  cuda_gpu_t *g = calloc(1, sizeof *g);
  if (g == NULL) return hct__error(HCT_ENOMEM, "out of memory opening '%s'", dev->name);
  g->base.ops = &hct__cuda_backend;
  g->base.dev = *dev;
  CUresult r = hct__cu.cuDeviceGet(&g->dev, dev->ordinal);
  if (r == CUDA_SUCCESS) r = hct__cu.cuDevicePrimaryCtxRetain(&g->ctx, g->dev);
  if (r != CUDA_SUCCESS) {
    free(g);
    return hct__cu_fail(r, "cuDevicePrimaryCtxRetain");
  }
  r = hct__cu.cuCtxSetCurrent(g->ctx);
  if (r == CUDA_SUCCESS) {
    current_ctx = g->ctx;
    /* Non-blocking: the legacy default stream never serialises with it. */
    r = hct__cu.cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING);
  }
  if (r != CUDA_SUCCESS) {
    rc = hct__cu_fail(r, "cuStreamCreate");
    hct__cu.cuDevicePrimaryCtxRelease_v2(g->dev);
    free(g);
    return rc;
  }
  *out = &g->base;
  return 0;
}

static void cuda_close(hct_gpu_t *gpu) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  if (enter(gpu) == 0) {
    hct__cu.cuStreamSynchronize(g->stream);
    hct__cu.cuStreamDestroy_v2(g->stream);
  }
  if (current_ctx == g->ctx) current_ctx = NULL;
  hct__cu.cuDevicePrimaryCtxRelease_v2(g->dev);
  free(g);
}

static int cuda_alloc(hct_gpu_t *g, size_t bytes, hct_dptr_t *out) {
  ENTER(g);
  CUdeviceptr p = 0;
  char what[64];
  snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
  CU_TRY(cuMemAlloc_v2(&p, bytes ? bytes : 1), what);
  *out = (hct_dptr_t)p;
  return 0;
}

static void cuda_free(hct_gpu_t *g, hct_dptr_t p) {
  if (p != 0 && enter(g) == 0) hct__cu.cuMemFree_v2((CUdeviceptr)p);
}

/* Copies go through the gpu's own stream: a copy on the legacy default
 * stream would not wait for the fills and launches queued on it. */
static int cuda_upload(hct_gpu_t *gpu, hct_dptr_t dst, const void *src, size_t bytes) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuMemcpyHtoDAsync_v2((CUdeviceptr)dst, src, bytes, g->stream), "cuMemcpyHtoDAsync");
  CU_TRY(cuStreamSynchronize(g->stream), "cuStreamSynchronize after an upload");
  return 0;
}

static int cuda_download(hct_gpu_t *gpu, void *dst, hct_dptr_t src, size_t bytes) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)src, bytes, g->stream), "cuMemcpyDtoHAsync");
  CU_TRY(cuStreamSynchronize(g->stream), "cuStreamSynchronize after a download");
  return 0;
}

/* Queued, not waited for: the caller times it between events. */
static int cuda_copy(hct_gpu_t *gpu, hct_dptr_t dst, hct_dptr_t src, size_t bytes) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  if (hct__cu.cuMemcpyDtoDAsync_v2 == NULL)
    return hct__error(HCT_EUNSUPPORTED, "cuda: the driver has no cuMemcpyDtoDAsync_v2");
  ENTER(gpu);
  CU_TRY(cuMemcpyDtoDAsync_v2((CUdeviceptr)dst, (CUdeviceptr)src, bytes, g->stream),
         "cuMemcpyDtoDAsync");
  return 0;
}

static int cuda_fill32(hct_gpu_t *gpu, hct_dptr_t dst, uint32_t value, size_t count) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuMemsetD32Async((CUdeviceptr)dst, value, count, g->stream), "cuMemsetD32Async");
  return 0;
}

static int cuda_fill16(hct_gpu_t *gpu, hct_dptr_t dst, uint16_t value, size_t count) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuMemsetD16Async((CUdeviceptr)dst, value, count, g->stream), "cuMemsetD16Async");
  return 0;
}

/* cuModuleLoadData takes a cubin or NUL-terminated PTX text. */
static int cuda_module_load(hct_gpu_t *g, const void *image, size_t size, hct_module_t **out) {
  ENTER(g);
  const unsigned char *p = image;
  void *copy = NULL;
  int is_elf = size >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F';
  if (!is_elf && size > 0 && p[size - 1] != '\0') {
    copy = malloc(size + 1);
    if (copy == NULL) return hct__error(HCT_ENOMEM, "out of memory loading a module");
    memcpy(copy, image, size);
    ((char *)copy)[size] = '\0';
    image = copy;
  }
  CUmodule m = NULL;
  CUresult r = hct__cu.cuModuleLoadData(&m, image);
  free(copy);
  if (r != CUDA_SUCCESS) return hct__cu_fail(r, is_elf ? "cuModuleLoadData (cubin)" : "cuModuleLoadData (ptx)");
  *out = (hct_module_t *)m;
  return 0;
}

static void cuda_module_unload(hct_gpu_t *g, hct_module_t *m) {
  if (m != NULL && enter(g) == 0) hct__cu.cuModuleUnload((CUmodule)m);
}

static int cuda_function(hct_module_t *m, const char *entry, hct_function_t **out) {
  CUfunction f = NULL;
  char what[128];
  snprintf(what, sizeof what, "kernel '%s'", entry);
  CU_TRY(cuModuleGetFunction(&f, (CUmodule)m, entry), what);
  *out = (hct_function_t *)f;
  return 0;
}

static int cuda_function_smem(hct_function_t *f, int bytes) {
  char what[96];
  snprintf(what, sizeof what, "dynamic shared memory of %d bytes", bytes);
  CU_TRY(cuFuncSetAttribute((CUfunction)f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
         what);
  return 0;
}

static int cuda_launch(hct_gpu_t *gpu, hct_function_t *f, const unsigned grid[3],
                       const unsigned block[3], unsigned smem, void **args) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CUresult r = hct__cu.cuLaunchKernel((CUfunction)f, grid[0], grid[1], grid[2], block[0], block[1],
                                 block[2], smem, g->stream, args, NULL);
  if (r != CUDA_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what, "cuLaunchKernel grid (%u,%u,%u) block (%u,%u,%u) smem %u", grid[0],
             grid[1], grid[2], block[0], block[1], block[2], smem);
    return hct__cu_fail(r, what);
  }
  return 0;
}

/* A launch that may overlap the previous kernel of the stream (CUDA 12+):
 * the kernel's own griddepcontrol.wait orders what must be ordered.  An
 * older driver without cuLaunchKernelEx launches plainly. */
static int cuda_launch_pdl(hct_gpu_t *gpu, hct_function_t *f, const unsigned grid[3],
                           const unsigned block[3], unsigned smem, void **args) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  if (hct__cu.cuLaunchKernelEx == NULL) return cuda_launch(gpu, f, grid, block, smem, args);
  ENTER(gpu);
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg = {grid[0],  grid[1],  grid[2], block[0], block[1],
                        block[2], smem,     g->stream, &attr, 1};
  CUresult r = hct__cu.cuLaunchKernelEx(&cfg, (CUfunction)f, args, NULL);
  if (r != CUDA_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what, "cuLaunchKernelEx (programmatic) grid (%u,%u,%u) block (%u,%u,%u)",
             grid[0], grid[1], grid[2], block[0], block[1], block[2]);
    return hct__cu_fail(r, what);
  }
  return 0;
}

/* Free and total device memory of the context's card: the worker takes
 * its timing allocations in groups that fit (tuner/worker_time.c). */
static int cuda_mem_info(hct_gpu_t *g, size_t *free_bytes, size_t *total_bytes) {
  if (hct__cu.cuMemGetInfo_v2 == NULL) return hct__error(HCT_EUNSUPPORTED, "cuda: the driver has no cuMemGetInfo_v2");
  ENTER(g);
  CU_TRY(cuMemGetInfo_v2(free_bytes, total_bytes), "cuMemGetInfo_v2");
  return 0;
}

/* Page-locks host memory the worker downloads outputs into (tuner/
 * hostbuf.c): the driver copies pageable memory through a staging buffer
 * at a fraction of the bus's rate. */
static int cuda_host_register(hct_gpu_t *g, void *p, size_t bytes) {
  if (hct__cu.cuMemHostRegister_v2 == NULL || hct__cu.cuMemHostUnregister == NULL)
    return hct__error(HCT_EUNSUPPORTED, "cuda: the driver has no cuMemHostRegister_v2");
  ENTER(g);
  CU_TRY(cuMemHostRegister_v2(p, bytes, 0), "cuMemHostRegister_v2");
  return 0;
}

static void cuda_host_unregister(hct_gpu_t *g, void *p) {
  if (hct__cu.cuMemHostUnregister != NULL && enter(g) == 0) hct__cu.cuMemHostUnregister(p);
}

static int cuda_sync(hct_gpu_t *gpu) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuStreamSynchronize(g->stream), "cuStreamSynchronize");
  return 0;
}

static int cuda_event_create(hct_gpu_t *g, hct_event_t **out) {
  ENTER(g);
  CUevent e = NULL;
  CU_TRY(cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  *out = (hct_event_t *)e;
  return 0;
}

static void cuda_event_destroy(hct_gpu_t *g, hct_event_t *e) {
  if (e != NULL && enter(g) == 0) hct__cu.cuEventDestroy_v2((CUevent)e);
}

static int cuda_event_record(hct_gpu_t *gpu, hct_event_t *e) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuEventRecord((CUevent)e, g->stream), "cuEventRecord");
  return 0;
}

static int cuda_event_elapsed(hct_gpu_t *g, hct_event_t *a, hct_event_t *b, float *ms) {
  ENTER(g);
  CU_TRY(cuEventSynchronize((CUevent)b), "cuEventSynchronize");
  if (hct__cu.cuEventElapsedTime_v2)
    CU_TRY(cuEventElapsedTime_v2(ms, (CUevent)a, (CUevent)b), "cuEventElapsedTime");
  else
    CU_TRY(cuEventElapsedTime_v1(ms, (CUevent)a, (CUevent)b), "cuEventElapsedTime");
  return 0;
}

/* Thread-local capture: this thread may not call unsafe APIs (cuMemAlloc)
 * while capturing, and other threads are left alone. */
static int cuda_capture_begin(hct_gpu_t *gpu) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuStreamBeginCapture_v2(g->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
         "cuStreamBeginCapture");
  return 0;
}

static int cuda_capture_end(hct_gpu_t *gpu, hct_graph_t **out) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CUgraph graph = NULL;
  CUresult r = hct__cu.cuStreamEndCapture(g->stream, &graph);
  if (r != CUDA_SUCCESS) {
    if (graph) hct__cu.cuGraphDestroy(graph);
    return hct__cu_fail(r, "cuStreamEndCapture");
  }
  cuda_graph_t *cg = calloc(1, sizeof *cg);
  if (cg == NULL) {
    hct__cu.cuGraphDestroy(graph);
    return hct__error(HCT_ENOMEM, "out of memory ending a capture");
  }
  cg->graph = graph;
  r = hct__cu.cuGraphInstantiateWithFlags(&cg->exec, graph, 0);
  if (r != CUDA_SUCCESS) {
    hct__cu.cuGraphDestroy(graph);
    free(cg);
    return hct__cu_fail(r, "cuGraphInstantiateWithFlags");
  }
  *out = (hct_graph_t *)cg;
  return 0;
}

static int cuda_graph_launch(hct_gpu_t *gpu, hct_graph_t *graph) {
  cuda_gpu_t *g = (cuda_gpu_t *)gpu;
  ENTER(gpu);
  CU_TRY(cuGraphLaunch(((cuda_graph_t *)graph)->exec, g->stream), "cuGraphLaunch");
  return 0;
}

static void cuda_graph_destroy(hct_gpu_t *g, hct_graph_t *graph) {
  cuda_graph_t *cg = (cuda_graph_t *)graph;
  if (cg == NULL) return;
  if (enter(g) == 0) {
    hct__cu.cuGraphExecDestroy(cg->exec);
    hct__cu.cuGraphDestroy(cg->graph);
  }
  free(cg);
}

/* The manifest's element types and swizzles as the driver names them. */
static const struct {
  hct_dtype_t dt;
  CUtensorMapDataType cu;
} tmap_types[] = {{HCT_DT_F32, CU_TENSOR_MAP_DATA_TYPE_FLOAT32},
                  {HCT_DT_BF16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16},
                  {HCT_DT_F16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16},
                  {HCT_DT_U32, CU_TENSOR_MAP_DATA_TYPE_UINT32},
                  {HCT_DT_I32, CU_TENSOR_MAP_DATA_TYPE_INT32}};
static const struct {
  int bytes;
  CUtensorMapSwizzle cu;
} tmap_swizzles[] = {{0, CU_TENSOR_MAP_SWIZZLE_NONE},
                     {32, CU_TENSOR_MAP_SWIZZLE_32B},
                     {64, CU_TENSOR_MAP_SWIZZLE_64B},
                     {128, CU_TENSOR_MAP_SWIZZLE_128B}};


/* cuTensorMapEncodeTiled (CUDA 12.0+) is host work only, so it is safe
 * while a stream captures.  Out-of-bounds elements of a box read as zero. */
int hct__cuda_tmap_encode(const hct_tmap_dims_t *t, uint64_t base, uint64_t out[16]) {
  if (hct__cu.cuTensorMapEncodeTiled == NULL)
    return hct__error(HCT_EUNSUPPORTED,
                      "cuda: this driver has no cuTensorMapEncodeTiled (tensor maps need CUDA 12.0 "
                      "or newer)");
  _Static_assert(sizeof(CUtensorMap) == 16 * sizeof(uint64_t), "a tensor map is 128 bytes");
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_NONE;
  for (size_t i = 0; i < HCT_ARRAY_SIZE(tmap_types); i++)
    if (tmap_types[i].dt == t->dtype) type = tmap_types[i].cu;
  for (size_t i = 0; i < HCT_ARRAY_SIZE(tmap_swizzles); i++)
    if (tmap_swizzles[i].bytes == t->swizzle) sw = tmap_swizzles[i].cu;
  cuuint64_t dims[HCT_TMAP_MAX_RANK], strides[HCT_TMAP_MAX_RANK];
  cuuint32_t box[HCT_TMAP_MAX_RANK], estr[HCT_TMAP_MAX_RANK];
  for (int i = 0; i < t->rank; i++) {
    dims[i] = t->dims[i];
    box[i] = t->box[i];
    estr[i] = 1;
    /* The driver takes the strides of dimensions 1.. only. */
    if (i > 0) strides[i - 1] = t->strides[i];
  }
  CUtensorMap m;
  CUresult r = hct__cu.cuTensorMapEncodeTiled(&m, type, (cuuint32_t)t->rank, (void *)(uintptr_t)base,
                                        dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return hct__cu_fail(r, "cuTensorMapEncodeTiled");
  memcpy(out, &m, sizeof m);
  return 0;
}

static int cuda_tensor_map(hct_gpu_t *g, const hct_tmap_dims_t *t, hct_dptr_t base,
                           hct_tmap_bytes_t *out) {
  (void)g;
  return hct__cuda_tmap_encode(t, base, out->words);
}

static int cuda_sm_clock(hct_gpu_t *g, int *mhz) { return hct__nvml_sm_clock(g->dev.uuid, 0, mhz); }

const hct_backend_ops_t hct__cuda_backend = {
    .name = "cuda",
    .kind = HCT_BACKEND_CUDA,
    .load = cuda_load,
    .device_count = cuda_device_count,
    .device_get = cuda_device_get,
    .compiler_version = cuda_compiler_version,
    .compile = cuda_compile,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .fill32 = cuda_fill32,
    .copy = cuda_copy,
    .fill16 = cuda_fill16,
    .module_load = cuda_module_load,
    .module_unload = cuda_module_unload,
    .function = cuda_function,
    .function_smem = cuda_function_smem,
    .launch = cuda_launch,
    .launch_pdl = cuda_launch_pdl,
    .sync = cuda_sync,
    .mem_info = cuda_mem_info,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_elapsed = cuda_event_elapsed,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .sm_clock = cuda_sm_clock,
    .target_options = cuda_target_options,
    .tensor_map = cuda_tensor_map,
};
