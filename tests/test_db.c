/*
 * test_db.c: the SQLite layer: opening (schema, versions, refusals of bad
 * files), every API round trip, transactions and data_version.
 */
#include <fcntl.h>
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
#include <jansson.h>
#include <sqlite3.h>

#include "db.h"
#include "jit.h"

/* ---- helpers ------------------------------------------------------------ */

/* Asserts a call returned 0, printing the error's message when not. */
#define assert_ok(expr)                                                          \
  do {                                                                           \
    int rc_ = (expr);                                                            \
    if (rc_ != 0) fail_msg("%s: %s (%s)", #expr, hct_err_name(rc_), hct_last_error()); \
  } while (0)

typedef struct {
  char dir[64];
  char path[128];
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/hct_test_db.XXXXXX");
  if (mkdtemp(f->dir) == NULL) return -1;
  /* A folder that does not exist yet: open must create it. */
  snprintf(f->path, sizeof f->path, "%s/a/b/hctune.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", f->dir, f->dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", f->dir);
  free(f);
  return 0;
}

static void keys_fill(hct_db_keys_t *k, const char *uuid) {
  memset(k, 0, sizeof *k);
  hct__strlcpy(k->host, "host-a", sizeof k->host);
  hct__strlcpy(k->uuid, uuid, sizeof k->uuid);
  hct__strlcpy(k->model_key, "nvidia|NVIDIA H200|sm_90|132|143", sizeof k->model_key);
  hct__strlcpy(k->driver_version, "580.1", sizeof k->driver_version);
  hct__strlcpy(k->compiler_version, "nvrtc 13.0", sizeof k->compiler_version);
  hct__strlcpy(k->hctune_version, "0.1.0", sizeof k->hctune_version);
}

static hct_db_t *open_ok(const char *path, int flags) {
  hct_db_t *db = NULL;
  int err = hct__db_open(path, flags, &db);
  if (err) fprintf(stderr, "open: %s (%s)\n", hct_last_error(), hct_err_name(err));
  assert_int_equal(err, 0);
  assert_non_null(db);
  return db;
}

static char *slurp(const char *path, size_t *len) {
  char *buf = NULL;
  assert_int_equal(hct__read_file(path, &buf, len), 0);
  return buf;
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* Runs one SQL text on a raw connection, for hand-made files. */
static void raw_exec(const char *path, const char *sql) {
  sqlite3 *h;
  assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
  char *msg = NULL;
  int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) fprintf(stderr, "raw_exec: %s\n", msg);
  sqlite3_free(msg);
  assert_int_equal(rc, SQLITE_OK);
  sqlite3_close(h);
}

static hct_db_trial_t trial_make(const char *uuid, const char *variant, int tokens) {
  hct_db_trial_t t;
  memset(&t, 0, sizeof t);
  keys_fill(&t.keys, uuid);
  hct__strlcpy(t.op, "hc_read", sizeof t.op);
  hct__strlcpy(t.variant, variant, sizeof t.variant);
  hct__strlcpy(t.params, "{\"ROWS\":4}", sizeof t.params);
  hct__strlcpy(t.template_hash, "0123456789abcdef0123456789abcdef", sizeof t.template_hash);
  t.tokens = tokens;
  hct__strlcpy(t.kind, "timing", sizeof t.kind);
  hct__strlcpy(t.status, "pass", sizeof t.status);
  t.seed = 0xfedcba9876543210ull;
  t.samples = 96;
  t.median_us = 12.5;
  t.ci_lo_us = 12.25;
  t.ci_hi_us = 12.75;
  t.converged = 1;
  t.figures_json = "{\"max_abs\":0.0,\"kl_mean\":1e-9}";
  t.log = "line one\nline two";
  return t;
}

/* ---- opening ------------------------------------------------------------ */

static void test_schema_created(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  int v = -1;
  assert_ok(hct__db_user_version(db, &v));
  assert_int_equal(v, HCT_DB_SCHEMA_VERSION);
  assert_string_equal(hct__db_path(db), f->path);
  static const char *const tables[] = {"devices", "runs", "trials", "decisions",
                                       "faults", "pins", "binaries"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(tables); i++) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(hct__db_sqlite(db),
                                        "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                                        " AND name = ?", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, tables[i], -1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    if (sqlite3_column_int(st, 0) != 1) fail_msg("table %s missing", tables[i]);
    sqlite3_finalize(st);
  }
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(hct__db_sqlite(db), "PRAGMA journal_mode", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
  sqlite3_finalize(st);
  assert_ok(hct__db_integrity_check(db));
  hct__db_close(db);
}

static void test_migrate_from_empty_file(void **state) {
  fixture_t *f = *state;
  /* Version 0: an empty file, which SQLite reads as an empty database,
   * plus a table from a hand-made older layout that must survive. */
  assert_int_equal(hct__mkdir_parents(f->path), 0);
  write_bytes(f->path, "", 0);
  raw_exec(f->path, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('kept');");
  hct_db_t *db = open_ok(f->path, 0);
  int v = -1;
  assert_ok(hct__db_user_version(db, &v));
  assert_int_equal(v, HCT_DB_SCHEMA_VERSION);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(hct__db_sqlite(db), "SELECT x FROM notes", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "kept");
  sqlite3_finalize(st);
  hct__db_close(db);
}

static void test_readonly_open_of_old_schema(void **state) {
  fixture_t *f = *state;
  assert_int_equal(hct__mkdir_parents(f->path), 0);
  write_bytes(f->path, "", 0);
  hct_db_t *db = NULL;
  assert_int_equal(hct__db_open(f->path, HCT_DB_READONLY, &db), HCT_EDBVERSION);
  assert_null(db);
  assert_non_null(strstr(hct_last_error(), f->path));
  struct stat st;
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_size, 0);
}

static void test_future_version_refused(void **state) {
  fixture_t *f = *state;
  assert_int_equal(hct__mkdir_parents(f->path), 0);
  raw_exec(f->path, "CREATE TABLE future (x); PRAGMA user_version = 99;");
  size_t n0, n1;
  char *before = slurp(f->path, &n0);
  hct_db_t *db = NULL;
  assert_int_equal(hct__db_open(f->path, 0, &db), HCT_EDBVERSION);
  assert_null(db);
  assert_non_null(strstr(hct_last_error(), f->path));
  assert_non_null(strstr(hct_last_error(), "99"));
  char *after = slurp(f->path, &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(before, after, n0);
  free(before);
  free(after);
}

static void test_reopen_keeps_data(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_trial_t t = trial_make("GPU-1111", "rowsplit", 4);
  int64_t id = 0;
  assert_ok(hct__db_trial_add(db, &t, &id));
  assert_true(id > 0);
  hct__db_close(db);
  db = open_ok(f->path, HCT_DB_READONLY | HCT_DB_NOCREATE);
  char *json = NULL;
  assert_ok(hct__db_trials_json(db, NULL, NULL, NULL, 0, &json));
  json_t *arr = json_loads(json, 0, NULL);
  assert_non_null(arr);
  assert_int_equal(json_array_size(arr), 1);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 0), "id")), id);
  json_decref(arr);
  free(json);
  hct__db_close(db);
}

