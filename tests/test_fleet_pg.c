/*
 * test_fleet_pg.c: the live fleet against a real PostgreSQL server.
 *
 * The test starts a throwaway cluster of its own: initdb into a temporary
 * folder, the server on a Unix socket in that folder and no TCP
 * (listen_addresses=''), run as user nobody when the test runs as root
 * (PostgreSQL refuses root), and stops it at the end.  Each case works in a
 * database of its own.  Without the server's programs (Debian's
 * postgresql package) every case skips, saying so.
 *
 * Cases: init and migration, push and idempotence, 8 pushers at once,
 * a server killed in the middle of a push, hostile rows, the roles of
 * docs/fleet-live.md, the H200 probe fixture, a simulated fleet of 1,000
 * hosts x 10 card models (push, recompute and pull times printed), and the
 * daemon's pull (tests of daemon/fleet_pull.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fleet_pg.h"

#ifndef HCT_NO_PG
#include "cli_test.h"
#include "daemon_test.h"
#include <libpq-fe.h>

#define MODEL_A "nvidia|Fleet Card A|sm_90|132|141"
#define DRIVER "580.1"
#define COMPILER "nvrtc 13.0"

/* ---- the throwaway cluster ------------------------------------------------ */

static struct {
  int ready;            /* the server runs */
  char why[256];        /* why not, for the skips */
  char bin[256];        /* PostgreSQL's programs */
  char dir[128];        /* data, socket and log */
  char runas[64];       /* "runuser -u nobody -- " as root, else "" */
  char work[160];       /* local DBs and outputs, ours */
  int next_db;
} PG;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int st = system(cmd);
  return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

static int server_start(void) {
  return sh("%s'%s/pg_ctl' -D '%s/data' -l '%s/log' -w -t 30 -o \"-c listen_addresses='' -k "
            "'%s' -c fsync=off -c full_page_writes=off "
            "-c max_connections=60\" start >/dev/null",
            PG.runas, PG.bin, PG.dir, PG.dir, PG.dir);
}

/* mode: "fast", or "immediate" (the server killed: no shutdown
 * checkpoint, clients cut off mid-transaction). */
static int server_stop(const char *mode) {
  return sh("%s'%s/pg_ctl' -D '%s/data' -m %s -w stop >/dev/null 2>&1", PG.runas, PG.bin, PG.dir,
            mode);
}

/* The server stopped however the program ends: a failed assertion ends a
 * case, but an alarm, tests/run.sh's timeout or a sanitizer's abort end
 * the program, and a server left running would outlive it.  The command
 * is made once, so the handler only forks and execs. */
static char stop_cmd[1024];
static volatile pid_t live_daemon_pid; /* a daemon of the running case */

static void on_fatal(int sig) {
  if (live_daemon_pid > 0) kill(live_daemon_pid, SIGKILL);
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[] = {"/bin/sh", "-c", stop_cmd, NULL};
    execv("/bin/sh", argv);
    _exit(127);
  }
  if (pid > 0) waitpid(pid, NULL, 0);
  signal(sig, SIG_DFL);
  raise(sig);
}

static int cluster_setup(void) {
  glob_t g;
  if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) != 0 || g.gl_pathc == 0) {
    snprintf(PG.why, sizeof PG.why, "no PostgreSQL server programs (/usr/lib/postgresql/*/bin;"
             " apt-get install postgresql, as tools/install-deps.sh does)");
    return 0;
  }
  hct__strlcpy(PG.bin, g.gl_pathv[g.gl_pathc - 1], sizeof PG.bin);
  globfree(&g);
  *strrchr(PG.bin, '/') = '\0';
  snprintf(PG.dir, sizeof PG.dir, "/tmp/hct-pg-XXXXXX");
  snprintf(PG.work, sizeof PG.work, "/tmp/hct-pgw-XXXXXX");
  if (mkdtemp(PG.dir) == NULL || mkdtemp(PG.work) == NULL) {
    snprintf(PG.why, sizeof PG.why, "mkdtemp: %s", strerror(errno));
    return 0;
  }
  chmod(PG.work, 0755);
  if (geteuid() == 0) {
    struct passwd *pw = getpwnam("nobody");
    if (pw == NULL || chown(PG.dir, pw->pw_uid, pw->pw_gid) != 0) {
      snprintf(PG.why, sizeof PG.why, "cannot hand %s to user nobody", PG.dir);
      return 0;
    }
    snprintf(PG.runas, sizeof PG.runas, "runuser -u nobody -- ");
  }
  chmod(PG.dir, 0755);
  double t0 = now_ms();
  if (sh("cd /tmp && %s'%s/initdb' -D '%s/data' -U hct --auth=trust -E UTF8 --locale=C "
         "--no-sync >'%s/initdb.log' 2>&1",
         PG.runas, PG.bin, PG.dir, PG.work) != 0) {
    snprintf(PG.why, sizeof PG.why, "initdb failed (see %s/initdb.log)", PG.work);
    return 0;
  }
  if (server_start() != 0) {
    snprintf(PG.why, sizeof PG.why, "the server did not start (see %s/log)", PG.dir);
    return 0;
  }
  snprintf(stop_cmd, sizeof stop_cmd, "%s'%s/pg_ctl' -D '%s/data' -m immediate stop "
           ">/dev/null 2>&1", PG.runas, PG.bin, PG.dir);
  static const int fatal[] = {SIGALRM, SIGTERM, SIGINT, SIGABRT, SIGSEGV};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(fatal); i++) signal(fatal[i], on_fatal);
  printf("fleet_pg: cluster in %s up in %.0f ms (%s)\n", PG.dir, now_ms() - t0, PG.bin);
  PG.ready = 1;
  return 0;
}

static int cluster_teardown(void **state) {
  (void)state;
  if (PG.dir[0] != '\0') {
    server_stop("fast");
    sh("rm -rf '%s' '%s'", PG.dir, PG.work);
  }
  return 0;
}

static int need_server(void **state) {
  (void)state;
  if (!PG.ready) {
    printf("fleet_pg: skipped: %s\n", PG.why);
    skip();
  }
  return 0;
}

/* After a case that stops the server: it runs again for the next. */
static int server_back(void **state) {
  (void)state;
  if (PG.ready && sh("%s'%s/pg_ctl' -D '%s/data' status >/dev/null 2>&1", PG.runas, PG.bin,
                     PG.dir) != 0)
    server_start();
  return 0;
}

static void url_of(const char *db, char *url, size_t len) {
  snprintf(url, len, "host=%s user=hct dbname=%s", PG.dir, db);
}

static PGconn *admin(const char *db) {
  char url[256];
  url_of(db, url, sizeof url);
  PGconn *c = PQconnectdb(url);
  if (PQstatus(c) != CONNECTION_OK) fail_msg("connect %s: %s", db, PQerrorMessage(c));
  PGresult *r = PQexec(c, "SET client_min_messages = warning");
  PQclear(r);
  return c;
}

static void sql(PGconn *c, const char *q) {
  PGresult *r = PQexec(c, q);
  ExecStatusType s = PQresultStatus(r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
    fail_msg("%s: %s", q, PQresultErrorMessage(r));
  PQclear(r);
}

/* Runs q, which must fail; returns its SQLSTATE (static buffer). */
static const char *sql_fails(PGconn *c, const char *q) {
  static char state[8];
  PGresult *r = PQexec(c, q);
  ExecStatusType s = PQresultStatus(r);
  if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) fail_msg("%s: did not fail", q);
  const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  hct__strlcpy(state, st ? st : "", sizeof state);
  PQclear(r);
  return state;
}

static long long sql_int(PGconn *c, const char *q) {
  PGresult *r = PQexec(c, q);
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
    fail_msg("%s: %s", q, PQresultErrorMessage(r));
  long long v = atoll(PQgetvalue(r, 0, 0));
  PQclear(r);
  return v;
}

