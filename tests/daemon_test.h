/*
 * daemon_test.h: what the daemon's tests and its bench share: a temporary
 * folder with an op manifest and a DB seeded through the db layer, a
 * hctuned started from $HCT_BIN on a temporary socket, and raw requests.
 * A header of static functions, not a tests/ .c helper, because only the
 * daemon's programs want it.
 */
#ifndef HCT_DAEMON_TEST_H
#define HCT_DAEMON_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon.h"
#include "db.h"
#include "jit.h"
#include "templates_test.h"

#define DT_CARD "GPU-aaaa0000-1111-2222-3333-444455556666"
#define DT_CARD_NAME "Test Card A"
#define DT_MODEL "nvidia|Test Card|sm_90|132|143"

typedef struct dt_env_s {
  char dir[256];
  char sock[300];
  char db[300];
  char kernels[300];
  char log[300];
  pid_t pid;
  int nofile; /* > 0: the daemon's RLIMIT_NOFILE */
} dt_env_t;

static inline double dt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void dt_die(const char *what) {
  fprintf(stderr, "daemon test setup: %s: %s\n", what, hct_last_error());
  exit(1);
}

/* The manifest of a small hc_read: v1 baseline, v2 bitwise, v3 kl, v4
 * bitwise against v3, v5 kl for sm_100 and up; bit families of v3 and v5. */
static const char dt_manifest[] =
    "{\"op\":\"hc_read\",\"tokens\":[1,8],\"constants\":{\"N\":1024},"
    "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"
    "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*N\"}],"
    "\"variants\":["
    "{\"name\":\"v1\",\"template\":\"v1.cu\",\"class\":\"baseline\",\"reference\":null,"
    "\"params\":[{\"name\":\"W\",\"values\":[4,8]}],\"constraints\":[\"W*32<=1024\"],"
    "\"launches\":[{\"entry\":\"k1\",\"grid\":[\"T\"],\"block\":[\"W*32\"],\"args\":[\"@x\",\"@y\",\"T\"]}]},"
    "{\"name\":\"v2\",\"template\":\"v2.cu\",\"class\":\"bitwise\",\"reference\":\"v1\","
    "\"params\":[{\"name\":\"R\",\"values\":[1,2]}],"
    "\"launches\":[{\"entry\":\"k2\",\"grid\":[\"cdiv(T*N,256*R)\"],\"block\":[256],\"smem\":\"R*1024\","
    "\"args\":[\"@x\",\"@y\",\"T\"]}]},"
    "{\"name\":\"v3\",\"template\":\"v3.cu\",\"class\":\"kl\",\"reference\":null,"
    "\"launches\":[{\"entry\":\"k3\",\"grid\":[\"SM_COUNT\"],\"block\":[128],\"args\":[\"@x\",\"@y\",\"T\"]}]},"
    "{\"name\":\"v4\",\"template\":\"v3.cu\",\"class\":\"bitwise\",\"reference\":\"v3\","
    "\"launches\":[{\"entry\":\"k4\",\"grid\":[\"SM_COUNT\"],\"block\":[128],\"args\":[\"@x\",\"@y\",\"T\"]}]},"
    "{\"name\":\"v5\",\"template\":\"v3.cu\",\"class\":\"kl\",\"reference\":null,\"min_arch\":100,"
    "\"launches\":[{\"entry\":\"k5\",\"grid\":[\"SM_COUNT\"],\"block\":[128],\"args\":[\"@x\",\"@y\",\"T\"]}]}"
    "],"
    /* Issue 29: v3's bits (v4 has them) and v5's (no card here runs v5). */
    "\"families\":[\"v3\",\"v5\"]}";

static inline void dt_write(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
  tt_touch_templates(path);
}

