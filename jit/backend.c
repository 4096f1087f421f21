/*
 * backend.c: the backend table, device discovery across vendors, and the
 * hct__gpu_* calls, which dispatch through the table of the card's backend.
 * A backend leaves an operation NULL when it cannot do it; calling it is
 * then HCT_EUNSUPPORTED, never a crash.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jit.h"

/* Indexed by hct_backend_kind_t; discovery lists cards in this order. */
static const hct_backend_ops_t *const backends[HCT_BACKEND_COUNT] = {
    [HCT_BACKEND_CUDA] = &hct__cuda_backend,
    [HCT_BACKEND_HIP] = &hct__hip_backend,
};

const hct_backend_ops_t *hct__backend(hct_backend_kind_t kind) {
  if ((int)kind < 0 || kind >= HCT_BACKEND_COUNT) return NULL;
  return backends[kind];
}

/* ---- devices ------------------------------------------------------------ */

int hct__devices(hct_device_t *out, int max) {
  char tried[1024] = "";
  size_t off = 0;
  int loaded = 0, n = 0;
  for (int b = 0; b < HCT_BACKEND_COUNT; b++) {
    const hct_backend_ops_t *ops = backends[b];
    hct__error_clear();
    int rc = ops->load ? ops->load() : hct__error(HCT_ENODRIVER, "%s: no driver", ops->name);
    int count = 0;
    if (rc == 0 && ops->device_count) rc = ops->device_count(&count);
    if (rc < 0) {
      const char *why = hct_last_error();
      if (off < sizeof tried)
        off += (size_t)snprintf(tried + off, sizeof tried - off, "%s%s", off ? "; " : "",
                                why[0] ? why : hct_strerror(rc));
      continue;
    }
    loaded++;
    for (int i = 0; i < count; i++) {
      if (n >= max) break;
      if (ops->device_get(i, &out[n]) < 0) {
        /* One broken card must not hide the others. */
        hct__log(HCT_LOG_WARN, "%s card %d skipped: %s", ops->name, i, hct_last_error());
        continue;
      }
      n++;
    }
  }
  if (loaded == 0) return hct__error(HCT_ENODRIVER, "no gpu driver found: %s", tried);
  hct__error_clear();
  return n;
}

static int all_digits(const char *s) {
  if (*s == '\0') return 0;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s)) return 0;
  return 1;
}

int hct__uuid_matches(const char *uuid, const char *spec) {
  size_t n = strlen(spec);
  if (strncasecmp(uuid, spec, n) == 0) return 1;
  return strncasecmp(uuid, "GPU-", 4) == 0 && strncasecmp(uuid + 4, spec, n) == 0;
}

int hct__device_find(const char *spec, hct_device_t *out) {
  hct_device_t *all = calloc(64, sizeof *all);
  if (all == NULL) return hct__error(HCT_ENOMEM, "out of memory listing cards");
  int n = hct__devices(all, 64);
  if (n < 0) {
    free(all);
    return n;
  }
  int found = -1, matches = 0;
  if (spec == NULL || spec[0] == '\0') spec = "0";
  if (all_digits(spec)) {
    long i = strtol(spec, NULL, 10);
    if (i < n) found = (int)i, matches = 1;
  } else {
    for (int i = 0; i < n; i++)
      if (hct__uuid_matches(all[i].uuid, spec)) found = i, matches++;
  }
  int rc = 0;
  if (matches == 1)
    *out = all[found];
  else if (matches > 1)
    rc = hct__error(HCT_EINVAL, "device '%s': matches %d cards, give more of the uuid", spec,
                    matches);
  else
    rc = hct__error(HCT_ENOENT, "device '%s': no such card (%d card%s found)", spec, n,
                    n == 1 ? "" : "s");
  free(all);
  return rc;
}

