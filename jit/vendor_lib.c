/*
 * vendor_lib.c: how every vendor library is loaded (the CUDA driver,
 * NVRTC, NVML, the HIP runtime, hiprtc): dlopen of the first of several
 * names that loads, then a table of symbols resolved into a struct of
 * function pointers, a missing required one named.  Never linked: a
 * machine without the library still runs the rest of hctune.  Any thread;
 * callers hold their own pthread_once.
 */
#include <dlfcn.h>
#include <string.h>

#include "jit.h"

void *hct__vendor_open(const char *const *names, size_t n, size_t *which, char *tried,
                       size_t tried_len, char *why, size_t why_len) {
  if (why_len > 0) why[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
      if (which != NULL) *which = i;
      return h;
    }
    /* dlerror()'s text lives in a buffer that the next dlopen frees: it
     * is copied here, never kept as a pointer. */
    const char *e = dlerror();
    if (why_len > 0) hct__strlcpy(why, e ? e : "unknown reason", why_len);
    size_t used = tried_len > 0 ? strnlen(tried, tried_len) : 0;
    if (used + 1 < tried_len)
      snprintf(tried + used, tried_len - used, "%s%s", used ? ", " : "", names[i]);
  }
  return NULL;
}

int hct__vendor_resolve(void *lib, const char *libname, const hct_vendor_sym_t *syms, size_t n) {
  for (size_t i = 0; i < n; i++) {
    *syms[i].slot = dlsym(lib, syms[i].name);
    if (*syms[i].slot == NULL && syms[i].required)
      return hct__error(HCT_ENOSYM, "'%s' has no symbol '%s'", libname, syms[i].name);
  }
  return 0;
}
