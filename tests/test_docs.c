/*
 * test_docs.c: the documentation cites what exists (tools/check-docs.py):
 * every path docs/architecture.md puts in backticks is in the tree, every
 * source file of the C folders has its paragraph there, every hct_ name it
 * gives is in the sources, and the paths of README.md and of the documents in docs/ exist.
 * A second test runs the checker on a small tree of its own, with a cited
 * file missing, a file never cited and a name no source has, and checks
 * that it fails and names each.  Skips, saying so, without python3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static int have_python(void) {
  return system("python3 -c 'import os, re' >/dev/null 2>&1") == 0;
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

static const char *root(void) {
  const char *r = getenv("HCT_TEST_ROOT");
  return r && *r ? r : ".";
}

static void test_docs_cite_what_exists(void **state) {
  if (!have_python()) {
    printf("skipped: no python3 here\n");
    return;
  }
  char cmd[2048];
  static char out[1 << 16];
  snprintf(cmd, sizeof cmd, "python3 '%s/tools/check-docs.py' --root '%s' 2>&1", root(), root());
  int rc = run_capture(cmd, out, sizeof out);
  printf("%s", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "check-docs: ok"));
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

static void test_checker_names_what_is_wrong(void **state) {
  if (!have_python()) {
    printf("skipped: no python3 here\n");
    return;
  }
  char dir[] = "/tmp/hct_docs.XXXXXX";
  assert_non_null(mkdtemp(dir));
  put(dir, "jit/present.c", "int hct__present_fn(void) { return 0; }\n");
  put(dir, "jit/orphan.c", "int hct__orphan_fn(void) { return 0; }\n");
  put(dir, "docs/arch.md",
      "# A tree\n\n`jit/present.c`: `hct__present_fn`.\n\n"
      "`jit/gone.c`: cited and missing; `hct__no_such_fn` is named and nowhere.\n"
      "`kernels-src/<op>/manifest.json` is a placeholder; `bin/hctune` a build output.\n"
      "```\njit/in_a_fence.c is not a citation\n```\n");
  char cmd[2048];
  static char out[1 << 16];
  snprintf(cmd, sizeof cmd, "python3 '%s/tools/check-docs.py' --root '%s' --full docs/arch.md 2>&1",
           root(), dir);
  int rc = run_capture(cmd, out, sizeof out);
  printf("%s", out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "docs/arch.md:5: cites `jit/gone.c`, which does not exist"));
  assert_non_null(strstr(out, "`hct__no_such_fn`, which no source file has"));
  assert_non_null(strstr(out, "`jit/orphan.c` has no paragraph"));
  assert_null(strstr(out, "jit/present.c"));
  assert_null(strstr(out, "hct__present_fn"));
  assert_null(strstr(out, "manifest.json"));
  assert_null(strstr(out, "bin/hctune"));
  assert_null(strstr(out, "in_a_fence"));

  /* The same tree with the missing file made and the orphan cited passes. */
  put(dir, "jit/gone.c", "int hct__no_such_fn;\n");
  put(dir, "docs/arch.md", "`jit/present.c`, `jit/gone.c`, `jit/orphan.c`: `hct__orphan_fn`.\n");
  rc = run_capture(cmd, out, sizeof out);
  printf("%s", out);
  assert_int_equal(rc, 0);

  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_docs_cite_what_exists),
      cmocka_unit_test(test_checker_names_what_is_wrong),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