/* A fresh database; its URL in url. */
static void new_db(char *name, size_t nlen, char *url, size_t ulen) {
  snprintf(name, nlen, "t%d", ++PG.next_db);
  PGconn *c = admin("postgres");
  char q[128];
  snprintf(q, sizeof q, "CREATE DATABASE %s", name);
  sql(c, q);
  PQfinish(c);
  url_of(name, url, ulen);
}

static hct_pg_t *connect_ok(const char *url, int flags) {
  hct_pg_t *p = NULL;
  int rc = hct__pg_connect(url, flags, &p);
  if (rc < 0) fail_msg("connect: %s", hct_last_error());
  return p;
}

static void init_db(char *name, size_t nlen, char *url, size_t ulen) {
  new_db(name, nlen, url, ulen);
  hct_pg_t *p = connect_ok(url, HCT_PG_NO_SCHEMA_CHECK);
  assert_int_equal(hct__pg_init(p, 0, NULL), 0);
  hct__pg_close(p);
}

/* ---- local DBs of synthetic hosts ------------------------------------------ */

/* hc_read's variants a synthetic card times, with their medians at T = 1
 * (us; more per token): the baseline, two bitwise ones, a kl one. */
static const struct {
  const char *variant;
  double us;
} synth[] = {{"v1", 10.0}, {"v2", 8.0}, {"relay", 5.0}, {"pipe", 4.0}};

#define SYNTH_T 8
#define SYNTH_TRIALS_PER_CARD ((int)HCT_ARRAY_SIZE(synth) * SYNTH_T * 2)

/*
 * A local DB at `path` of one card probed: a parity pass and a timing per
 * variant and T.  `slow` scales every timing (1: a normal card); `only`
 * (may be NULL) limits the variants to one plus the baseline.
 */
static void make_host_db(const char *path, const char *host, const char *uuid, const char *model,
                         double slow) {
  hct_db_t *db;
  assert_int_equal(hct__db_open(path, 0, &db), 0);
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  hct__strlcpy(k.host, host, sizeof k.host);
  hct__strlcpy(k.uuid, uuid, sizeof k.uuid);
  hct__strlcpy(k.model_key, model, sizeof k.model_key);
  hct__strlcpy(k.driver_version, DRIVER, sizeof k.driver_version);
  hct__strlcpy(k.compiler_version, COMPILER, sizeof k.compiler_version);
  hct__strlcpy(k.hctune_version, HCT_VERSION_STRING, sizeof k.hctune_version);
  assert_int_equal(hct__db_device_upsert(db, &k, "Fleet Card", "sm_90", "{\"sm_count\":132}"), 0);
  char run_id[33];
  assert_int_equal(hct__db_run_begin(db, &k, "hc_read", "--synthetic", run_id), 0);
  assert_int_equal(hct__db_begin(db), 0);
  for (size_t v = 0; v < HCT_ARRAY_SIZE(synth); v++)
    for (int T = 1; T <= SYNTH_T; T++)
      for (int kind = 0; kind < 2; kind++) {
        hct_db_trial_t t;
        memset(&t, 0, sizeof t);
        t.keys = k;
        hct__strlcpy(t.run_id, run_id, sizeof t.run_id);
        hct__strlcpy(t.op, "hc_read", sizeof t.op);
        hct__strlcpy(t.variant, synth[v].variant, sizeof t.variant);
        hct__strlcpy(t.params, "{}", sizeof t.params);
        hct__strlcpy(t.template_hash, "0123456789abcdef0123456789abcdef", sizeof t.template_hash);
        t.tokens = T;
        hct__strlcpy(t.kind, kind ? "timing" : "parity", sizeof t.kind);
        hct__strlcpy(t.status, "pass", sizeof t.status);
        t.seed = 42;
        if (kind) {
          double us = (synth[v].us + 0.25 * T) * slow;
          t.samples = 100;
          t.median_us = t.min_us = t.p10_us = us;
          t.p90_us = us * 1.01;
          t.ci_lo_us = us * 0.995;
          t.ci_hi_us = us * 1.005;
          t.converged = 1;
          t.figures_json = "{\"decides\":1}";
        } else {
          t.figures_json = "{\"bits_equal\":true}";
        }
        assert_int_equal(hct__db_trial_add(db, &t, NULL), 0);
      }
  assert_int_equal(hct__db_commit(db), 0);
  assert_int_equal(hct__db_run_end(db, run_id, "done"), 0);
  hct__db_close(db);
}

static void host_db_path(int i, char *path, size_t len) {
  snprintf(path, len, "%s/host%d.db", PG.work, i);
}

static int push_cli(const char *url, const char *db, char **out, char **err) {
  char args[1024];
  snprintf(args, sizeof args, "fleet push --url \"%s\" --db '%s' --json", url, db);
  char bin[512];
  snprintf(bin, sizeof bin, "%s/hctune", getenv("HCT_BIN"));
  return cli_run("", bin, PG.work, args, out, err);
}

static json_int_t jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* The server's decisions of a model as "op parity tmin-tmax variant" lines. */
static char *decisions_text(PGconn *c, const char *model) {
  const char *vals[] = {model};
  PGresult *r = PQexecParams(c,
                             "SELECT string_agg(op || ' ' || parity || ' ' || tmin || '-' || tmax"
                             " || ' ' || variant || ' ' || params, E'\\n' ORDER BY op, parity, tmin)"
                             " FROM hctune.decisions WHERE model_key = $1",
                             1, NULL, vals, NULL, NULL, 0);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  char *s = strdup(PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0));
  PQclear(r);
  return s;
}

/* ---- init and migration ---------------------------------------------------------- */

static void test_init_and_migration(void **state) {
  (void)state;
  char name[32], url[256];
  new_db(name, sizeof name, url, sizeof url);
  hct_pg_t *p = NULL;
  /* No schema yet: a checked connect says what to run. */
  assert_int_equal(hct__pg_connect(url, 0, &p), HCT_ENOENT);
  assert_non_null(strstr(hct_last_error(), "fleet init"));
  p = connect_ok(url, HCT_PG_NO_SCHEMA_CHECK);
  int from = -1, v = -1;
  /* A server of the first version, as an older hctune left it. */
  assert_int_equal(hct__pg_init(p, 1, &from), 0);
  assert_int_equal(from, 0);
  assert_int_equal(hct__pg_schema_version(p, &v), 0);
  assert_int_equal(v, 1);
  hct__pg_close(p);
  assert_int_equal(hct__pg_connect(url, 0, &p), HCT_EDBVERSION);
  assert_non_null(strstr(hct_last_error(), "older"));
  /* hctune fleet init migrates it, and again changes nothing. */
  char bin[512], args[512], *out = NULL, *err = NULL;
  snprintf(bin, sizeof bin, "%s/hctune", getenv("HCT_BIN"));
  snprintf(args, sizeof args, "fleet init --url \"%s\" --json", url);
  assert_int_equal(cli_run("", bin, PG.work, args, &out, &err), 0);
  json_t *j = json_loads(out, 0, NULL);
  assert_non_null(j);
  assert_int_equal(jint(j, "from_version"), 1);
  assert_int_equal(jint(j, "schema_version"), HCT_PG_SCHEMA_VERSION);
  json_decref(j);
  free(out);
  free(err);
  assert_int_equal(cli_run("", bin, PG.work, args, &out, &err), 0);
  j = json_loads(out, 0, NULL);
  assert_int_equal(jint(j, "from_version"), HCT_PG_SCHEMA_VERSION);
  json_decref(j);
  free(out);
  free(err);
  p = connect_ok(url, 0);
  hct__pg_close(p);
  PGconn *c = admin(name);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.schema"), HCT_PG_SCHEMA_VERSION);
  /* Four inits at once on a fresh database: all succeed, one schema. */
  char name2[32], url2[256];
  new_db(name2, sizeof name2, url2, sizeof url2);
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    kids[i] = fork();
    if (kids[i] == 0) {
      int fd = open("/dev/null", O_WRONLY);
      dup2(fd, 1);
      execl(bin, bin, "fleet", "init", "--url", url2, (char *)NULL);
      _exit(127);
    }
  }
  for (int i = 0; i < 4; i++) {
    int st;
    assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  PGconn *c2 = admin(name2);
  assert_int_equal(sql_int(c2, "SELECT count(*) FROM hctune.schema"), HCT_PG_SCHEMA_VERSION);
  PQfinish(c2);
  /* A newer server is refused, by init too. */
  sql(c, "INSERT INTO hctune.schema VALUES (99, 0)");
  assert_int_equal(hct__pg_connect(url, 0, &p), HCT_EDBVERSION);
  assert_non_null(strstr(hct_last_error(), "newer"));
  snprintf(args, sizeof args, "fleet init --url \"%s\"", url);
  assert_int_equal(cli_run("", bin, PG.work, args, &out, &err), 1);
  assert_non_null(strstr(err, "schema version 99 is newer"));
  assert_int_equal(cli_lines(err), 1);
  free(out);
  free(err);
  PQfinish(c);
}

