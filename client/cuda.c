/*
 * cuda.c: the engine's side of the CUDA driver: modules, scratch and
 * launches in the caller's context, on the caller's stream.
 *
 * jit/cuda.c drives cards for the tuner: it owns a primary context and a
 * stream per hct_gpu_t and makes its context current on every call.  An
 * engine's library must do neither: it loads into whatever context the
 * caller has current (PyTorch's, CuPy's, the engine's own) and enqueues on
 * the caller's stream, so that the launches order with the engine's work
 * and can be captured in the engine's CUDA graphs.  Both call the driver
 * through the one table of jit/cuda_api.h (loaded by jit/cuda_driver.c),
 * and launch plans that jit/plan.c evaluated.
 *
 * Thread rules: loading is guarded by pthread_once.  Every call pushes the
 * kernel's context when the calling thread has another one current (or
 * none) and pops it afterwards, so a thread's current context is never
 * changed behind the caller's back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cuda_api.h"

/* Loads the driver (jit/cuda_driver.c, shared with the tuner's backend);
 * an engine without a card has nothing to load into. */
static int load(void) {
  int no_device = 0, rc = hct__cu_load(&no_device);
  if (rc == 0 && no_device) rc = hct__error(HCT_ENODEV, "cuda: no gpu device found");
  return rc;
}

/* Makes ctx current for one call: *pushed tells leave() to pop it. */
static int enter(const hct_ecard_t *card, int *pushed) {
  CUcontext cur = NULL;
  *pushed = 0;
  if (hct__cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == (CUcontext)card->ctx) return 0;
  CUresult r = hct__cu.cuCtxPushCurrent_v2((CUcontext)card->ctx);
  if (r != CUDA_SUCCESS) return hct__cu_fail(r, "cuCtxPushCurrent");
  *pushed = 1;
  return 0;
}

static void leave(int pushed) {
  CUcontext dummy;
  if (pushed) hct__cu.cuCtxPopCurrent_v2(&dummy);
}

