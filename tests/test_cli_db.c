/*
 * test_cli_db.c: `hctune list` and `hctune show` as a user runs them, on
 * databases seeded through the db API.  Needs HCT_BIN (set by tests/run.sh).
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
#include <jansson.h>

#include "db.h"
#include "jit.h"
#include "cli_test.h"

typedef struct {
  char dir[64];
  char path[128];
  char bin[512];
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  snprintf(f->bin, sizeof f->bin, "%s/hctune", getenv("HCT_BIN"));
  snprintf(f->dir, sizeof f->dir, "/tmp/hct_test_cli.XXXXXX");
  if (mkdtemp(f->dir) == NULL) return -1;
  snprintf(f->path, sizeof f->path, "%s/hctune.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  if (f == NULL) return 0;
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", f->dir);
  free(f);
  return 0;
}

/* Runs `hctune <args>`; returns the exit status, stdout and stderr in
 * malloc'd buffers. */
static int run(fixture_t *f, const char *args, char **out, char **err) {
  return cli_run("", f->bin, f->dir, args, out, err);
}

static void seed(const char *path) {
  hct_db_t *db;
  int err = hct__db_open(path, 0, &db);
  if (err) fail_msg("%s", hct_last_error());
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  strcpy(k.host, "h");
  strcpy(k.uuid, "GPU-8d1c2e3f-aaaa-bbbb");
  strcpy(k.model_key, "nvidia|NVIDIA H200|sm_90|132|143");
  strcpy(k.driver_version, "580.1");
  assert_int_equal(hct__db_device_upsert(db, &k, "NVIDIA H200", "sm_90", "{}"), 0);
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  d.keys = k;
  strcpy(d.op, "hc_read");
  strcpy(d.parity, "bitwise");
  d.tmin = 1;
  d.tmax = 4;
  strcpy(d.variant, "rowsplit_zebra");
  strcpy(d.params, "{\"ROWS\":4}");
  strcpy(d.source, "probe");
  d.median_us = 5;
  d.baseline_us = 10;
  assert_int_equal(hct__db_decisions_replace(db, &d, 1), 0);
  hct_db_trial_t t;
  memset(&t, 0, sizeof t);
  t.keys = k;
  strcpy(t.op, "hc_read");
  strcpy(t.variant, "rowsplit_zebra");
  strcpy(t.params, "{\"ROWS\": 4}");
  strcpy(t.kind, "timing");
  strcpy(t.status, "pass");
  t.tokens = 2;
  t.seed = 987654321;
  t.median_us = 5;
  t.samples = 77;
  t.figures_json = "{\"max_abs\":0}";
  assert_int_equal(hct__db_trial_add(db, &t, NULL), 0);
  /* A candidate caught by the verification after timing (issue 20). */
  strcpy(t.op, "selftest");
  strcpy(t.variant, "wrongset");
  strcpy(t.kind, "timed");
  strcpy(t.status, "timed");
  t.tokens = 4;
  t.log = "T=4: the outputs of its timed launches (32 rotating sets) are wrong\nsecond line";
  assert_int_equal(hct__db_trial_add(db, &t, NULL), 0);
  hct_db_fault_t fa;
  memset(&fa, 0, sizeof fa);
  fa.keys = k;
  strcpy(fa.op, "hc_read");
  strcpy(fa.variant, "persist_yak");
  strcpy(fa.reason, "timeout");
  fa.tokens = 8;
  fa.log = "barrier wait exceeded 2 s\nmore";
  assert_int_equal(hct__db_fault_add(db, &fa), 0);
  hct__db_close(db);
}

static void test_missing_db(void **state) {
  fixture_t *f = *state;
  char *out, *err;
  assert_int_equal(run(f, "list --db /nonexistent/x.db", &out, &err), 1);
  assert_int_equal(cli_lines(err), 1);
  assert_non_null(strstr(err, "/nonexistent/x.db"));
  assert_string_equal(out, "");
  free(out);
  free(err);
  assert_int_equal(run(f, "show --db /nonexistent/x.db", &out, &err), 1);
  assert_int_equal(cli_lines(err), 1);
  assert_non_null(strstr(err, "/nonexistent/x.db"));
  free(out);
  free(err);
  assert_int_not_equal(access("/nonexistent/x.db", F_OK), 0);
}