static void test_missing_nocreate(void **state) {
  fixture_t *f = *state;
  static const int flag_sets[] = {HCT_DB_NOCREATE, HCT_DB_READONLY,
                                  HCT_DB_NOCREATE | HCT_DB_READONLY};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(flag_sets); i++) {
    hct_db_t *db = NULL;
    assert_int_equal(hct__db_open(f->path, flag_sets[i], &db), HCT_ENOENT);
    assert_null(db);
    assert_non_null(strstr(hct_last_error(), f->path));
    assert_null(strchr(hct_last_error(), '\n'));
    assert_int_not_equal(access(f->path, F_OK), 0);
  }
}

static void expect_corrupt(const char *path) {
  size_t n0, n1;
  char *before = slurp(path, &n0);
  static const int flag_sets[] = {0, HCT_DB_READONLY};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(flag_sets); i++) {
    hct_db_t *db = NULL;
    int err = hct__db_open(path, flag_sets[i], &db);
    if (err != HCT_EDBCORRUPT)
      fail_msg("open flags %d: got %s (%s), want EDBCORRUPT", flag_sets[i], hct_err_name(err),
               hct_last_error());
    assert_null(db);
    assert_non_null(strstr(hct_last_error(), path));
  }
  char *after = slurp(path, &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(before, after, n0);
  free(before);
  free(after);
  char side[256];
  snprintf(side, sizeof side, "%s-wal", path);
  assert_int_not_equal(access(side, F_OK), 0);
}

static void test_garbage_file(void **state) {
  fixture_t *f = *state;
  assert_int_equal(hct__mkdir_parents(f->path), 0);
  unsigned char junk[8192];
  srand(1234);
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)rand();
  write_bytes(f->path, junk, sizeof junk);
  expect_corrupt(f->path);
  /* Shorter than SQLite's header, and text. */
  write_bytes(f->path, "not a database\n", 15);
  expect_corrupt(f->path);
}

static void test_truncated_file(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_trial_t t = trial_make("GPU-2222", "rowsplit", 1);
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  t.log = big;
  for (int i = 0; i < 64; i++) assert_ok(hct__db_trial_add(db, &t, NULL));
  hct__db_close(db); /* the last close checkpoints and removes the WAL */
  struct stat st;
  assert_int_equal(stat(f->path, &st), 0);
  assert_true(st.st_size > 64 * 4096);
  assert_int_equal(truncate(f->path, st.st_size / 2), 0);
  expect_corrupt(f->path);
}

/* The chmod cases, in a folder of their own; returns 0 or the line of the
 * first failed check (so a child process can report it). */
#define RO_CHECK(c) do { if (!(c)) { fprintf(stderr, "failed: %s (%s)\n", #c, hct_last_error()); return __LINE__ % 256 ? __LINE__ % 256 : 1; } } while (0)
static int readonly_cases(void) {
  char dir[64] = "/tmp/hct_test_ro.XXXXXX", path[128], rodir[128], ropath[160];
  if (mkdtemp(dir) == NULL) return 1;
  snprintf(path, sizeof path, "%s/x.db", dir);
  hct_db_t *db = NULL;
  RO_CHECK(hct__db_open(path, 0, &db) == 0);
  hct_db_trial_t t = trial_make("GPU-ro", "rowsplit", 1);
  RO_CHECK(hct__db_trial_add(db, &t, NULL) == 0);
  hct__db_close(db);
  RO_CHECK(chmod(path, 0444) == 0);
  size_t n0, n1;
  char *before = NULL, *after = NULL;
  RO_CHECK(hct__read_file(path, &before, &n0) == 0);
  RO_CHECK(hct__db_open(path, 0, &db) == HCT_EDBREADONLY);
  RO_CHECK(strstr(hct_last_error(), path) != NULL);
  RO_CHECK(hct__read_file(path, &after, &n1) == 0);
  RO_CHECK(n0 == n1 && memcmp(before, after, n0) == 0);
  free(before);
  free(after);
  /* A read-only open of the read-only file works. */
  RO_CHECK(hct__db_open(path, HCT_DB_READONLY, &db) == 0);
  hct__db_close(db);
  /* A reader who cannot write the folder (the daemon's database read by
   * `hctune list`): read-only opens work without a WAL index. */
  char sub[96], subpath[128];
  snprintf(sub, sizeof sub, "%s/shared", dir);
  snprintf(subpath, sizeof subpath, "%s/x.db", sub);
  RO_CHECK(hct__db_open(subpath, 0, &db) == 0);
  RO_CHECK(hct__db_trial_add(db, &t, NULL) == 0);
  hct__db_close(db); /* the last close removes -wal and -shm */
  char shm[160];
  snprintf(shm, sizeof shm, "%s-shm", subpath);
  RO_CHECK(access(shm, F_OK) != 0);
  RO_CHECK(chmod(sub, 0555) == 0);
  RO_CHECK(hct__db_open(subpath, 0, &db) == HCT_EDBREADONLY);
  RO_CHECK(hct__db_open(subpath, HCT_DB_READONLY, &db) == 0);
  char *json = NULL;
  RO_CHECK(hct__db_trials_json(db, NULL, NULL, NULL, 0, &json) == 0);
  RO_CHECK(strstr(json, "GPU-ro") != NULL);
  free(json);
  hct__db_close(db);
  RO_CHECK(access(shm, F_OK) != 0);
  RO_CHECK(chmod(sub, 0755) == 0);
  /* A read-only folder: no file can be created in it. */
  snprintf(rodir, sizeof rodir, "%s/ro", dir);
  RO_CHECK(mkdir(rodir, 0555) == 0);
  snprintf(ropath, sizeof ropath, "%s/x.db", rodir);
  RO_CHECK(hct__db_open(ropath, 0, &db) == HCT_EDBREADONLY);
  RO_CHECK(strstr(hct_last_error(), ropath) != NULL);
  RO_CHECK(access(ropath, F_OK) != 0);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : 2;
}