/* ---- URLs never shown with their secrets ----------------------------------------- */

static void test_url_shown(void **state) {
  (void)state;
  char shown[512];
  hct__pg_url_shown("postgresql://pusher:s3cret@db.example:5433/fleet?sslmode=verify-full", shown,
                    sizeof shown);
  assert_null(strstr(shown, "s3cret"));
  assert_non_null(strstr(shown, "host=db.example"));
  assert_non_null(strstr(shown, "sslmode=verify-full"));
  hct__pg_url_shown("host=h password=s3cret user=u dbname=d", shown, sizeof shown);
  assert_null(strstr(shown, "s3cret"));
  assert_string_equal(shown, "host=h dbname=d user=u");
  /* libpq's parse errors quote the text: none of it is shown. */
  hct__pg_url_shown("host=h password=s3cret junk", shown, sizeof shown);
  assert_null(strstr(shown, "s3cret"));
  hct_pg_t *p;
  assert_int_equal(hct__pg_connect("host=h password=s3cret junk", 0, &p), HCT_EINVAL);
  assert_null(strstr(hct_last_error(), "s3cret"));
  /* A refused connection names the server without the password. */
  char url[512];
  snprintf(url, sizeof url, "postgresql://hct:s3cret@/nosuchdb?host=%s", PG.dir);
  assert_true(hct__pg_connect(url, 0, &p) < 0);
  assert_null(strstr(hct_last_error(), "s3cret"));
  assert_non_null(strstr(hct_last_error(), "nosuchdb"));
}

/* ---- push and idempotence ---------------------------------------------------------- */

static void test_push_idempotent(void **state) {
  (void)state;
  char name[32], url[256], path[256];
  init_db(name, sizeof name, url, sizeof url);
  host_db_path(100, path, sizeof path);
  make_host_db(path, "host-a", "GPU-a0000000-0000-0000-0000-000000000001", MODEL_A, 1.0);
  char *out, *err;
  assert_int_equal(push_cli(url, path, &out, &err), 0);
  json_t *j = json_loads(out, 0, NULL);
  assert_non_null(j);
  assert_int_equal(jint(j, "trials_new"), SYNTH_TRIALS_PER_CARD);
  assert_int_equal(jint(j, "keys_recomputed"), 1);
  json_decref(j);
  free(out);
  free(err);
  PGconn *c = admin(name);
  char *first = decisions_text(c, MODEL_A);
  /* The merge rule on one card decides what its probe would: relay for
   * bitwise, pipe (kl) for kl, over T = 1..8. */
  assert_string_equal(first, "hc_read bitwise 1-8 relay {}\nhc_read kl 1-8 pipe {}");
  long long rev = sql_int(c, "SELECT revision FROM hctune.keys");
  /* Again: nothing new, nothing recomputed. */
  assert_int_equal(push_cli(url, path, &out, &err), 0);
  j = json_loads(out, 0, NULL);
  assert_int_equal(jint(j, "trials_new"), 0);
  assert_int_equal(jint(j, "keys_recomputed"), 0);
  json_decref(j);
  free(out);
  free(err);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.trials"), SYNTH_TRIALS_PER_CARD);
  assert_int_equal(sql_int(c, "SELECT revision FROM hctune.keys"), rev);
  char *second = decisions_text(c, MODEL_A);
  assert_string_equal(first, second);
  free(first);
  free(second);
  /* fleet status: the key, its host and card, as a table and as JSON. */
  char bin[512], args[512];
  snprintf(bin, sizeof bin, "%s/hctune", getenv("HCT_BIN"));
  snprintf(args, sizeof args, "fleet status --url \"%s\" --json", url);
  assert_int_equal(cli_run("", bin, PG.work, args, &out, &err), 0);
  j = json_loads(out, 0, NULL);
  assert_non_null(j);
  assert_int_equal(jint(j, "hosts"), 1);
  assert_int_equal(jint(j, "trials"), SYNTH_TRIALS_PER_CARD);
  assert_int_equal(jint(j, "decisions"), 2);
  json_t *k = json_array_get(json_object_get(j, "keys"), 0);
  assert_string_equal(json_string_value(json_object_get(k, "model_key")), MODEL_A);
  assert_int_equal(jint(k, "cards"), 1);
  json_decref(j);
  free(out);
  free(err);
  snprintf(args, sizeof args, "fleet status --url \"%s\"", url);
  assert_int_equal(cli_run("", bin, PG.work, args, &out, &err), 0);
  assert_non_null(strstr(out, MODEL_A));
  assert_int_equal(cli_lines(out), 3);
  free(out);
  free(err);
  PQfinish(c);
}

/* ---- 8 pushers at once -------------------------------------------------------------- */

static void test_concurrent_pushers(void **state) {
  (void)state;
  enum { N = 8 };
  char name[32], url[256], path[N][256];
  init_db(name, sizeof name, url, sizeof url);
  for (int i = 0; i < N; i++) {
    char host[32], uuid[64];
    host_db_path(200 + i, path[i], sizeof path[i]);
    snprintf(host, sizeof host, "pusher-%d", i);
    snprintf(uuid, sizeof uuid, "GPU-b000000%d-0000-0000-0000-000000000000", i);
    /* Two models, so that pushers share keys and also have their own. */
    make_host_db(path[i], host, uuid, i % 2 ? MODEL_A : "nvidia|Fleet Card B|sm_90|132|141",
                 1.0 + 0.01 * i);
  }
  char bin[512];
  snprintf(bin, sizeof bin, "%s/hctune", getenv("HCT_BIN"));
  pid_t pid[N];
  for (int i = 0; i < N; i++) {
    pid[i] = fork();
    if (pid[i] == 0) {
      char out[300];
      snprintf(out, sizeof out, "%s/push%d.err", PG.work, i);
      int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      dup2(fd, 1);
      execl(bin, bin, "fleet", "push", "--url", url, "--db", path[i], (char *)NULL);
      _exit(127);
    }
  }
  for (int i = 0; i < N; i++) {
    int st;
    assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      sh("cat '%s/push%d.err' >&2", PG.work, i);
      fail_msg("pusher %d failed", i);
    }
  }
  PGconn *c = admin(name);
  /* No trial lost, none twice. */
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.trials"), N * SYNTH_TRIALS_PER_CARD);
  assert_int_equal(sql_int(c, "SELECT count(DISTINCT uid) FROM hctune.trials"),
                   N * SYNTH_TRIALS_PER_CARD);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.hosts"), N);
  /* Each key was recomputed by the last of its pushers with all of their
   * trials in the pool: its cards are all four. */
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.keys WHERE cards = 4 AND trials = "
                              "4 * 64"),
                   2);
  char *before = decisions_text(c, MODEL_A);
  hct_pg_t *p = connect_ok(url, 0);
  assert_int_equal(hct__pg_recompute(p, MODEL_A, DRIVER, COMPILER, HCT_VERSION_STRING, NULL), 0);
  hct__pg_close(p);
  char *after = decisions_text(c, MODEL_A);
  assert_string_equal(before, after);
  assert_true(strlen(before) > 0);
  free(before);
  free(after);
  PQfinish(c);
}