void hct__device_model_key(const hct_device_t *d, char *buf, size_t len) {
  /* Whole GiB, rounded: ECC and driver reservations move the byte count
   * by a few MiB between hosts of the same model. */
  long long gib = (long long)((d->mem_bytes + (1LL << 29)) >> 30);
  snprintf(buf, len, "%s|%s|%s|%d|%lld", d->vendor, d->name, d->arch, d->sm_count, gib);
}

/* ---- dispatch ----------------------------------------------------------- */

/* The backend of the last module this thread loaded: see loaded_backend. */
static _Thread_local const hct_backend_ops_t *module_ops;

static int unsupported(const hct_gpu_t *g, const char *what) {
  return hct__error(HCT_EUNSUPPORTED, "%s backend: %s not supported",
                    g && g->ops ? g->ops->name : "unknown", what);
}

/* Calls op `fn` of g's backend, or fails with EUNSUPPORTED when absent. */
#define DISPATCH(g, fn, ...) \
  ((g)->ops->fn ? (g)->ops->fn(__VA_ARGS__) : unsupported((g), #fn))

int hct__gpu_open(const hct_device_t *dev, hct_gpu_t **out) {
  const hct_backend_ops_t *ops = hct__backend(dev->backend);
  if (ops == NULL) return hct__error(HCT_EINVAL, "device '%s': unknown backend", dev->name);
  if (ops->open == NULL)
    return hct__error(HCT_EUNSUPPORTED, "%s backend: open not supported", ops->name);
  int rc = ops->load ? ops->load() : 0;
  if (rc < 0) return rc;
  return ops->open(dev, out);
}

void hct__gpu_close(hct_gpu_t *g) {
  if (g != NULL && g->ops->close) g->ops->close(g);
}

const hct_device_t *hct__gpu_device(const hct_gpu_t *g) { return &g->dev; }

int hct__gpu_alloc(hct_gpu_t *g, size_t bytes, hct_dptr_t *out) {
  return DISPATCH(g, alloc, g, bytes, out);
}

void hct__gpu_free(hct_gpu_t *g, hct_dptr_t p) {
  if (g->ops->free) g->ops->free(g, p);
}

int hct__gpu_upload(hct_gpu_t *g, hct_dptr_t dst, const void *src, size_t bytes) {
  return DISPATCH(g, upload, g, dst, src, bytes);
}

int hct__gpu_download(hct_gpu_t *g, void *dst, hct_dptr_t src, size_t bytes) {
  return DISPATCH(g, download, g, dst, src, bytes);
}

int hct__gpu_fill32(hct_gpu_t *g, hct_dptr_t dst, uint32_t value, size_t count) {
  return DISPATCH(g, fill32, g, dst, value, count);
}

int hct__gpu_fill16(hct_gpu_t *g, hct_dptr_t dst, uint16_t value, size_t count) {
  return DISPATCH(g, fill16, g, dst, value, count);
}

int hct__gpu_module_load(hct_gpu_t *g, const void *image, size_t size, hct_module_t **out) {
  module_ops = g->ops;
  return DISPATCH(g, module_load, g, image, size, out);
}

void hct__gpu_module_unload(hct_gpu_t *g, hct_module_t *m) {
  if (g->ops->module_unload) g->ops->module_unload(g, m);
}

/*
 * A module or function does not say which backend made it, and these two
 * calls get no hct_gpu_t.  Everything made from a gpu belongs to the thread
 * that opened it, so the backend of the last module this thread loaded is
 * the one to ask; failing that, the first backend whose driver loads.
 */
static const hct_backend_ops_t *loaded_backend(void) {
  if (module_ops != NULL) return module_ops;
  for (int b = 0; b < HCT_BACKEND_COUNT; b++) {
    const hct_backend_ops_t *ops = backends[b];
    hct__error_clear();
    if (ops->load && ops->load() == 0) return ops;
  }
  return NULL;
}

int hct__gpu_function(hct_module_t *m, const char *entry, hct_function_t **out) {
  const hct_backend_ops_t *ops = loaded_backend();
  if (ops == NULL || ops->function == NULL)
    return hct__error(HCT_EUNSUPPORTED, "kernel '%s': no loaded backend can look it up", entry);
  return ops->function(m, entry, out);
}

int hct__gpu_function_smem(hct_function_t *f, int bytes) {
  const hct_backend_ops_t *ops = loaded_backend();
  if (ops == NULL || ops->function_smem == NULL)
    return hct__error(HCT_EUNSUPPORTED, "dynamic shared memory: no loaded backend can set it");
  return ops->function_smem(f, bytes);
}

int hct__gpu_launch(hct_gpu_t *g, hct_function_t *f, const unsigned grid[3],
                    const unsigned block[3], unsigned smem, void **args) {
  return DISPATCH(g, launch, g, f, grid, block, smem, args);
}

int hct__gpu_launch_pdl(hct_gpu_t *g, hct_function_t *f, const unsigned grid[3],
                        const unsigned block[3], unsigned smem, void **args) {
  if (g->ops->launch_pdl == NULL) return DISPATCH(g, launch, g, f, grid, block, smem, args);
  return DISPATCH(g, launch_pdl, g, f, grid, block, smem, args);
}

int hct__gpu_sync(hct_gpu_t *g) { return DISPATCH(g, sync, g); }

int hct__gpu_mem_info(hct_gpu_t *g, size_t *free_bytes, size_t *total_bytes) {
  return DISPATCH(g, mem_info, g, free_bytes, total_bytes);
}

int hct__gpu_copy(hct_gpu_t *g, hct_dptr_t dst, hct_dptr_t src, size_t bytes) {
  return DISPATCH(g, copy, g, dst, src, bytes);
}

int hct__gpu_host_register(hct_gpu_t *g, void *p, size_t bytes) {
  return DISPATCH(g, host_register, g, p, bytes);
}

void hct__gpu_host_unregister(hct_gpu_t *g, void *p) {
  if (g->ops->host_unregister) g->ops->host_unregister(g, p);
}

int hct__gpu_tensor_map(hct_gpu_t *g, const hct_tmap_dims_t *t, hct_dptr_t base,
                        hct_tmap_bytes_t *out) {
  if (g->ops->tensor_map == NULL)
    return hct__error(HCT_EUNSUPPORTED, "%s: no tensor maps (TMA) on this backend", g->ops->name);
  return g->ops->tensor_map(g, t, base, out);
}

int hct__gpu_event_create(hct_gpu_t *g, hct_event_t **out) {
  return DISPATCH(g, event_create, g, out);
}

void hct__gpu_event_destroy(hct_gpu_t *g, hct_event_t *e) {
  if (g->ops->event_destroy) g->ops->event_destroy(g, e);
}

int hct__gpu_event_record(hct_gpu_t *g, hct_event_t *e) {
  return DISPATCH(g, event_record, g, e);
}

int hct__gpu_event_elapsed(hct_gpu_t *g, hct_event_t *start, hct_event_t *end, float *ms) {
  return DISPATCH(g, event_elapsed, g, start, end, ms);
}

int hct__gpu_capture_begin(hct_gpu_t *g) { return DISPATCH(g, capture_begin, g); }

int hct__gpu_capture_end(hct_gpu_t *g, hct_graph_t **out) {
  return DISPATCH(g, capture_end, g, out);
}

int hct__gpu_graph_launch(hct_gpu_t *g, hct_graph_t *graph) {
  return DISPATCH(g, graph_launch, g, graph);
}

void hct__gpu_graph_destroy(hct_gpu_t *g, hct_graph_t *graph) {
  if (g->ops->graph_destroy) g->ops->graph_destroy(g, graph);
}

int hct__gpu_sm_clock(hct_gpu_t *g, int *mhz) { return DISPATCH(g, sm_clock, g, mhz); }
