/*
 * test_ops_broken.c: ops that fail alone (issue 27).
 *
 * Beside hc_read (daemon_test.h's fixture), one broken op folder of each
 * kind a person or a half-finished copy leaves behind: a half-written
 * manifest, an unknown parity class, a misspelt field, a duplicate variant
 * name, an unknown symbol in a grid, a 64 MB manifest, a FIFO, templates
 * escaping the folder, missing templates, absurd scratch, and more.  For
 * each: hctuned starts and answers a choose for hc_read, its status names
 * the broken op with the cause, its log says so once, and `hctune compile`
 * refuses the op in one line with a non-zero status.  Every step is
 * bounded: the daemon must answer within dt_spawn's 5 s, the CLI runs under
 * timeout(1), so a hang fails the test instead of stalling it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli_test.h"
#include "daemon_test.h"

/* A change to the fixture manifest (parsed), made before it is written;
 * `after` runs once it is written, in the op's folder. */
typedef void (*mutate_fn)(json_t *m);
typedef void (*after_fn)(const char *dir);

static json_t *variant(json_t *m, size_t i) { return json_array_get(json_object_get(m, "variants"), i); }

static void m_parity(json_t *m) { json_object_set_new(variant(m, 2), "class", json_string("fast")); }
static void m_misspelt(json_t *m) {
  json_t *v = variant(m, 0);
  json_object_set(v, "constraint", json_object_get(v, "constraints"));
  json_object_del(v, "constraints");
}
static void m_dupname(json_t *m) { json_object_set_new(variant(m, 2), "name", json_string("v1")); }
static void m_badsym(json_t *m) {
  json_t *l = json_array_get(json_object_get(variant(m, 0), "launches"), 0);
  json_array_set_new(json_object_get(l, "grid"), 0, json_string("BLOKS"));
}
static void m_escape(json_t *m) {
  json_object_set_new(variant(m, 1), "template", json_string("../../../../etc/passwd"));
}
static void m_absolute(json_t *m) { json_object_set_new(variant(m, 1), "template", json_string("/etc/passwd")); }
static void m_symlink(json_t *m) { json_object_set_new(variant(m, 1), "template", json_string("link.cu")); }
static void m_reference(json_t *m) {
  json_object_set_new(m, "reference",
                      json_pack("{s:s, s:[{s:s, s:[i], s:[i], s:[s,s]}]}", "template",
                                "reference.cu", "launches", "entry", "r", "grid", 1, "block", 1,
                                "args", "@x", "@ref.y"));
}
static void m_scratch(json_t *m) {
  json_object_set_new(variant(m, 0), "scratch",
                      json_pack("[{s:s, s:s}]", "name", "s", "bytes", "1000000000000000000"));
}
static void m_negative(json_t *m) {
  json_object_set_new(variant(m, 0), "scratch", json_pack("[{s:s, s:s}]", "name", "s", "bytes", "-T"));
}
static void m_empty(json_t *m) {
  json_object_set_new(variant(m, 0), "constraints", json_pack("[s]", "W > 100"));
}
static void m_nolaunch(json_t *m) { json_object_set_new(variant(m, 2), "launches", json_array()); }
static void m_nobaseline(json_t *m) {
  json_object_set_new(variant(m, 0), "class", json_string("kl"));
  json_array_remove(json_object_get(m, "variants"), 1); /* v2's reference was v1's bits */
}

static void put_text(const char *dir, const char *text) {
  char p[700];
  snprintf(p, sizeof p, "%s/manifest.json", dir);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}
