/*
 * test_install.c: what `make install` puts in place, as a user meets it.
 * The group's setup runs `make install DESTDIR=TMP PREFIX=/opt/hct` once
 * (this build's: SAN=1 under the sanitizers, from $HCT_BIN), then:
 *
 *   - the man pages render without a warning from groff (man --warnings)
 *     and hctune(1) has every command of cli/cmd_table.c;
 *   - pkg-config, pointed at the tree (PKG_CONFIG_PATH and
 *     PKG_CONFIG_SYSROOT_DIR), gives the tree's flags, and a program
 *     built with them links and runs against the installed library;
 *   - the bash completion offers exactly the command table's commands,
 *     and a command's options and subcommands;
 *   - make uninstall leaves no file of hctune's in a tree of its own;
 *   - `pip install --no-index ./python` into a fresh venv, with an index
 *     that cannot be reached, builds and installs the package, which then
 *     finds the installed library through HCTUNE_PREFIX or
 *     LD_LIBRARY_PATH, and that library the installed templates.
 *
 * A test whose tool is missing (man, pkg-config, bash, python3-venv)
 * skips, saying which.  Make's variables from a `make check` around it
 * are dropped: this make is a new one, not a job of that one's.
 */
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

#include "python_env.h"

#define PREFIX "/opt/hct"
#define MAX_COMMANDS 64

static char tmp[256];     /* the test's folder */
static char dest[300];    /* DESTDIR of the group's install */
static char cwd[1024];    /* the checkout (tests/run.sh runs from it) */
static char san[16];      /* "SAN=1" under the sanitizers, else "" */

/* Runs `cmd` under sh; its stdout and stderr together into out (len). */
static int run(char *out, size_t len, const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  size_t n = 0, got;
  char sink[4096];
  if (out != NULL && len > 0) out[0] = '\0';
  while ((got = fread(sink, 1, sizeof sink, p)) > 0) {
    if (out == NULL || n + 1 >= len) continue;
    size_t k = got < len - 1 - n ? got : len - 1 - n;
    memcpy(out + n, sink, k);
    n += k;
    out[n] = '\0';
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int have(const char *tool) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
  return system(cmd) == 0;
}

/* make install (or uninstall) of this build into destdir.  `-o all`: the
 * build is taken as it is, never remade, because the other test programs
 * of make check run from it meanwhile: a relink there (a source whose
 * time is ahead of the clock is enough) leaves a test program half
 * written, or not yet executable, under the runner. */
static int make_into(const char *target, const char *destdir, char *out, size_t len) {
  return run(out, len,
             "cd '%s' && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -o all %s %s DESTDIR='%s' "
             "PREFIX=" PREFIX,
             cwd, target, san, destdir);
}

/* The command names of cli/cmd_table.c's table, in its order. */
static int table_commands(char names[][32], int max) {
  FILE *f = fopen("cli/cmd_table.c", "r");
  if (f == NULL) return -1;
  char line[512];
  int n = 0, in = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strstr(line, "hct_cmd_t commands[] = {") != NULL) in = 1;
    else if (in && strncmp(line, "};", 2) == 0) break;
    else if (in && n < max && sscanf(line, " {\"%31[^\"]\", cmd_", names[n]) == 1) n++;
  }
  fclose(f);
  return n;
}

static int setup(void **state) {
  if (getcwd(cwd, sizeof cwd) == NULL) return -1;
  const char *bin = getenv("HCT_BIN");
  snprintf(san, sizeof san, "%s", bin != NULL && strstr(bin, "build/asan") ? "SAN=1" : "");
  snprintf(tmp, sizeof tmp, "/tmp/hct_install.XXXXXX");
  if (mkdtemp(tmp) == NULL) return -1;
  snprintf(dest, sizeof dest, "%s/dest", tmp);
  static char out[16384];
  int rc = make_into("install", dest, out, sizeof out);
  if (rc != 0) fprintf(stderr, "make install into '%s' failed (%d):\n%s\n", dest, rc, out);
  return rc == 0 ? 0 : -1;
}