static void test_readonly_file(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_trial_t t = trial_make("GPU-3333", "rowsplit", 2);
  assert_ok(hct__db_trial_add(db, &t, NULL));
  hct__db_close(db);

  /* File modes stop writes only for a user other than root: as root (CI),
   * a child drops to nobody for these cases. */
  if (geteuid() == 0) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(90);
      _exit(readonly_cases());
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 90)
      printf("  skip: chmod 0444 cases: cannot switch to user nobody\n");
    else if (WEXITSTATUS(status) != 0)
      fail_msg("read-only case failed at line %d", WEXITSTATUS(status));
  } else {
    int line = readonly_cases();
    if (line) fail_msg("read-only case failed at line %d", line);
  }

  /* HCT_DB_READONLY: reads work, every write is refused. */
  db = open_ok(f->path, HCT_DB_READONLY);
  char *json = NULL;
  assert_ok(hct__db_trials_json(db, "", "", "", 0, &json));
  assert_non_null(strstr(json, "GPU-3333"));
  free(json);
  int err = hct__db_trial_add(db, &t, NULL);
  assert_int_equal(err, HCT_EDBREADONLY);
  assert_non_null(strstr(hct_last_error(), f->path));
  hct_db_pin_t p = {.uuid = "*", .op = "hc_read", .tmin = 1, .tmax = 4, .variant = "v"};
  assert_int_equal(hct__db_pin_add(db, &p), HCT_EDBREADONLY);
  hct__db_close(db);
}

static void test_data_version(void **state) {
  fixture_t *f = *state;
  hct_db_t *a = open_ok(f->path, 0), *b = open_ok(f->path, 0);
  int64_t v0, v1, v2;
  assert_ok(hct__db_data_version(a, &v0));
  assert_ok(hct__db_data_version(a, &v1));
  assert_int_equal(v0, v1);
  hct_db_trial_t t = trial_make("GPU-4444", "rowsplit", 2);
  assert_ok(hct__db_trial_add(b, &t, NULL));
  assert_ok(hct__db_data_version(a, &v2));
  assert_int_not_equal(v1, v2);
  hct__db_close(a);
  hct__db_close(b);
}

static void test_transaction(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0), *other = open_ok(f->path, HCT_DB_READONLY);
  hct_db_trial_t t = trial_make("GPU-5555", "rowsplit", 2);
  assert_ok(hct__db_begin(db));
  assert_ok(hct__db_trial_add(db, &t, NULL));
  /* A decisions replace nests as a savepoint inside the caller's one. */
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  keys_fill(&d.keys, "GPU-5555");
  strcpy(d.op, "hc_read");
  strcpy(d.parity, "bitwise");
  strcpy(d.variant, "rowsplit");
  d.tmin = 1;
  d.tmax = 4;
  assert_ok(hct__db_decisions_replace(db, &d, 1));
  char *json = NULL;
  assert_ok(hct__db_trials_json(other, NULL, NULL, NULL, 0, &json));
  assert_string_equal(json, "[]"); /* not visible before the commit */
  free(json);
  assert_ok(hct__db_rollback(db));
  hct_db_decision_t *list;
  int n;
  assert_ok(hct__db_decisions_list(db, &list, &n));
  assert_int_equal(n, 0);
  free(list);
  assert_ok(hct__db_begin(db));
  assert_ok(hct__db_trial_add(db, &t, NULL));
  assert_ok(hct__db_commit(db));
  assert_ok(hct__db_trials_json(other, NULL, NULL, NULL, 0, &json));
  assert_non_null(strstr(json, "GPU-5555"));
  free(json);
  hct__db_close(db);
  hct__db_close(other);
}

