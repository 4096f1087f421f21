/*
 * test_db_crash.c: a probe killed at any moment keeps every trial it
 * committed, and the file stays sound.
 *
 * A child opens the database (creating it in the first round), then adds
 * trials in a loop and, after each commit returns, writes the trial's id
 * and seed to a pipe.  The parent SIGKILLs it after a random
 * 1-50 ms, 20 times on the same database, then checks integrity and that
 * every reported trial is there with its seed.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "db.h"

#define ROUNDS 20

typedef struct {
  int64_t id;
  uint64_t seed;
} report_t;

static void child(const char *path, int fd, uint64_t rng) {
  hct_db_t *db;
  if (hct__db_open(path, 0, &db) != 0) {
    fprintf(stderr, "child: %s\n", hct_last_error());
    _exit(3);
  }
  /* Ready: the parent may time its kill from here. */
  report_t ready = {-1, 0};
  if (write(fd, &ready, sizeof ready) != (ssize_t)sizeof ready) _exit(5);
  hct_db_trial_t t;
  memset(&t, 0, sizeof t);
  strcpy(t.keys.host, "crash-host");
  strcpy(t.keys.uuid, "GPU-crash");
  strcpy(t.op, "hc_read");
  strcpy(t.variant, "rowsplit");
  strcpy(t.kind, "timing");
  strcpy(t.status, "pass");
  /* Logs of varying size make commits span several pages, so kills land
   * inside page writes as well as between them. */
  static char log[9000];
  for (int i = 0;; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    t.seed = rng;
    t.tokens = i % 64 + 1;
    size_t n = (size_t)(rng % (sizeof log - 1));
    memset(log, 'a' + i % 26, n);
    log[n] = '\0';
    t.log = log;
    int64_t id;
    if (hct__db_trial_add(db, &t, &id) != 0) {
      fprintf(stderr, "child: %s\n", hct_last_error());
      _exit(4);
    }
    report_t r = {id, t.seed};
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(5);
  }
}

static void test_kill_during_writes(void **state) {
  (void)state;
  char dir[] = "/tmp/hct_test_crash.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/crash.db", dir);
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  report_t *reports = NULL;
  size_t n_reports = 0, cap = 0;
  int kills_mid_run = 0;

  for (int round = 0; round < ROUNDS; round++) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    uint64_t rng = ((uint64_t)rand() << 32 | (unsigned)rand()) | 1;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      child(path, fds[1], rng);
    }
    close(fds[1]);
    /* Odd rounds time the kill from the child's open, so that a loaded
     * machine still kills mid-writes; even rounds from the fork, so that
     * kills land in the open and the migration too. */
    report_t ready = {0, 0};
    if (round % 2 == 1)
      assert_int_equal(read(fds[0], &ready, sizeof ready), sizeof ready);
    struct timespec delay = {0, (long)(1 + rand() % 50) * 1000000L};
    nanosleep(&delay, NULL);
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status)) fail_msg("child exited with %d before the kill", WEXITSTATUS(status));
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    size_t before = n_reports;
    for (;;) {
      report_t r;
      ssize_t got = read(fds[0], &r, sizeof r);
      if (got == 0) break;
      if (got < 0 && errno == EINTR) continue;
      /* A write of 16 bytes to a pipe is atomic: never a half report. */
      assert_int_equal(got, sizeof r);
      if (r.id == -1) continue; /* the ready message */
      if (n_reports == cap) {
        cap = cap ? cap * 2 : 1024;
        reports = realloc(reports, cap * sizeof *reports);
        assert_non_null(reports);
      }
      reports[n_reports++] = r;
    }
    close(fds[0]);
    if (n_reports > before) kills_mid_run++;
  }

  hct_db_t *db;
  int err = hct__db_open(path, 0, &db);
  if (err) fail_msg("reopen: %s", hct_last_error());
  err = hct__db_integrity_check(db);
  if (err) fail_msg("%s", hct_last_error());
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(hct__db_sqlite(db), "SELECT seed FROM trials WHERE id = ?",
                                      -1, &st, NULL), SQLITE_OK);
  for (size_t i = 0; i < n_reports; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, reports[i].id);
    if (sqlite3_step(st) != SQLITE_ROW)
      fail_msg("trial %lld was reported committed but is missing", (long long)reports[i].id);
    assert_int_equal((uint64_t)sqlite3_column_int64(st, 0), reports[i].seed);
  }
  sqlite3_finalize(st);
  printf("  %zu committed trials over %d kills (%d after at least one commit), all present\n",
         n_reports, ROUNDS, kills_mid_run);
  /* The test means nothing if no child ever got a trial in. */
  assert_true(n_reports > 0);
  hct__db_close(db);
  free(reports);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_kill_during_writes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
