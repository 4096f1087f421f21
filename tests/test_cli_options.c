/*
 * test_cli_options.c: the option handling every hctune command shares
 * (common/cmdline.c, hct__cli_options) as a user meets it: each command of `hctune --help`
 * answers --help with its usage and words a bad argument the same way;
 * `--opt=value` means `--opt value`; the command table's setup (the
 * database) fails with one line naming what is missing.  Runs
 * $HCT_BIN/hctune; no GPU, no compiler.
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

#include "cli_test.h"

static char bin[1024], dir[64];

static int run(const char *args, char **out, char **err) {
  return cli_run("", bin, dir, args, out, err);
}

/* The command names `hctune --help` lists (lines "  NAME  summary"). */
static int command_names(char names[][32], int max) {
  char *out, *err;
  assert_int_equal(run("--help", &out, &err), 0);
  int n = 0;
  for (const char *line = out; *line && n < max;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    if (len > 3 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ') {
      size_t w = strcspn(line + 2, " \n");
      snprintf(names[n++], 32, "%.*s", (int)w, line + 2);
    }
    line += len + (eol ? 1 : 0);
  }
  free(out);
  free(err);
  return n;
}

/* Exit 2 and exactly `want_line` on stderr. */
static void want_usage_error(const char *args, const char *want_line) {
  char *out, *err;
  int rc = run(args, &out, &err);
  if (rc != 2 || strcmp(err, want_line) != 0)
    fail_msg("hctune %s: exit %d, stderr '%s'; want 2 and '%s'", args, rc, err, want_line);
  free(out);
  free(err);
}

static void test_every_command(void **state) {
  (void)state;
  char names[32][32];
  int n = command_names(names, 32);
  assert_true(n >= 10);
  for (int i = 0; i < n; i++) {
    char args[1200], want[2600], *out, *err;
    snprintf(args, sizeof args, "%s --help", names[i]);
    int rc = run(args, &out, &err);
    snprintf(want, sizeof want, "usage: hctune %s", names[i]);
    if (rc != 0 || strstr(out, want) == NULL || err[0] != '\0')
      fail_msg("hctune %s: exit %d, stdout lacks '%s' or stderr '%s'", args, rc, want, err);
    free(out);
    free(err);
    snprintf(args, sizeof args, "%s -h", names[i]);
    assert_int_equal(run(args, &out, &err), 0);
    assert_non_null(strstr(out, want));
    free(out);
    free(err);

    snprintf(args, sizeof args, "%s --bogus", names[i]);
    snprintf(want, sizeof want, "hctune %s: unknown option '--bogus' (see 'hctune %s --help')\n",
             names[i], names[i]);
    want_usage_error(args, want);
    snprintf(args, sizeof args, "%s --bogus=1", names[i]);
    want_usage_error(args, want);
    snprintf(args, sizeof args, "%s extra", names[i]);
    snprintf(want, sizeof want, "hctune %s: unexpected argument 'extra' (see 'hctune %s --help')\n",
             names[i], names[i]);
    want_usage_error(args, want);
  }
}

/* --opt=value and --opt value give the same result, value errors too. */
static void test_equals_form(void **state) {
  (void)state;
  static const struct {
    const char *a, *b, *want;
  } cases[] = {
      {"show --tokens=0", "show --tokens 0",
       "hctune show: --tokens '0': want a whole number from 1 to 1048576 (see 'hctune show "
       "--help')\n"},
      {"compile --arch=sm_90 --jobs=0", "compile --arch sm_90 --jobs 0",
       "hctune compile: --jobs '0': want a whole number from 1 to 256 (see 'hctune compile "
       "--help')\n"},
      {"query --timeout=x", "query --timeout x",
       "hctune query: --timeout 'x': want a whole number from 1 to 600000 (see 'hctune query "
       "--help')\n"},
      {"probe --margin=51", "probe --margin 51",
       "hctune probe: --margin '51': want a number from 0 to 50 (see 'hctune probe --help')\n"},
      {"compile --arch=sm_90 --backend=metal", "compile --arch sm_90 --backend metal",
       "hctune compile: --backend 'metal': unknown backend: expected cuda or hip (see 'hctune "
       "compile --help')\n"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    want_usage_error(cases[i].a, cases[i].want);
    want_usage_error(cases[i].b, cases[i].want);
  }
  want_usage_error("list --db", "hctune list: option '--db' needs a value (see 'hctune list --help')\n");
  want_usage_error("list --db=",
                   "hctune list: option '--db' needs a value, not '' (see 'hctune list --help')\n");
  want_usage_error("query --op ''",
                   "hctune query: option '--op' needs a value, not '' (see 'hctune query --help')\n");
  want_usage_error("list --json=yes",
                   "hctune list: option '--json' takes no value (see 'hctune list --help')\n");
  want_usage_error("devices -j", "hctune devices: unknown option '-j' (see 'hctune devices --help')\n");
  /* An option's name is matched whole: a prefix is not an abbreviation. */
  want_usage_error("list --js", "hctune list: unknown option '--js' (see 'hctune list --help')\n");
}

/* The table's setup: list, show and verify-decisions open the database
 * before their work (--db=PATH too), and fail with one line naming it. */
static void test_setup(void **state) {
  (void)state;
  static const char *const cmds[] = {"list", "show", "verify-decisions"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cmds); i++) {
    char args[256], *out, *err;
    snprintf(args, sizeof args, "%s --db=%s/none.db", cmds[i], dir);
    int rc = run(args, &out, &err);
    if (rc != 1 || cli_lines(err) != 1 || strstr(err, "none.db") == NULL)
      fail_msg("hctune %s: exit %d, stderr '%s'; want 1 and one line naming none.db", args, rc,
               err);
    assert_string_equal(out, "");
    free(out);
    free(err);
  }
  /* A command without the database in its setup takes no --db. */
  want_usage_error("devices --db x",
                   "hctune devices: unknown option '--db' (see 'hctune devices --help')\n");
}

int main(void) {
  const char *b = hct_test_bin("test_cli_options");
  if (b == NULL) return 1;
  snprintf(bin, sizeof bin, "%s/hctune", b);
  snprintf(dir, sizeof dir, "/tmp/hct_test_cli_options.XXXXXX");
  if (mkdtemp(dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_command),
      cmocka_unit_test(test_equals_form),
      cmocka_unit_test(test_setup),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return rc;
}