static void test_busy(void **state) {
  fixture_t *f = *state;
  hct_db_t *a = open_ok(f->path, 0), *b = open_ok(f->path, 0);
  assert_ok(hct__db_begin(a));
  /* The 5 s timeout of an open is kept short here so the test is quick. */
  sqlite3_busy_timeout(hct__db_sqlite(b), 50);
  hct_db_trial_t t = trial_make("GPU-busy", "rowsplit", 2);
  assert_int_equal(hct__db_trial_add(b, &t, NULL), HCT_EBUSY);
  assert_non_null(strstr(hct_last_error(), f->path));
  assert_non_null(strstr(hct_last_error(), "locked"));
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  keys_fill(&d.keys, "GPU-busy");
  strcpy(d.op, "hc_read");
  strcpy(d.parity, "bitwise");
  strcpy(d.variant, "v");
  d.tmin = d.tmax = 1;
  assert_int_equal(hct__db_decisions_replace(b, &d, 1), HCT_EBUSY);
  assert_ok(hct__db_commit(a));
  assert_ok(hct__db_trial_add(b, &t, NULL));
  assert_ok(hct__db_decisions_replace(b, &d, 1));
  hct__db_close(a);
  hct__db_close(b);
}

/* Processes that open a fresh file at once (a probe, its workers, the
 * daemon) must agree on one schema: the migration re-reads the version
 * under the write lock. */
static void test_concurrent_first_open(void **state) {
  fixture_t *f = *state;
  enum { PROCS = 6, ROUNDS = 5 };
  for (int round = 0; round < ROUNDS; round++) {
    char path[160];
    snprintf(path, sizeof path, "%s/c%d.db", f->dir, round);
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
      pids[i] = fork();
      assert_true(pids[i] >= 0);
      if (pids[i] == 0) {
        hct_db_t *db;
        hct_db_trial_t t = trial_make("GPU-c", "rowsplit", i + 1);
        if (hct__db_open(path, 0, &db) != 0 || hct__db_trial_add(db, &t, NULL) != 0) {
          fprintf(stderr, "child %d: %s\n", i, hct_last_error());
          _exit(1);
        }
        hct__db_close(db);
        _exit(0);
      }
    }
    for (int i = 0; i < PROCS; i++) {
      int status;
      assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
      assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    hct_db_t *db = open_ok(path, HCT_DB_READONLY);
    char *json;
    assert_ok(hct__db_trials_json(db, NULL, NULL, NULL, 0, &json));
    json_t *arr = json_loads(json, 0, NULL);
    assert_int_equal(json_array_size(arr), PROCS);
    json_decref(arr);
    free(json);
    hct__db_close(db);
  }
}

/* ---- round trips -------------------------------------------------------- */

static void test_devices(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_keys_t k;
  keys_fill(&k, "GPU-aaaa");
  assert_ok(hct__db_device_upsert(db, &k, "NVIDIA H200", "sm_90", "{\"sms\":132}"));
  assert_ok(hct__db_device_upsert(db, &k, "NVIDIA H200 NVL", "sm_90", NULL));
  keys_fill(&k, "GPU-bbbb");
  assert_ok(hct__db_device_upsert(db, &k, "Other", "sm_80", "{}"));
  hct_db_device_t *d;
  int n;
  assert_ok(hct__db_devices_list(db, &d, &n));
  assert_int_equal(n, 2);
  assert_string_equal(d[0].uuid, "GPU-aaaa");
  assert_string_equal(d[0].name, "NVIDIA H200 NVL");
  assert_string_equal(d[0].host, "host-a");
  assert_string_equal(d[0].arch, "sm_90");
  assert_null(d[0].fingerprint_json);
  assert_true(d[0].first_seen > 0 && d[0].last_seen >= d[0].first_seen);
  assert_string_equal(d[1].uuid, "GPU-bbbb");
  assert_string_equal(d[1].fingerprint_json, "{}");
  hct__db_devices_free(d, n);
  hct__db_close(db);
}

