/*
 * test_layers.c: the product's files use only the layers below them and no
 * two of them use each other in a loop (tools/check-layers.py, the layers
 * in docs/architecture.md): read from every #include of the sources and
 * every undefined symbol of the objects this build made, the ones beside
 * this program's folder (build/<kind>/, so the plain and the sanitizer
 * passes each check their own).  A second test runs the checker on a small
 * tree of its own, compiled here, with a call up a layer, an include up a
 * layer, two files calling each other and a source without its object,
 * and checks that it fails naming each; then passes once they are gone.
 * Skips, saying so, without python3.
 */
#include <libgen.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static int have_python(void) {
  return system("python3 -c 'import os, re, subprocess' >/dev/null 2>&1") == 0;
}

/* Runs cmd, its stdout and stderr into out; returns its exit status. */
static int run_capture(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The build folder this program belongs to: build/<kind>/tests/test_layers
 * -> build/<kind>, where make put the product's objects. */
static void objects_dir(char *out, size_t cap) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = '\0';
  char *tests = dirname(self);
  snprintf(out, cap, "%s", dirname(tests));
}

static void test_layers_hold(void **state) {
  if (!have_python()) {
    printf("skipped: no python3 here\n");
    skip();
  }
  char objs[4096], cmd[10000];
  static char out[1 << 17];
  objects_dir(objs, sizeof objs);
  snprintf(cmd, sizeof cmd, "python3 '%s/tools/check-layers.py' --root '%s' --objects '%s' 2>&1",
           hct_test_root(), hct_test_root(), objs);
  int rc = run_capture(cmd, out, sizeof out);
  printf("%s", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "check-layers: ok"));
}

static void put(const char *dir, const char *rel, const char *text) {
  char path[1024], cmd[1200];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
  assert_int_equal(system(cmd), 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* Compiles dir/<rel>.c into dir/obj/<rel>.o, as the Makefile would. */
static void compile(const char *dir, const char *rel) {
  const char *cc = getenv("CC");
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && mkdir -p \"$(dirname 'obj/%s.o')\" && %s -c -Icommon -Ituner '%s.c' "
           "-o 'obj/%s.o'",
           dir, rel, cc && *cc ? cc : "cc", rel, rel);
  assert_int_equal(system(cmd), 0);
}

static void test_checker_names_what_is_wrong(void **state) {
  if (!have_python()) {
    printf("skipped: no python3 here\n");
    skip();
  }
  char dir[] = "/tmp/hct_layers.XXXXXX";
  assert_non_null(mkdtemp(dir));
  put(dir, "common/common.h", "int hct__low(void);\n");
  put(dir, "common/low.c", "#include \"common.h\"\nint hct__low(void) { return 1; }\n");
  put(dir, "tuner/tuner.h", "int hct__high(void);\n");
  put(dir, "tuner/high.c", "#include \"common.h\"\nint hct__high(void) { return hct__low(); }\n");
  /* db/ calls up into tuner/, and includes its header. */
  put(dir, "db/store.c",
      "#include \"common.h\"\nint hct__high(void);\n"
      "int hct__store(void) { return hct__high() + hct__low(); }\n");
  put(dir, "db/peek.c", "#include \"tuner.h\"\nint hct__peek;\n");
  /* Two files of one folder calling each other. */
  put(dir, "tuner/ping.c", "int hct__pong(int);\nint hct__ping(int n) { return n ? hct__pong(n - 1) : 0; }\n");
  put(dir, "tuner/pong.c", "int hct__ping(int);\nint hct__pong(int n) { return n ? hct__ping(n - 1) : 1; }\n");
  /* A source make did not compile: its calls cannot be read. */
  put(dir, "tuner/unbuilt.c", "int hct__unbuilt;\n");
  const char *built[] = {"common/low", "tuner/high", "db/store", "db/peek", "tuner/ping",
                         "tuner/pong"};
  for (size_t i = 0; i < sizeof built / sizeof built[0]; i++) compile(dir, built[i]);

  char cmd[4096];
  static char out[1 << 16];
  snprintf(cmd, sizeof cmd, "python3 '%s/tools/check-layers.py' --root '%s' --objects '%s/obj' 2>&1",
           hct_test_root(), dir, dir);
  int rc = run_capture(cmd, out, sizeof out);
  printf("%s", out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "layers: db/store.c calls hct__high of tuner/high.c: db/ may use "
                              "jit/, common/, include/ only"));
  assert_non_null(strstr(out, "layers: db/peek.c includes tuner/tuner.h"));
  assert_non_null(strstr(out, "loop: tuner/ping.c -> tuner/pong.c (hct__pong); "
                              "tuner/pong.c -> tuner/ping.c (hct__ping)"));
  assert_non_null(strstr(out, "tuner/unbuilt.c: no object"));
  assert_non_null(strstr(out, "check-layers: 4 problem(s)"));
  /* Uses down a layer, and within a folder, are no problem. */
  assert_null(strstr(out, "tuner/high.c calls"));
  assert_null(strstr(out, "hct__low"));

  /* The same tree with the call and include gone, the loop broken (pong
   * no longer calls back) and the unbuilt file built passes. */
  put(dir, "db/store.c", "#include \"common.h\"\nint hct__store(void) { return hct__low(); }\n");
  put(dir, "db/peek.c", "#include \"common.h\"\nint hct__peek;\n");
  put(dir, "tuner/pong.c", "int hct__pong(int n) { return n; }\n");
  const char *again[] = {"db/store", "db/peek", "tuner/pong", "tuner/unbuilt"};
  for (size_t i = 0; i < sizeof again / sizeof again[0]; i++) compile(dir, again[i]);
  rc = run_capture(cmd, out, sizeof out);
  printf("%s", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "check-layers: ok"));

  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layers_hold),
      cmocka_unit_test(test_checker_names_what_is_wrong),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
