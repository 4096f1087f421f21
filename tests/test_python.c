/*
 * test_python.c: runs the Python package's tests (python/tests, unittest)
 * against this build's lib/libhctune.so.0, so that `make check` covers
 * them: fallback, errors, argument checking, the package's build backend
 * and its search for the library, and hctune.torch_ops where torch is
 * importable (skipped, with the reason, where not); no GPU needed.  Skips,
 * saying so, without python3.  Under the sanitizers the library needs
 * their runtimes loaded first (tests/python_env.h).  The package as pip
 * installs it, with the library as make install puts it:
 * tests/test_install.c.
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

#include "daemon_test.h"
#include "python_env.h"

static void test_python_package(void **state) {
  if (system("python3 -c 'import ctypes, unittest' >/dev/null 2>&1") != 0) {
    printf("skipped: no python3 with ctypes here\n");
    return;
  }
  const char *bin = getenv("HCT_BIN");
  char lib[1024];
  snprintf(lib, sizeof lib, "%s/../lib/libhctune.so.0", bin ? bin : "bin");
  assert_int_equal(access(lib, R_OK), 0);
  char preload[1100];
  hct_test_sanitizer_env(lib, preload, sizeof preload);
  /* A daemon with two cards of one prefix, for the tests of device names
   * (TestDeviceNames): they must run here, not skip. */
  dt_env_t e;
  dt_start_twins(&e);
  char cwd[1024], cmd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  snprintf(cmd, sizeof cmd,
           "%sHCTUNE_LIB='%s' PYTHONPATH='%s/python' HCTUNE_TEST_SOCKET='%s' "
           "HCTUNE_TEST_REQUIRE_DAEMON=1 python3 -m unittest discover -s python/tests -v 2>&1",
           preload, lib, cwd, e.sock);
  printf("%s\n", cmd);
  int rc = system(cmd);
  dt_stop(&e);
  dt_env_remove(&e);
  assert_int_equal(rc, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_python_package)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