int hct__ecuda_card(hct_ecard_t *card) {
  memset(card, 0, sizeof *card);
  int rc = load();
  if (rc < 0) return rc;
  CUcontext ctx = NULL;
  CUdevice dev = 0;
  CUresult r = hct__cu.cuCtxGetCurrent(&ctx);
  if (r != CUDA_SUCCESS) return hct__cu_fail(r, "cuCtxGetCurrent");
  if (ctx == NULL) {
    if ((r = hct__cu.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) return hct__cu_fail(r, "cuDeviceGet 0");
    if ((r = hct__cu.cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS)
      return hct__cu_fail(r, "cuDevicePrimaryCtxRetain of card 0");
    card->retained = 1;
  } else if ((r = hct__cu.cuCtxGetDevice(&dev)) != CUDA_SUCCESS) {
    return hct__cu_fail(r, "cuCtxGetDevice");
  }
  card->ctx = ctx;
  card->ordinal = (int)dev;
  int major = 0, minor = 0, sms = 0, optin = 0;
  static const struct {
    CUdevice_attribute a;
    const char *name;
  } attrs[] = {{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability"},
               {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability"},
               {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count"},
               {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared memory"}};
  int *vals[] = {&major, &minor, &sms, &optin};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(attrs); i++)
    if ((r = hct__cu.cuDeviceGetAttribute(vals[i], attrs[i].a, dev)) != CUDA_SUCCESS) {
      rc = hct__cu_fail(r, attrs[i].name);
      hct__ecuda_card_release(card);
      return rc;
    }
  card->arch_num = major * 10 + minor;
  card->sm_count = sms;
  card->smem_optin = optin;
  if ((rc = hct__cu_device_uuid(dev, card->uuid, sizeof card->uuid)) < 0) {
    hct__ecuda_card_release(card);
    return rc;
  }
  return 0;
}

void hct__ecuda_card_release(hct_ecard_t *card) {
  if (card->retained) hct__cu.cuDevicePrimaryCtxRelease_v2((CUdevice)card->ordinal);
  card->retained = 0;
}

int hct__ecuda_module_load(const hct_ecard_t *card, const void *image, size_t size,
                           void **module) {
  int pushed, rc = enter(card, &pushed);
  if (rc < 0) return rc;
  /* cuModuleLoadData takes a cubin or NUL-terminated PTX text. */
  const unsigned char *p = image;
  int is_elf = size >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F';
  char *copy = NULL;
  if (!is_elf && size > 0 && p[size - 1] != '\0') {
    if ((copy = malloc(size + 1)) == NULL) {
      leave(pushed);
      return hct__error(HCT_ENOMEM, "out of memory loading a module");
    }
    memcpy(copy, image, size);
    copy[size] = '\0';
    image = copy;
  }
  CUmodule m = NULL;
  CUresult r = hct__cu.cuModuleLoadData(&m, image);
  free(copy);
  leave(pushed);
  if (r != CUDA_SUCCESS) return hct__cu_fail(r, is_elf ? "cuModuleLoadData (cubin)" : "cuModuleLoadData (ptx)");
  *module = m;
  return 0;
}

void hct__ecuda_module_unload(const hct_ecard_t *card, void *module) {
  int pushed;
  if (module == NULL || enter(card, &pushed) < 0) return;
  hct__cu.cuModuleUnload((CUmodule)module);
  leave(pushed);
}

int hct__ecuda_function(void *module, const char *entry, int smem, void **fn) {
  CUfunction f = NULL;
  char what[160];
  snprintf(what, sizeof what, "kernel '%s'", entry);
  CUresult r = hct__cu.cuModuleGetFunction(&f, (CUmodule)module, entry);
  if (r != CUDA_SUCCESS) return hct__cu_fail(r, what);
  /* Above 48 KB, dynamic shared memory must be asked for per function. */
  if (smem > 48 * 1024 &&
      (r = hct__cu.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)) !=
          CUDA_SUCCESS) {
    snprintf(what, sizeof what, "kernel '%s': %d bytes of dynamic shared memory", entry, smem);
    return hct__cu_fail(r, what);
  }
  *fn = f;
  return 0;
}

int hct__ecuda_alloc(const hct_ecard_t *card, size_t bytes, uint64_t *ptr) {
  int pushed, rc = enter(card, &pushed);
  if (rc < 0) return rc;
  CUdeviceptr p = 0;
  CUresult r = hct__cu.cuMemAlloc_v2(&p, bytes ? bytes : 4);
  leave(pushed);
  if (r != CUDA_SUCCESS) {
    char what[80];
    snprintf(what, sizeof what, "cuMemAlloc of %zu bytes of scratch", bytes);
    return hct__cu_fail(r, what);
  }
  *ptr = (uint64_t)p;
  return 0;
}

void hct__ecuda_free(const hct_ecard_t *card, uint64_t ptr) {
  int pushed;
  if (ptr == 0 || enter(card, &pushed) < 0) return;
  hct__cu.cuMemFree_v2((CUdeviceptr)ptr);
  leave(pushed);
}

int hct__ecuda_zero(const hct_ecard_t *card, uint64_t ptr, size_t words) {
  int pushed, rc = enter(card, &pushed);
  if (rc < 0) return rc;
  CUresult r = hct__cu.cuMemsetD32_v2((CUdeviceptr)ptr, 0, words);
  leave(pushed);
  return r == CUDA_SUCCESS ? 0 : hct__cu_fail(r, "cuMemsetD32 of scratch");
}

int hct__ecuda_ctx_sync(const hct_ecard_t *card) {
  int pushed, rc = enter(card, &pushed);
  if (rc < 0) return rc;
  CUresult r = hct__cu.cuCtxSynchronize();
  leave(pushed);
  return r == CUDA_SUCCESS ? 0 : hct__cu_fail(r, "cuCtxSynchronize");
}

int hct__ecuda_has_tmaps(void) {
  if (load() < 0) return 0;
  if (hct__cu.cuTensorMapEncodeTiled != NULL) return 1;
  hct__error(HCT_EUNSUPPORTED, "cuda: this driver has no cuTensorMapEncodeTiled (tensor maps need "
                               "CUDA 12.0 or newer)");
  return 0;
}

int hct__ecuda_tensor_map(const hct_tmap_dims_t *t, uint64_t base, uint64_t out[16]) {
  int rc = load();
  return rc < 0 ? rc : hct__cuda_tmap_encode(t, base, out);
}

/*
 * The hot path: no allocation, no synchronisation, nothing but enqueues on
 * the caller's stream, so it is captured into a CUDA graph as it is.  A
 * launch with pdl gets programmatic stream serialisation: it may start
 * while the previous kernel on the stream still runs, and its own
 * griddepcontrol.wait orders what it reads of that kernel's output.
 */
int hct__ecuda_enqueue(const hct_ecard_t *card, void *stream, const hct_plan_t *plan,
                       const hct_ebound_t *bound, const uint64_t *buffers) {
  int pushed, rc = enter(card, &pushed);
  if (rc < 0) return rc;
  CUstream s = (CUstream)stream;
  CUresult r = CUDA_SUCCESS;
  for (int i = 0; i < plan->n_scratch && r == CUDA_SUCCESS; i++)
    if (plan->scratch_zero[i] == HCT_ZERO_EACH_RUN)
      r = hct__cu.cuMemsetD32Async((CUdeviceptr)bound->scratch[i], 0, plan->scratch_bytes[i] / 4, s);
  if (r != CUDA_SUCCESS) {
    leave(pushed);
    return hct__cu_fail(r, "cuMemsetD32Async of scratch");
  }
  for (int l = 0; l < plan->n_launches; l++) {
    /* Argument storage lives until the launch call returns: the driver
     * copies the values then. */
    uint64_t ptrs[HCT_MAX_ARGS];
    int ints[HCT_MAX_ARGS];
    hct_tmap_bytes_t maps[HCT_MAX_TMAPS];
    void *args[HCT_MAX_ARGS];
    const hct_plan_launch_t *P = &plan->launches[l];
    for (int a = 0; a < P->n_args; a++) {
      const hct_plan_arg_t *pa = &P->args[a];
      if (pa->kind == HCT_PLAN_INT) {
        ints[a] = pa->value;
        args[a] = &ints[a];
      } else if (pa->kind == HCT_PLAN_TMAP) {
        /* A map over a buffer is made from this launch's address (host
         * work only: a capture records the bytes). */
        const int i = pa->index;
        const hct_plan_tmap_t *m = &P->tmaps[i];
        if (bound->built[l][i]) {
          memcpy(maps[i].words, bound->words[l][i], sizeof maps[i].words);
        } else if (buffers[m->index] == 0) {
          leave(pushed);
          return hct__error(HCT_EINVAL, "launch %d: a tensor map over buffer %d, which is null", l,
                            m->index);
        } else if ((rc = hct__cuda_tmap_encode(&m->dims,
                                               buffers[m->index], maps[i].words)) < 0) {
          leave(pushed);
          return rc;
        }
        args[a] = &maps[i];
      } else {
        ptrs[a] = pa->kind == HCT_PLAN_BUFFER ? buffers[pa->index] : bound->scratch[pa->index];
        args[a] = &ptrs[a];
      }
    }
    if (P->pdl && hct__cu.cuLaunchKernelEx != NULL) {
      CUlaunchAttribute attr;
      memset(&attr, 0, sizeof attr);
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig cfg;
      memset(&cfg, 0, sizeof cfg);
      cfg.gridDimX = P->grid[0];
      cfg.gridDimY = P->grid[1];
      cfg.gridDimZ = P->grid[2];
      cfg.blockDimX = P->block[0];
      cfg.blockDimY = P->block[1];
      cfg.blockDimZ = P->block[2];
      cfg.sharedMemBytes = P->smem;
      cfg.hStream = s;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      r = hct__cu.cuLaunchKernelEx(&cfg, (CUfunction)bound->fn[l], args, NULL);
    } else {
      r = hct__cu.cuLaunchKernel((CUfunction)bound->fn[l], P->grid[0], P->grid[1], P->grid[2], P->block[0],
                            P->block[1], P->block[2], P->smem, s, args, NULL);
    }
    if (r != CUDA_SUCCESS) {
      leave(pushed);
      char what[160];
      snprintf(what, sizeof what, "launch %d grid (%u,%u,%u) block (%u,%u,%u) smem %u%s", l,
               P->grid[0], P->grid[1], P->grid[2], P->block[0], P->block[1], P->block[2], P->smem,
               P->pdl ? " (programmatic)" : "");
      return hct__cu_fail(r, what);
    }
  }
  leave(pushed);
  return 0;
}