static inline hct_db_decision_t dt_decision(const char *uuid, const char *model, const char *parity,
                                     int tmin, int tmax, const char *variant, const char *cls,
                                     double med, double base) {
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  hct__strlcpy(d.keys.host, "testhost", sizeof d.keys.host);
  hct__strlcpy(d.keys.uuid, uuid, sizeof d.keys.uuid);
  hct__strlcpy(d.keys.model_key, model, sizeof d.keys.model_key);
  hct__strlcpy(d.keys.driver_version, "580.1", sizeof d.keys.driver_version);
  hct__strlcpy(d.keys.compiler_version, "nvrtc 13.0", sizeof d.keys.compiler_version);
  hct__strlcpy(d.keys.hctune_version, HCT_VERSION_STRING, sizeof d.keys.hctune_version);
  hct__strlcpy(d.op, "hc_read", sizeof d.op);
  hct__strlcpy(d.parity, parity, sizeof d.parity);
  d.tmin = tmin;
  d.tmax = tmax;
  hct__strlcpy(d.variant, variant, sizeof d.variant);
  /* Params are a point of the variant, strictly (the daemon skips a row
   * whose params are not): v1 has W, v2 has R, v3 none. */
  hct__strlcpy(d.params,
               strcmp(variant, "v2") == 0   ? "{\"R\":2}"
               : strcmp(variant, "v1") == 0 ? "{\"W\":4}"
                                            : "{}",
               sizeof d.params);
  hct__strlcpy(d.variant_class, cls, sizeof d.variant_class);
  hct__strlcpy(d.template_hash, "0123456789abcdef0123456789abcdef", sizeof d.template_hash);
  hct__strlcpy(d.source, "probe", sizeof d.source);
  d.median_us = med;
  d.baseline_us = base;
  d.ci_lo_us = med * 0.98;
  d.ci_hi_us = med * 1.02;
  d.samples = 200;
  d.decided_at = 1764500000;
  hct__strlcpy(d.run_id, "feedfacefeedfacefeedfacefeedface", sizeof d.run_id);
  hct__strlcpy(d.evidence_json, "{\"maxabs\":0,\"bits_equal\":true}", sizeof d.evidence_json);
  return d;
}

/* The binary recorded for the v2 decision: bytes of every value. */
static inline void dt_image(unsigned char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 7 + (i >> 8));
}
#define DT_IMAGE_SIZE 1000
#define DT_BINARY_KEY "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"

static inline void dt_seed_card(hct_db_t *db, const char *uuid, const char *name) {
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  hct__strlcpy(k.host, "testhost", sizeof k.host);
  hct__strlcpy(k.uuid, uuid, sizeof k.uuid);
  hct__strlcpy(k.model_key, DT_MODEL, sizeof k.model_key);
  if (hct__db_device_upsert(db, &k, name, "sm_90", "{\"sm_count\":132}") < 0)
    dt_die("device_upsert");
}

/*
 * The seeded decisions of DT_CARD for hc_read:
 *   bitwise  T 1-4 v2 (2.0 us)   T 5-8 v1 (4.0 us, the baseline wins)
 *   kl       T 1-4 v3 (1.5 us)   T 5-8 v3 (4.5 us, slower than bitwise v1)
 *   bits:v3  T 1-4 v4 (1.8 us)   (none above: v3, the family's head)
 */
static inline void dt_seed(const dt_env_t *e) {
  hct_db_t *db;
  if (hct__db_open(e->db, 0, &db) < 0) dt_die("db_open");
  dt_seed_card(db, DT_CARD, DT_CARD_NAME);
  hct_db_decision_t bw[2] = {
      dt_decision(DT_CARD, DT_MODEL, "bitwise", 1, 4, "v2", "bitwise", 2.0, 5.0),
      dt_decision(DT_CARD, DT_MODEL, "bitwise", 5, 8, "v1", "baseline", 4.0, 4.0)};
  hct__strlcpy(bw[0].binary_key, DT_BINARY_KEY, sizeof bw[0].binary_key);
  hct_db_decision_t kl[2] = {dt_decision(DT_CARD, DT_MODEL, "kl", 1, 4, "v3", "kl", 1.5, 5.0),
                             dt_decision(DT_CARD, DT_MODEL, "kl", 5, 8, "v3", "kl", 4.5, 4.0)};
  if (hct__db_decisions_replace(db, bw, 2) < 0) dt_die("decisions_replace bitwise");
  if (hct__db_decisions_replace(db, kl, 2) < 0) dt_die("decisions_replace kl");
  hct_db_decision_t fam = dt_decision(DT_CARD, DT_MODEL, "bits:v3", 1, 4, "v4", "kl", 1.8, 5.0);
  if (hct__db_decisions_replace(db, &fam, 1) < 0) dt_die("decisions_replace bits:v3");
  hct_op_t *op;
  if (hct__manifest_load(e->kernels, "hc_read", &op) < 0) dt_die("manifest_load");
  hct_binary_store_t store;
  hct__db_binary_store(db, &store);
  static unsigned char img[DT_IMAGE_SIZE];
  dt_image(img, sizeof img);
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  hct__strlcpy(job.key, DT_BINARY_KEY, sizeof job.key);
  hct__strlcpy(job.arch, "sm_90", sizeof job.arch);
  hct__strlcpy(job.template_hash, "0123456789abcdef0123456789abcdef", sizeof job.template_hash);
  job.op = op;
  job.variant = hct__variant_find(op, "v2");
  job.image = img;
  job.image_size = sizeof img;
  if (store.put(store.ctx, &job) < 0) dt_die("binary put");
  hct__manifest_free(op);
  hct__db_close(db);
}

