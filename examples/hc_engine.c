/*
 * hc_engine: an inference engine's windows, run on what hctune chose.
 *
 * --window decode (the default): 48 layers x 2 reads of hc_read for T tokens
 * (1..8), each layer with
 * its own (seeded) weights, the layer's pending write on its first read,
 * and before each read the layer's other work: a kernel that streams
 * --stream-mb of memory (a copy), so that the read starts with a cold L2
 * as it would in an engine.  The window is captured in one CUDA graph and
 * replayed --windows times.  The engine ships no hc_read kernel: it asks
 * libhctune for one (hct_kernel_load) and enqueues it (hct_kernel_launch),
 * for each of: the daemon's bitwise choice, its kl choice, all-v1
 * (HCTUNE_FORCE=hc_read=v1), and any --force variant.
 *
 * It reports ms per window (median over the windows) and the reads' share
 * (the window less a graph of the other work alone), checks that the
 * bitwise choice's outputs (all 96 reads' mixed, mixed_bf16, mixed_f16, and
 * resid) after the windows are bit-identical to all-v1's, and gives the kl
 * choice's metrics against v1 (tuner/parity.c: KL mean, max error ratio,
 * argmax agreement).
 *
 * --window prefill: the same window of hc_read_prefill at T = 2,048 and
 * 8,192 (--tokens, 16..32768), for: pair_mma (HCTUNE_FORCE, the
 * reference), the daemon's bits:pair_mma choice, checked bit-identical to
 * pair_mma's resid and every read's three outputs over the window, and its
 * kl choice, with the metrics against pair_mma over the first two reads and
 * the last (the outputs are GBs: 96 reads at T = 8,192 are 16 GB on the
 * card, the reference's copy 16 GB on the host, the layers' pending writes
 * 16 GB more on the card).
 *
 * Exit 0 when every check holds, 1 when one fails, 2 on bad arguments or
 * no GPU.
 *
 * The engine's own CUDA is the driver API, loaded with dlopen like
 * everything of hctune; its other-work kernel is PTX text below.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h" /* the driver's types, without a toolkit */

#include "hctune.h"
#include "tuner.h"

#define S 4
#define C 2560
#define D (S * C)
#define K 320
#define MAX_DECODE_T 8
#define MAX_CONFIGS 8

/* ---- the engine's CUDA -------------------------------------------------- */

#define ENGINE_CU(XX)                                                                      \
  XX(cuInit, (unsigned), "cuInit")                                                         \
  XX(cuGetErrorString, (CUresult, const char **), "cuGetErrorString")                      \
  XX(cuDeviceGet, (CUdevice *, int), "cuDeviceGet")                                        \
  XX(cuDeviceGetName, (char *, int, CUdevice), "cuDeviceGetName")                          \
  XX(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain")        \
  XX(cuCtxSetCurrent, (CUcontext), "cuCtxSetCurrent")                                      \
  XX(cuStreamCreate, (CUstream *, unsigned), "cuStreamCreate")                             \
  XX(cuStreamSynchronize, (CUstream), "cuStreamSynchronize")                               \
  XX(cuMemAlloc, (CUdeviceptr *, size_t), "cuMemAlloc_v2")                                 \
  XX(cuMemFree, (CUdeviceptr), "cuMemFree_v2")                                             \
  XX(cuMemcpyHtoD, (CUdeviceptr, const void *, size_t), "cuMemcpyHtoD_v2")                 \
  XX(cuMemcpyDtoH, (void *, CUdeviceptr, size_t), "cuMemcpyDtoH_v2")                       \
  XX(cuMemsetD32, (CUdeviceptr, unsigned, size_t), "cuMemsetD32_v2")                       \
  XX(cuModuleLoadData, (CUmodule *, const void *), "cuModuleLoadData")                     \
  XX(cuModuleGetFunction, (CUfunction *, CUmodule, const char *), "cuModuleGetFunction")   \
  XX(cuModuleUnload, (CUmodule), "cuModuleUnload")                                         \
  XX(cuEventDestroy, (CUevent), "cuEventDestroy_v2")                                       \
  XX(cuLaunchKernel,                                                                       \
     (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,    \
      CUstream, void **, void **),                                                         \
     "cuLaunchKernel")                                                                     \
  XX(cuStreamBeginCapture, (CUstream, CUstreamCaptureMode), "cuStreamBeginCapture_v2")     \
  XX(cuStreamEndCapture, (CUstream, CUgraph *), "cuStreamEndCapture")                      \
  XX(cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long),            \
     "cuGraphInstantiateWithFlags")                                                        \
  XX(cuGraphLaunch, (CUgraphExec, CUstream), "cuGraphLaunch")                              \
  XX(cuGraphExecDestroy, (CUgraphExec), "cuGraphExecDestroy")                              \
  XX(cuGraphDestroy, (CUgraph), "cuGraphDestroy")                                          \
  XX(cuEventCreate, (CUevent *, unsigned), "cuEventCreate")                                \
  XX(cuEventRecord, (CUevent, CUstream), "cuEventRecord")                                  \
  XX(cuEventSynchronize, (CUevent), "cuEventSynchronize")                                  \
  XX(cuEventElapsedTime, (float *, CUevent, CUevent), "cuEventElapsedTime_v2")

#define FIELD(name, args, sym) CUresult (*name) args;
static struct { ENGINE_CU(FIELD) } cu;
#undef FIELD

static const char *prog = "hc_engine";

/* One line on stderr and the exit status. */
static int die(int status, const char *fmt, ...) HCT_PRINTF(2, 3);
static int die(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(status);
}

static void check_cu(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const char *msg = NULL;
  if (cu.cuGetErrorString == NULL || cu.cuGetErrorString(r, &msg) != CUDA_SUCCESS) msg = NULL;
  die(2, "cuda: %s: %s (%d)", what, msg ? msg : "error", (int)r);
}
#define CU(call) check_cu(cu.call, #call)

static void check_hct(int rc, const char *what) {
  if (rc >= 0) return;
  die(1, "%s: %s", what, hct_last_error()[0] ? hct_last_error() : hct_strerror(rc));
}

/* Loads the driver and makes card 0's primary context current, as the
 * CUDA runtime would.  Without a GPU: one line, exit 2. */
static CUdevice open_gpu(char *name, size_t len) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) die(2, "no GPU: cannot load libcuda.so.1 (%s)", dlerror());
  static const struct {
    void **slot;
    const char *name;
  } syms[] = {
#define ROW(n, args, sym) {(void **)&cu.n, sym},
      ENGINE_CU(ROW)
#undef ROW
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(syms); i++)
    if ((*syms[i].slot = dlsym(lib, syms[i].name)) == NULL &&
        /* drivers before 12.8 have only the first cuEventElapsedTime */
        (strcmp(syms[i].name, "cuEventElapsedTime_v2") != 0 ||
         (*syms[i].slot = dlsym(lib, "cuEventElapsedTime")) == NULL))
      die(2, "no GPU: libcuda.so.1 lacks '%s'", syms[i].name);
  CUresult r = cu.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *msg = NULL;
    cu.cuGetErrorString(r, &msg);
    die(2, "no GPU: cuInit: %s", msg ? msg : "error");
  }
  CUdevice dev;
  CUcontext ctx;
  CU(cuDeviceGet(&dev, 0));
  CU(cuDeviceGetName(name, (int)len, dev));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  return dev;
}