static void a_half(const char *dir) {
  char *text;
  size_t len;
  char p[700];
  snprintf(p, sizeof p, "%s/manifest.json", dir);
  assert_int_equal(hct__read_file(p, &text, &len), 0);
  text[len * 2 / 5] = '\0';
  put_text(dir, text);
  free(text);
}
static void a_notjson(const char *dir) { put_text(dir, "hello, this is not JSON\n"); }
static void a_array(const char *dir) { put_text(dir, "[1, 2, 3]\n"); }
static void a_huge(const char *dir) {
  char p[700];
  snprintf(p, sizeof p, "%s/manifest.json", dir);
  /* 64 MB, sparse: refused by its size, never read. */
  assert_int_equal(truncate(p, (off_t)64 << 20), 0);
}
static void replace_manifest(const char *dir, const char *how, const char *target) {
  char p[700];
  snprintf(p, sizeof p, "%s/manifest.json", dir);
  assert_int_equal(unlink(p), 0);
  if (strcmp(how, "fifo") == 0) assert_int_equal(mkfifo(p, 0644), 0);
  else assert_int_equal(symlink(target, p), 0);
}
static void a_fifo(const char *dir) { replace_manifest(dir, "fifo", NULL); }
static void a_loop(const char *dir) { replace_manifest(dir, "link", "manifest.json"); }
static void a_device(const char *dir) { replace_manifest(dir, "link", "/dev/zero"); }
static void a_symlink(const char *dir) {
  char p[700];
  snprintf(p, sizeof p, "%s/link.cu", dir);
  unlink(p);
  assert_int_equal(symlink("/etc/passwd", p), 0);
}
static void a_noref(const char *dir) {
  char p[700];
  snprintf(p, sizeof p, "%s/reference.cu", dir);
  assert_int_equal(unlink(p), 0);
}

static const struct {
  const char *name;
  mutate_fn mutate;
  after_fn after;
  const char *cause; /* in the one line that refuses the op */
} kinds[] = {
    {"half", NULL, a_half, "not JSON"},
    {"parity", m_parity, NULL, "class must be baseline, bitwise or kl"},
    {"misspelt", m_misspelt, NULL, "unknown field 'constraint'"},
    {"dupname", m_dupname, NULL, "name used twice"},
    {"badsym", m_badsym, NULL, "unknown name 'BLOKS'"},
    {"huge", NULL, a_huge, "over the limit of 4194304"},
    {"fifo", NULL, a_fifo, "a FIFO, not a regular file"},
    {"loop", NULL, a_loop, "cannot open"},
    {"device", NULL, a_device, "a character device, not a regular file"},
    {"escape", m_escape, NULL, "'..' in the template path"},
    {"absolute", m_absolute, NULL, "an absolute template path"},
    {"symlink", m_symlink, a_symlink, "outside the op's folder"},
    {"noref", m_reference, a_noref, "reference.template: template 'reference.cu'"},
    {"scratch", m_scratch, NULL, "over the limit of 1 TiB"},
    {"negative", m_negative, NULL, "negative"},
    {"empty", m_empty, NULL, "empty parameter space"},
    {"notjson", NULL, a_notjson, "not JSON"},
    {"array", NULL, a_array, "top level: not an object"},
    {"nolaunch", m_nolaunch, NULL, "launches must be a non-empty array"},
    {"nobaseline", m_nobaseline, NULL, "need exactly one variant of class baseline"},
};

static dt_env_t env;

/* Runs hctune with the test's kernels folder under timeout(1): a hang is
 * exit 124, a failure, not a stalled test. */
static int run_hctune(const char *args, char **out, char **err) {
  char envs[700], bin[600], dir[200];
  snprintf(envs, sizeof envs, "HCTUNE_KERNELS='%s' timeout 10 ", env.kernels);
  snprintf(bin, sizeof bin, "%s/hctune", hct_test_bin("test_ops_broken"));
  snprintf(dir, sizeof dir, "%.199s", env.dir);
  return cli_run(envs, bin, dir, args, out, err);
}

/* Writes kinds[k] as op folder kinds[k].name beside hc_read. */
static void put_kind(size_t k) {
  char dir[600], p[700];
  snprintf(dir, sizeof dir, "%s/%s", env.kernels, kinds[k].name);
  mkdir(dir, 0755);
  json_t *m = json_loads(dt_manifest, 0, NULL);
  assert_non_null(m);
  json_object_del(m, "op"); /* the folder names the op */
  if (kinds[k].mutate != NULL) kinds[k].mutate(m);
  if (kinds[k].after == a_symlink) a_symlink(dir); /* before dt_write touches templates */
  char *text = json_dumps(m, 0);
  json_decref(m);
  snprintf(p, sizeof p, "%s/manifest.json", dir);
  dt_write(p, text);
  free(text);
  if (kinds[k].after != NULL && kinds[k].after != a_symlink) kinds[k].after(dir);
}

static void remove_kind(size_t k) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", env.kernels, kinds[k].name);
  assert_int_equal(system(cmd), 0);
}

