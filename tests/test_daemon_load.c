/*
 * test_daemon_load.c: hctuned under hostile load and faults, each test a
 * regression test of issue 16 printing the figure it measures:
 *
 *   test_fair_pipelining   choose latency (p50, p99, max) and fallbacks of a
 *                          50 ms engine while another client pipelines
 *                          10,000 `list` requests on 3,000 decisions and
 *                          never reads
 *   test_memory_non_readers  the daemon's RSS with 40 clients pipelining
 *                          `module` requests (256 KiB images) and never
 *                          reading
 *   test_replaced_db       time from a DB replaced by rename to its answers
 *   test_pin_under_lock    the worst choose latency of other clients while a
 *                          pin waits 2 s for another process's write lock
 *   test_half_close        a 1 MB list asked with shutdown(SHUT_WR) right
 *                          after the request: every byte arrives
 *
 * The bounds asserted are looser than the goals (a 2-core machine shared
 * with other builds), yet far below what the defects gave (473 ms behind a
 * pipeliner, 1.2 GB, never picked up, 4 s behind a lock, 219,264 bytes),
 * so each test fails if its defect comes back.  Everything runs on Unix
 * sockets in a temporary folder, bounded in count and time.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "daemon_test.h"

static dt_env_t env;

#define N_CARDS 300
#define N_RANGES 10 /* 3,000 decisions */
#define BIG_IMAGE (256 << 10)
#define BIG_KEY "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"

static void card_uuid(int i, char *buf, size_t len) {
  snprintf(buf, len, "GPU-%08d-1111-2222-3333-444455556666", i);
}

/* 3,000 decisions (300 cards, ten ranges each), and card 0's T=1-4
 * decision with a 256 KiB binary for module. */
static void seed_many(const char *path) {
  hct_db_t *db;
  if (hct__db_open(path, 0, &db) < 0) dt_die("db_open");
  for (int c = 0; c < N_CARDS; c++) {
    char uuid[64];
    card_uuid(c, uuid, sizeof uuid);
    dt_seed_card(db, uuid, "Test Card");
    hct_db_decision_t d[N_RANGES];
    for (int k = 0; k < N_RANGES; k++) {
      d[k] = dt_decision(uuid, DT_MODEL, "bitwise", 4 * k + 1, 4 * k + 4, "v2", "bitwise", 2.0, 5.0);
      if (c == 0 && k == 0) hct__strlcpy(d[k].binary_key, BIG_KEY, sizeof d[k].binary_key);
    }
    if (hct__db_decisions_replace(db, d, N_RANGES) < 0) dt_die("decisions_replace");
  }
  hct_op_t *op;
  if (hct__manifest_load(env.kernels, "hc_read", &op) < 0) dt_die("manifest_load");
  hct_binary_store_t store;
  hct__db_binary_store(db, &store);
  unsigned char *img = malloc(BIG_IMAGE);
  dt_image(img, BIG_IMAGE);
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  hct__strlcpy(job.key, BIG_KEY, sizeof job.key);
  hct__strlcpy(job.arch, "sm_90", sizeof job.arch);
  hct__strlcpy(job.template_hash, "0123456789abcdef0123456789abcdef", sizeof job.template_hash);
  job.op = op;
  job.variant = hct__variant_find(op, "v2");
  job.image = img;
  job.image_size = BIG_IMAGE;
  if (store.put(store.ctx, &job) < 0) dt_die("binary put");
  free(img);
  hct__manifest_free(op);
  hct__db_close(db);
}

static int group_setup(void **state) {
  dt_env_init(&env);
  seed_many(env.db);
  dt_start(&env, NULL);
  return 0;
}