/* The layer's other work: a grid-stride copy of 16-byte words, written as
 * PTX so that the engine needs no compiler of its own. */
static const char stream_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry hce_stream(.param .u64 p_dst, .param .u64 p_src, .param .u64 p_n16)\n{\n"
    "  .reg .pred %p;\n  .reg .b32 %r<9>;\n  .reg .b64 %rd<12>;\n"
    "  ld.param.u64 %rd1, [p_dst];\n  ld.param.u64 %rd2, [p_src];\n  ld.param.u64 %rd3, [p_n16];\n"
    "  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %ntid.x;\n  mov.u32 %r3, %tid.x;\n"
    "  mov.u32 %r4, %nctaid.x;\n  cvt.u64.u32 %rd4, %r1;\n  cvt.u64.u32 %rd5, %r2;\n"
    "  cvt.u64.u32 %rd6, %r3;\n  mad.lo.u64 %rd7, %rd4, %rd5, %rd6;\n  cvt.u64.u32 %rd8, %r4;\n"
    "  mul.lo.u64 %rd9, %rd8, %rd5;\n"
    "LOOP:\n  setp.ge.u64 %p, %rd7, %rd3;\n  @%p bra DONE;\n  shl.b64 %rd10, %rd7, 4;\n"
    "  add.s64 %rd11, %rd2, %rd10;\n  ld.global.nc.v4.u32 {%r5, %r6, %r7, %r8}, [%rd11];\n"
    "  add.s64 %rd11, %rd1, %rd10;\n  st.global.v4.u32 [%rd11], {%r5, %r6, %r7, %r8};\n"
    "  add.s64 %rd7, %rd7, %rd9;\n  bra LOOP;\nDONE:\n  ret;\n}\n";

/* ---- options -------------------------------------------------------------- */

/* The windows: the op each reads, its token range, defaults. */
typedef struct {
  const char *name, *op, *tokens;
  int tmin, tmax, windows;
} window_kind_t;

static const window_kind_t window_kinds[] = {
    {"decode", "hc_read", "1,4,8", 1, MAX_DECODE_T, 100},
    {"prefill", "hc_read_prefill", "2048,8192", 16, 32768, 10},
};

typedef struct {
  const char *socket;
  const window_kind_t *kind;
  int tokens[HCT_MAX_TOKEN_LIST];
  int n_tokens;
  int windows;
  int layers;
  double stream_mb;
  const char *parity; /* "bitwise", "kl" or "both" */
  const char *forced[MAX_CONFIGS];
  int n_forced;
  uint64_t seed;
  int json;
  int timeout_ms;
  int windows_given;
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: hc_engine [options]\n"
          "  An engine's window: L layers x 2 reads (pending on each layer's first read),\n"
          "  each read after the layer's other work (a copy kernel streaming --stream-mb),\n"
          "  captured in one CUDA graph; reports ms per window and the reads' share.\n"
          "  decode (hc_read): what the hctune daemon chose, all-v1 and any forced\n"
          "  variant; the bitwise choice checked bit-identical to all-v1 (outputs and\n"
          "  resid), the kl choice's metrics against v1.  prefill (hc_read_prefill):\n"
          "  pair_mma, the bits:pair_mma choice checked bit-identical to it, the kl choice.\n"
          "  --window W         decode or prefill (default decode)\n"
          "  --socket PATH      daemon socket (default: $HCTUNE_SOCKET, $XDG_RUNTIME_DIR,\n"
          "                     /run/hctune); without a daemon the baseline runs, said so\n"
          "  --tokens LIST      token counts, 1..8 (default 1,4,8); prefill 16..32768\n"
          "                     (default 2048,8192)\n"
          "  --windows N        windows replayed per configuration (default 100; prefill 10)\n"
          "  --layers N         layers per window (default 48)\n"
          "  --stream-mb MB     memory the other work copies before each read (default 64)\n"
          "  --parity P         bitwise, kl or both (default both; decode only)\n"
          "  --force V[{json}]  also run variant V (at that point), e.g. relay{\"PDL\":1,...};\n"
          "                     may be given several times\n"
          "  --seed N           weights and inputs (default 1)\n"
          "  --timeout-ms N     daemon timeout (default 1000)\n"
          "  --json             one JSON object on stdout instead of the table\n"
          "  --help             this text\n"
          "exit: 0 every check holds, 1 a check or a load failed, 2 bad arguments or no GPU\n");
}