/* ---- a server killed in the middle of a push ------------------------------------------ */

static void test_server_killed_mid_push(void **state) {
  (void)state;
  char name[32], url[256], path[256];
  init_db(name, sizeof name, url, sizeof url);
  host_db_path(300, path, sizeof path);
  make_host_db(path, "host-killed", "GPU-c0000000-0000-0000-0000-000000000000", MODEL_A, 1.0);
  PGconn *c = admin(name);
  /* Hold the key's lock: the push uploads its rows, then waits for the
   * lock inside its transaction, with everything written but nothing
   * committed. */
  const char *key[] = {MODEL_A, DRIVER, COMPILER, HCT_VERSION_STRING};
  PGresult *r = PQexecParams(c, HCT_PG_KEY_LOCK_SQL("pg_advisory_lock"), 4, NULL, key, NULL,
                             NULL, 0);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  PQclear(r);
  char bin[512];
  snprintf(bin, sizeof bin, "%s/hctune", getenv("HCT_BIN"));
  char errf[300];
  snprintf(errf, sizeof errf, "%s/killed.err", PG.work);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    dup2(fd, 1);
    execl(bin, bin, "fleet", "push", "--url", url, "--db", path, (char *)NULL);
    _exit(127);
  }
  int waiting = 0;
  for (int i = 0; i < 500 && !waiting; i++) {
    waiting = sql_int(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT "
                         "granted") > 0;
    if (!waiting) usleep(10000);
  }
  assert_true(waiting);
  /* Killed with the lock still held: the push never got past it. */
  assert_int_equal(server_stop("immediate"), 0);
  PQfinish(c);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  char *msg;
  assert_int_equal(hct__read_file(errf, &msg, NULL), 0);
  assert_int_equal(cli_lines(msg), 1);
  assert_non_null(strstr(msg, "fleet '"));
  free(msg);
  assert_int_equal(server_start(), 0);
  c = admin(name);
  /* Nothing of the push: no trial, no host, no device, no decision. */
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.trials"), 0);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.hosts"), 0);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.devices"), 0);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.decisions"), 0);
  PQfinish(c);
  /* And the same push, run again, lands whole. */
  char *out, *err;
  assert_int_equal(push_cli(url, path, &out, &err), 0);
  free(out);
  free(err);
  c = admin(name);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.trials"), SYNTH_TRIALS_PER_CARD);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.decisions"), 2);
  PQfinish(c);
}

/* ---- hostile rows -------------------------------------------------------------------- */

/* Drops every CHECK of a table: a server that hands out what it likes. */
static void drop_checks(PGconn *c, const char *table) {
  char q[1024];
  snprintf(q, sizeof q,
           "DO $$ DECLARE r record; BEGIN FOR r IN SELECT conname FROM pg_constraint WHERE "
           "conrelid = 'hctune.%s'::regclass AND contype = 'c' LOOP EXECUTE format('ALTER TABLE "
           "hctune.%s DROP CONSTRAINT %%I', r.conname); END LOOP; END $$",
           table, table);
  sql(c, q);
}

static void test_hostile_rows(void **state) {
  (void)state;
  /* SQL_ASCII: the server stores any bytes, as a hostile one would. */
  char name[32], url[256], path[256];
  snprintf(name, sizeof name, "t%d", ++PG.next_db);
  PGconn *a = admin("postgres");
  char q[2048];
  snprintf(q, sizeof q, "CREATE DATABASE %s ENCODING 'SQL_ASCII' TEMPLATE template0", name);
  sql(a, q);
  PQfinish(a);
  url_of(name, url, sizeof url);
  hct_pg_t *p = connect_ok(url, HCT_PG_NO_SCHEMA_CHECK);
  assert_int_equal(hct__pg_init(p, 0, NULL), 0);
  hct__pg_close(p);
  /* The server's own checks refuse a pusher's hostile rows. */
  PGconn *c = admin(name);
  static const char *const bad_trials[] = {
    "uid = 'not-hex'", "tokens = -1", "kind = 'bogus'", "median_us = 'NaN'",
    "median_us = 'Infinity'", "op = 'a b'", "params = repeat('x', 300)",
  };
  sql(c, "CREATE TEMP TABLE good AS SELECT 'ab' || repeat('0', 30) AS uid, 'h' AS host, 'u' AS "
         "uuid, 'm' AS model_key, '' AS driver_version, '' AS compiler_version, '' AS "
         "hctune_version, '' AS software_key, '' AS software_json, '' AS run_id, 'hc_read' AS op,"
         " 'v1' AS variant, '{}' AS params, '' AS template_hash, '' AS binary_key, 1 AS tokens, "
         "0 AS pending, 'timing' AS kind, 'pass' AS status, 0 AS seed, 1 AS samples, "
         "1.0::float8 AS median_us, 1.0::float8 AS min_us, 1.0::float8 AS p10_us, 1.0::float8 "
         "AS p90_us, 1.0::float8 AS ci_lo_us, 1.0::float8 AS ci_hi_us, 1 AS converged, 0 AS "
         "throttled, 0 AS cold, '' AS figures_json, 0 AS created_at, 0 AS pushed_at");
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad_trials); i++) {
    sql(c, "BEGIN");
    snprintf(q, sizeof q, "UPDATE good SET %s", bad_trials[i]);
    sql(c, q);
    const char *state_ = sql_fails(c, "INSERT INTO hctune.trials SELECT * FROM good");
    assert_true(strncmp(state_, "23", 2) == 0 || strncmp(state_, "22", 2) == 0);
    sql(c, "ROLLBACK");
  }
  /* A served set: one good decision from a push, then each hostile change
   * of it refuses the whole pull, naming the row and the column. */
  host_db_path(400, path, sizeof path);
  make_host_db(path, "host-h", "GPU-d0000000-0000-0000-0000-000000000000", MODEL_A, 1.0);
  char *out, *err;
  assert_int_equal(push_cli(url, path, &out, &err), 0);
  free(out);
  free(err);
  drop_checks(c, "decisions");
  p = connect_ok(url, 0);
  const char *models[] = {MODEL_A};
  hct_fleet_t set;
  assert_int_equal(hct__pg_pull(p, models, 1, &set, NULL), 0);
  assert_int_equal(set.n_decisions, 2);
  hct__fleet_free(&set);
  static const struct {
    const char *change, *column;
  } hostile[] = {
    {"variant = repeat('v', 40)", "variant"},
    {"variant = 'rm -rf;'", "variant"},
    {"host = E'\\xff\\xfe'", "host"},
    {"driver_version = E'caf\\xc3'", "driver_version"},
    {"uuid = E'a\\x01b'", "uuid"},
    {"params = 'not json'", "params"},
    {"evidence_json = '[1,2]'", "evidence_json"},
    {"tmin = 0", "tmin"},
    {"tmax = 2000000", "tmax"},
    {"median_us = 'NaN'", "median_us"},
    {"ci_hi_us = '-Infinity'", "ci_hi_us"},
    {"baseline_us = -1", "baseline_us"},
    {"software_key = 'XYZ'", "software_key"},
    {"parity = 'fast'", "parity"},
    {"variant_class = NULL", "variant_class"},
    {"uid = 'zz'", "uid"},
  };
  /* Changes are committed, each undone from a saved copy: a transaction
   * left open here would hold locks the pull waits for. */
  sql(c, "ALTER TABLE hctune.decisions ALTER COLUMN variant_class DROP NOT NULL;"
         "CREATE TABLE saved AS SELECT * FROM hctune.decisions");
  for (size_t i = 0; i < HCT_ARRAY_SIZE(hostile); i++) {
    snprintf(q, sizeof q, "UPDATE hctune.decisions SET %s WHERE parity = 'kl'", hostile[i].change);
    sql(c, q);
    int rc = hct__pg_pull(p, models, 1, &set, NULL);
    sql(c, "DELETE FROM hctune.decisions; INSERT INTO hctune.decisions SELECT * FROM saved");
    if (rc != HCT_EPROTO) fail_msg("'%s' pulled: %d %s", hostile[i].change, rc, hct_last_error());
    char want[64];
    snprintf(want, sizeof want, "column '%s'", hostile[i].column);
    if (strchr(hct_last_error(), '\n') || !strstr(hct_last_error(), want))
      fail_msg("'%s': %s", hostile[i].change, hct_last_error());
    assert_int_equal(set.n_decisions, 0);
    assert_null(set.decisions);
  }
  /* Ranges that overlap, and one that ends before it starts. */
  sql(c, "INSERT INTO hctune.decisions SELECT md5('y'), host, uuid, model_key, driver_version,"
         " compiler_version, hctune_version, software_key, software_json, op, parity, 2, 5,"
         " variant, params, variant_class, template_hash, binary_key, source, median_us,"
         " baseline_us, ci_lo_us, ci_hi_us, samples, decided_at, run_id, evidence_json, revision"
         " FROM hctune.decisions WHERE parity = 'kl'");
  assert_int_equal(hct__pg_pull(p, models, 1, &set, NULL), HCT_EPROTO);
  assert_non_null(strstr(hct_last_error(), "overlap"));
  sql(c, "DELETE FROM hctune.decisions; INSERT INTO hctune.decisions SELECT * FROM saved");
  sql(c, "UPDATE hctune.decisions SET tmin = 5, tmax = 4 WHERE parity = 'kl'");
  assert_int_equal(hct__pg_pull(p, models, 1, &set, NULL), HCT_EPROTO);
  sql(c, "DELETE FROM hctune.decisions; INSERT INTO hctune.decisions SELECT * FROM saved");
  /* Hostile trials in a key's pool refuse the recompute, and with it the
   * push that asked for it: nothing of the push is kept. */
  drop_checks(c, "trials");
  sql(c, "UPDATE hctune.trials SET figures_json = E'{\"a\":\\x01}' WHERE tokens = 3 AND"
         " kind = 'timing' AND variant = 'relay'");
  assert_int_equal(hct__pg_recompute(p, MODEL_A, DRIVER, COMPILER, HCT_VERSION_STRING, NULL),
                   HCT_EPROTO);
  assert_non_null(strstr(hct_last_error(), "figures_json"));
  hct__pg_close(p);
  /* After all that, the good set is still served. */
  p = connect_ok(url, 0);
  assert_int_equal(hct__pg_pull(p, models, 1, &set, NULL), 0);
  assert_int_equal(set.n_decisions, 2);
  hct__fleet_free(&set);
  hct__pg_close(p);
  PQfinish(c);
}