static int count_in_file(const char *path, const char *text) {
  char *s;
  if (hct__read_file(path, &s, NULL) != 0) return -1;
  int n = 0;
  for (const char *p = s; (p = strstr(p, text)) != NULL; p += strlen(text)) n++;
  free(s);
  return n;
}

/* A choose for hc_read answers with a variant, not an error. */
static void expect_hc_read_served(int fd, dt_reader_t *r) {
  json_t *j = dt_ask(fd, r, "{\"cmd\":\"choose\",\"op\":\"hc_read\",\"tokens\":2,\"device\":\"" DT_CARD "\"}");
  assert_non_null(j);
  if (!json_is_true(json_object_get(j, "ok")))
    fail_msg("choose hc_read: %s", json_dumps(j, 0));
  assert_true(dt_str(j, "variant")[0] != '\0');
  json_decref(j);
}

/* The status's broken_ops entry of op `name`, or NULL (a new reference). */
static json_t *broken_entry(int fd, dt_reader_t *r, const char *name) {
  json_t *st = dt_ask(fd, r, "{\"cmd\":\"status\"}");
  assert_non_null(st);
  size_t i;
  json_t *b, *found = NULL;
  json_array_foreach(json_object_get(st, "broken_ops"), i, b)
    if (strcmp(dt_str(b, "op"), name) == 0) found = json_incref(b);
  json_decref(st);
  return found;
}

static int setup(void **state) {
  (void)state;
  dt_env_init(&env);
  dt_seed(&env);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (env.pid > 0) dt_stop(&env);
  dt_env_remove(&env);
  return 0;
}

/* Each kind alone beside hc_read: the daemon starts, serves hc_read, and
 * its status and log name the op and the cause; compile refuses it. */
static void test_each_kind_alone(void **state) {
  (void)state;
  char args[200], marker[100];
  for (size_t k = 0; k < HCT_ARRAY_SIZE(kinds); k++) {
    put_kind(k);
    truncate(env.log, 0);
    dt_start(&env, NULL);
    int fd = dt_connect(env.sock);
    assert_true(fd >= 0);
    dt_reader_t r = {0};
    expect_hc_read_served(fd, &r);
    json_t *b = broken_entry(fd, &r, kinds[k].name);
    if (b == NULL) fail_msg("%s: not in status's broken_ops", kinds[k].name);
    snprintf(marker, sizeof marker, "op '%s' (", kinds[k].name);
    if (strstr(dt_str(b, "why"), marker) != NULL && strstr(dt_str(b, "why"), kinds[k].cause) == NULL)
      fail_msg("%s: status says '%s', want '%s'", kinds[k].name, dt_str(b, "why"), kinds[k].cause);
    if (strstr(dt_str(b, "why"), marker) == NULL)
      fail_msg("%s: status says '%s', without '%s'", kinds[k].name, dt_str(b, "why"), marker);
    assert_false(json_is_true(json_object_get(b, "kept")));
    json_decref(b);
    close(fd);
    assert_int_equal(dt_stop(&env), 0);
    /* Once per load in the log. */
    assert_int_equal(count_in_file(env.log, marker), 1);

    /* compile: one line naming the op, non-zero, nothing compiled. */
    char *out, *err;
    snprintf(args, sizeof args, "compile --arch sm_90 --op %s", kinds[k].name);
    int rc = run_hctune(args, &out, &err);
    if (rc == 0 || rc == 124 || cli_lines(err) != 1 || strstr(err, marker) == NULL ||
        strstr(err, kinds[k].cause) == NULL)
      fail_msg("%s: compile exit %d, stderr:\n%s", kinds[k].name, rc, err);
    free(out);
    free(err);
    remove_kind(k);
  }
}

/* Every kind at once: still served, each named once, and compile of
 * every op says each broken one on its own line before compiling. */