static long parse_long(const char *opt, const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    die(2, "%s '%s': want an integer in %ld..%ld", opt, s, lo, hi);
  return v;
}

static void parse_opts(int argc, char **argv, opts_t *o) {
  const char *tokens = NULL;
  memset(o, 0, sizeof *o);
  o->kind = &window_kinds[0];
  o->layers = 48;
  o->stream_mb = 64;
  o->parity = "both";
  o->seed = 1;
  o->timeout_ms = 1000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--json") == 0) {
      o->json = 1;
      takes = 0;
    } else if (strstr(" --window --socket --tokens --windows --layers --stream-mb --parity --force "
                      "--seed --timeout-ms ", a) == NULL || strncmp(a, "--", 2) != 0) {
      die(2, "%s: unknown option (see --help)", a);
    } else if (v == NULL) {
      die(2, "%s: needs a value (see --help)", a);
    } else if (strcmp(a, "--window") == 0) {
      o->kind = NULL;
      for (size_t k = 0; k < HCT_ARRAY_SIZE(window_kinds); k++)
        if (strcmp(v, window_kinds[k].name) == 0) o->kind = &window_kinds[k];
      if (o->kind == NULL) die(2, "--window '%s': want decode or prefill", v);
    } else if (strcmp(a, "--socket") == 0) {
      o->socket = v;
    } else if (strcmp(a, "--tokens") == 0) {
      tokens = v;
    } else if (strcmp(a, "--windows") == 0) {
      o->windows = (int)parse_long(a, v, 1, 100000);
      o->windows_given = 1;
    } else if (strcmp(a, "--layers") == 0) {
      o->layers = (int)parse_long(a, v, 1, 256);
    } else if (strcmp(a, "--stream-mb") == 0) {
      char *end;
      o->stream_mb = strtod(v, &end);
      if (end == v || *end != '\0' || !(o->stream_mb >= 0 && o->stream_mb <= 4096))
        die(2, "--stream-mb '%s': want a number of MB in 0..4096", v);
    } else if (strcmp(a, "--parity") == 0) {
      if (strcmp(v, "bitwise") != 0 && strcmp(v, "kl") != 0 && strcmp(v, "both") != 0)
        die(2, "--parity '%s': want bitwise, kl or both", v);
      o->parity = v;
    } else if (strcmp(a, "--force") == 0) {
      if (o->n_forced == MAX_CONFIGS - 3) die(2, "--force: at most %d", MAX_CONFIGS - 3);
      o->forced[o->n_forced++] = v;
    } else if (strcmp(a, "--seed") == 0) {
      o->seed = (uint64_t)parse_long(a, v, 0, 0x7fffffff);
    } else if (strcmp(a, "--timeout-ms") == 0) {
      o->timeout_ms = (int)parse_long(a, v, 1, 600000);
    } else {
      die(2, "%s: unknown option (see --help)", a);
    }
    i += takes;
  }
  /* The token list after the loop: its range is the window's. */
  const window_kind_t *w = o->kind;
  const char *list = tokens ? tokens : w->tokens;
  hct_tokens_t set;
  if (hct__parse_token_list(list, &set) <= 0) die(2, "--tokens '%s': %s", list, hct_last_error());
  if (set.t[0] < w->tmin || set.t[set.n - 1] > w->tmax)
    die(2, "--tokens '%s': the %s window takes T = %d..%d", list, w->name, w->tmin, w->tmax);
  for (int k = 0; k < set.n; k++) o->tokens[o->n_tokens++] = set.t[k];
  if (!o->windows_given) o->windows = w->windows;
  if (w != &window_kinds[0] && (strcmp(o->parity, "both") != 0 || o->n_forced > 0))
    die(2, "--parity and --force: the decode window only");
}