/* ---- the roles of docs/fleet-live.md ------------------------------------------------- */

/* The GRANTs of docs/fleet-live.md, read from it: the roles the docs
 * name are the roles tested.  Every line that starts with GRANT. */
static char *docs_grants(void) {
  char *text = NULL;
  if (hct__read_file("docs/fleet-live.md", &text, NULL) != 0) fail_msg("docs/fleet-live.md");
  size_t n = strlen(text), o = 0;
  char *out = calloc(n + 1, 1);
  int count = 0;
  for (char *line = text; line != NULL && *line;) {
    char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    if (strncmp(line, "GRANT ", 6) == 0) {
      memcpy(out + o, line, len);
      o += len;
      out[o++] = '\n';
      count++;
    }
    line = nl ? nl + 1 : NULL;
  }
  free(text);
  if (count < 6) fail_msg("docs/fleet-live.md: %d GRANT lines, want the roles' 6 or more", count);
  return out;
}

static void test_roles(void **state) {
  (void)state;
  char name[32], url[256], path[256];
  init_db(name, sizeof name, url, sizeof url);
  PGconn *c = admin(name);
  /* Roles are the cluster's: made once. */
  PGresult *r = PQexec(c, "SELECT 1 FROM pg_roles WHERE rolname = 'hctune_push'");
  int exists = PQntuples(r) == 1;
  PQclear(r);
  if (!exists) sql(c, "CREATE ROLE hctune_push LOGIN; CREATE ROLE hctune_read LOGIN");
  char *grants = docs_grants();
  sql(c, grants);
  free(grants);
  host_db_path(500, path, sizeof path);
  make_host_db(path, "host-r", "GPU-e0000000-0000-0000-0000-000000000000", MODEL_A, 1.0);
  char push_url[256], read_url[256];
  snprintf(push_url, sizeof push_url, "host=%s user=hctune_push dbname=%s", PG.dir, name);
  snprintf(read_url, sizeof read_url, "host=%s user=hctune_read dbname=%s", PG.dir, name);
  char *out, *err;
  /* The reader may not push: one line, and nothing written. */
  assert_int_equal(push_cli(read_url, path, &out, &err), 1);
  assert_non_null(strstr(err, "permission denied"));
  assert_int_equal(cli_lines(err), 1);
  free(out);
  free(err);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.trials"), 0);
  /* The pusher may, twice (its second push updates hosts and devices). */
  assert_int_equal(push_cli(push_url, path, &out, &err), 0);
  free(out);
  free(err);
  assert_int_equal(push_cli(push_url, path, &out, &err), 0);
  free(out);
  free(err);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.decisions"), 2);
  /* The reader reads the decisions; neither may remove trials or change
   * the schema. */
  hct_pg_t *p = connect_ok(read_url, 0);
  const char *models[] = {MODEL_A};
  hct_fleet_t set;
  assert_int_equal(hct__pg_pull(p, models, 1, &set, NULL), 0);
  assert_int_equal(set.n_decisions, 2);
  hct__fleet_free(&set);
  json_t *j;
  assert_int_equal(hct__pg_status(p, &j), 0);
  json_decref(j);
  hct__pg_close(p);
  static const char *const users[] = {"hctune_push", "hctune_read"};
  for (int u = 0; u < 2; u++) {
    char url2[256];
    snprintf(url2, sizeof url2, "host=%s user=%s dbname=%s", PG.dir, users[u], name);
    PGconn *uc = PQconnectdb(url2);
    assert_int_equal(PQstatus(uc), CONNECTION_OK);
    assert_string_equal(sql_fails(uc, "DELETE FROM hctune.trials"), "42501");
    assert_string_equal(sql_fails(uc, "DROP TABLE hctune.trials"), "42501");
    assert_string_equal(sql_fails(uc, "UPDATE hctune.trials SET median_us = 0"), "42501");
    PQfinish(uc);
  }
  PQfinish(c);
}

/* ---- the H200 probe fixture ------------------------------------------------------------ */

#define H200_MODEL "nvidia|NVIDIA H200|sm_90|132|140"

static void fixture_path(char *buf, size_t len) {
  /* tests/run.sh runs the programs from the top of the tree. */
  char cwd[256];
  snprintf(buf, len, "%s/tests/fixtures/h200-probe.db", getcwd(cwd, sizeof cwd) ? cwd : ".");
}