static void test_all_kinds_together(void **state) {
  (void)state;
  for (size_t k = 0; k < HCT_ARRAY_SIZE(kinds); k++) put_kind(k);
  dt_start(&env, NULL);
  int fd = dt_connect(env.sock);
  dt_reader_t r = {0};
  expect_hc_read_served(fd, &r);
  for (size_t k = 0; k < HCT_ARRAY_SIZE(kinds); k++) {
    json_t *b = broken_entry(fd, &r, kinds[k].name);
    if (b == NULL) fail_msg("%s: not in status's broken_ops", kinds[k].name);
    json_decref(b);
  }
  /* A choose for a broken op is refused with the cause. */
  json_t *j = dt_ask(fd, &r, "{\"cmd\":\"choose\",\"op\":\"dupname\",\"tokens\":2}");
  if (json_is_true(json_object_get(j, "ok")) ||
      strstr(dt_str(json_object_get(j, "error"), "message"), "name used twice") == NULL)
    fail_msg("choose of a broken op: %s", json_dumps(j, 0));
  json_decref(j);
  close(fd);
  /* hctune status and list print each broken op on a line of its own. */
  char *out, *err, args[600];
  snprintf(args, sizeof args, "status --socket '%s'", env.sock);
  int rc = run_hctune(args, &out, &err);
  assert_int_equal(rc, 0);
  snprintf(args, sizeof args, "list --db '%s'", env.db);
  char *lout, *lerr;
  assert_int_equal(run_hctune(args, &lout, &lerr), 0);
  for (size_t k = 0; k < HCT_ARRAY_SIZE(kinds); k++) {
    char line[100];
    snprintf(line, sizeof line, "broken op '%s' (not served): op '%s' (", kinds[k].name, kinds[k].name);
    if (strstr(out, line) == NULL) fail_msg("status: no '%s' in:\n%s", line, out);
    snprintf(line, sizeof line, "broken op '%s': op '%s' (", kinds[k].name, kinds[k].name);
    if (strstr(lout, line) == NULL) fail_msg("list: no '%s' in:\n%s", line, lout);
  }
  free(out);
  free(err);
  free(lout);
  free(lerr);
  assert_int_equal(dt_stop(&env), 0);
  rc = run_hctune("compile --arch sm_90", &out, &err);
  if (rc == 0 || rc == 124 || cli_lines(err) != (int)HCT_ARRAY_SIZE(kinds))
    fail_msg("compile exit %d, %d lines, want %zu:\n%s", rc, cli_lines(err), HCT_ARRAY_SIZE(kinds), err);
  free(out);
  free(err);
  for (size_t k = 0; k < HCT_ARRAY_SIZE(kinds); k++) remove_kind(k);
}

/* SIGHUP keeps the last good manifest of an op that breaks, and says so
 * in status; the op is still chosen for. */
static void test_sighup_keeps_last_good(void **state) {
  (void)state;
  char dir[600], p[700];
  snprintf(dir, sizeof dir, "%s/flip", env.kernels);
  mkdir(dir, 0755);
  snprintf(p, sizeof p, "%s/manifest.json", dir);
  json_t *m = json_loads(dt_manifest, 0, NULL);
  json_object_del(m, "op");
  char *text = json_dumps(m, 0);
  dt_write(p, text);
  free(text);
  dt_start(&env, NULL);
  int fd = dt_connect(env.sock);
  dt_reader_t r = {0};
  assert_null(broken_entry(fd, &r, "flip"));
  m_misspelt(m);
  text = json_dumps(m, 0);
  json_decref(m);
  dt_write(p, text);
  free(text);
  kill(env.pid, SIGHUP);
  json_t *b = NULL;
  for (int i = 0; i < 500 && b == NULL; i++) {
    b = broken_entry(fd, &r, "flip");
    if (b == NULL) usleep(10000);
  }
  if (b == NULL) fail_msg("flip: not reported broken after SIGHUP");
  assert_true(json_is_true(json_object_get(b, "kept")));
  assert_non_null(strstr(dt_str(b, "why"), "unknown field 'constraint'"));
  json_decref(b);
  json_t *j = dt_ask(fd, &r, "{\"cmd\":\"choose\",\"op\":\"flip\",\"tokens\":2,\"device\":\"" DT_CARD "\"}");
  assert_true(json_is_true(json_object_get(j, "ok")));
  assert_string_equal(dt_str(j, "variant"), "v1");
  json_decref(j);
  expect_hc_read_served(fd, &r);
  close(fd);
  assert_int_equal(dt_stop(&env), 0);
  assert_true(dt_log_has(&env, "keeping the manifest read before"));
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_kind_alone),
      cmocka_unit_test(test_all_kinds_together),
      cmocka_unit_test(test_sighup_keeps_last_good),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