static void test_runs(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_keys_t k;
  keys_fill(&k, "GPU-aaaa");
  char id1[33], id2[33];
  assert_ok(hct__db_run_begin(db, &k, "hc_read", "--tokens 1-4", id1));
  assert_ok(hct__db_run_begin(db, &k, "hc_read", NULL, id2));
  assert_int_equal(strlen(id1), 32);
  assert_string_not_equal(id1, id2);
  assert_ok(hct__db_run_end(db, id1, "done"));
  assert_int_equal(hct__db_run_end(db, "0000", "done"), HCT_ENOENT);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(hct__db_sqlite(db), "SELECT status, ended_at FROM runs"
                                      " WHERE id = ?", -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_text(st, 1, id1, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "done");
  assert_true(sqlite3_column_int64(st, 1) > 0);
  sqlite3_finalize(st);
  hct__db_close(db);
}

static void test_trials(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_trial_t t = trial_make("GPU-aaaa-1234", "rowsplit", 4);
  strcpy(t.run_id, "r1");
  int64_t id1, id2, id3;
  assert_ok(hct__db_trial_add(db, &t, &id1));
  t.tokens = 8;
  assert_ok(hct__db_trial_add(db, &t, &id2));
  hct_db_trial_t p = trial_make("GPU-bbbb", "splitk", 4);
  strcpy(p.kind, "parity");
  strcpy(p.status, "parity");
  p.figures_json = NULL;
  p.log = NULL;
  p.pending = 1;
  assert_ok(hct__db_trial_add(db, &p, &id3));
  assert_true(id1 < id2 && id2 < id3);

  char *json;
  /* uuid prefix, op, tokens */
  assert_ok(hct__db_trials_json(db, "GPU-aaaa", "hc_read", NULL, 4, &json));
  json_t *arr = json_loads(json, 0, NULL);
  free(json);
  assert_int_equal(json_array_size(arr), 1);
  json_t *o = json_array_get(arr, 0);
  assert_int_equal(json_integer_value(json_object_get(o, "id")), id1);
  assert_string_equal(json_string_value(json_object_get(o, "uuid")), "GPU-aaaa-1234");
  assert_string_equal(json_string_value(json_object_get(o, "host")), "host-a");
  assert_string_equal(json_string_value(json_object_get(o, "model_key")),
                      "nvidia|NVIDIA H200|sm_90|132|143");
  assert_string_equal(json_string_value(json_object_get(o, "driver_version")), "580.1");
  assert_string_equal(json_string_value(json_object_get(o, "compiler_version")), "nvrtc 13.0");
  assert_string_equal(json_string_value(json_object_get(o, "hctune_version")), "0.1.0");
  assert_string_equal(json_string_value(json_object_get(o, "run_id")), "r1");
  assert_string_equal(json_string_value(json_object_get(o, "variant")), "rowsplit");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "params"), "ROWS")), 4);
  assert_string_equal(json_string_value(json_object_get(o, "template_hash")),
                      "0123456789abcdef0123456789abcdef");
  assert_string_equal(json_string_value(json_object_get(o, "seed")), "18364758544493064720");
  assert_int_equal(json_integer_value(json_object_get(o, "samples")), 96);
  assert_true(json_real_value(json_object_get(o, "median_us")) == 12.5);
  assert_true(json_real_value(json_object_get(o, "ci_hi_us")) == 12.75);
  assert_int_equal(json_integer_value(json_object_get(o, "converged")), 1);
  assert_true(json_is_object(json_object_get(o, "figures")));
  assert_true(json_real_value(json_object_get(json_object_get(o, "figures"), "kl_mean")) == 1e-9);
  assert_string_equal(json_string_value(json_object_get(o, "log")), "line one\nline two");
  assert_string_equal(json_string_value(json_object_get(o, "kind")), "timing");
  json_decref(arr);

  /* all, newest first */
  assert_ok(hct__db_trials_json(db, "", "", "", 0, &json));
  arr = json_loads(json, 0, NULL);
  free(json);
  assert_int_equal(json_array_size(arr), 3);
  o = json_array_get(arr, 0);
  assert_int_equal(json_integer_value(json_object_get(o, "id")), id3);
  assert_int_equal(json_integer_value(json_object_get(o, "pending")), 1);
  assert_true(json_is_null(json_object_get(o, "figures")));
  assert_true(json_is_null(json_object_get(o, "log")));
  assert_string_equal(json_string_value(json_object_get(o, "status")), "parity");
  json_decref(arr);

  /* variant filter, and one that matches nothing */
  assert_ok(hct__db_trials_json(db, NULL, NULL, "splitk", 0, &json));
  arr = json_loads(json, 0, NULL);
  free(json);
  assert_int_equal(json_array_size(arr), 1);
  json_decref(arr);
  assert_ok(hct__db_trials_json(db, "GPU-zz", NULL, NULL, 0, &json));
  assert_string_equal(json, "[]");
  free(json);
  hct__db_close(db);
}

static hct_db_decision_t decision(const char *uuid, const char *parity, int tmin, int tmax,
                                  const char *variant) {
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  keys_fill(&d.keys, uuid);
  strcpy(d.op, "hc_read");
  hct__strlcpy(d.parity, parity, sizeof d.parity);
  d.tmin = tmin;
  d.tmax = tmax;
  hct__strlcpy(d.variant, variant, sizeof d.variant);
  strcpy(d.params, "{\"ROWS\":2}");
  strcpy(d.variant_class, "bitwise");
  strcpy(d.source, "probe");
  d.median_us = 10;
  d.baseline_us = 15;
  d.samples = 50;
  strcpy(d.evidence_json, "{\"max_abs\":0}");
  return d;
}

/* Checks the decisions of GPU-d/bitwise are exactly `want`, as
 * "tmin-tmax:variant" joined by spaces. */
static void expect_ranges(hct_db_t *db, const char *want) {
  hct_db_decision_t *d;
  int n;
  assert_ok(hct__db_decisions_list(db, &d, &n));
  char got[512] = "";
  for (int i = 0; i < n; i++) {
    if (strcmp(d[i].keys.uuid, "GPU-d") != 0 || strcmp(d[i].parity, "bitwise") != 0) continue;
    char one[64];
    snprintf(one, sizeof one, "%s%d-%d:%s", got[0] ? " " : "", d[i].tmin, d[i].tmax, d[i].variant);
    strcat(got, one);
  }
  free(d);
  assert_string_equal(got, want);
}

