/*
 * test_cli_probe.c: the argument and input errors of `hctune probe`,
 * `bench` and `verify-decisions` as a user meets them on a machine without
 * a GPU: each a one-line message naming the thing and the cause, a
 * non-zero status (2 for usage, 1 for the rest), and no database written
 * when nothing was probed.  Needs HCT_BIN (set by tests/run.sh).
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

#include "cli.h"
#include "common.h"
#include "cli_test.h"
#include "db.h"

static char dir[64];

static int run_out(const char *args, char **out, char **err) {
  char bin[1100];
  snprintf(bin, sizeof bin, "%s/hctune", getenv("HCT_BIN"));
  return cli_run("", bin, dir, args, out, err);
}

static int run(const char *args, char **err) { return run_out(args, NULL, err); }

static void test_errors(void **state) {
  (void)state;
  static const struct {
    const char *args;
    int status;
    const char *needle;
    int advice; /* lines after the error's: what to do without a GPU */
  } cases[] = {
      {"probe --op no_such_op", 1, "op 'no_such_op'", 0},
      {"probe --op ../etc", 1, "not a valid op name", 0},
      {"probe --tokens 0", 2, "outside 1..1048576", 0},
      {"probe --tokens 1-65", 2, "more than 64 token counts", 0},
      {"probe --tokens 1-32,100-132", 2, "more than 64 token counts", 0},
      {"probe --tokens 2-1", 2, "token list '2-1'", 0},
      {"probe --tokens x", 2, "not a number", 0},
      {"probe --tokens 9", 1, "token count 9: op 'hc_read' supports 1..8", 0},
      /* No GPU here: the error's line, then what to do next (issue 30). */
      {"probe --device 7", 1, "no gpu driver found", 1},
      {"probe --device all", 1, "no gpu driver found", 1},
      {"probe --device 0,1", 1, "no gpu driver found", 1},
      {"probe --device all --verify-fleet", 2, "names several cards", 0},
      {"probe --outlier-pct 5", 2, "--outlier-pct needs --device all", 0},
      {"probe --device all --outlier-pct x", 2, "--outlier-pct 'x'", 0},
      {"probe --check-sets 0", 2, "--check-sets '0'", 0},
      {"probe --margin 90", 2, "--margin '90'", 0},
      {"probe --bogus", 2, "unknown option '--bogus'", 0},
      {"probe --db", 2, "needs a value", 0},
      {"probe extra", 2, "unexpected argument 'extra'", 0},
      {"bench --tokens 1", 2, "--variants is required", 0},
      {"bench --variants v1 --tokens 1-100", 2, "more than 64 token counts", 0},
      {"bench --variants v1 --tokens 32768", 1, "token count 32768: op 'hc_read' supports 1..8", 0},
      {"verify-decisions --limit 0.5", 2, "--limit '0.5'", 0},
      {"nosuchcommand", 2, "'nosuchcommand' is not a command", 0},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    char *err = NULL;
    int st = run(cases[i].args, &err);
    const char *nl = strchr(err, '\n');
    int first = nl != NULL ? (int)(nl - err) : (int)strlen(err);
    int found = (int)(strstr(err, cases[i].needle) - err);
    if (st != cases[i].status || strstr(err, cases[i].needle) == NULL || found >= first ||
        (cases[i].advice ? cli_lines(err) != 6 : cli_lines(err) != 1))
      fail_msg("hctune %s: status %d (want %d), stderr '%s' (want '%s' in its first line "
               "of %d)", cases[i].args, st, cases[i].status, err, cases[i].needle,
               cases[i].advice ? 6 : 1);
    if (cases[i].advice && (strstr(err, "hctune compile --arch sm_90") == NULL ||
                            strstr(err, "`make probe` on the GPU machine") == NULL))
      fail_msg("hctune %s: no advice for a machine without a GPU: '%s'", cases[i].args, err);
    free(err);
  }
}

/* A probe that fails before it starts leaves no database behind. */
static void test_no_db_on_early_failure(void **state) {
  (void)state;
  char args[256], db[128];
  snprintf(db, sizeof db, "%s/never.db", dir);
  snprintf(args, sizeof args, "probe --op no_such_op --db '%s'", db);
  char *err = NULL;
  assert_int_equal(run(args, &err), 1);
  free(err);
  struct stat st;
  assert_int_not_equal(stat(db, &st), 0);
}

static void test_help(void **state) {
  (void)state;
  static const char *const cmds[] = {"probe", "bench", "verify-decisions", "devices", "list",
                                     "show", "compile", "query", "daemon"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cmds); i++) {
    char args[64], *err = NULL;
    snprintf(args, sizeof args, "%s --help", cmds[i]);
    int st = run(args, &err);
    if (st != 0 || err[0] != '\0') fail_msg("hctune %s: status %d, stderr '%s'", args, st, err);
    free(err);
  }
}

/* The rows bench and verify-decisions collect from the probe: every one
 * kept, in order, past the first growth of the array. */