static void test_usage(void **state) {
  fixture_t *f = *state;
  char *out, *err;
  assert_int_equal(run(f, "list --help", &out, &err), 0);
  assert_non_null(strstr(out, "usage: hctune list"));
  free(out);
  free(err);
  assert_int_equal(run(f, "list --bogus", &out, &err), 2);
  assert_non_null(strstr(err, "--bogus"));
  assert_int_equal(cli_lines(err), 1);
  free(out);
  free(err);
  assert_int_equal(run(f, "show --tokens zero", &out, &err), 2);
  assert_non_null(strstr(err, "zero"));
  free(out);
  free(err);
  assert_int_equal(run(f, "show --help", &out, &err), 0);
  assert_non_null(strstr(out, "usage: hctune show"));
  free(out);
  free(err);
}

static void test_empty_db(void **state) {
  fixture_t *f = *state;
  hct_db_t *db;
  assert_int_equal(hct__db_open(f->path, 0, &db), 0);
  hct__db_close(db);
  char *out, *err, args[256];
  snprintf(args, sizeof args, "list --db '%s'", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  assert_string_equal(out, "no decisions recorded\n");
  free(out);
  free(err);
}

/* list marks a decision stale, with the part that changed, when its
 * software key is not what this host would compile now (the test hooks
 * stand for a new compiler or driver on a host without a GPU). */
static void test_list_stale(void **state) {
  fixture_t *f = *state;
  const char *kdir = getenv("HCTUNE_KERNELS");
  if (kdir == NULL) fail_msg("HCTUNE_KERNELS is not set (tests/run.sh sets it)");
  char ver[64];
  if (hct__compiler_version(HCT_BACKEND_CUDA, ver, sizeof ver) != 0) {
    fprintf(stderr, "skipped: NVRTC does not load here (%s)\n", hct_last_error());
    skip();
  }
  hct_op_t *op;
  if (hct__manifest_load(kdir, "hc_read", &op) != 0) fail_msg("%s", hct_last_error());
  hct_device_t dev;
  memset(&dev, 0, sizeof dev);
  dev.backend = HCT_BACKEND_CUDA;
  strcpy(dev.vendor, "nvidia");
  strcpy(dev.name, "NVIDIA H200");
  strcpy(dev.uuid, "GPU-5a1e0000-1111-2222");
  strcpy(dev.arch, "sm_90");
  dev.arch_num = 90;
  strcpy(dev.driver_version, "580.1");
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  job.backend = HCT_BACKEND_CUDA;
  strcpy(job.arch, "sm_90");
  job.op = op;
  job.variant = hct__variant_find(op, "v1");
  assert_non_null(job.variant);
  hct_point_t pts[64];
  assert_true(hct__param_points(job.variant, pts, 64) > 0);
  job.point = pts[0];
  hct_softkey_t key;
  if (hct__softkey_now(&job, "580.1", &key) != 0) fail_msg("%s", hct_last_error());

  hct_db_t *db;
  assert_int_equal(hct__db_open(f->path, 0, &db), 0);
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  strcpy(k.host, "h");
  strcpy(k.uuid, dev.uuid);
  hct__device_model_key(&dev, k.model_key, sizeof k.model_key);
  json_t *fpj = hct__device_json(&dev);
  char *fp = json_dumps(fpj, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(fpj);
  assert_int_equal(hct__db_device_upsert(db, &k, dev.name, dev.arch, fp), 0);
  free(fp);
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  d.keys = k;
  strcpy(d.op, "hc_read");
  strcpy(d.parity, "bitwise");
  d.tmin = 1;
  d.tmax = 8;
  strcpy(d.variant, "v1");
  hct__point_json(job.variant, &job.point, d.params, sizeof d.params);
  strcpy(d.variant_class, "baseline");
  strcpy(d.software_key, key.key);
  strcpy(d.software_json, key.json);
  assert_int_equal(hct__db_decisions_replace(db, &d, 1), 0);
  hct__db_close(db);
  hct__manifest_free(op);

  static const struct {
    const char *env;
    const char *want;   /* NULL: current */
  } cases[] = {
      {"HCTUNE_TEST_DRIVER_VERSION=580.1 ", NULL},
      {"HCTUNE_TEST_DRIVER_VERSION=580.1 HCTUNE_TEST_COMPILER_VERSION='nvrtc 99.1' ",
       "STALE: compiler changed ("},
      {"HCTUNE_TEST_DRIVER_VERSION=581.7 ", "STALE: driver changed ('580.1', now '581.7')"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    char *out, *err, args[256];
    snprintf(args, sizeof args, "list --db '%s'", f->path);
    assert_int_equal(cli_run(cases[i].env, f->bin, f->dir, args, &out, &err), 0);
    if (cases[i].want == NULL) {
      if (strstr(out, "STALE:") != NULL) fail_msg("%sgave a stale decision:\n%s", cases[i].env, out);
      assert_int_equal(cli_lines(out), 2);
    } else if (strstr(out, cases[i].want) == NULL) {
      fail_msg("%sgave\n%s\nwant '%s'", cases[i].env, out, cases[i].want);
    }
    free(out);
    free(err);
    snprintf(args, sizeof args, "list --json --db '%s'", f->path);
    assert_int_equal(cli_run(cases[i].env, f->bin, f->dir, args, &out, &err), 0);
    json_t *arr = json_loads(out, 0, NULL);
    json_t *o = json_array_get(arr, 0);
    assert_int_equal(json_is_true(json_object_get(o, "stale")), cases[i].want != NULL);
    assert_string_equal(json_string_value(json_object_get(o, "software_key")), key.key);
    json_decref(arr);
    free(out);
    free(err);
  }
}

static void test_seeded(void **state) {
  fixture_t *f = *state;
  seed(f->path);
  char *out, *err, args[256];
  snprintf(args, sizeof args, "list --db '%s'", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  assert_non_null(strstr(out, "rowsplit_zebra"));
  assert_non_null(strstr(out, "GPU-8d1c2e3f (NVIDIA H200)"));
  assert_non_null(strstr(out, "1-4"));
  assert_non_null(strstr(out, "2.00x"));
  /* Recorded with no software key (before schema 2): unkeyed, served as
   * recorded, and a line saying what re-probes it. */
  assert_non_null(strstr(out, "unkeyed"));
  assert_null(strstr(out, "STALE:"));
  assert_non_null(strstr(out, "1 of 1 decisions unkeyed"));
  assert_int_equal(cli_lines(out), 3);
  free(out);
  free(err);

  snprintf(args, sizeof args, "list --json --db '%s'", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  json_t *arr = json_loads(out, 0, NULL);
  assert_non_null(arr);
  assert_int_equal(json_array_size(arr), 1);
  json_t *o = json_array_get(arr, 0);
  assert_string_equal(json_string_value(json_object_get(o, "variant")), "rowsplit_zebra");
  assert_true(json_real_value(json_object_get(o, "speedup")) == 2.0);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "params"), "ROWS")), 4);
  json_decref(arr);
  free(out);
  free(err);

  snprintf(args, sizeof args, "list --faults --db '%s'", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  assert_non_null(strstr(out, "persist_yak"));
  assert_non_null(strstr(out, "8+"));
  assert_non_null(strstr(out, "barrier wait exceeded 2 s"));
  assert_null(strstr(out, "more"));
  free(out);
  free(err);

  snprintf(args, sizeof args, "list --pins --db '%s'", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  assert_string_equal(out, "no pins\n");
  free(out);
  free(err);

  /* show: the decided trial is marked, its params summarized, its card
   * and op (one on every row) said once above the table */
  snprintf(args, sizeof args, "show --db '%s' --device GPU-8d1c --tokens 2", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  assert_non_null(strstr(out, "card GPU-8d1c2e3f\nop hc_read\n"));
  assert_non_null(strstr(out, "\n*1 "));
  assert_non_null(strstr(out, "ROWS=4"));
  assert_non_null(strstr(out, "n=77"));
  assert_null(strstr(out, "{\"ROWS\""));
  free(out);
  free(err);
  snprintf(args, sizeof args, "show --db '%s' --tokens 3", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  assert_string_equal(out, "no trials recorded that match\n");
  free(out);
  free(err);
  snprintf(args, sizeof args, "show --json --db '%s' --op hc_read", f->path);
  assert_int_equal(run(f, args, &out, &err), 0);
  arr = json_loads(out, 0, NULL);
  assert_non_null(arr);
  assert_int_equal(json_array_size(arr), 1);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 0), "samples")), 77);
  json_decref(arr);
  free(out);
  free(err);
  /* show says which check caught a candidate, and what it found (at a
   * width that holds it). */
  snprintf(args, sizeof args, "show --db '%s' --op selftest", f->path);
  assert_int_equal(cli_run("COLUMNS=200 ", f->bin, f->dir, args, &out, &err), 0);
  const char *row = strstr(out, "wrongset");
  assert_non_null(row);
  assert_non_null(strstr(row, " timed "));
  assert_non_null(strstr(strstr(row, " timed ") + 6, "timed"));
  assert_non_null(strstr(out, "the outputs of its timed launches (32 rotating sets) are wrong"));
  assert_null(strstr(out, "second line"));
  free(out);
  free(err);
}

/* The longest line of a text. */
static int widest_line(const char *s) {
  int w = 0;
  while (*s) {
    int n = (int)strcspn(s, "\n");
    if (n > w) w = n;
    s += n + (s[n] == '\n');
  }
  return w;
}

/* Regression (issue 30): show on a real probe's DB printed 240-column rows
 * with the parameters' JSON cut mid-key.  The table now fits $COLUMNS, or
 * 80 when stdout is not a terminal, and --json keeps every field. */
static void test_show_fits_width(void **state) {
  fixture_t *f = *state;
  char args[1024], *out, *err;
  snprintf(args, sizeof args, "cp tests/fixtures/h200-probe.db '%s'", f->path);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "show --db '%s' --op hc_read", f->path);
  assert_int_equal(cli_run("COLUMNS= ", f->bin, f->dir, args, &out, &err), 0);
  assert_true(widest_line(out) <= 80);
  assert_true(cli_lines(out) > 1000);
  assert_non_null(strstr(out, "PDL=1"));
  assert_non_null(strstr(out, "--json has every field"));
  free(out);
  free(err);
  assert_int_equal(cli_run("COLUMNS=100 ", f->bin, f->dir, args, &out, &err), 0);
  assert_true(widest_line(out) <= 100);
  assert_true(widest_line(out) > 80);
  free(out);
  free(err);
  /* wide enough: nothing is cut */
  assert_int_equal(cli_run("COLUMNS=400 ", f->bin, f->dir, args, &out, &err), 0);
  assert_null(strstr(out, "cut to the width"));
  assert_non_null(strstr(out, "mixed_bf16=(kl "));
  assert_non_null(strstr(out, "PDL=1 GB=0 G=1 NG=4 LT=1"));
  free(out);
  free(err);
}