static int teardown(void **state) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_man_pages_render_without_warnings(void **state) {
  if (!have("man") || !have("groff")) {
    printf("skipped: no man or groff here (tools/install-deps.sh check: man-db, groff-base)\n");
    skip();
  }
  static char out[262144];
  const char *pages[] = {PREFIX "/share/man/man1/hctune.1", PREFIX "/share/man/man8/hctuned.8"};
  for (int i = 0; i < 2; i++) {
    /* groff's warnings (stderr) kept, the page (stdout) dropped. */
    int rc = run(out, sizeof out, "{ LC_ALL=C MANWIDTH=80 man --warnings -l '%s%s' 2>&1 >/dev/null; }",
                 dest, pages[i]);
    if (rc != 0 || out[0] != '\0') fail_msg("man -l %s: rc %d, said:\n%s", pages[i], rc, out);
  }
  assert_int_equal(run(out, sizeof out, "LC_ALL=C MANWIDTH=200 man -l '%s%s'", dest, pages[0]), 0);
  char names[MAX_COMMANDS][32], want[64];
  int n = table_commands(names, MAX_COMMANDS);
  assert_true(n >= 10);
  for (int i = 0; i < n; i++) {
    snprintf(want, sizeof want, "usage: hctune %.31s", names[i]);
    if (strstr(out, want) == NULL) fail_msg("hctune(1) lacks the command '%s' ('%s')", names[i], want);
  }
  assert_int_equal(run(out, sizeof out, "LC_ALL=C MANWIDTH=200 man -l '%s%s'", dest, pages[1]), 0);
  assert_non_null(strstr(out, "hctuned - the hctune daemon"));
  assert_non_null(strstr(out, "--socket PATH"));
}

static void test_pkg_config_gives_the_installed_flags(void **state) {
  if (!have("pkg-config")) {
    printf("skipped: no pkg-config here (tools/install-deps.sh check: pkgconf)\n");
    skip();
  }
  char out[4096], want[1024];
  int rc = run(out, sizeof out,
               "PKG_CONFIG_SYSROOT_DIR='%s' PKG_CONFIG_PATH='%s" PREFIX "/lib/pkgconfig' "
               "PKG_CONFIG_LIBDIR=/nonexistent pkg-config --cflags --libs hctune",
               dest, dest);
  assert_int_equal(rc, 0);
  out[strcspn(out, "\n")] = '\0';
  while (out[0] != '\0' && out[strlen(out) - 1] == ' ') out[strlen(out) - 1] = '\0';
  snprintf(want, sizeof want, "-I%s" PREFIX "/include -L%s" PREFIX "/lib -lhctune", dest, dest);
  assert_string_equal(out, want);
  /* A program built with those flags, run against the installed library. */
  char src[300];
  snprintf(src, sizeof src, "%s/use.c", tmp);
  FILE *f = fopen(src, "w");
  assert_non_null(f);
  fprintf(f, "#include <hctune.h>\n#include <stdio.h>\n"
             "int main(void) { printf(\"%%s\\n\", hct_err_name(HCT_EINVAL)); return 0; }\n");
  fclose(f);
  rc = run(out, sizeof out,
           "${CC:-cc} %s '%s' -o '%s/use' $(PKG_CONFIG_SYSROOT_DIR='%s' PKG_CONFIG_PATH='%s" PREFIX
           "/lib/pkgconfig' pkg-config --cflags --libs hctune) && LD_LIBRARY_PATH='%s" PREFIX
           "/lib' %s '%s/use'",
           san[0] ? "-fsanitize=address,undefined" : "", src, tmp, dest, dest, dest,
           san[0] ? "ASAN_OPTIONS=detect_leaks=0" : "", tmp);
  if (rc != 0) fail_msg("building or running a program with pkg-config's flags: rc %d\n%s", rc, out);
  assert_string_equal(out, "EINVAL\n");
}

/* COMPREPLY of the installed completion for `hctune WORDS...` (the last
 * word is the one being completed), one per line. */
static int complete(char *out, size_t len, const char *words, int cword) {
  return run(out, len,
             "bash -c 'source \"%s" PREFIX "/share/bash-completion/completions/hctune\" && "
             "complete -p hctune >/dev/null && COMP_WORDS=(hctune %s) && COMP_CWORD=%d && "
             "_hctune && printf \"%%s\\n\" \"${COMPREPLY[@]}\"'",
             dest, words, cword);
}

static void test_completion_offers_the_command_table(void **state) {
  if (!have("bash")) {
    printf("skipped: no bash here to load the completion\n");
    skip();
  }
  static char out[16384];
  assert_int_equal(complete(out, sizeof out, "\"\"", 1), 0);
  char names[MAX_COMMANDS][32], line[64];
  int n = table_commands(names, MAX_COMMANDS);
  assert_true(n >= 10);
  int offered = 0;
  for (char *p = out; *p != '\0'; offered++) {
    size_t k = strcspn(p, "\n");
    p += k + (p[k] == '\n');
  }
  for (int i = 0; i < n; i++) {
    snprintf(line, sizeof line, "\n%.31s\n", names[i]);
    char framed[16400];
    snprintf(framed, sizeof framed, "\n%s", out);
    if (strstr(framed, line) == NULL) fail_msg("the completion lacks '%s':\n%s", names[i], out);
  }
  /* The table's commands, --help and --version, nothing else. */
  assert_int_equal(offered, n + 2);
  assert_int_equal(complete(out, sizeof out, "probe --verify", 2), 0);
  assert_string_equal(out, "--verify-all\n--verify-fleet\n");
  assert_int_equal(complete(out, sizeof out, "db \"\"", 2), 0);
  assert_string_equal(out, "export\nimport\nmerge\n");
}