static void test_timed_rows(void **state) {
  (void)state;
  hct_timed_rows_t rows = {0};
  for (int i = 0; i < 1000; i++) {
    hct_summary_t s = {0};
    s.median = 10.0 + i;
    char params[32];
    snprintf(params, sizeof params, "{\"P\":%d}", i);
    hct__timed_rows_add(&rows, 1 + i % 8, i % 2 ? "tg" : "persist", params, &s, i % 3 == 0);
  }
  assert_int_equal(rows.n, 1000);
  assert_int_equal(rows.oom, 0);
  assert_true(rows.cap >= 1000);
  assert_int_equal(rows.r[999].T, 8);
  assert_string_equal(rows.r[999].variant, "tg");
  assert_string_equal(rows.r[999].params, "{\"P\":999}");
  assert_true(rows.r[999].s.median == 1009.0);
  assert_int_equal(rows.r[999].pruned, 1);
  assert_int_equal(rows.r[998].pruned, 0);
  hct__timed_rows_free(&rows);
  assert_null(rows.r);
  assert_int_equal(rows.n, 0);
}

/* A database holding decisions of `ncards` cards this host does not have
 * (UUIDs no driver gives), three decisions each. */
static void db_of_absent_cards(const char *path, int ncards) {
  hct_db_t *db;
  if (hct__db_open(path, 0, &db) != 0) fail_msg("%s", hct_last_error());
  for (int c = 0; c < ncards; c++) {
    hct_db_keys_t k;
    memset(&k, 0, sizeof k);
    strcpy(k.host, "elsewhere");
    snprintf(k.uuid, sizeof k.uuid, "GPU-00000000-absent-%d", c);
    strcpy(k.model_key, "nvidia|NVIDIA H200|sm_90|132|143");
    strcpy(k.driver_version, "580.1");
    assert_int_equal(hct__db_device_upsert(db, &k, "NVIDIA H200", "sm_90", "{}"), 0);
    hct_db_decision_t d[3];
    memset(d, 0, sizeof d);
    for (int i = 0; i < 3; i++) {
      d[i].keys = k;
      strcpy(d[i].op, "hc_read");
      strcpy(d[i].parity, "bitwise");
      d[i].tmin = 1 + 2 * i;
      d[i].tmax = 2 + 2 * i;
      strcpy(d[i].variant, "v1");
      strcpy(d[i].params, "{}");
      strcpy(d[i].source, "probe");
      d[i].median_us = 5;
      d[i].baseline_us = 5;
    }
    assert_int_equal(hct__db_decisions_replace(db, d, 3), 0);
  }
  hct__db_close(db);
}

/*
 * Issue 30: on a host without the recorded cards verify-decisions printed
 * "skipped" for each, then "0 decisions x token counts checked; ... every
 * chosen variant passes every check", and exited 0.  Checking nothing is
 * a failure that says why, never a pass; so is an empty database, and a
 * filter that leaves no decision.
 */
static void test_verify_nothing_checked(void **state) {
  (void)state;
  char path[128], empty[128], args[512];
  snprintf(path, sizeof path, "%s/absent.db", dir);
  snprintf(empty, sizeof empty, "%s/empty.db", dir);
  db_of_absent_cards(path, 3);
  db_of_absent_cards(empty, 0);
  static const struct {
    const char *db, *extra, *needle;
  } cases[] = {
      {"absent.db", "", "nothing checked: the cards of all 9 decisions are not on this host"},
      {"absent.db", "--op hc_read_prefill", "nothing checked: none of the 9 decisions"},
      {"empty.db", "", "nothing checked: no decisions recorded in"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    char *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "verify-decisions --db '%s/%s' %s", dir, cases[i].db, cases[i].extra);
    int st = run_out(args, &out, &err);
    if (st != 1 || cli_lines(err) != 1 || strstr(err, cases[i].needle) == NULL ||
        strstr(out, "passes every check") != NULL)
      fail_msg("hctune %s: status %d (want 1), stdout '%s', stderr '%s' (want one line with '%s')",
               args, st, out, err, cases[i].needle);
    free(out);
    free(err);
  }
  /* The skipped cards are still listed, each once per op. */
  char *out = NULL, *err = NULL;
  snprintf(args, sizeof args, "verify-decisions --db '%s'", path);
  assert_int_equal(run_out(args, &out, &err), 1);
  int skipped = 0;
  for (const char *p = out; (p = strstr(p, "skipped: card not on this host")) != NULL; p++) skipped++;
  assert_int_equal(skipped, 3);
  free(out);
  free(err);
}

int main(void) {
  if (hct_test_bin("test_cli_probe") == NULL) return 1;
  snprintf(dir, sizeof dir, "/tmp/hct_test_cli_probe.XXXXXX");
  if (mkdtemp(dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_no_db_on_early_failure),
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_timed_rows),
      cmocka_unit_test(test_verify_nothing_checked),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return rc;
}
