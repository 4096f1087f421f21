/*
 * test_python.c: runs the Python package's tests (python/tests, unittest)
 * against this build's lib/libhctune.so.0, so that `make check` covers
 * them: fallback, errors, argument checking; no GPU needed.  Skips, saying
 * so, without python3.  Under the sanitizers the library needs their
 * runtimes loaded first: they are preloaded into python3, leaks not
 * counted (the interpreter's own are not the library's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* The runtime a sanitizer build of the library needs, or "" . */
static void runtime(const char *lib, const char *name, char *out, size_t len) {
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

static void test_python_package(void **state) {
  if (system("python3 -c 'import ctypes, unittest' >/dev/null 2>&1") != 0) {
    printf("skipped: no python3 with ctypes here\n");
    return;
  }
  const char *bin = getenv("HCT_BIN");
  char lib[1024];
  snprintf(lib, sizeof lib, "%s/../lib/libhctune.so.0", bin ? bin : "bin");
  assert_int_equal(access(lib, R_OK), 0);
  char asan[512], ubsan[512], preload[1100] = "";
  runtime(lib, "asan", asan, sizeof asan);
  runtime(lib, "ubsan", ubsan, sizeof ubsan);
  if (asan[0] || ubsan[0])
    snprintf(preload, sizeof preload, "LD_PRELOAD='%s %s' ASAN_OPTIONS=detect_leaks=0 ", asan, ubsan);
  char cwd[1024], cmd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  snprintf(cmd, sizeof cmd,
           "%sHCTUNE_LIB='%s' PYTHONPATH='%s/python' python3 -m unittest discover -s python/tests "
           "-v 2>&1",
           preload, lib, cwd);
  printf("%s\n", cmd);
  int rc = system(cmd);
  assert_int_equal(rc, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_python_package)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