static void test_h200_fixture(void **state) {
  (void)state;
  char name[32], url[256], fixture[512], copy[512];
  init_db(name, sizeof name, url, sizeof url);
  fixture_path(fixture, sizeof fixture);
  snprintf(copy, sizeof copy, "%s/h200.db", PG.work);
  assert_int_equal(sh("cp '%s' '%s' && chmod u+w '%s'", fixture, copy, copy), 0);
  char *out, *err;
  double t0 = now_ms();
  if (push_cli(url, copy, &out, &err) != 0) fail_msg("push: %s", err);
  double ms = now_ms() - t0;
  json_t *j = json_loads(out, 0, NULL);
  printf("fleet_pg: H200 probe fixture: %lld trials pushed in %.0f ms (upload %.0f, recompute "
         "%.0f)\n",
         (long long)jint(j, "trials_new"), ms,
         json_real_value(json_object_get(j, "upload_ms")),
         json_real_value(json_object_get(j, "recompute_ms")));
  assert_int_equal(jint(j, "trials_new"), 1896);
  json_decref(j);
  free(out);
  free(err);
  /* The fleet decides on one card what its probe decided there. */
  hct_db_t *db;
  assert_int_equal(hct__db_open(copy, HCT_DB_READONLY, &db), 0);
  hct_db_decision_t *d;
  int n;
  assert_int_equal(hct__db_decisions_list(db, &d, &n), 0);
  hct__db_close(db);
  hct_pg_t *p = connect_ok(url, 0);
  const char *models[] = {H200_MODEL};
  hct_fleet_t set;
  assert_int_equal(hct__pg_pull(p, models, 1, &set, NULL), 0);
  hct__pg_close(p);
  assert_int_equal(set.n_decisions, n);
  for (int i = 0; i < n; i++) {
    /* Both sorted by op, parity, tmin. */
    assert_string_equal(set.decisions[i].parity, d[i].parity);
    assert_int_equal(set.decisions[i].tmin, d[i].tmin);
    assert_int_equal(set.decisions[i].tmax, d[i].tmax);
    assert_string_equal(set.decisions[i].variant, d[i].variant);
    assert_string_equal(set.decisions[i].params, d[i].params);
    assert_string_equal(set.decisions[i].source, "fleet");
  }
  free(d);
  hct__fleet_free(&set);
}

/* ---- the simulated fleet ------------------------------------------------------------------ */

#define SIM_HOSTS 1000
#define SIM_MODELS 10

/*
 * 1,000 hosts of one card each, 100 of each of 10 card models, 64 trials a
 * card (4 variants x 8 T, parity and timing), written straight into the
 * server; two cards a model run 30% slow (outliers).  Then, timed: the
 * recompute of one key (100 cards), the push of one more host's probe into
 * a key of 100 cards, and a daemon's pull of the decisions of its card
 * model.
 */
static void test_simulated_fleet(void **state) {
  (void)state;
  char name[32], url[256], path[256];
  init_db(name, sizeof name, url, sizeof url);
  PGconn *c = admin(name);
  double t0 = now_ms();
  char q[4096];
  snprintf(q, sizeof q,
           "INSERT INTO hctune.variants VALUES ('hc_read', 'v1', 'baseline'),"
           " ('hc_read', 'v2', 'bitwise'), ('hc_read', 'relay', 'bitwise'),"
           " ('hc_read', 'pipe', 'kl');"
           "INSERT INTO hctune.hosts SELECT 'sim-' || h, '%s', 0, 0, 1"
           " FROM generate_series(0, %d) h;"
           "INSERT INTO hctune.devices SELECT 'GPU-sim-' || h, 'sim-' || h,"
           " 'nvidia|Sim Card ' || (h %% %d) || '|sm_90|132|141', 'Sim Card', 'sm_90', '%s', '%s',"
           " '%s', 0, 0 FROM generate_series(0, %d) h;"
           "INSERT INTO hctune.trials SELECT md5(h || ' ' || v.name || ' ' || t || ' ' || k),"
           " 'sim-' || h, 'GPU-sim-' || h, 'nvidia|Sim Card ' || (h %% %d) || '|sm_90|132|141',"
           " '%s', '%s', '%s', '', '', '', 'hc_read', v.name, '{}',"
           " '0123456789abcdef0123456789abcdef', '', t, 0, k, 'pass', 42,"
           " CASE WHEN k = 'timing' THEN 100 ELSE 0 END, m.us, m.us, m.us, m.us * 1.01,"
           " m.us * 0.995, m.us * 1.005, 1, 0, 0,"
           " CASE WHEN k = 'timing' THEN '{\"decides\":1}' ELSE '{}' END, 1764500000, 0"
           " FROM generate_series(0, %d) h,"
           " (VALUES ('v1', 10.0), ('v2', 8.0), ('relay', 5.0), ('pipe', 4.0)) AS v(name, us),"
           " generate_series(1, 8) t, (VALUES ('parity'), ('timing')) AS kk(k),"
           " LATERAL (SELECT CASE WHEN k = 'timing' THEN (v.us + 0.25 * t)"
           "   * (CASE WHEN (h / 10) %% 50 = 7 THEN 1.3 ELSE 1.0 + (h %% 13) * 0.001 END) ELSE 0 END"
           "   AS us) m",
           HCT_VERSION_STRING, SIM_HOSTS - 1, SIM_MODELS, DRIVER, COMPILER, HCT_VERSION_STRING,
           SIM_HOSTS - 1, SIM_MODELS, DRIVER, COMPILER, HCT_VERSION_STRING, SIM_HOSTS - 1);
  sql(c, q);
  long long ntrials = sql_int(c, "SELECT count(*) FROM hctune.trials");
  assert_int_equal(ntrials, SIM_HOSTS * SYNTH_TRIALS_PER_CARD);
  sql(c, "ANALYZE");
  double load_ms = now_ms() - t0;
  hct_pg_t *p = connect_ok(url, 0);
  /* Every key once (what the pushes of its 100 hosts would have left). */
  double rec_ms[SIM_MODELS], rec_sum = 0, rec_max = 0;
  for (int m = 0; m < SIM_MODELS; m++) {
    char model[128];
    snprintf(model, sizeof model, "nvidia|Sim Card %d|sm_90|132|141", m);
    if (hct__pg_recompute(p, model, DRIVER, COMPILER, HCT_VERSION_STRING, &rec_ms[m]) != 0)
      fail_msg("recompute of %s: %s", model, hct_last_error());
    rec_sum += rec_ms[m];
    if (rec_ms[m] > rec_max) rec_max = rec_ms[m];
  }
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.keys WHERE cards = 100"), SIM_MODELS);
  /* Two outliers a model ((h / 10) % 50 == 7), left out and flagged. */
  assert_int_equal(sql_int(c, "SELECT sum(outliers) FROM hctune.keys"), 2 * SIM_MODELS);
  assert_int_equal(sql_int(c, "SELECT count(*) FROM hctune.flags WHERE kind = 'outlier'"),
                   2 * SIM_MODELS);
  char *dec = decisions_text(c, "nvidia|Sim Card 3|sm_90|132|141");
  assert_string_equal(dec, "hc_read bitwise 1-8 relay {}\nhc_read kl 1-8 pipe {}");
  free(dec);
  /* One more host's probe, into a key of 100 cards. */
  host_db_path(600, path, sizeof path);
  make_host_db(path, "sim-new", "GPU-sim-new", "nvidia|Sim Card 3|sm_90|132|141", 1.0);
  hct_db_t *db;
  assert_int_equal(hct__db_open(path, HCT_DB_READONLY, &db), 0);
  char kernels[512];
  hct__kernels_dir(kernels, sizeof kernels);
  hct_pg_push_t st;
  assert_int_equal(hct__pg_push(p, db, kernels, &st), 0);
  hct__db_close(db);
  assert_int_equal(st.trials_new, SYNTH_TRIALS_PER_CARD);
  assert_int_equal(st.keys, 1);
  assert_int_equal(sql_int(c, "SELECT cards FROM hctune.keys WHERE model_key = 'nvidia|Sim Card "
                              "3|sm_90|132|141'"),
                   101);
  /* A daemon's pull: the decisions of its card model, on a connection of
   * its own (the connect counted apart). */
  double c0 = now_ms();
  hct_pg_t *d = connect_ok(url, 0);
  double connect_ms = now_ms() - c0;
  const char *models[] = {"nvidia|Sim Card 5|sm_90|132|141"};
  hct_fleet_t set;
  double pull_ms = 1e9;
  for (int i = 0; i < 5; i++) {
    double p0 = now_ms();
    int64_t rev;
    assert_int_equal(hct__pg_pull(d, models, 1, &set, &rev), 0);
    double ms = now_ms() - p0;
    if (ms < pull_ms) pull_ms = ms;
    assert_int_equal(set.n_decisions, 2);
    assert_true(rev > 0);
    hct__fleet_free(&set);
  }
  hct__pg_close(d);
  hct__pg_close(p);
  printf("fleet_pg: simulated fleet: %d hosts x %d card models, %lld trials (loaded in %.0f ms)\n",
         SIM_HOSTS, SIM_MODELS, ntrials, load_ms);
  printf("fleet_pg:   recompute of one key (100 cards, 6400 trials): %.1f ms mean, %.1f ms max\n",
         rec_sum / SIM_MODELS, rec_max);
  printf("fleet_pg:   push of one host's probe (%d trials) into that key: %.1f ms (upload %.1f, "
         "recompute %.1f)\n",
         st.trials, st.total_ms, st.upload_ms, st.recompute_ms);
  printf("fleet_pg:   a daemon's pull of one model's decisions: %.2f ms (connect %.1f ms)\n",
         pull_ms, connect_ms);
  PQfinish(c);
}