/*
 * Two cards whose UUIDs share a prefix (issue 30), each with a bitwise
 * decision v2 for T=1-4 (A's with per-T evidence: its figures are T=2's);
 * DT_HOST_CARDS makes A this host's card for a daemon started with it in
 * $HCT_TEST_HOST_CARDS (the stand-in for the driver, daemon/cards.c).
 */
#define DT_TWIN_A "GPU-7f92aaaa-0000-0000-0000-000000000001"
#define DT_TWIN_B "GPU-7f92bbbb-0000-0000-0000-000000000002"
#define DT_HOST_CARDS DT_TWIN_A "=" DT_MODEL

static inline void dt_seed_twins(const dt_env_t *e) {
  hct_db_t *db;
  if (hct__db_open(e->db, 0, &db) < 0) dt_die("db_open");
  const char *cards[2] = {DT_TWIN_A, DT_TWIN_B};
  for (int i = 0; i < 2; i++) {
    dt_seed_card(db, cards[i], i ? "Twin B" : "Twin A");
    hct_db_decision_t d = dt_decision(cards[i], DT_MODEL, "bitwise", 1, 4, "v2", "bitwise", 2.0, 5.0);
    if (i == 0)
      hct__strlcpy(d.evidence_json, "{\"per_T\":[{\"T\":1,\"us\":1.500,\"baseline_us\":4.000},"
                   "{\"T\":2,\"us\":2.000,\"baseline_us\":5.000}]}", sizeof d.evidence_json);
    if (hct__db_decisions_replace(db, &d, 1) < 0) dt_die("decisions_replace twins");
  }
  hct__db_close(db);
}

/* A fresh folder (readable by everyone, for the test as user nobody) with
 * the manifest; the DB is left to the caller. */