static void test_decisions(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_decision_t first[3] = {decision("GPU-d", "bitwise", 1, 4, "A"),
                                decision("GPU-d", "bitwise", 5, 8, "B"),
                                decision("GPU-d", "bitwise", 9, 16, "C")};
  first[0].baseline_us = 41;
  first[1].baseline_us = 42;
  first[1].decided_at = 1700000000;
  strcpy(first[1].evidence_json, "{\"from\":\"B\"}");
  assert_ok(hct__db_decisions_replace(db, first, 3));
  /* Other groups must not be touched by replacements below. */
  hct_db_decision_t kl = decision("GPU-d", "kl", 1, 16, "K");
  hct_db_decision_t other = decision("GPU-e", "bitwise", 1, 16, "E");
  assert_ok(hct__db_decisions_replace(db, &kl, 1));
  assert_ok(hct__db_decisions_replace(db, &other, 1));
  expect_ranges(db, "1-4:A 5-8:B 9-16:C");

  hct_db_decision_t mid = decision("GPU-d", "bitwise", 3, 6, "D");
  assert_ok(hct__db_decisions_replace(db, &mid, 1));
  expect_ranges(db, "1-2:A 3-6:D 7-8:B 9-16:C");
  /* The cut pieces keep their rows' figures. */
  hct_db_decision_t *cut;
  int ncut;
  assert_ok(hct__db_decisions_list(db, &cut, &ncut));
  assert_int_equal(ncut, 6);
  assert_string_equal(cut[0].variant, "A");
  assert_true(cut[0].baseline_us == 41);
  assert_string_equal(cut[2].variant, "B");
  assert_true(cut[2].baseline_us == 42);
  assert_string_equal(cut[2].evidence_json, "{\"from\":\"B\"}");
  assert_int_equal(cut[2].decided_at, 1700000000);
  free(cut);

  hct_db_decision_t inside = decision("GPU-d", "bitwise", 10, 12, "E");
  assert_ok(hct__db_decisions_replace(db, &inside, 1));
  expect_ranges(db, "1-2:A 3-6:D 7-8:B 9-9:C 10-12:E 13-16:C");

  /* Two ranges: the gap between them (not measured) keeps its answers. */
  hct_db_decision_t two[2] = {decision("GPU-d", "bitwise", 2, 5, "F"),
                              decision("GPU-d", "bitwise", 12, 14, "G")};
  assert_ok(hct__db_decisions_replace(db, two, 2));
  expect_ranges(db, "1-1:A 2-5:F 6-6:D 7-8:B 9-9:C 10-11:E 12-14:G 15-16:C");

  /* One range over everything. */
  hct_db_decision_t all = decision("GPU-d", "bitwise", 1, 16, "H");
  assert_ok(hct__db_decisions_replace(db, &all, 1));
  expect_ranges(db, "1-16:H");
  hct_db_decision_t three[3] = {decision("GPU-d", "bitwise", 1, 1, "A"),
                                decision("GPU-d", "bitwise", 2, 5, "F"),
                                decision("GPU-d", "bitwise", 12, 14, "G")};
  assert_ok(hct__db_decisions_replace(db, three, 3));
  expect_ranges(db, "1-1:A 2-5:F 6-11:H 12-14:G 15-16:H");
  /* Back to the layout the checks below expect. */
  hct_db_decision_t back[2] = {decision("GPU-d", "bitwise", 6, 11, "Z"),
                               decision("GPU-d", "bitwise", 15, 16, "C")};
  assert_ok(hct__db_decisions_replace(db, back, 2));
  expect_ranges(db, "1-1:A 2-5:F 6-11:Z 12-14:G 15-16:C");

  /* Bad input: overlapping new ranges, mixed groups. */
  hct_db_decision_t bad[2] = {decision("GPU-d", "bitwise", 1, 5, "X"),
                              decision("GPU-d", "bitwise", 5, 9, "Y")};
  assert_int_equal(hct__db_decisions_replace(db, bad, 2), HCT_EINVAL);
  bad[1] = decision("GPU-e", "bitwise", 6, 9, "Y");
  assert_int_equal(hct__db_decisions_replace(db, bad, 2), HCT_EINVAL);
  expect_ranges(db, "1-1:A 2-5:F 6-11:Z 12-14:G 15-16:C");

  hct_db_decision_t *d;
  int n;
  assert_ok(hct__db_decisions_list(db, &d, &n));
  assert_int_equal(n, 7);
  /* sorted by uuid, op, parity, tmin: GPU-d bitwise x4, GPU-d kl, GPU-e */
  assert_string_equal(d[5].parity, "kl");
  assert_string_equal(d[5].variant, "K");
  assert_string_equal(d[6].keys.uuid, "GPU-e");
  assert_string_equal(d[1].keys.host, "host-a");
  assert_string_equal(d[1].keys.model_key, "nvidia|NVIDIA H200|sm_90|132|143");
  assert_string_equal(d[1].keys.driver_version, "580.1");
  assert_string_equal(d[1].params, "{\"ROWS\":2}");
  assert_string_equal(d[1].variant_class, "bitwise");
  assert_string_equal(d[1].evidence_json, "{\"max_abs\":0}");
  assert_true(d[1].median_us == 10 && d[1].baseline_us == 15);
  assert_int_equal(d[1].samples, 50);
  assert_true(d[1].decided_at > 0);
  free(d);
  hct__db_close(db);
}

/* Schema 2: decisions and trials carry the software key; a database of
 * schema 1 (made here by taking the columns away again) migrates, keeping
 * its rows with no key, and a cut range keeps its piece's key. */
static void test_software_key_columns(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_decision_t d = decision("GPU-d", "bitwise", 1, 8, "A");
  strcpy(d.software_key, "00112233445566778899aabbccddeeff");
  strcpy(d.software_json, "{\"compiler\":\"c\",\"driver\":\"d\",\"hctune\":\"h\","
                          "\"options\":\"o\",\"template\":\"t\"}");
  assert_ok(hct__db_decisions_replace(db, &d, 1));
  hct_db_decision_t mid = decision("GPU-d", "bitwise", 3, 4, "B");
  assert_ok(hct__db_decisions_replace(db, &mid, 1));
  hct_db_trial_t t = trial_make("GPU-d", "A", 2);
  strcpy(t.software_key, d.software_key);
  strcpy(t.software_json, d.software_json);
  assert_ok(hct__db_trial_add(db, &t, NULL));
  hct_db_decision_t *list;
  int n;
  assert_ok(hct__db_decisions_list(db, &list, &n));
  assert_int_equal(n, 3);
  assert_string_equal(list[0].software_key, d.software_key); /* 1-2: A */
  assert_string_equal(list[2].software_key, d.software_key); /* 5-8: A, cut off */
  assert_string_equal(list[2].software_json, d.software_json);
  assert_string_equal(list[1].software_key, "");             /* 3-4: B, none */
  free(list);
  char *json = NULL;
  assert_ok(hct__db_trials_json(db, "GPU-d", "hc_read", "A", 2, &json));
  assert_non_null(strstr(json, "\"software_key\": \"00112233445566778899aabbccddeeff\""));
  assert_non_null(strstr(json, "\"software_json\": {"));
  free(json);
  hct__db_close(db);

  raw_exec(f->path, "DROP INDEX decisions_software;"
                    "ALTER TABLE decisions DROP COLUMN software_key;"
                    "ALTER TABLE decisions DROP COLUMN software_json;"
                    "ALTER TABLE trials DROP COLUMN software_key;"
                    "ALTER TABLE trials DROP COLUMN software_json;"
                    "PRAGMA user_version = 1;");
  db = open_ok(f->path, 0);
  int v = -1;
  assert_ok(hct__db_user_version(db, &v));
  assert_int_equal(v, 2);
  assert_ok(hct__db_decisions_list(db, &list, &n));
  assert_int_equal(n, 3);
  assert_string_equal(list[0].variant, "A");
  assert_string_equal(list[0].software_key, "");
  assert_string_equal(list[0].software_json, "");
  free(list);
  hct__db_close(db);
}