/* ---- daemons with --fleet-url ------------------------------------------------------------ */

/* The synthetic variants as a manifest of the daemon's kernels folder, so
 * that the pulled rows pass the daemon's manifest check. */
static const char synth_manifest[] =
    "{\"op\":\"hc_read\",\"tokens\":[1,8],\"constants\":{\"N\":1024},"
    "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"
    "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*N\"}],\"variants\":["
    "{\"name\":\"v1\",\"template\":\"v1.cu\",\"class\":\"baseline\",\"reference\":null,"
    "\"launches\":[{\"entry\":\"k\",\"grid\":[\"T\"],\"block\":[32],\"args\":[\"@x\",\"@y\",\"T\"]}]},"
    "{\"name\":\"v2\",\"template\":\"v2.cu\",\"class\":\"bitwise\",\"reference\":\"v1\","
    "\"launches\":[{\"entry\":\"k\",\"grid\":[\"T\"],\"block\":[32],\"args\":[\"@x\",\"@y\",\"T\"]}]},"
    "{\"name\":\"relay\",\"template\":\"relay.cu\",\"class\":\"bitwise\",\"reference\":\"v1\","
    "\"launches\":[{\"entry\":\"k\",\"grid\":[\"T\"],\"block\":[32],\"args\":[\"@x\",\"@y\",\"T\"]}]},"
    "{\"name\":\"pipe\",\"template\":\"pipe.cu\",\"class\":\"kl\",\"reference\":null,"
    "\"launches\":[{\"entry\":\"k\",\"grid\":[\"T\"],\"block\":[32],\"args\":[\"@x\",\"@y\",\"T\"]}]}"
    "]}";

/* A daemon's answer for a card it has never seen, of `model`, at T. */
static json_t *ask_fleet(dt_env_t *e, const char *model, int T, const char *parity) {
  int fd = dt_connect(e->sock);
  if (fd < 0) return NULL;
  dt_reader_t *rd = calloc(1, sizeof *rd);
  char line[600];
  snprintf(line, sizeof line,
           "{\"cmd\":\"choose\",\"op\":\"hc_read\",\"tokens\":%d,\"parity\":\"%s\","
           "\"device\":\"GPU-99999999-8888-7777-6666-555555555555\",\"model\":\"%s\"}",
           T, parity, model);
  json_t *j = dt_ask(fd, rd, line);
  free(rd);
  close(fd);
  return j;
}

static int answers(json_t *j, const char *variant, const char *source) {
  return j != NULL && strcmp(dt_str(j, "variant"), variant) == 0 &&
         strcmp(dt_str(j, "source"), source) == 0;
}

/* Waits up to ms for the daemon's answer for `model` to be `variant` from
 * the fleet; the time it took, or -1. */
static double wait_for_fleet(dt_env_t *e, const char *model, const char *variant, double ms) {
  double t0 = now_ms();
  while (now_ms() - t0 < ms) {
    json_t *j = ask_fleet(e, model, 1, "bitwise");
    int ok = answers(j, variant, "fleet");
    json_decref(j);
    if (ok) return now_ms() - t0;
    usleep(5000);
  }
  return -1;
}

static int log_count(dt_env_t *e, const char *needle) {
  char *text = NULL;
  if (hct__read_file(e->log, &text, NULL) != 0) return -1;
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  free(text);
  return n;
}

/* The daemon of the running case, stopped by its teardown when an
 * assertion ended the case first. */
static dt_env_t *live_daemon;

static int daemon_gone(void **state) {
  if (live_daemon != NULL) {
    if (live_daemon->pid > 0) dt_stop(live_daemon);
    dt_env_remove(live_daemon);
    live_daemon = NULL;
  }
  return server_back(state);
}

static void daemon_env(dt_env_t *e) {
  live_daemon = e;
  dt_env_init(e);
  char p[400];
  snprintf(p, sizeof p, "%s/hc_read/manifest.json", e->kernels);
  dt_write(p, synth_manifest);
}

#define MODEL_N "nvidia|Fleet Card New|sm_90|132|141"
#define MODEL_M "nvidia|Fleet Card Later|sm_90|132|141"

/*
 * A NOTIFY reaches a daemon within 1 s: its fallback poll is set to 60 s,
 * so only the notification can explain an answer that fast.
 */
static void test_daemon_notify(void **state) {
  (void)state;
  char name[32], url[256], path[256];
  init_db(name, sizeof name, url, sizeof url);
  dt_env_t e;
  daemon_env(&e);
  const char *extra[] = {"--fleet-url", url, "--fleet-model", MODEL_N, "--fleet-poll-ms",
                         "60000", NULL};
  double s0 = now_ms();
  dt_start(&e, extra);
  live_daemon_pid = e.pid;
  double start_ms = now_ms() - s0;
  /* Nothing for the model yet: the baseline. */
  json_t *j = ask_fleet(&e, MODEL_N, 1, "bitwise");
  assert_true(answers(j, "v1", "default"));
  json_decref(j);
  /* Wait until the daemon listens (it says so), then push. */
  for (int i = 0; i < 400 && log_count(&e, "connected") < 1; i++) usleep(5000);
  assert_int_equal(log_count(&e, "connected"), 1);
  host_db_path(700, path, sizeof path);
  make_host_db(path, "host-n", "GPU-f0000000-0000-0000-0000-000000000000", MODEL_N, 1.0);
  char *out, *err;
  assert_int_equal(push_cli(url, path, &out, &err), 0);
  free(out);
  free(err);
  double ms = wait_for_fleet(&e, MODEL_N, "relay", 3000);
  printf("fleet_pg: daemon started in %.0f ms; a NOTIFY reached it and it answered the new "
         "decision %.0f ms after the push committed\n", start_ms, ms);
  assert_true(ms >= 0);
  assert_true(ms < 1000);
  j = ask_fleet(&e, MODEL_N, 5, "kl");
  assert_true(answers(j, "pipe", "fleet"));
  json_decref(j);
  assert_int_equal(dt_stop(&e), 0);
  dt_env_remove(&e);
  live_daemon = NULL;
}