static inline void dt_env_init(dt_env_t *e) {
  memset(e, 0, sizeof *e);
  snprintf(e->dir, sizeof e->dir, "/tmp/hct-daemon-test-XXXXXX");
  if (mkdtemp(e->dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  chmod(e->dir, 0755);
  snprintf(e->sock, sizeof e->sock, "%s/hctune.sock", e->dir);
  snprintf(e->db, sizeof e->db, "%s/hctune.db", e->dir);
  snprintf(e->kernels, sizeof e->kernels, "%s/kernels", e->dir);
  snprintf(e->log, sizeof e->log, "%s/daemon.log", e->dir);
  mkdir(e->kernels, 0755);
  char p[400];
  snprintf(p, sizeof p, "%s/hc_read", e->kernels);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/hc_read/manifest.json", e->kernels);
  dt_write(p, dt_manifest);
  /* A self-test op: its manifest exists, and the daemon must still refuse
   * to offer it. */
  snprintf(p, sizeof p, "%s/selftest", e->kernels);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/selftest/manifest.json", e->kernels);
  dt_write(p, "{\"op\":\"selftest\",\"selftest\":true,\"buffers\":[{\"name\":\"y\",\"dtype\":\"f32\","
              "\"role\":\"output\",\"elems\":\"T\"}],\"variants\":[{\"name\":\"base\",\"template\":\"b.cu\","
              "\"class\":\"baseline\",\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],"
              "\"args\":[\"@y\"]}]}]}");
}

static inline void dt_env_remove(dt_env_t *e) {
  /* HCT_TEST_KEEP=1 keeps the folder (its DB, its log) for a look after a failure. */
  if (getenv("HCT_TEST_KEEP") != NULL) {
    fprintf(stderr, "kept %s\n", e->dir);
    return;
  }
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", e->dir);
}

static inline int dt_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  hct__strlcpy(sa.sun_path, path, sizeof sa.sun_path);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Starts $HCT_BIN/hctuned with the env's socket, DB and kernels plus
 * `extra` (NULL-terminated), its stderr appended to e->log. */
static inline pid_t dt_exec(dt_env_t *e, const char *const *extra) {
  const char *bin = getenv("HCT_BIN");
  char exe[400];
  snprintf(exe, sizeof exe, "%s/hctuned", bin != NULL ? bin : "bin");
  pid_t pid = fork();
  if (pid == 0) {
    /* A test that fails longjmps past its dt_stop: the daemon then dies
     * with the test program, and never holds the runner's output pipe
     * (stdout goes to the log too), which would keep tests/run.sh
     * waiting for an end of file that never comes. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(e->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (e->nofile > 0) {
      struct rlimit rl = {(rlim_t)e->nofile, (rlim_t)e->nofile};
      setrlimit(RLIMIT_NOFILE, &rl);
    }
    const char *argv[32] = {exe, "--socket", e->sock, "--db", e->db, "--kernels", e->kernels,
                            "--poll-ms", "100"};
    int n = 9;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 30; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    execv(exe, (char **)argv);
    fprintf(stderr, "cannot run %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  return pid;
}

/* A daemon that must refuse to start: its exit status, or -1 when it was
 * still running after 5 s (then killed). */
static inline int dt_run_refused(dt_env_t *e, const char *const *extra) {
  pid_t pid = dt_exec(e, extra);
  for (int i = 0; i < 1000; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    usleep(5000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

/* Starts the daemon and waits until it answers.  Returns the pid, or -1
 * when it exited (its status in *status). */
static inline pid_t dt_spawn(dt_env_t *e, const char *const *extra, int *status) {
  pid_t pid = dt_exec(e, extra);
  for (int i = 0; i < 1000; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      if (status != NULL) *status = st;
      return -1;
    }
    int fd = dt_connect(e->sock);
    if (fd >= 0) {
      close(fd);
      return pid;
    }
    usleep(5000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

static inline void dt_start(dt_env_t *e, const char *const *extra) {
  int st = 0;
  e->pid = dt_spawn(e, extra, &st);
  if (e->pid < 0) {
    fprintf(stderr, "hctuned did not start (status %d); its log:\n", st);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cat '%s' >&2", e->log);
    if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
    exit(1);
  }
}

/* A fresh env with the twin cards (dt_seed_twins) and a daemon started on
 * it that takes A for this host's card. */
static inline void dt_start_twins(dt_env_t *e) {
  dt_env_init(e);
  dt_seed_twins(e);
  setenv("HCT_TEST_HOST_CARDS", DT_HOST_CARDS, 1);
  dt_start(e, NULL);
  unsetenv("HCT_TEST_HOST_CARDS");
}

/* SIGTERM; returns the exit status (-1 when it had to be killed). */
static inline int dt_stop(dt_env_t *e) {
  if (e->pid <= 0) return -1;
  kill(e->pid, SIGTERM);
  for (int i = 0; i < 1000; i++) {
    int st;
    if (waitpid(e->pid, &st, WNOHANG) == e->pid) {
      e->pid = 0;
      return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    usleep(5000);
  }
  kill(e->pid, SIGKILL);
  waitpid(e->pid, NULL, 0);
  e->pid = 0;
  return -1;
}

static inline int dt_send(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
    if (k <= 0) return -1;
    s += k;
    n -= (size_t)k;
  }
  return 0;
}

static inline int dt_sends(int fd, const char *s) { return dt_send(fd, s, strlen(s)); }

/* One reply line from fd within timeout_ms, malloc'd; NULL on EOF/timeout.
 * Bytes after the newline stay in the caller's carry buffer. */
typedef struct dt_reader_s {
  char buf[1 << 16];
  size_t len;
} dt_reader_t;

static inline char *dt_read_line(int fd, dt_reader_t *r, int timeout_ms) {
  double end = dt_now_ms() + timeout_ms;
  for (;;) {
    char *nl = memchr(r->buf, '\n', r->len);
    if (nl != NULL) {
      size_t n = (size_t)(nl - r->buf);
      char *s = malloc(n + 1);
      memcpy(s, r->buf, n);
      s[n] = '\0';
      memmove(r->buf, nl + 1, r->len - n - 1);
      r->len -= n + 1;
      return s;
    }
    if (r->len == sizeof r->buf) return NULL;
    int left = (int)(end - dt_now_ms());
    if (left <= 0) return NULL;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, left) <= 0) return NULL;
    ssize_t k = recv(fd, r->buf + r->len, sizeof r->buf - r->len, 0);
    if (k <= 0) return NULL;
    r->len += (size_t)k;
  }
}

/* Sends one line and parses the reply. */
static inline json_t *dt_ask(int fd, dt_reader_t *r, const char *line) {
  char *buf = malloc(strlen(line) + 2);
  sprintf(buf, "%s\n", line);
  int rc = dt_send(fd, buf, strlen(buf));
  free(buf);
  if (rc < 0) return NULL;
  char *reply = dt_read_line(fd, r, 10000);
  if (reply == NULL) return NULL;
  json_t *j = json_loads(reply, 0, NULL);
  if (j == NULL) fprintf(stderr, "reply is not JSON: %s\n", reply);
  free(reply);
  return j;
}

static inline const char *dt_str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s != NULL ? s : "";
}

/* Whether the daemon's log holds `text`. */
static inline int dt_log_has(const dt_env_t *e, const char *text) {
  FILE *f = fopen(e->log, "r");
  if (f == NULL) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) found = strstr(line, text) != NULL;
  fclose(f);
  return found;
}

static inline long dt_rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kb = -1;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

#endif