/* Regression (issue 30): `devices --json` printed nothing without a card,
 * so a script's JSON parser failed on empty input.  Now: [] and exit 1 (a
 * GPU machine: its cards, exit 0). */
static void test_devices_json_empty(void **state) {
  fixture_t *f = *state;
  char *out, *err;
  int st = run(f, "devices --json", &out, &err);
  json_t *arr = json_loads(out, 0, NULL);
  assert_true(json_is_array(arr));
  if (st == 1) {
    assert_string_equal(out, "[]\n");
    assert_true(strlen(err) > 0); /* the reason, on stderr */
  } else {
    assert_int_equal(st, 0);
    assert_true(json_array_size(arr) > 0);
  }
  json_decref(arr);
  free(out);
  free(err);
}

static void test_corrupt_db(void **state) {
  fixture_t *f = *state;
  FILE *fp = fopen(f->path, "wb");
  assert_non_null(fp);
  for (int i = 0; i < 4096; i++) fputc((i * 131) & 0xff, fp);
  fclose(fp);
  char *out, *err, args[256];
  snprintf(args, sizeof args, "list --db '%s'", f->path);
  assert_int_equal(run(f, args, &out, &err), 1);
  assert_int_equal(cli_lines(err), 1);
  assert_non_null(strstr(err, f->path));
  free(out);
  free(err);
}

int main(void) {
  /* The commands are run as a user runs them: without the binary there is
   * nothing to test, which is said, not passed over. */
  const char *bin = hct_test_bin("test_cli_db");
  char exe[512];
  if (bin == NULL) return 1;
  snprintf(exe, sizeof exe, "%s/hctune", bin);
  if (access(exe, X_OK) != 0) {
    fprintf(stderr, "test_cli_db: '%s' is not built (make all)\n", exe);
    return 1;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_missing_db, setup, teardown),
    cmocka_unit_test_setup_teardown(test_usage, setup, teardown),
    cmocka_unit_test_setup_teardown(test_empty_db, setup, teardown),
    cmocka_unit_test_setup_teardown(test_seeded, setup, teardown),
    cmocka_unit_test_setup_teardown(test_list_stale, setup, teardown),
    cmocka_unit_test_setup_teardown(test_corrupt_db, setup, teardown),
    cmocka_unit_test_setup_teardown(test_show_fits_width, setup, teardown),
    cmocka_unit_test_setup_teardown(test_devices_json_empty, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