/* ---- the model's memory --------------------------------------------------- */

typedef struct {
  CUdeviceptr w_norm, w_down, w_up, pending;
} layer_t;

/* Output of one read: mixed, mixed_bf16, mixed_f16. */
typedef struct {
  CUdeviceptr mixed, mixed_bf16, mixed_f16;
} out_t;

typedef struct {
  int layers;
  int tmax;                /* the largest T: every buffer holds that many tokens */
  layer_t *layer;
  out_t *out;              /* 2 per layer */
  CUdeviceptr resid;       /* [tmax][S][C] */
  float *resid0;           /* its initial value (host) */
  CUdeviceptr src, dst;    /* the other work's memory */
  size_t stream_bytes;
  CUmodule stream_mod;
  CUfunction stream_fn;
  CUstream stream;
} model_t;

/* Uniform in [-a, a): cheap enough for 630 MB of weights at start-up. */
static float uniform(hct_rng_t *r, float a) {
  return a * (float)((double)(hct__rng_next(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static CUdeviceptr upload_bf16(hct_rng_t *r, size_t n, float scale, uint16_t *tmp) {
  for (size_t i = 0; i < n; i++) {
    float x = uniform(r, scale);
    tmp[i] = hct__f32_to_bf16(x != 0.0f ? x : scale * 1e-3f);
  }
  CUdeviceptr p;
  CU(cuMemAlloc(&p, n * 2));
  CU(cuMemcpyHtoD(p, tmp, n * 2));
  return p;
}

/* Values drawn per layer for its pending write; a longer one repeats them
 * (48 layers x 84 M draws at T = 8,192 would take a minute to start). */
#define PENDING_DRAW ((size_t)1 << 20)

static void model_init(model_t *m, const opts_t *o) {
  memset(m, 0, sizeof *m);
  m->layers = o->layers;
  m->tmax = o->tokens[o->n_tokens - 1];
  const size_t n_tsc = (size_t)m->tmax * S * C;
  m->layer = calloc((size_t)o->layers, sizeof *m->layer);
  m->out = calloc((size_t)o->layers * 2, sizeof *m->out);
  uint16_t *tmp = malloc((size_t)K * D * 2);
  float *f = malloc(n_tsc * 4);
  m->resid0 = malloc(n_tsc * 4);
  if (!m->layer || !m->out || !tmp || !f || !m->resid0) die(2, "out of memory");
  /* sqrt(3) makes the uniform's deviation 1/sqrt(fan-in), as the spec's
   * normal weights have. */
  const float down_scale = sqrtf(3.0f / D), up_scale = sqrtf(3.0f / K);
  for (int l = 0; l < o->layers; l++) {
    hct_rng_t r;
    hct__rng_seed(&r, o->seed * 1000003u + (uint64_t)l);
    layer_t *L = &m->layer[l];
    /* norm weights around 1, as trained models have them */
    for (size_t i = 0; i < (size_t)S * C; i++) tmp[i] = hct__f32_to_bf16(1.0f + uniform(&r, 0.25f));
    CU(cuMemAlloc(&L->w_norm, (size_t)S * C * 2));
    CU(cuMemcpyHtoD(L->w_norm, tmp, (size_t)S * C * 2));
    L->w_down = upload_bf16(&r, (size_t)K * D, down_scale, tmp);
    L->w_up = upload_bf16(&r, (size_t)D * K, up_scale, tmp);
    for (size_t i = 0; i < n_tsc; i++) f[i] = i < PENDING_DRAW ? uniform(&r, 0.1f) : f[i % PENDING_DRAW];
    CU(cuMemAlloc(&L->pending, n_tsc * 4));
    CU(cuMemcpyHtoD(L->pending, f, n_tsc * 4));
    for (int k = 0; k < 2; k++) {
      out_t *ot = &m->out[2 * l + k];
      CU(cuMemAlloc(&ot->mixed, (size_t)m->tmax * C * 4));
      CU(cuMemAlloc(&ot->mixed_bf16, (size_t)m->tmax * C * 2));
      CU(cuMemAlloc(&ot->mixed_f16, (size_t)m->tmax * C * 2));
    }
  }
  hct_rng_t r;
  hct__rng_seed(&r, o->seed ^ 0x5eed);
  for (size_t i = 0; i < n_tsc; i++) m->resid0[i] = uniform(&r, 1.7f);
  CU(cuMemAlloc(&m->resid, n_tsc * 4));
  m->stream_bytes = ((size_t)(o->stream_mb * 1048576.0) + 15) / 16 * 16;
  CU(cuMemAlloc(&m->src, m->stream_bytes ? m->stream_bytes : 16));
  CU(cuMemAlloc(&m->dst, m->stream_bytes ? m->stream_bytes : 16));
  CU(cuMemsetD32(m->src, 0x3f800000u, (m->stream_bytes ? m->stream_bytes : 16) / 4));
  CU(cuModuleLoadData(&m->stream_mod, stream_ptx));
  CU(cuModuleGetFunction(&m->stream_fn, m->stream_mod, "hce_stream"));
  CU(cuStreamCreate(&m->stream, CU_STREAM_NON_BLOCKING));
  free(tmp);
  free(f);
}

static void model_free(model_t *m) {
  for (int l = 0; l < m->layers; l++) {
    const layer_t *L = &m->layer[l];
    cu.cuMemFree(L->w_norm);
    cu.cuMemFree(L->w_down);
    cu.cuMemFree(L->w_up);
    cu.cuMemFree(L->pending);
    for (int k = 0; k < 2; k++) {
      cu.cuMemFree(m->out[2 * l + k].mixed);
      cu.cuMemFree(m->out[2 * l + k].mixed_bf16);
      cu.cuMemFree(m->out[2 * l + k].mixed_f16);
    }
  }
  cu.cuMemFree(m->resid);
  cu.cuMemFree(m->src);
  cu.cuMemFree(m->dst);
  cu.cuModuleUnload(m->stream_mod);
  free(m->layer);
  free(m->out);
  free(m->resid0);
}

static void other_work(model_t *m) {
  if (m->stream_bytes == 0) return;
  uint64_t n16 = m->stream_bytes / 16;
  void *args[] = {&m->dst, &m->src, &n16};
  CU(cuLaunchKernel(m->stream_fn, 132 * 16, 1, 1, 256, 1, 1, 0, m->stream, args, NULL));
}

/* One window on the stream: for each layer, work, read with pending,
 * work, read.  k NULL: the other work alone. */
static void window(model_t *m, hct_kernel_t *k, int T) {
  for (int l = 0; l < m->layers; l++) {
    for (int r = 0; r < 2; r++) {
      other_work(m);
      if (k == NULL) continue;
      const layer_t *L = &m->layer[l];
      const out_t *ot = &m->out[2 * l + r];
      uint64_t bufs[8] = {m->resid,  r == 0 ? L->pending : 0, L->w_norm,      L->w_down,
                          L->w_up,   ot->mixed,               ot->mixed_bf16, ot->mixed_f16};
      check_hct(hct_kernel_launch(k, m->stream, T, bufs, 8), "hct_kernel_launch");
    }
  }
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Captures a window, replays it: ms per window (median). */
static double run_windows(model_t *m, hct_kernel_t *k, int T, int windows) {
  CUgraph g;
  CUgraphExec exec;
  CU(cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  window(m, k, T);
  CU(cuStreamEndCapture(m->stream, &g));
  CU(cuGraphInstantiateWithFlags(&exec, g, 0));
  /* Two windows to warm up, then resid from its start: every
   * configuration's outputs follow the same N windows from the same
   * state. */
  for (int i = 0; i < 2; i++) CU(cuGraphLaunch(exec, m->stream));
  CU(cuStreamSynchronize(m->stream));
  CU(cuMemcpyHtoD(m->resid, m->resid0, (size_t)m->tmax * S * C * 4));
  CUevent *ev = malloc(sizeof *ev * (size_t)(windows + 1));
  float *ms = malloc(sizeof *ms * (size_t)windows);
  if (ev == NULL || ms == NULL) die(2, "out of memory");
  for (int i = 0; i <= windows; i++) CU(cuEventCreate(&ev[i], CU_EVENT_DEFAULT));
  for (int i = 0; i < windows; i++) {
    CU(cuEventRecord(ev[i], m->stream));
    CU(cuGraphLaunch(exec, m->stream));
  }
  CU(cuEventRecord(ev[windows], m->stream));
  CU(cuEventSynchronize(ev[windows]));
  for (int i = 0; i < windows; i++) CU(cuEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
  qsort(ms, (size_t)windows, sizeof *ms, cmp_float);
  double med = ms[windows / 2];
  CU(cuGraphExecDestroy(exec));
  CU(cuGraphDestroy(g));
  for (int i = 0; i <= windows; i++) cu.cuEventDestroy(ev[i]);
  free(ev);
  free(ms);
  return med;
}

/* ---- configurations -------------------------------------------------------- */

typedef struct {
  char name[80];          /* "bitwise choice", "all-v1", "forced relay{...}" */
  const char *parity;     /* for hct_kernel_load */
  const char *force;      /* HCTUNE_FORCE value while loading, or NULL */
  int is_ref;             /* all-v1 */
  int check_bitwise, check_kl;
  hct_kernel_t *k;
  int load_rc;
} config_t;

/* What a configuration left after the windows: resid and every output. */
typedef struct {
  float *resid;
  float *mixed;           /* [2L][T*C] */
  uint16_t *bf16, *f16;
} result_t;

static void download(model_t *m, int T, result_t *r) {
  size_t n = (size_t)m->layers * 2 * T * C;
  r->resid = malloc((size_t)T * S * C * 4);
  r->mixed = malloc(n * 4);
  r->bf16 = malloc(n * 2);
  r->f16 = malloc(n * 2);
  if (!r->resid || !r->mixed || !r->bf16 || !r->f16) die(2, "out of memory");
  CU(cuStreamSynchronize(m->stream));
  CU(cuMemcpyDtoH(r->resid, m->resid, (size_t)T * S * C * 4));
  for (int i = 0; i < m->layers * 2; i++) {
    CU(cuMemcpyDtoH(r->mixed + (size_t)i * T * C, m->out[i].mixed, (size_t)T * C * 4));
    CU(cuMemcpyDtoH(r->bf16 + (size_t)i * T * C, m->out[i].mixed_bf16, (size_t)T * C * 2));
    CU(cuMemcpyDtoH(r->f16 + (size_t)i * T * C, m->out[i].mixed_f16, (size_t)T * C * 2));
  }
}

static void result_free(result_t *r) {
  free(r->resid);
  free(r->mixed);
  free(r->bf16);
  free(r->f16);
}

/* The spec's metrics of `out` against the reference's mixed (v1's, or
 * pair_mma's), by tuner/parity.c: rows of C channels. */
static void kl_metrics(const float *out, const float *ref, size_t n, hct_parity_figs_t *f) {
  hct_buffer_t spec;
  memset(&spec, 0, sizeof spec);
  hct__strlcpy(spec.name, "mixed", sizeof spec.name);
  spec.dtype = HCT_DT_F32;
  spec.role = HCT_BUF_OUTPUT;
  hct_hbuf_t b;
  memset(&b, 0, sizeof b);
  b.spec = &spec;
  b.elems = n;
  b.row_len = C;
  b.ref = malloc(n * sizeof *b.ref);
  if (b.ref == NULL) die(2, "out of memory");
  for (size_t i = 0; i < n; i++) b.ref[i] = ref[i];
  memset(f, 0, sizeof *f);
  hct__parity_metrics(&b, out, f);
  free(b.ref);
}

/* Whether read i's mixed enters the KL metrics: every read of a decode
 * window; the first two and the last of a prefill one, whose 96 reads are
 * 786,432 rows at T = 8,192 (the bit comparison takes every read). */
static int sampled(const model_t *m, int i) {
  return m->tmax <= MAX_DECODE_T || i < 2 || i == 2 * m->layers - 1;
}

typedef struct {
  size_t bad;             /* elements whose bits differ: resid and every output */
  size_t bad_resid;       /* of them, resid's */
  hct_parity_figs_t figs; /* KL metrics of the sampled reads' mixed */
} compare_t;

/* Compares what the window left on the card with the reference's copy,
 * a read at a time (a prefill window's outputs are GBs: the host holds
 * the reference's alone). */
static void compare_window(model_t *m, int T, const result_t *ref, compare_t *c) {
  size_t tc = (size_t)T * C, n_resid = (size_t)T * S * C, n_sample = 0;
  for (int i = 0; i < 2 * m->layers; i++) n_sample += sampled(m, i) ? tc : 0;
  float *resid = malloc(n_resid * 4), *mixed = malloc(tc * 4);
  uint16_t *bf16 = malloc(tc * 2), *f16 = malloc(tc * 2);
  float *got = malloc(n_sample * 4), *want = malloc(n_sample * 4);
  if (!resid || !mixed || !bf16 || !f16 || !got || !want) die(2, "out of memory");
  memset(c, 0, sizeof *c);
  CU(cuStreamSynchronize(m->stream));
  CU(cuMemcpyDtoH(resid, m->resid, n_resid * 4));
  for (size_t i = 0; i < n_resid; i++) c->bad_resid += memcmp(&resid[i], &ref->resid[i], 4) != 0;
  c->bad = c->bad_resid;
  size_t at = 0;
  for (int i = 0; i < 2 * m->layers; i++) {
    CU(cuMemcpyDtoH(mixed, m->out[i].mixed, tc * 4));
    CU(cuMemcpyDtoH(bf16, m->out[i].mixed_bf16, tc * 2));
    CU(cuMemcpyDtoH(f16, m->out[i].mixed_f16, tc * 2));
    const float *rm = ref->mixed + (size_t)i * tc;
    const uint16_t *rb = ref->bf16 + (size_t)i * tc, *rh = ref->f16 + (size_t)i * tc;
    for (size_t e = 0; e < tc; e++)
      c->bad += (memcmp(&mixed[e], &rm[e], 4) != 0) + (bf16[e] != rb[e]) + (f16[e] != rh[e]);
    if (sampled(m, i)) {
      memcpy(got + at, mixed, tc * 4);
      memcpy(want + at, rm, tc * 4);
      at += tc;
    }
  }
  kl_metrics(got, want, n_sample, &c->figs);
  free(resid);
  free(mixed);
  free(bf16);
  free(f16);
  free(got);
  free(want);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(argc, argv, &o);
  char gpu[128] = "";
  open_gpu(gpu, sizeof gpu);

  hct_client_t *client = NULL;
  int crc = hct_connect(o.socket, o.timeout_ms, &client);
  char daemon_note[512] = "";
  if (crc == HCT_FALLBACK) {
    snprintf(daemon_note, sizeof daemon_note, "no daemon (%s): running the baseline compiled here",
             hct_last_error());
    fprintf(stderr, "%s: %s\n", prog, daemon_note);
    hct_close(client);
    client = NULL;
  } else if (crc < 0) {
    die(2, "hct_connect: %s", hct_last_error());
  }

  model_t m;
  model_init(&m, &o);

  config_t cfg[MAX_CONFIGS];
  int n_cfg = 0, ref;
  memset(cfg, 0, sizeof cfg);
  const char *op = o.kind->op;
  static char force_env[MAX_CONFIGS][400];
  if (o.kind != &window_kinds[0]) {
    /* prefill: pair_mma the reference, the bit family of it checked
     * against it, the kl choice's metrics against it */
    ref = n_cfg;
    snprintf(cfg[n_cfg].name, sizeof cfg[n_cfg].name, "pair_mma");
    snprintf(force_env[0], sizeof force_env[0], "%s=pair_mma", op);
    cfg[n_cfg].parity = "bitwise";
    cfg[n_cfg].force = force_env[0];
    cfg[n_cfg++].is_ref = 1;
    snprintf(cfg[n_cfg].name, sizeof cfg[n_cfg].name, "bits:pair_mma choice");
    cfg[n_cfg].parity = "bits:pair_mma";
    cfg[n_cfg++].check_bitwise = 1;
    snprintf(cfg[n_cfg].name, sizeof cfg[n_cfg].name, "kl choice");
    cfg[n_cfg].parity = "kl";
    cfg[n_cfg++].check_kl = 1;
  } else {
  if (strcmp(o.parity, "kl") != 0) {
    snprintf(cfg[n_cfg].name, sizeof cfg[n_cfg].name, "bitwise choice");
    cfg[n_cfg].parity = "bitwise";
    cfg[n_cfg++].check_bitwise = 1;
  }
  if (strcmp(o.parity, "bitwise") != 0) {
    snprintf(cfg[n_cfg].name, sizeof cfg[n_cfg].name, "kl choice");
    cfg[n_cfg].parity = "kl";
    cfg[n_cfg++].check_kl = 1;
  }
  ref = n_cfg;
  snprintf(cfg[n_cfg].name, sizeof cfg[n_cfg].name, "all-v1");
  cfg[n_cfg].parity = "bitwise";
  cfg[n_cfg].force = "hc_read=v1";
  cfg[n_cfg++].is_ref = 1;
  for (int i = 0; i < o.n_forced; i++) {
    snprintf(cfg[n_cfg].name, sizeof cfg[n_cfg].name, "forced %.60s", o.forced[i]);
    snprintf(force_env[i], sizeof force_env[i], "hc_read=%s", o.forced[i]);
    cfg[n_cfg].parity = "bitwise";
    cfg[n_cfg].force = force_env[i];
    cfg[n_cfg++].check_kl = 1; /* a forced variant: its metrics against v1 */
  }
  }
  const char *ref_name = cfg[ref].name;

  int tmin = o.tokens[0], tmax = o.tokens[o.n_tokens - 1];
  const char *user_force = getenv("HCTUNE_FORCE");
  char *saved_force = user_force ? strdup(user_force) : NULL;
  for (int i = 0; i < n_cfg; i++) {
    if (cfg[i].force) setenv("HCTUNE_FORCE", cfg[i].force, 1);
    else if (saved_force) setenv("HCTUNE_FORCE", saved_force, 1);
    else unsetenv("HCTUNE_FORCE");
    cfg[i].load_rc = hct_kernel_load(client, op, tmin, tmax, NULL, cfg[i].parity, &cfg[i].k);
    if (cfg[i].load_rc < 0) {
      if (cfg[i].is_ref) check_hct(cfg[i].load_rc, ref_name);
      fprintf(stderr, "%s: %s: %s\n", prog, cfg[i].name, hct_last_error());
    }
  }
  if (saved_force) setenv("HCTUNE_FORCE", saved_force, 1);
  else unsetenv("HCTUNE_FORCE");

  int failed = 0;
  FILE *out = stdout;
  if (o.json) {
    fprintf(out, "{\"gpu\":");
    json_str(out, gpu);
    fprintf(out, ",\"daemon\":%s,\"note\":", client ? "true" : "false");
    json_str(out, daemon_note);
    fprintf(out, ",\"window\":\"%s\",\"op\":\"%s\",\"layers\":%d,\"windows\":%d,\"stream_mb\":%g,"
            "\"rows\":[", o.kind->name, op, o.layers, o.windows, o.stream_mb);
  } else {
    printf("hc_engine %s window on %s: %d layers x 2 reads of %s, %g MB of other work before each "
           "read, median of %d windows%s\n",
           o.kind->name, gpu, o.layers, op, o.stream_mb, o.windows,
           client ? "" : " (no daemon: the baseline)");
    printf("%-3s %-24s %-44s %9s %8s %7s  %s\n", "T", "configuration", "runs", "ms/window",
           "reads ms", "share", "check");
  }
  int first_row = 1;
  for (int ti = 0; ti < o.n_tokens; ti++) {
    int T = o.tokens[ti];
    double other = run_windows(&m, NULL, T, o.windows);
    result_t res;
    double ms[MAX_CONFIGS];
    memset(&res, 0, sizeof res);
    /* The reference first: the others compare against it. */
    int order[MAX_CONFIGS], n_order = 0;
    order[n_order++] = ref;
    for (int i = 0; i < n_cfg; i++)
      if (i != ref) order[n_order++] = i;
    for (int oi = 0; oi < n_order; oi++) {
      int i = order[oi];
      config_t *c = &cfg[i];
      char runs[400] = "", check[200] = "";
      const char *why = "";
      hct_choice_t ch;
      memset(&ch, 0, sizeof ch);
      int ok = 1;
      if (c->k == NULL) {
        snprintf(runs, sizeof runs, "(not loaded)");
        snprintf(check, sizeof check, "load failed");
        ms[i] = 0;
        failed = 1;
        ok = 0;
      } else {
        int lrc = hct_kernel_choice(c->k, T, &ch, &why);
        snprintf(runs, sizeof runs, "%s %s [%s%s]", ch.variant, ch.params, hct_source_name(ch.source),
                 lrc == HCT_FALLBACK ? ", compiled here" : "");
        ms[i] = run_windows(&m, c->k, T, o.windows);
        compare_t cmp;
        if (i == ref) download(&m, T, &res);
        else compare_window(&m, T, &res, &cmp);
        if (c->check_bitwise) {
          ok = cmp.bad == 0;
          if (cmp.bad == 0)
            snprintf(check, sizeof check, "bit-identical to %s (resid and %d reads x 3 outputs)",
                     ref_name, m.layers * 2);
          else
            snprintf(check, sizeof check, "DIFFERS from %s: %zu elements", ref_name, cmp.bad);
          failed |= !ok;
        } else if (c->check_kl) {
          const hct_parity_figs_t *f = &cmp.figs;
          snprintf(check, sizeof check, "vs %s%s: KL mean %.3g, max err ratio %.3g, argmax %.4f%s%s",
                   ref_name, m.tmax <= MAX_DECODE_T ? "" : " (reads 1, 2, last)", f->kl_mean,
                   f->max_err_ratio, f->argmax_agree, f->nonfinite ? ", NON-FINITE" : "",
                   cmp.bad_resid ? ", resid DIFFERS" : "");
          ok = f->nonfinite == 0 && f->unwritten == 0 && cmp.bad_resid == 0;
          failed |= !ok;
        } else {
          snprintf(check, sizeof check, "reference");
        }
      }
      double reads = ms[i] > 0 ? ms[i] - other : 0;
      if (o.json) {
        fprintf(out, "%s{\"T\":%d,\"config\":", first_row ? "" : ",", T);
        json_str(out, c->name);
        fprintf(out, ",\"variant\":");
        json_str(out, ch.variant);
        fprintf(out, ",\"params\":");
        json_str(out, ch.params);
        fprintf(out, ",\"source\":\"%s\",\"compiled_here\":", hct_source_name(ch.source));
        json_str(out, why ? why : "");
        fprintf(out, ",\"ms_window\":%.4f,\"ms_other\":%.4f,\"ms_reads\":%.4f,\"check\":", ms[i],
                other, reads);
        json_str(out, check);
        fprintf(out, ",\"ok\":%s}", ok ? "true" : "false");
        first_row = 0;
      } else {
        printf("%-3d %-24s %-44s %9.3f %8.3f %6.1f%%  %s\n", T, c->name, runs, ms[i], reads,
               ms[i] > 0 ? 100.0 * reads / ms[i] : 0.0, check);
        if (why && why[0]) printf("    (compiled here: %s)\n", why);
      }
    }
    if (!o.json) printf("%-3d %-24s %-44s %9.3f\n", T, "other work alone", "", other);
    result_free(&res);
  }
  if (o.json) fprintf(out, "],\"ok\":%s}\n", failed ? "false" : "true");
  for (int i = 0; i < n_cfg; i++) hct_kernel_free(cfg[i].k);
  model_free(&m);
  hct_close(client);
  free(saved_force);
  return failed ? 1 : 0;
}