static void test_faults(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_fault_t fa;
  memset(&fa, 0, sizeof fa);
  keys_fill(&fa.keys, "GPU-f");
  strcpy(fa.op, "hc_read");
  strcpy(fa.variant, "persist");
  strcpy(fa.params, "{\"ROWS\":4}");
  strcpy(fa.template_hash, "h1");
  fa.tokens = 8;
  strcpy(fa.reason, "timeout");
  fa.log = "grid barrier timed out\nsecond line";
  assert_ok(hct__db_fault_add(db, &fa));
  hct_db_keys_t k;
  keys_fill(&k, "GPU-f");
  const char *ps = "{\"ROWS\":4}";
  /* timeout at 8: 8 and larger out, smaller in */
  assert_ok(hct__db_fault_check(db, &k, "hc_read", "persist", ps, "h1", 4));
  assert_int_equal(hct__db_fault_check(db, &k, "hc_read", "persist", ps, "h1", 8), 1);
  assert_int_equal(hct__db_fault_check(db, &k, "hc_read", "persist", ps, "h1", 16), 1);
  /* each key matters */
  assert_ok(hct__db_fault_check(db, &k, "hc_read", "persist", "{\"ROWS\":2}", "h1", 16));
  assert_ok(hct__db_fault_check(db, &k, "hc_read", "persist", ps, "h2", 16));
  assert_ok(hct__db_fault_check(db, &k, "hc_read", "other", ps, "h1", 16));
  hct_db_keys_t k2 = k;
  strcpy(k2.driver_version, "590.0");
  assert_ok(hct__db_fault_check(db, &k2, "hc_read", "persist", ps, "h1", 16));
  strcpy(k2.driver_version, k.driver_version);
  strcpy(k2.uuid, "GPU-g");
  assert_ok(hct__db_fault_check(db, &k2, "hc_read", "persist", ps, "h1", 16));

  /* a hang at 2 holds at 2 only */
  strcpy(fa.variant, "rowsplit");
  fa.tokens = 2;
  strcpy(fa.reason, "hang");
  fa.log = NULL;
  assert_ok(hct__db_fault_add(db, &fa));
  assert_int_equal(hct__db_fault_check(db, &k, "hc_read", "rowsplit", ps, "h1", 2), 1);
  assert_ok(hct__db_fault_check(db, &k, "hc_read", "rowsplit", ps, "h1", 3));
  assert_ok(hct__db_fault_check(db, &k, "hc_read", "rowsplit", ps, "h1", 1));
  /* a compile fault at 0 holds everywhere */
  strcpy(fa.variant, "splitk");
  fa.tokens = 0;
  strcpy(fa.reason, "compile");
  assert_ok(hct__db_fault_add(db, &fa));
  assert_int_equal(hct__db_fault_check(db, &k, "hc_read", "splitk", ps, "h1", 1), 1);
  assert_int_equal(hct__db_fault_check(db, &k, "hc_read", "splitk", ps, "h1", 512), 1);

  hct_db_fault_t *list;
  int n;
  assert_ok(hct__db_faults_list(db, &list, &n));
  assert_int_equal(n, 3);
  assert_string_equal(list[0].variant, "persist");
  assert_string_equal(list[0].reason, "timeout");
  assert_string_equal(list[0].log, "grid barrier timed out\nsecond line");
  assert_int_equal(list[0].tokens, 8);
  assert_string_equal(list[0].keys.driver_version, "580.1");
  assert_true(list[0].created_at > 0);
  assert_null(list[1].log);
  hct__db_faults_free(list, n);
  hct__db_close(db);
}

static void test_pins(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_db_pin_t p = {.uuid = "*", .op = "hc_read", .tmin = 1, .tmax = 4, .variant = "rowsplit",
                    .params = "{\"ROWS\":4}"};
  assert_ok(hct__db_pin_add(db, &p));
  p.tmin = 5;
  p.tmax = 8;
  strcpy(p.variant, "splitk");
  p.until = 2000000000;
  assert_ok(hct__db_pin_add(db, &p));
  hct_db_pin_t q = {.uuid = "GPU-p", .op = "hc_read", .tmin = 1, .tmax = 64, .variant = "v"};
  assert_ok(hct__db_pin_add(db, &q));
  hct_db_pin_t *list;
  int n;
  assert_ok(hct__db_pins_list(db, &list, &n));
  assert_int_equal(n, 3);
  assert_string_equal(list[0].uuid, "*");
  assert_int_equal(list[0].tmax, 4);
  assert_string_equal(list[0].params, "{\"ROWS\":4}");
  assert_int_equal(list[1].until, 2000000000);
  assert_string_equal(list[1].variant, "splitk");
  assert_string_equal(list[2].uuid, "GPU-p");
  free(list);
  /* An overlapping pin replaces the one it overlaps. */
  p.tmin = 3;
  p.tmax = 6;
  strcpy(p.variant, "persist");
  assert_ok(hct__db_pin_add(db, &p));
  assert_ok(hct__db_pins_list(db, &list, &n));
  assert_int_equal(n, 2);
  assert_string_equal(list[0].variant, "persist");
  free(list);
  assert_int_equal(hct__db_pin_remove(db, "*", "hc_read", 1, 100), 1);
  assert_ok(hct__db_pin_remove(db, "*", "hc_read", 1, 100));
  assert_int_equal(hct__db_pin_remove(db, "GPU-p", "hc_read", 64, 64), 1);
  assert_ok(hct__db_pins_list(db, &list, &n));
  assert_int_equal(n, 0);
  free(list);
  hct_db_pin_t bad = {.uuid = "*", .op = "hc_read", .tmin = 5, .tmax = 4, .variant = "v"};
  assert_int_equal(hct__db_pin_add(db, &bad), HCT_EINVAL);
  hct__db_close(db);
}

