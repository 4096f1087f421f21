/*
 * cli_test.h: what the tests that run the hctune executable share: run it
 * with arguments, its stdout and stderr captured through files in a
 * temporary folder, and count the lines of what it printed.  A header of
 * static functions, like daemon_test.h, because only those programs want
 * it.  Include after <cmocka.h>.
 */
#ifndef HCT_CLI_TEST_H
#define HCT_CLI_TEST_H

#include <stdio.h>
#include <sys/wait.h>

#include "common.h"

/* Runs `<env>'<bin>' <args>` (env: "" or assignments ending in a space)
 * with stdout in *out and stderr in *err (malloc'd; out NULL: stdout is
 * discarded), through files in dir; returns the exit status. */
static int cli_run(const char *env, const char *bin, const char *dir, const char *args,
                   char **out, char **err) {
  char cmd[4096], ofile[256], efile[256];
  snprintf(ofile, sizeof ofile, "%s/out", dir);
  snprintf(efile, sizeof efile, "%s/err", dir);
  snprintf(cmd, sizeof cmd, "%s'%s' %s >'%s' 2>'%s'", env, bin, args,
           out != NULL ? ofile : "/dev/null", efile);
  int st = system(cmd);
  assert_true(st != -1 && WIFEXITED(st));
  if (out != NULL) assert_int_equal(hct__read_file(ofile, out, NULL), 0);
  assert_int_equal(hct__read_file(efile, err, NULL), 0);
  return WEXITSTATUS(st);
}

/* Lines of a printed text (its newlines). */
static int cli_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

#endif /* HCT_CLI_TEST_H */