/*
 * The server goes down: the daemon keeps answering, fast, from what it
 * pulled, says so once however many retries fail, and a daemon started
 * while it is down serves the set kept in the DB.  Back up, it catches
 * up with what was pushed meanwhile.
 */
static void test_daemon_server_down(void **state) {
  (void)state;
  char name[32], url[256], path[256];
  init_db(name, sizeof name, url, sizeof url);
  host_db_path(800, path, sizeof path);
  make_host_db(path, "host-d", "GPU-f1000000-0000-0000-0000-000000000000", MODEL_A, 1.0);
  char *out, *err;
  assert_int_equal(push_cli(url, path, &out, &err), 0);
  free(out);
  free(err);
  dt_env_t e;
  daemon_env(&e);
  const char *extra[] = {"--fleet-url", url, "--fleet-model", MODEL_A, "--fleet-model",
                         MODEL_M, "--fleet-poll-ms", "200", NULL};
  dt_start(&e, extra);
  live_daemon_pid = e.pid;
  assert_true(wait_for_fleet(&e, MODEL_A, "relay", 5000) >= 0);
  assert_int_equal(server_stop("fast"), 0);
  /* Ten retries' worth of outage; answers all the while. */
  double worst = 0;
  double t0 = now_ms();
  int asked = 0;
  while (now_ms() - t0 < 2000) {
    double q0 = now_ms();
    json_t *j = ask_fleet(&e, MODEL_A, 1, "bitwise");
    double q = now_ms() - q0;
    if (q > worst) worst = q;
    assert_true(answers(j, "relay", "fleet"));
    json_decref(j);
    asked++;
    usleep(20000);
  }
  printf("fleet_pg: server down: %d answers in 2 s, the slowest %.2f ms\n", asked, worst);
  assert_true(worst < 100);
  assert_int_equal(log_count(&e, "answering from the fleet decisions pulled before"), 1);
  /* A fresh daemon, server still down: the set kept in the DB. */
  assert_int_equal(dt_stop(&e), 0);
  dt_start(&e, extra);
  live_daemon_pid = e.pid;
  json_t *j = ask_fleet(&e, MODEL_A, 1, "bitwise");
  assert_true(answers(j, "relay", "fleet"));
  json_decref(j);
  /* Back up, with a new model pushed: the daemon catches up. */
  assert_int_equal(server_start(), 0);
  host_db_path(801, path, sizeof path);
  make_host_db(path, "host-m", "GPU-f2000000-0000-0000-0000-000000000000", MODEL_M, 1.0);
  assert_int_equal(push_cli(url, path, &out, &err), 0);
  free(out);
  free(err);
  double ms = wait_for_fleet(&e, MODEL_M, "relay", 5000);
  printf("fleet_pg: server back: the daemon answered a decision pushed meanwhile in %.0f ms\n",
         ms);
  assert_true(ms >= 0);
  assert_int_equal(log_count(&e, "reachable again"), 1);
  /* A server that starts serving hostile rows: refused, said once, the
   * kept set still answers. */
  PGconn *c = admin(name);
  drop_checks(c, "decisions");
  sql(c, "UPDATE hctune.decisions SET variant = E'v\\x01' WHERE model_key = '" MODEL_A "';"
         "UPDATE hctune.keys SET revision = revision + 100;"
         "SELECT pg_notify('" HCT_PG_CHANNEL "', '" MODEL_A "')");
  PQfinish(c);
  for (int i = 0; i < 200 && log_count(&e, "column 'variant'") < 1; i++) usleep(10000);
  usleep(500000); /* two more polls: still said once */
  assert_int_equal(log_count(&e, "column 'variant'"), 1);
  j = ask_fleet(&e, MODEL_A, 1, "bitwise");
  assert_true(answers(j, "relay", "fleet"));
  json_decref(j);
  assert_int_equal(dt_stop(&e), 0);
  dt_env_remove(&e);
  live_daemon = NULL;
}

/* The H200 probe pushed, and a fresh daemon on this machine (no GPU)
 * answering its decisions for an H200 it has never seen. */
static void test_daemon_h200(void **state) {
  (void)state;
  char name[32], url[256], fixture[512], copy[512];
  init_db(name, sizeof name, url, sizeof url);
  fixture_path(fixture, sizeof fixture);
  snprintf(copy, sizeof copy, "%s/h200-d.db", PG.work);
  assert_int_equal(sh("cp '%s' '%s' && chmod u+w '%s'", fixture, copy, copy), 0);
  char *out, *err;
  assert_int_equal(push_cli(url, copy, &out, &err), 0);
  free(out);
  free(err);
  dt_env_t e;
  live_daemon = &e;
  dt_env_init(&e);
  const char *kernels = getenv("HCTUNE_KERNELS");
  char kdir[512];
  snprintf(kdir, sizeof kdir, "%s", kernels ? kernels : "kernels-src");
  const char *extra[] = {"--kernels", kdir, "--fleet-url", url, "--fleet-model", H200_MODEL,
                         NULL};
  double t0 = now_ms();
  dt_start(&e, extra);
  live_daemon_pid = e.pid;
  double ms = wait_for_fleet(&e, H200_MODEL, "relay", 5000);
  printf("fleet_pg: a fresh daemon answered the H200's fleet decision %.0f ms after start\n",
         now_ms() - t0);
  assert_true(ms >= 0);
  /* Every decision of the probe, for a card UUID the daemon has not seen. */
  hct_db_t *db;
  assert_int_equal(hct__db_open(copy, HCT_DB_READONLY, &db), 0);
  hct_db_decision_t *d;
  int n;
  assert_int_equal(hct__db_decisions_list(db, &d, &n), 0);
  hct__db_close(db);
  assert_int_equal(n, 9);
  for (int i = 0; i < n; i++)
    for (int T = d[i].tmin; T <= d[i].tmax; T++) {
      json_t *j = ask_fleet(&e, H200_MODEL, T, d[i].parity);
      if (!answers(j, d[i].variant, "fleet"))
        fail_msg("T=%d %s: want %s from the fleet, got %s from %s", T, d[i].parity,
                 d[i].variant, dt_str(j, "variant"), dt_str(j, "source"));
      json_t *params = json_loads(d[i].params, 0, NULL);
      assert_true(json_equal(params, json_object_get(j, "params")));
      json_decref(params);
      json_decref(j);
    }
  free(d);
  assert_int_equal(dt_stop(&e), 0);
  dt_env_remove(&e);
  live_daemon = NULL;
}

#endif /* HCT_NO_PG */

int main(void) {
#ifdef HCT_NO_PG
  printf("fleet_pg: skipped: built without PostgreSQL (HCT_NO_PG, make STATIC=1)\n");
  return 0;
#else
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* A case stuck on a lock fails the program in time, not after
   * tests/run.sh's ten minutes. */
  alarm(180);
  cluster_setup();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(test_url_shown, need_server),
    cmocka_unit_test_setup(test_init_and_migration, need_server),
    cmocka_unit_test_setup(test_push_idempotent, need_server),
    cmocka_unit_test_setup(test_concurrent_pushers, need_server),
    cmocka_unit_test_setup_teardown(test_server_killed_mid_push, need_server, server_back),
    cmocka_unit_test_setup(test_hostile_rows, need_server),
    cmocka_unit_test_setup(test_roles, need_server),
    cmocka_unit_test_setup(test_h200_fixture, need_server),
    cmocka_unit_test_setup(test_simulated_fleet, need_server),
    cmocka_unit_test_setup_teardown(test_daemon_notify, need_server, daemon_gone),
    cmocka_unit_test_setup_teardown(test_daemon_server_down, need_server, daemon_gone),
    cmocka_unit_test_setup_teardown(test_daemon_h200, need_server, daemon_gone),
  };
  return cmocka_run_group_tests(tests, NULL, cluster_teardown);
#endif
}