static int group_teardown(void **state) {
  dt_stop(&env);
  dt_env_remove(&env);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- a client that pipelines and never reads ------------------------------ */

typedef struct hog_s {
  pthread_t th;
  int fd;
  const char *line;
  int count;
  int sent;         /* requests fully written */
  volatile int stop;
} hog_t;

/* Writes `count` request lines as fast as the socket takes them; gives up
 * when told to stop (its sends block once the daemon stops reading it). */
static void *hog_main(void *arg) {
  hog_t *h = arg;
  size_t n = strlen(h->line);
  for (h->sent = 0; h->sent < h->count && !h->stop; h->sent++) {
    size_t off = 0;
    while (off < n && !h->stop) {
      struct pollfd p = {.fd = h->fd, .events = POLLOUT};
      if (poll(&p, 1, 50) <= 0) continue;
      ssize_t k = send(h->fd, h->line + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (k <= 0) return NULL;
      off += (size_t)k;
    }
  }
  return NULL;
}

static void hog_start(hog_t *h, const char *line, int count) {
  memset(h, 0, sizeof *h);
  h->fd = dt_connect(env.sock);
  assert_true(h->fd >= 0);
  h->line = line;
  h->count = count;
  assert_int_equal(pthread_create(&h->th, NULL, hog_main, h), 0);
}

static void hog_stop(hog_t *h) {
  h->stop = 1;
  pthread_join(h->th, NULL);
  close(h->fd);
}

/* 600 choose calls of a 50 ms engine: latencies sorted into ms[], the
 * fallbacks counted. */
static int engine_calls(double *ms, int n) {
  hct_client_t *c;
  assert_int_equal(hct_connect(env.sock, 50, &c), 0);
  int fallbacks = 0;
  char uuid[64];
  for (int i = 0; i < n; i++) {
    card_uuid(i % N_CARDS, uuid, sizeof uuid);
    hct_choice_t ch;
    double t0 = dt_now_ms();
    int rc = hct_choose(c, "hc_read", 1 + i % 40, uuid, NULL, &ch);
    ms[i] = dt_now_ms() - t0;
    if (rc == HCT_FALLBACK) fallbacks++;
    else if (rc != 0 || strcmp(ch.variant, "v2") != 0) fail_msg("call %d: rc %d variant %s", i, rc, ch.variant);
    usleep(1000);
  }
  hct_close(c);
  qsort(ms, (size_t)n, sizeof *ms, cmp_double);
  return fallbacks;
}

/* engine_calls, up to three times until a run has no fallback: one stall
 * of this test process past the 50 ms timeout (a loaded machine, two make
 * checks side by side) falls back for the next second, 360 calls once,
 * while a daemon that is slow is slow in every run.  The last run is kept. */
static int engine_runs(double *ms, int n) {
  int fb = engine_calls(ms, n);
  for (int run = 1; run < 3 && fb > 0; run++) fb = engine_calls(ms, n);
  return fb;
}

static void test_fair_pipelining(void **state) {
  enum { CALLS = 600 };
  static double alone[CALLS], behind[CALLS];
  int fb0 = engine_runs(alone, CALLS);
  hog_t h;
  hog_start(&h, "{\"cmd\":\"list\"}\n", 10000);
  usleep(200000); /* the hog's burst is in */
  int fb1 = engine_runs(behind, CALLS);
  int sent = h.sent;
  hog_stop(&h);
  fprintf(stderr,
          "choose of a 50 ms engine, %d calls: alone p50 %.3f p99 %.3f max %.3f ms, %d fallbacks; "
          "behind a client pipelining %d list requests (3,000 decisions) without reading: p50 "
          "%.3f p99 %.3f max %.3f ms, %d fallbacks\n",
          CALLS, alone[CALLS / 2], alone[CALLS * 99 / 100], alone[CALLS - 1], fb0, sent,
          behind[CALLS / 2], behind[CALLS * 99 / 100], behind[CALLS - 1], fb1);
  assert_int_equal(fb0, 0);
  assert_int_equal(fb1, 0);
  /* The goal is 2 ms on an idle machine; a shared one gets room. */
  assert_true(behind[CALLS * 99 / 100] < 20.0);
  /* The daemon is still whole: status answers. */
  int fd = dt_connect(env.sock);
  static dt_reader_t r;
  json_t *j = dt_ask(fd, &r, "{\"cmd\":\"status\"}");
  assert_non_null(j);
  assert_true(json_is_true(json_object_get(j, "ok")));
  json_decref(j);
  close(fd);
}

/* 40 clients pipelining `line` and never reading: the daemon's peak RSS
 * over three seconds, while another client is still served. */
static long non_readers(const char *line, int *sent_out) {
  enum { CLIENTS = 40 };
  static hog_t h[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) hog_start(&h[i], line, 5000);
  long peak = 0;
  for (int t = 0; t < 30; t++) {
    usleep(100000);
    long kb = dt_rss_kb(env.pid);
    if (kb > peak) peak = kb;
  }
  hct_client_t *c;
  assert_int_equal(hct_connect(env.sock, 1000, &c), 0);
  hct_choice_t ch;
  char uuid[64];
  card_uuid(3, uuid, sizeof uuid);
  assert_int_equal(hct_choose(c, "hc_read", 2, uuid, NULL, &ch), 0);
  hct_close(c);
  int sent = 0;
  for (int i = 0; i < CLIENTS; i++) {
    sent += h[i].sent;
    hog_stop(&h[i]);
  }
  *sent_out = sent;
  usleep(300000); /* their connections closed */
  return peak;
}

static void test_memory_non_readers(void **state) {
  char line[200];
  char uuid[64];
  card_uuid(0, uuid, sizeof uuid);
  snprintf(line, sizeof line, "{\"cmd\":\"module\",\"op\":\"hc_read\",\"tokens\":2,\"device\":\"%s\"}\n",
           uuid);
  long base = dt_rss_kb(env.pid);
  int sent_m, sent_l;
  long peak_m = non_readers(line, &sent_m);
  long peak_l = non_readers("{\"cmd\":\"list\"}\n", &sent_l);
  fprintf(stderr,
          "hctuned resident: %ld kB before; at most %ld kB while 40 clients pipelined %d module "
          "requests (%d KiB images) and never read; at most %ld kB while 40 pipelined %d list "
          "requests (1.4 MB each) and never read\n",
          base, peak_m, sent_m, BIG_IMAGE >> 10, peak_l, sent_l);
  long peak = peak_m > peak_l ? peak_m : peak_l;
#if defined(__SANITIZE_ADDRESS__)
  if (peak >= 128 * 1024) {
    fprintf(stderr, "test_memory_non_readers: skipped: under AddressSanitizer the resident size "
                    "counts its shadow and quarantine; the plain build checks 128 MB\n");
    skip();
  }
#endif
  assert_true(peak > 0 && peak < 128 * 1024);
}

/* ---- a DB replaced by rename ---------------------------------------------- */

static void test_replaced_db(void **state) {
  /* A daemon of its own with the default watch period (500 ms). */
  dt_env_t e;
  dt_env_init(&e);
  dt_seed(&e);
  static const char *const extra[] = {"--poll-ms", "500", NULL};
  dt_start(&e, extra);
  hct_client_t *c;
  assert_int_equal(hct_connect(e.sock, 1000, &c), 0);
  hct_choice_t ch;
  assert_int_equal(hct_choose(c, "hc_read", 12, DT_CARD, NULL, &ch), 0);
  assert_int_equal(ch.source, HCT_SOURCE_DEFAULT);
  double worst = 0;
  for (int round = 0; round < 3; round++) {
    /* A new file, as `install`, `mv` or rsync leave it: another inode. */
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s/new.db", e.dir);
    unlink(tmp);
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", e.db, tmp);
    assert_int_equal(system(cmd), 0);
    hct_db_t *db;
    assert_int_equal(hct__db_open(tmp, 0, &db), 0);
    hct_db_decision_t d = dt_decision(DT_CARD, DT_MODEL, "bitwise", 9, 16,
                                      round % 2 ? "v2" : "v3", round % 2 ? "bitwise" : "kl", 1.0, 2.0);
    assert_int_equal(hct__db_decisions_replace(db, &d, 1), 0);
    hct__db_close(db);
    /* Its WAL is folded in by the close; what is left beside it goes. */
    snprintf(cmd, sizeof cmd, "rm -f '%s-wal' '%s-shm'", tmp, tmp);
    assert_int_equal(system(cmd), 0);
    double t0 = dt_now_ms();
    assert_int_equal(rename(tmp, e.db), 0);
    const char *want = round % 2 ? "v2" : "v3";
    do {
      usleep(5000);
      assert_int_equal(hct_choose(c, "hc_read", 12, DT_CARD, NULL, &ch), 0);
    } while (strcmp(ch.variant, want) != 0 && dt_now_ms() - t0 < 5000);
    double took = dt_now_ms() - t0;
    worst = took > worst ? took : worst;
    fprintf(stderr, "replaced DB (rename, new inode) served after %.0f ms (poll 500 ms)\n", took);
    assert_string_equal(ch.variant, want);
  }
  assert_true(worst <= 1000);
  hct_close(c);
  dt_stop(&e);
  dt_env_remove(&e);
}

/* ---- a pin behind another process's write lock ---------------------------- */

typedef struct prober_s {
  pthread_t th;
  volatile int stop;
  double worst;
  int calls, fallbacks;
} prober_t;

static void *prober_main(void *arg) {
  prober_t *p = arg;
  hct_client_t *c;
  if (hct_connect(env.sock, 50, &c) != 0) return NULL;
  char uuid[64];
  card_uuid(1, uuid, sizeof uuid);
  while (!p->stop) {
    hct_choice_t ch;
    double t0 = dt_now_ms();
    int rc = hct_choose(c, "hc_read", 3, uuid, NULL, &ch);
    double ms = dt_now_ms() - t0;
    if (ms > p->worst) p->worst = ms;
    if (rc == HCT_FALLBACK) p->fallbacks++;
    p->calls++;
    usleep(2000);
  }
  hct_close(c);
  return NULL;
}

static void test_pin_under_lock(void **state) {
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t locker = fork();
  if (locker == 0) {
    /* Another process holds the DB's write lock for two seconds, as the
     * sqlite3 shell's BEGIN IMMEDIATE does. */
    sqlite3 *db;
    if (sqlite3_open_v2(env.db, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
      _exit(1);
    if (write(go[1], "x", 1) != 1) _exit(1);
    usleep(2000000);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    _exit(0);
  }
  char x;
  assert_int_equal(read(go[0], &x, 1), 1);
  prober_t p;
  memset(&p, 0, sizeof p);
  assert_int_equal(pthread_create(&p.th, NULL, prober_main, &p), 0);
  int fd = dt_connect(env.sock);
  static dt_reader_t r;
  char uuid[64];
  card_uuid(2, uuid, sizeof uuid);
  char line[300];
  snprintf(line, sizeof line,
           "{\"id\":1,\"cmd\":\"pin\",\"device\":\"%s\",\"op\":\"hc_read\",\"variant\":\"v1\","
           "\"params\":{\"W\":8}}",
           uuid);
  double t0 = dt_now_ms();
  json_t *j = dt_ask(fd, &r, line);
  double pin_ms = dt_now_ms() - t0;
  p.stop = 1;
  pthread_join(p.th, NULL);
  int st;
  waitpid(locker, &st, 0);
  assert_non_null(j);
  fprintf(stderr,
          "pin behind another process's 2 s write lock answered after %.0f ms (ok %s); meanwhile "
          "%d choose calls of another client: worst %.2f ms, %d fallbacks\n",
          pin_ms, json_is_true(json_object_get(j, "ok")) ? "true" : "false", p.calls, p.worst,
          p.fallbacks);
  assert_true(json_is_true(json_object_get(j, "ok")));
  json_decref(j);
  assert_true(pin_ms >= 1500);
  assert_true(p.calls > 100);
  assert_int_equal(p.fallbacks, 0);
  /* The goal is 10 ms on an idle machine; the defect was the whole 2 s
   * (4 s in the report), and a machine shared with builds gets room. */
  assert_true(p.worst < 100.0);
  /* The pin answered ok is served at once. */
  hct_client_t *c;
  assert_int_equal(hct_connect(env.sock, 1000, &c), 0);
  hct_choice_t ch;
  assert_int_equal(hct_choose(c, "hc_read", 3, uuid, NULL, &ch), 0);
  if (ch.source != HCT_SOURCE_PIN) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "tail -5 '%s' >&2", env.log);
    if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
    fail_msg("T=3 on %s after the pin: %s %s, source %s", uuid, ch.variant, ch.params,
             hct_source_name(ch.source));
  }
  assert_string_equal(ch.params, "{\"W\":8}");
  hct_close(c);
  snprintf(line, sizeof line, "{\"cmd\":\"unpin\",\"device\":\"%s\",\"op\":\"hc_read\"}", uuid);
  j = dt_ask(fd, &r, line);
  if (!json_is_true(json_object_get(j, "ok")))
    fail_msg("unpin: %s", dt_str(json_object_get(j, "error"), "message"));
  json_decref(j);
  close(fd);
  close(go[0]);
  close(go[1]);
}

/* ---- half-close ------------------------------------------------------------ */

static void test_half_close(void **state) {
  for (int trial = 0; trial < 5; trial++) {
    int fd = dt_connect(env.sock);
    assert_true(fd >= 0);
    assert_int_equal(dt_sends(fd, "{\"id\":9,\"cmd\":\"list\"}\n{\"cmd\":\"status\"}\n"), 0);
    /* What socat and shell clients do: nothing more to send. */
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    size_t cap = 8 << 20, len = 0;
    char *buf = malloc(cap);
    double t0 = dt_now_ms();
    for (;;) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      if (poll(&p, 1, 5000) <= 0) break;
      ssize_t k = recv(fd, buf + len, cap - len, 0);
      if (k <= 0) break;
      len += (size_t)k;
      if (len == cap) break;
    }
    close(fd);
    /* Two lines: the list, then the status. */
    char *nl = memchr(buf, '\n', len);
    assert_non_null(nl);
    json_error_t jerr;
    json_t *j = json_loadb(buf, (size_t)(nl - buf), 0, &jerr);
    if (j == NULL) fail_msg("list reply of %zu bytes is not whole: %s", len, jerr.text);
    assert_int_equal(json_array_size(json_object_get(j, "decisions")), N_CARDS * N_RANGES);
    json_decref(j);
    json_t *s = json_loadb(nl + 1, len - (size_t)(nl + 1 - buf) - 1, 0, &jerr);
    assert_non_null(s);
    assert_true(json_is_true(json_object_get(s, "ok")));
    json_decref(s);
    assert_int_equal(buf[len - 1], '\n');
    if (trial == 0)
      fprintf(stderr, "half-closed list: %zu bytes arrived whole in %.0f ms, then the status line\n",
              len, dt_now_ms() - t0);
    free(buf);
  }
}

int main(void) {
  unsetenv("HCTUNE_FORCE");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fair_pipelining), cmocka_unit_test(test_memory_non_readers),
      cmocka_unit_test(test_replaced_db),     cmocka_unit_test(test_pin_under_lock),
      cmocka_unit_test(test_half_close),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