static void test_uninstall_leaves_no_file(void **state) {
  char tree[300], out[16384];
  snprintf(tree, sizeof tree, "%s/un", tmp);
  assert_int_equal(make_into("install", tree, out, sizeof out), 0);
  assert_int_equal(run(out, sizeof out, "find '%s' -type f -o -type l | wc -l", tree), 0);
  assert_true(atoi(out) > 12);
  if (make_into("uninstall", tree, out, sizeof out) != 0) fail_msg("make uninstall: %s", out);
  assert_int_equal(run(out, sizeof out, "find '%s' -type f -o -type l", tree), 0);
  if (out[0] != '\0') fail_msg("left after make uninstall:\n%s", out);
}

static void test_pip_install_offline_finds_the_installed_library(void **state) {
  if (system("python3 -c 'import venv, ensurepip' >/dev/null 2>&1") != 0) {
    printf("skipped: python3 -m venv needs python3-venv (ensurepip), missing here "
           "(tools/install-deps.sh check)\n");
    skip();
  }
  static char out[65536];
  /* No index: --no-index, PIP_NO_INDEX, and an index URL nothing answers. */
  int rc = run(out, sizeof out,
               "python3 -m venv '%s/venv' && cd '%s' && PIP_NO_INDEX=1 "
               "PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_DISABLE_PIP_VERSION_CHECK=1 "
               "'%s/venv/bin/pip' install --no-index ./python",
               tmp, cwd, tmp);
  if (rc != 0) fail_msg("pip install --no-index ./python: rc %d\n%s", rc, out);
  char lib[400], env[1100];
  snprintf(lib, sizeof lib, "%s" PREFIX "/lib/libhctune.so.0", dest);
  hct_test_sanitizer_env(lib, env, sizeof env);
  /* Out of the checkout (cd /, nothing of it on the path): the package is
   * the venv's, the library the installed one, and its templates the
   * installed ones (a variant their manifest lacks is refused naming it). */
  const char *code =
      "import hctune, sys\n"
      "print(hctune.__file__.startswith(sys.prefix), hctune.library_path)\n"
      "try:\n    hctune.Client(\"/nonexistent.sock\", 10).choose(\"hc_read\", 4)\n"
      "except hctune.Error as e:\n    print(e)\n";
  rc = run(out, sizeof out,
           "cd / && env -u HCTUNE_LIB -u HCTUNE_KERNELS -u PYTHONPATH -u LD_LIBRARY_PATH %s "
           "HCTUNE_PREFIX='%s" PREFIX "' HCTUNE_FORCE=hc_read=v9 '%s/venv/bin/python' -c '%s'",
           env, dest, tmp, code);
  char want[1024];
  snprintf(want, sizeof want, "True %s\n", lib);
  if (rc != 0 || strncmp(out, want, strlen(want)) != 0)
    fail_msg("with HCTUNE_PREFIX: rc %d, want '%s', got:\n%s", rc, want, out);
  snprintf(want, sizeof want, "in '%s" PREFIX "/share/hctune/kernels-src/hc_read/manifest.json'",
           dest);
  if (strstr(out, "no variant 'v9'") == NULL || strstr(out, want) == NULL)
    fail_msg("the installed library did not read the installed templates (%s):\n%s", want, out);
  rc = run(out, sizeof out,
           "cd / && env -u HCTUNE_LIB -u HCTUNE_PREFIX -u PYTHONPATH %s LD_LIBRARY_PATH='%s" PREFIX
           "/lib' '%s/venv/bin/python' -c 'import hctune; print(hctune.library_path)'",
           env, dest, tmp);
  if (rc != 0 || strcmp(out, "libhctune.so.0\n") != 0)
    fail_msg("with LD_LIBRARY_PATH: rc %d, want the loader's libhctune.so.0, got:\n%s", rc, out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_man_pages_render_without_warnings),
    cmocka_unit_test(test_pkg_config_gives_the_installed_flags),
    cmocka_unit_test(test_completion_offers_the_command_table),
    cmocka_unit_test(test_uninstall_leaves_no_file),
    cmocka_unit_test(test_pip_install_offline_finds_the_installed_library),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
