/*
 * python_env.h: what the tests that run python3 over libhctune share
 * (tests/test_python.c, tests/test_install.c).
 *
 * A sanitizer build of libhctune.so.0 needs the sanitizers' runtimes
 * loaded ahead of everything else in the process that loads it, which
 * python3 is not built with: hct_test_sanitizer_env() gives the
 * environment to put before such a command, LD_PRELOAD of the runtimes
 * the library was linked with and leaks not counted (the interpreter's
 * own are not the library's), or "" for a plain build.
 */
#ifndef HCT_PYTHON_ENV_H
#define HCT_PYTHON_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The runtime lib<name>.so a sanitizer build of `lib` needs, or "". */
static inline void hct_test_runtime(const char *lib, const char *name, char *out, size_t len) {
  char cmd[1200];
  out[0] = '\0';
  snprintf(cmd, sizeof cmd, "readelf -d '%s' 2>/dev/null | grep -q 'lib%s\\.so'", lib, name);
  if (system(cmd) != 0) return;
  snprintf(cmd, sizeof cmd, "${CC:-gcc} -print-file-name=lib%s.so", name);
  FILE *p = popen(cmd, "r");
  if (p == NULL) return;
  if (fgets(out, (int)len, p) == NULL) out[0] = '\0';
  pclose(p);
  out[strcspn(out, "\n")] = '\0';
}

/* "LD_PRELOAD='ASAN UBSAN' ASAN_OPTIONS=detect_leaks=0 " for a sanitizer
 * build of `lib`, else "". */
static inline void hct_test_sanitizer_env(const char *lib, char *out, size_t len) {
  char asan[512], ubsan[512];
  hct_test_runtime(lib, "asan", asan, sizeof asan);
  hct_test_runtime(lib, "ubsan", ubsan, sizeof ubsan);
  out[0] = '\0';
  if (asan[0] || ubsan[0])
    snprintf(out, len, "LD_PRELOAD='%s %s' ASAN_OPTIONS=detect_leaks=0 ", asan, ubsan);
}

#endif /* HCT_PYTHON_ENV_H */