static void test_binary_store(void **state) {
  fixture_t *f = *state;
  hct_db_t *db = open_ok(f->path, 0);
  hct_binary_store_t store;
  hct__db_binary_store(db, &store);
  void *image = (void *)1;
  size_t size = 7;
  int is_ptx = -1;
  char *log = (char *)1;
  assert_int_equal(store.get(store.ctx, "feedbeef", &image, &size, &is_ptx, &log), HCT_ENOENT);
  assert_null(image);
  assert_non_null(strstr(hct_last_error(), "feedbeef"));

  static hct_op_t op;
  static hct_variant_t var;
  strcpy(op.name, "hc_read");
  strcpy(var.name, "rowsplit");
  strcpy(var.params[0].name, "ROWS");
  strcpy(var.params[1].name, "TPL");
  var.n_params = 2;
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  job.backend = HCT_BACKEND_CUDA;
  strcpy(job.arch, "sm_90");
  job.op = &op;
  job.variant = &var;
  job.point.v[0] = 4;
  job.point.v[1] = 2;
  strcpy(job.key, "feedbeef");
  strcpy(job.template_hash, "th");
  unsigned char bin[300];
  for (size_t i = 0; i < sizeof bin; i++) bin[i] = (unsigned char)(i * 7); /* has NULs */
  job.image = bin;
  job.image_size = sizeof bin;
  job.log = "warning: x";
  job.regs = 40;
  job.spill_bytes = 8;
  job.compile_ms = 12.5;
  assert_int_equal(store.put(store.ctx, &job), 0);
  assert_int_equal(store.put(store.ctx, &job), 0); /* same key twice: replaced */

  assert_int_equal(store.get(store.ctx, "feedbeef", &image, &size, &is_ptx, &log), 0);
  assert_int_equal(size, sizeof bin);
  assert_memory_equal(image, bin, sizeof bin);
  assert_int_equal(is_ptx, 0);
  assert_string_equal(log, "warning: x");
  free(image);
  free(log);

  job.is_ptx = 1;
  job.log = NULL;
  strcpy(job.key, "cafe");
  job.image = ".version 8.0";
  job.image_size = 12;
  assert_int_equal(store.put(store.ctx, &job), 0);
  assert_ok(hct__db_binary_get(db, "cafe", &image, &size, &is_ptx, &log));
  assert_int_equal(is_ptx, 1);
  assert_null(log);
  assert_string_equal(image, ".version 8.0"); /* terminated for PTX loaders */
  free(image);

  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(hct__db_sqlite(db), "SELECT count(*), max(params),"
                                      " max(regs), max(op), max(variant) FROM binaries", -1, &st,
                                      NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 2);
  assert_string_equal((const char *)sqlite3_column_text(st, 1), "{\"ROWS\":4,\"TPL\":2}");
  assert_int_equal(sqlite3_column_int(st, 2), 40);
  assert_string_equal((const char *)sqlite3_column_text(st, 3), "hc_read");
  assert_string_equal((const char *)sqlite3_column_text(st, 4), "rowsplit");
  sqlite3_finalize(st);

  job.status = HCT_ECOMPILE;
  assert_int_equal(store.put(store.ctx, &job), HCT_EINVAL);
  hct__db_close(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_schema_created, setup, teardown),
    cmocka_unit_test_setup_teardown(test_migrate_from_empty_file, setup, teardown),
    cmocka_unit_test_setup_teardown(test_readonly_open_of_old_schema, setup, teardown),
    cmocka_unit_test_setup_teardown(test_future_version_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(test_reopen_keeps_data, setup, teardown),
    cmocka_unit_test_setup_teardown(test_missing_nocreate, setup, teardown),
    cmocka_unit_test_setup_teardown(test_garbage_file, setup, teardown),
    cmocka_unit_test_setup_teardown(test_truncated_file, setup, teardown),
    cmocka_unit_test_setup_teardown(test_readonly_file, setup, teardown),
    cmocka_unit_test_setup_teardown(test_data_version, setup, teardown),
    cmocka_unit_test_setup_teardown(test_transaction, setup, teardown),
    cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
    cmocka_unit_test_setup_teardown(test_concurrent_first_open, setup, teardown),
    cmocka_unit_test_setup_teardown(test_devices, setup, teardown),
    cmocka_unit_test_setup_teardown(test_runs, setup, teardown),
    cmocka_unit_test_setup_teardown(test_trials, setup, teardown),
    cmocka_unit_test_setup_teardown(test_decisions, setup, teardown),
    cmocka_unit_test_setup_teardown(test_software_key_columns, setup, teardown),
    cmocka_unit_test_setup_teardown(test_faults, setup, teardown),
    cmocka_unit_test_setup_teardown(test_pins, setup, teardown),
    cmocka_unit_test_setup_teardown(test_binary_store, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
