/*
 * client_jit.c: what libhctune.so's own copy of jit/ needs instead of
 * libuv and of the daemon's backend table.
 *
 * The shared library compiles the baseline itself when no daemon answers,
 * so it carries jit/expr.c, jit/manifest.c, jit/cache.c (the option list),
 * jit/cuda.c (NVRTC and the driver, both through dlopen), jit/nvml.c and
 * common/util.c, built a second time for the library (Makefile, $(O)/so/)
 * with four names renamed by the preprocessor:
 *
 *   uv_once      -> hct__client_once      (libuv's is pthread_once on Unix)
 *   uv_exepath   -> hct__client_exepath   (the library's own file, so that
 *                                          hct__kernels_dir finds the
 *                                          templates beside lib/, not beside
 *                                          the engine's executable)
 *   uv_strerror  -> hct__client_strerror
 *   hct__backend -> hct__client_backend   (CUDA only: HIP is not carried)
 *
 * and linked with --gc-sections, so what those files use of libuv and
 * xxHash elsewhere (the compile pool, the cache keys) is left out.  An
 * engine's process therefore gets no libuv, no SQLite, and no second copy
 * of a libuv symbol that could clash with its own.  In the programs (which
 * link the real libuv and jit/backend.c) these functions are unused.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

void hct__client_once(pthread_once_t *guard, void (*callback)(void));
int hct__client_exepath(char *buf, size_t *size);
const char *hct__client_strerror(int err);
const hct_backend_ops_t *hct__client_backend(hct_backend_kind_t kind);

void hct__client_once(pthread_once_t *guard, void (*callback)(void)) {
  if (pthread_once(guard, callback) != 0) abort(); /* as libuv does */
}

int hct__client_exepath(char *buf, size_t *size) {
  Dl_info info;
  char real[PATH_MAX];
  if (buf == NULL || size == NULL || *size == 0) return -EINVAL;
  if (dladdr((void *)&hct__client_exepath, &info) == 0 || info.dli_fname == NULL)
    return -ENOENT;
  if (realpath(info.dli_fname, real) == NULL) return -errno;
  size_t n = strlen(real);
  if (n >= *size) n = *size - 1;
  memcpy(buf, real, n);
  buf[n] = '\0';
  *size = n;
  return 0;
}

const char *hct__client_strerror(int err) { return strerror(err < 0 ? -err : err); }

const hct_backend_ops_t *hct__client_backend(hct_backend_kind_t kind) {
  return kind == HCT_BACKEND_CUDA ? &hct__cuda_backend : NULL;
}
