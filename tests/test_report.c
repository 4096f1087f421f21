/*
 * test_report.c: `hctune report` as a user runs it.
 *
 *   - The real H200 probe database (tests/fixtures/h200-probe.db) rendered,
 *     opened in headless Chromium: a screenshot taken, and the DOM after
 *     load holding one mark per plotted timing trial (by id) and, at every
 *     T, the winner of each class that the decisions table names.
 *   - A synthetic database of two probes (db/ writes): the same checks on
 *     the page's text, the probes-over-time plot, faults and parity rows.
 *   - An empty database, one holding only faults, and a hostile one (names
 *     and reasons made of markup): all render, nothing unescaped.
 *   - Argument and file errors: one line, non-zero status, no page.
 *
 * Chromium: Debian's `chromium` (tools/install-deps.sh installs it).  When
 * absent the test fails, unless HCT_ALLOW_NO_CHROMIUM=1, which skips that
 * part with the reason; HCT_CHROMIUM names another browser binary.  Under
 * the sanitizers (make check-asan) the
 * rendering is checked on the page's text only: the browser part ran in the
 * plain pass, and two browser launches per run are enough for this 2-core
 * machine.  HCT_REPORT_SHOT=PATH keeps the screenshot (the README's image),
 * HCT_TEST_KEEP=1 the temporary folder with every page.
 * Needs HCT_BIN (set by tests/run.sh).
 */
#include <math.h>
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
#include "cli_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define FIXTURE "tests/fixtures/h200-probe.db"

static char dir[64];
static char bin[1100];

static int run(const char *args, char **err) { return cli_run("", bin, dir, args, NULL, err); }

static char *slurp(const char *path) {
  char *s = NULL;
  if (hct__read_file(path, &s, NULL) != 0) fail_msg("cannot read %s: %s", path, hct_last_error());
  return s;
}

/* Renders db into dir/name; returns the page's text. */
static char *render(const char *db, const char *name) {
  char args[1024], out[256], *err = NULL;
  snprintf(out, sizeof out, "%s/%s", dir, name);
  snprintf(args, sizeof args, "report --db '%s' --out '%s'", db, out);
  int st = run(args, &err);
  if (st != 0 || err[0] != '\0') fail_msg("hctune %s: status %d, stderr '%s'", args, st, err);
  free(err);
  return slurp(out);
}

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

/* ---- reading marks back from a page or a DOM ------------------------------ */

/* The value of attribute `name` in the tag around s[at] (up to its '>'),
 * with the entities a serializer writes decoded; 0 when absent. */
static int attr(const char *s, const char *at, const char *name, char *out, size_t len) {
  const char *end = strchr(at, '>');
  char key[64];
  snprintf(key, sizeof key, " %s=\"", name);
  const char *p = strstr(at, key);
  if (p == NULL || end == NULL || p > end) return 0;
  p += strlen(key);
  size_t n = 0;
  static const struct {
    const char *ent;
    char c;
  } ents[] = {{"&quot;", '"'}, {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&#39;", '\''}};
  while (*p && *p != '"' && n + 1 < len) {
    int hit = 0;
    for (size_t e = 0; e < HCT_ARRAY_SIZE(ents) && !hit; e++)
      if (strncmp(p, ents[e].ent, strlen(ents[e].ent)) == 0) {
        out[n++] = ents[e].c;
        p += strlen(ents[e].ent);
        hit = 1;
      }
    if (!hit) out[n++] = *p++;
  }
  out[n] = '\0';
  (void)s;
  return 1;
}

static void canon(const char *text, char *out, size_t len) {
  json_t *j = json_loads(text, 0, NULL);
  char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  snprintf(out, len, "%s", s ? s : text);
  free(s);
  json_decref(j);
}

/* ---- what the DB says the page must show --------------------------------- */

typedef struct {
  int64_t id;
  char key[128];  /* uuid|op */
  char run[40];
  int T;
  int64_t at;
  int deciding, timed;
} row_t;

/* The ids of the timing trials the page must mark: per card and op and T,
 * those of the newest probe that timed T in the deciding mode (probes
 * ordered by their first trial).  Written from the SQL, apart from the
 * report's own code. */
static int expected_marks(const char *db, int64_t **ids) {
  sqlite3 *h;
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(h,
                                      "SELECT id, uuid || '|' || op, run_id, tokens, created_at,"
                                      " coalesce(json_extract(figures_json, '$.decides'), 1) != 0,"
                                      " status IN ('pass', 'pruned') AND median_us > 0"
                                      " FROM trials WHERE kind = 'timing' AND tokens >= 1",
                                      -1, &st, NULL),
                   SQLITE_OK);
  row_t *r = NULL;
  int n = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    r = realloc(r, (size_t)(n + 1) * sizeof *r);
    r[n].id = sqlite3_column_int64(st, 0);
    snprintf(r[n].key, sizeof r[n].key, "%s", sqlite3_column_text(st, 1));
    snprintf(r[n].run, sizeof r[n].run, "%s", sqlite3_column_text(st, 2));
    r[n].T = sqlite3_column_int(st, 3);
    r[n].at = sqlite3_column_int64(st, 4);
    r[n].deciding = sqlite3_column_int(st, 5);
    r[n].timed = sqlite3_column_int(st, 6);
    n++;
  }
  if (rc != SQLITE_DONE) fail_msg("%s: reading the timing trials: %s", db, sqlite3_errmsg(h));
  sqlite3_finalize(st);
  sqlite3_close(h);
  /* A probe's order: its first timed trial's (time, id). */
  int64_t *out = calloc((size_t)n + 1, sizeof *out);
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (!r[i].timed) continue;
    int64_t best_at = -1, best_id = -1;
    const char *best_run = NULL;
    for (int j = 0; j < n; j++) {
      if (!r[j].timed || !r[j].deciding || r[j].T != r[i].T || strcmp(r[j].key, r[i].key) != 0)
        continue;
      int64_t at = INT64_MAX, id = INT64_MAX;
      for (int k = 0; k < n; k++)
        if (r[k].timed && strcmp(r[k].key, r[j].key) == 0 && strcmp(r[k].run, r[j].run) == 0) {
          if (r[k].at < at || (r[k].at == at && r[k].id < id)) at = r[k].at, id = r[k].id;
        }
      if (at > best_at || (at == best_at && id > best_id)) best_at = at, best_id = id, best_run = r[j].run;
    }
    if (best_run && strcmp(best_run, r[i].run) == 0) out[m++] = r[i].id;
  }
  free(r);
  *ids = out;
  return m;
}

static int id_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Every expected trial has exactly one mark, and no mark is of another. */
static void check_marks(const char *page, const char *db) {
  int64_t *want;
  int nw = expected_marks(db, &want);
  int64_t *got = calloc((size_t)count(page, "class=\"trial") + 1, sizeof *got);
  int ng = 0;
  for (const char *p = page; (p = strstr(p, "class=\"trial")) != NULL; p++) {
    char v[32];
    if (!attr(page, p - 1, "data-trial", v, sizeof v)) fail_msg("a trial mark without data-trial");
    got[ng++] = strtoll(v, NULL, 10);
  }
  qsort(want, (size_t)nw, sizeof *want, id_cmp);
  qsort(got, (size_t)ng, sizeof *got, id_cmp);
  if (ng != nw) fail_msg("%d trial marks on the page, the DB has %d timed trials to plot", ng, nw);
  for (int i = 0; i < nw; i++)
    if (got[i] != want[i]) fail_msg("trial %lld has no mark (mark %lld instead)", (long long)want[i], (long long)got[i]);
  free(want);
  free(got);
  assert_true(nw > 0);
}

/* At every T of every decision, one winner mark of its class naming its
 * variant and parameters; and no winner mark that no decision holds.
 * Returns the number of winner marks. */
static int check_winners(const char *page, const char *db) {
  sqlite3 *h;
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  /* Where two decisions hold one T (a DB keeping them per software), the
   * newest is the one shown: the older rows are skipped. */
  assert_int_equal(sqlite3_prepare_v2(h,
                                      "SELECT parity, tmin, tmax, variant, params FROM decisions d"
                                      " WHERE NOT EXISTS (SELECT 1 FROM decisions e WHERE"
                                      " e.uuid = d.uuid AND e.op = d.op AND e.parity = d.parity"
                                      " AND e.tmin <= d.tmax AND e.tmax >= d.tmin"
                                      " AND e.decided_at > d.decided_at)"
                                      " AND parity IN ('bitwise', 'kl')",
                                      -1, &st, NULL),
                   SQLITE_OK);
  int want = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *par = (const char *)sqlite3_column_text(st, 0);
    const char *variant = (const char *)sqlite3_column_text(st, 3);
    char params[512];
    canon((const char *)sqlite3_column_text(st, 4), params, sizeof params);
    for (int T = sqlite3_column_int(st, 1); T <= sqlite3_column_int(st, 2); T++) {
      int found = 0;
      for (const char *p = page; (p = strstr(p, "class=\"winner\"")) != NULL; p++) {
        char a[32], t[16], v[64], pr[512], pc[512];
        attr(page, p - 1, "data-parity", a, sizeof a);
        attr(page, p - 1, "data-t", t, sizeof t);
        if (strcmp(a, par) != 0 || atoi(t) != T) continue;
        attr(page, p - 1, "data-variant", v, sizeof v);
        attr(page, p - 1, "data-params", pr, sizeof pr);
        canon(pr, pc, sizeof pc);
        if (strcmp(v, variant) != 0 || strcmp(pc, params) != 0)
          fail_msg("%s winner at T=%d: the page marks %s %s, the DB decided %s %s", par, T, v, pc,
                   variant, params);
        found++;
      }
      if (found != 1) fail_msg("%s winner at T=%d: %d marks (want 1)", par, T, found);
      want++;
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  assert_int_equal(count(page, "class=\"winner\""), want);
  return want;
}

/* ---- databases made through db/ ------------------------------------------ */

static hct_db_keys_t keys(const char *uuid) {
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  strcpy(k.host, "bench-1");
  snprintf(k.uuid, sizeof k.uuid, "%s", uuid);
  strcpy(k.model_key, "nvidia|NVIDIA H200|sm_90|132|143");
  strcpy(k.driver_version, "580.95");
  strcpy(k.compiler_version, "12.8");
  strcpy(k.hctune_version, "0.1.0");
  return k;
}

typedef struct {
  const char *variant, *params;
  double a, b; /* us = a + b*T */
  const char *klass;
} cand_t;

/* hc_read's names (so the manifest gives classes): a baseline, bitwise
 * and kl variants, relay winning bitwise, pipe then persist winning kl. */
static const cand_t cands[] = {
    {"v1", "{\"DOWN_WARPS\":8,\"UP_WARPS\":8}", 20, 2.0, "baseline"},
    {"v2", "{\"DOWN_WARPS\":8,\"UP_WARPS\":4}", 16, 1.8, "bitwise"},
    {"tg", "{\"PDL\":0,\"PF\":0,\"RPB\":2,\"TG\":1,\"UPW\":8}", 10, 1.5, "bitwise"},
    {"tg", "{\"PDL\":1,\"PF\":0,\"RPB\":2,\"TG\":2,\"UPW\":8}", 9.5, 1.6, "bitwise"},
    {"relay", "{\"G\":1,\"GB\":0,\"LT\":0,\"NG\":1,\"PDL\":1}", 6, 0.9, "bitwise"},
    {"relay", "{\"G\":1,\"GB\":0,\"LT\":1,\"NG\":4,\"PDL\":1}", 5.6, 1.0, "bitwise"},
    {"persist_bw", "{\"NB\":128,\"PDL\":1,\"TP\":2}", 7, 1.2, "bitwise"},
    {"persist", "{\"GB\":40,\"PDL\":1,\"RG\":32}", 6.2, 0.62, "kl"},
    {"pipe", "{\"CL\":8,\"GB\":40,\"PDL\":1}", 4.6, 1.0, "kl"},
};
#define NCANDS ((int)HCT_ARRAY_SIZE(cands))

static double us_of(int c, int T, int run) {
  /* A fixed wiggle per (c, T) so lines are not straight; the older probe
   * 4% slower, as after a driver update. */
  double wiggle = 1 + 0.03 * sin(c * 1.7 + T * 2.3);
  return (cands[c].a + cands[c].b * T) * wiggle * (run == 0 ? 1.04 : 1.0);
}

static void add_timing(hct_db_t *db, const hct_db_keys_t *k, const char *run_id, int c, int T,
                       int run, int cold, int decides) {
  hct_db_trial_t t;
  memset(&t, 0, sizeof t);
  t.keys = *k;
  hct__strlcpy(t.run_id, run_id, sizeof t.run_id);
  strcpy(t.op, "hc_read");
  strcpy(t.variant, cands[c].variant);
  strcpy(t.params, cands[c].params);
  strcpy(t.kind, "timing");
  double us = us_of(c, T, run) * (cold ? 1.0 : 0.55);
  /* The slowest are pruned early, as the probe does. */
  strcpy(t.status, decides && us > 3 * us_of(NCANDS - 1, T, run) ? "pruned" : "pass");
  t.tokens = T;
  t.cold = cold;
  t.samples = 12;
  t.median_us = us;
  t.ci_lo_us = us * 0.985;
  t.ci_hi_us = us * 1.02;
  char figs[128];
  snprintf(figs, sizeof figs, "{\"batch\":96,\"decides\":%d}", decides);
  t.figures_json = figs;
  assert_int_equal(hct__db_trial_add(db, &t, NULL), 0);
}

static void add_parity(hct_db_t *db, const hct_db_keys_t *k, const char *run_id, int c, int T,
                       const char *status, double kl) {
  hct_db_trial_t t;
  memset(&t, 0, sizeof t);
  t.keys = *k;
  hct__strlcpy(t.run_id, run_id, sizeof t.run_id);
  strcpy(t.op, "hc_read");
  strcpy(t.variant, cands[c].variant);
  strcpy(t.params, cands[c].params);
  strcpy(t.kind, "parity");
  strcpy(t.status, status);
  t.tokens = T;
  t.seed = 1000 + (uint64_t)T;
  char figs[640];
  snprintf(figs, sizeof figs,
           "{\"resid\":{\"rel_err\":0,\"max_err_ratio\":0,\"kl_mean\":0,\"kl_max\":0,\"argmax\":1,"
           "\"mismatches\":0,\"unwritten\":0,\"image_mismatches\":0},"
           "\"mixed\":{\"rel_err\":3e-7,\"max_err_ratio\":%g,\"kl_mean\":%g,\"kl_max\":%g,"
           "\"argmax\":1,\"mismatches\":%d,\"unwritten\":0,\"image_mismatches\":0},"
           "\"mixed_bf16\":{\"rel_err\":0.002,\"max_err_ratio\":0.004,\"kl_mean\":1e-6,"
           "\"kl_max\":1e-5,\"argmax\":1,\"mismatches\":0,\"unwritten\":0,"
           "\"image_mismatches\":0},\"run_ms\":0.5}",
           2e-6 * kl / 1e-10, kl, kl * 3, strcmp(cands[c].klass, "kl") == 0 ? 812 : 0);
  t.figures_json = figs;
  assert_int_equal(hct__db_trial_add(db, &t, NULL), 0);
}

static void add_fault(hct_db_t *db, const hct_db_keys_t *k, const char *variant,
                      const char *params, int T, const char *reason, const char *log) {
  hct_db_fault_t f;
  memset(&f, 0, sizeof f);
  f.keys = *k;
  strcpy(f.op, "hc_read");
  snprintf(f.variant, sizeof f.variant, "%s", variant);
  snprintf(f.params, sizeof f.params, "%s", params);
  snprintf(f.reason, sizeof f.reason, "%s", reason);
  f.tokens = T;
  f.log = (char *)log;
  assert_int_equal(hct__db_fault_add(db, &f), 0);
}

/* Two probes of hc_read at T = 1..8 on one card, the decisions of the
 * newer, a parity failure and a timeout. */
static void make_two_probes(const char *path) {
  hct_db_t *db;
  if (hct__db_open(path, 0, &db) != 0) fail_msg("%s", hct_last_error());
  hct_db_keys_t k = keys("GPU-5e1f0c2a-77aa-4b1e-9c3d-0123456789ab");
  assert_int_equal(hct__db_device_upsert(db, &k, "NVIDIA H200", "sm_90", "{}"), 0);
  char runs[2][33];
  for (int run = 0; run < 2; run++) {
    assert_int_equal(hct__db_run_begin(db, &k, "hc_read", "--tokens 1-8", runs[run]), 0);
    for (int T = 1; T <= 8; T++)
      for (int c = 0; c < NCANDS; c++) add_parity(db, &k, runs[run], c, T, "pass", c == 0 ? 1e-10 : 1.1e-10);
    for (int T = 1; T <= 8; T++) {
      for (int c = 0; c < NCANDS; c++) add_timing(db, &k, runs[run], c, T, run, 1, 1);
      /* hot figures for the baseline and relay, beside */
      add_timing(db, &k, runs[run], 0, T, run, 0, 0);
      add_timing(db, &k, runs[run], 5, T, run, 0, 0);
    }
    assert_int_equal(hct__db_run_end(db, runs[run], "done"), 0);
  }
  /* Decisions of the newer probe: the fastest per class at each T. */
  for (int kl = 0; kl <= 1; kl++) {
    hct_db_decision_t d[8];
    memset(d, 0, sizeof d);
    for (int T = 1; T <= 8; T++) {
      int best = 0;
      for (int c = 1; c < NCANDS; c++)
        if ((kl || strcmp(cands[c].klass, "kl") != 0) && us_of(c, T, 1) < us_of(best, T, 1)) best = c;
      hct_db_decision_t *x = &d[T - 1];
      x->keys = k;
      strcpy(x->op, "hc_read");
      strcpy(x->parity, kl ? "kl" : "bitwise");
      x->tmin = x->tmax = T;
      strcpy(x->variant, cands[best].variant);
      strcpy(x->params, cands[best].params);
      strcpy(x->variant_class, cands[best].klass);
      strcpy(x->source, "probe");
      x->median_us = us_of(best, T, 1);
      x->ci_lo_us = x->median_us * 0.985;
      x->ci_hi_us = x->median_us * 1.02;
      x->baseline_us = us_of(0, T, 1);
      x->samples = 12;
      x->decided_at = hct__unix_time();
      snprintf(x->run_id, sizeof x->run_id, "%s", runs[1]);
    }
    assert_int_equal(hct__db_decisions_replace(db, d, 8), 0);
  }
  /* Issue 29: a bit family's decision (relay's bits), listed in the
   * decisions table, never drawn as a class's winner. */
  hct_db_decision_t fam;
  memset(&fam, 0, sizeof fam);
  fam.keys = k;
  strcpy(fam.op, "hc_read");
  strcpy(fam.parity, "bits:relay");
  fam.tmin = 1;
  fam.tmax = 8;
  strcpy(fam.variant, cands[5].variant);
  strcpy(fam.params, cands[5].params);
  strcpy(fam.variant_class, "bitwise");
  strcpy(fam.source, "probe");
  fam.median_us = us_of(5, 1, 1);
  fam.baseline_us = us_of(0, 1, 1);
  fam.samples = 12;
  fam.decided_at = hct__unix_time();
  assert_int_equal(hct__db_decisions_replace(db, &fam, 1), 0);
  add_fault(db, &k, "splitk", "{\"CPW\":1,\"PDL\":0,\"PF\":0,\"RPB\":4,\"SPLIT\":20,\"UW\":8}", 3,
            "parity", "T=3 seed 77: 'mixed' 0 mismatches, kl 4.1e-09 over the limit 1.25e-10");
  add_fault(db, &k, "persist_bw", "{\"NB\":128,\"PDL\":0,\"TP\":2}", 8, "timeout",
            "grid barrier wait exceeded 2 s");
  hct__db_close(db);
  /* The older probe a day earlier: trials get their time when written. */
  sqlite3 *h;
  assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
  char sql[256];
  snprintf(sql, sizeof sql, "UPDATE trials SET created_at = created_at - 86400 WHERE run_id = '%s'",
           runs[0]);
  assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_two_probes(void **state) {
  (void)state;
  char db[128];
  snprintf(db, sizeof db, "%s/two.db", dir);
  make_two_probes(db);
  char *page = render(db, "two.html");
  check_marks(page, db);
  assert_int_equal(check_winners(page, db), 16);
  assert_non_null(strstr(page, "<tr><td><span class=\"cls family\">bits:relay</span></td><td class=\"nw\">1&ndash;8</td><td>relay</td>"));
  /* One summary line per T, the over-time plot, both faults, parity rows. */
  assert_int_equal(count(page, "<li data-t=\""), 8);
  assert_non_null(strstr(page, "class=\"plot history\""));
  assert_true(count(page, "class=\"history\"") >= 8);
  assert_int_equal(count(page, "<tr class=\"fault\">"), 2);
  assert_non_null(strstr(page, "grid barrier wait exceeded 2 s"));
  assert_non_null(strstr(page, "8 and up"));
  assert_int_equal(count(page, "<tr class=\"ok\">"), NCANDS);
  /* Self-contained: nothing fetched, no script. */
  assert_null(strstr(page, "<script"));
  assert_null(strstr(page, "src="));
  assert_null(strstr(page, "href=\"http"));
  free(page);
}

static void test_empty(void **state) {
  (void)state;
  char db[128];
  snprintf(db, sizeof db, "%s/empty.db", dir);
  hct_db_t *h;
  assert_int_equal(hct__db_open(db, 0, &h), 0);
  hct__db_close(h);
  char *page = render(db, "empty.html");
  assert_non_null(strstr(page, "id=\"nothing\""));
  assert_non_null(strstr(page, "</html>"));
  assert_int_equal(count(page, "<svg"), 0);
  free(page);
}

static void test_faults_only(void **state) {
  (void)state;
  char db[128];
  snprintf(db, sizeof db, "%s/faults.db", dir);
  hct_db_t *h;
  assert_int_equal(hct__db_open(db, 0, &h), 0);
  hct_db_keys_t k = keys("GPU-faulty");
  add_fault(h, &k, "persist", "{\"GB\":40}", 0, "compile", "error: identifier \"x\" is undefined");
  add_fault(h, &k, "pipe", "{\"CL\":8}", 4, "hang", NULL);
  hct__db_close(h);
  char *page = render(db, "faults.html");
  assert_int_equal(count(page, "<tr class=\"fault\">"), 2);
  assert_non_null(strstr(page, "every T"));
  assert_non_null(strstr(page, "identifier &quot;x&quot; is undefined"));
  assert_non_null(strstr(page, "No decisions recorded."));
  assert_int_equal(count(page, "class=\"trial"), 0);
  free(page);
}

/* Names, parameters, reasons and logs are the DB's: markup in them stays
 * text. */
static void test_hostile(void **state) {
  (void)state;
  char db[128];
  snprintf(db, sizeof db, "%s/hostile.db", dir);
  hct_db_t *h;
  assert_int_equal(hct__db_open(db, 0, &h), 0);
  hct_db_keys_t k = keys("GPU-<img src=x onerror=alert(1)>");
  strcpy(k.host, "</title><script>alert(2)</script>");
  const char *evil = "<script>alert(3)</script>";
  assert_int_equal(hct__db_device_upsert(h, &k, "<b onmouseover=alert(4)>", "'\"<>", "{}"), 0);
  hct_db_trial_t t;
  memset(&t, 0, sizeof t);
  t.keys = k;
  strcpy(t.op, "hc_read");
  strcpy(t.variant, evil);
  strcpy(t.params, "{\"X\":\"\\\"><svg onload=alert(5)>\"}");
  strcpy(t.kind, "timing");
  strcpy(t.status, "pass");
  t.tokens = 2;
  t.median_us = 5;
  t.ci_lo_us = -5; /* a hostile interval is not drawn */
  t.ci_hi_us = 1e300;
  t.samples = 7;
  t.figures_json = "not json <i>";
  assert_int_equal(hct__db_trial_add(h, &t, NULL), 0);
  t.median_us = INFINITY; /* never plotted */
  t.tokens = 3;
  assert_int_equal(hct__db_trial_add(h, &t, NULL), 0);
  add_fault(h, &k, evil, "{\"<i>\":1}", 2, "<u>reason", "</pre><script>alert(6)</script>\x01\x1b");
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  d.keys = k;
  strcpy(d.op, "hc_read");
  strcpy(d.parity, "bitwise");
  d.tmin = d.tmax = 2;
  strcpy(d.variant, evil);
  strcpy(d.params, "{\"X\":\"\\\"><svg onload=alert(5)>\"}");
  strcpy(d.variant_class, "<b>");
  strcpy(d.source, "<i>");
  d.median_us = 5;
  d.baseline_us = 7;
  assert_int_equal(hct__db_decisions_replace(h, &d, 1), 0);
  hct__db_close(h);
  char *page = render(db, "hostile.html");
  assert_null(strstr(page, "<script"));
  assert_null(strstr(page, "<img"));
  assert_null(strstr(page, "<b onmouseover"));
  assert_null(strstr(page, "<u>"));
  assert_null(strstr(page, "<td><i>"));
  assert_null(strstr(page, "<i>=1"));
  assert_non_null(strstr(page, "&lt;i&gt;=1"));
  assert_null(strstr(page, "<svg onload"));
  assert_null(strstr(page, "\x1b"));
  assert_non_null(strstr(page, "&lt;script&gt;alert(3)&lt;/script&gt;"));
  assert_int_equal(count(page, "class=\"trial"), 1);
  assert_int_equal(count(page, "class=\"winner\""), 1);
  free(page);
}

static void test_errors(void **state) {
  (void)state;
  char missing[128], out[160], ro[160];
  snprintf(missing, sizeof missing, "%s/absent.db", dir);
  snprintf(out, sizeof out, "%s/never.html", dir);
  snprintf(ro, sizeof ro, "%s/no/such/folder/x.html", dir);
  char a1[512], a2[512], a3[512], a4[512];
  snprintf(a1, sizeof a1, "report --db '%s' --out '%s'", missing, out);
  snprintf(a2, sizeof a2, "report --db '%s/empty.db' --out '%s'", dir, ro);
  snprintf(a3, sizeof a3, "report --db '%s/empty.db'", dir);
  snprintf(a4, sizeof a4, "report --db '%s/empty.db' --op no_such_op --device GPU-x --out '%s'",
           dir, out);
  const struct {
    const char *args;
    int status;
    const char *needle;
  } cases[] = {
      {a1, 1, "absent.db"},
      {a2, 1, "x.html': cannot write"},
      {a3, 2, "--out FILE is required"},
      {a4, 1, "nothing recorded for op 'no_such_op' on card 'GPU-x'"},
      {"report --bogus", 2, "unknown option '--bogus'"},
      {"report --out", 2, "needs a value"},
      {"report --out x.html extra", 2, "unexpected argument 'extra'"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    char *err = NULL;
    int st = run(cases[i].args, &err);
    if (st != cases[i].status || cli_lines(err) != 1 || strstr(err, cases[i].needle) == NULL)
      fail_msg("hctune %s: status %d (want %d), stderr '%s' (want one line with '%s')",
               cases[i].args, st, cases[i].status, err, cases[i].needle);
    free(err);
  }
  assert_int_not_equal(access(out, F_OK), 0);
  assert_int_not_equal(access(missing, F_OK), 0);
  char *err = NULL;
  assert_int_equal(run("report --help", &err), 0);
  assert_string_equal(err, "");
  free(err);
}

/* --op and --device pick sections; "-" writes the page to stdout. */
static void test_filters(void **state) {
  (void)state;
  char db[128];
  snprintf(db, sizeof db, "%s/two.db", dir);
  char *out = NULL, *err = NULL, args[512];
  snprintf(args, sizeof args, "report --db '%s' --op hc_read --device GPU-5e1f --out -", db);
  int st = cli_run("", bin, dir, args, &out, &err);
  if (st != 0 || err[0]) fail_msg("hctune %s: status %d, stderr '%s'", args, st, err);
  assert_int_equal(count(out, "<section class=\"card-op\""), 1);
  check_marks(out, db);
  free(out);
  free(err);
  snprintf(args, sizeof args, "report --db '%s' --device GPU-0000 --out -", db);
  st = cli_run("", bin, dir, args, &out, &err);
  assert_int_equal(st, 1);
  assert_string_equal(out, "");
  assert_non_null(strstr(err, "nothing recorded for card 'GPU-0000'"));
  free(out);
  free(err);
}

/* ---- the fixture in Chromium ----------------------------------------------- */

/* The browser: $HCT_CHROMIUM when set (a name or a path), else the first
 * of Debian's and others' names on PATH; NULL when none runs. */
static const char *chromium(void) {
  static const char *const names[] = {"chromium", "chromium-browser", "google-chrome"};
  static char found[256];
  const char *forced = getenv("HCT_CHROMIUM");
  if (forced && forced[0]) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v '%s' >/dev/null 2>&1", forced);
    if (system(cmd) != 0) return NULL;
    snprintf(found, sizeof found, "'%s'", forced);
    return found;
  }
  for (size_t i = 0; i < HCT_ARRAY_SIZE(names); i++) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", names[i]);
    if (system(cmd) == 0) {
      snprintf(found, sizeof found, "%s", names[i]);
      return found;
    }
  }
  return NULL;
}

/* Runs the browser headless on a page: `what` is "--dump-dom" (the DOM
 * after load into out) or "--screenshot=PATH". */
static void browse(const char *browser, const char *what, const char *page, const char *out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "timeout 120 %s --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
           "--no-first-run --hide-scrollbars --user-data-dir='%s/chromium' "
           "--window-size=1180,%d %s 'file://%s' >'%s' 2>'%s/chromium.log'",
           browser, dir, strncmp(what, "--dump", 6) == 0 ? 900 : 1750, what, page,
           out ? out : "/dev/null", dir);
  int st = system(cmd);
  if (st != 0) {
    char log[256], *text = NULL;
    snprintf(log, sizeof log, "%s/chromium.log", dir);
    hct__read_file(log, &text, NULL);
    fail_msg("%s %s: status %d: %.600s", browser, what, st, text ? text : "");
  }
}

/* The fixture: tests/fixtures/ from the tree's root (where tests/run.sh
 * runs), else beside the kernel templates' folder. */
static const char *fixture(void) {
  static char path[1200];
  struct stat sb;
  if (stat(FIXTURE, &sb) == 0) return FIXTURE;
  snprintf(path, sizeof path, "%s/%s", hct_test_root(), FIXTURE);
  if (stat(path, &sb) != 0) fail_msg("%s: missing (run from the tree's root)", FIXTURE);
  return path;
}

/* ---- the distance to the card's limit -------------------------------------- */

/* The fraction of floor of class par at T in a page or DOM: data-fraction
 * of the floor table's cell; NAN when absent. */
static double floor_fraction(const char *page, const char *par, int T) {
  char row[64], cell[96], v[32];
  snprintf(row, sizeof row, "<tr data-t=\"%d\">", T);
  const char *r = strstr(page, "<table class=\"floor\">");
  if (r != NULL) r = strstr(r, row);
  snprintf(cell, sizeof cell, "class=\"n frac\" data-parity=\"%s\"", par);
  const char *c = r != NULL ? strstr(r, cell) : NULL;
  const char *end = r != NULL ? strstr(r, "</tr>") : NULL;
  if (c == NULL || c > end || !attr(page, c, "data-fraction", v, sizeof v)) return NAN;
  return atof(v);
}

/* The floor (us) the table gives at T. */
static double floor_us(const char *page, int T) {
  char row[64];
  snprintf(row, sizeof row, "<tr data-t=\"%d\"><td class=\"n\">%d</td><td class=\"n\">", T, T);
  const char *r = strstr(page, "<table class=\"floor\">");
  r = r != NULL ? strstr(r, row) : NULL;
  return r != NULL ? atof(r + strlen(row)) : NAN;
}

/* The fixture's page: the floor column at every T, nominal for an H200
 * without a measurement, the decode read's floor its bytes over 4.27 TB/s
 * (13.11 MB of weights, 20 KB of w_norm, 40 KB of resid and 20 KB of
 * outputs per token: 3.09 us at T = 1). */
static void check_floor(const char *page) {
  if (strstr(page, "<table class=\"floor\">") == NULL) fail_msg("no floor table");
  if (strstr(page, "fraction of floor</th>") == NULL) fail_msg("no 'fraction of floor' column");
  for (int T = 1; T <= 8; T++)
    for (int par = 0; par < 2; par++) {
      double fr = floor_fraction(page, par ? "kl" : "bitwise", T);
      if (!(fr > 0.05 && fr < 1.0))
        fail_msg("T=%d %s: fraction of floor %g, not in (0.05, 1)", T, par ? "kl" : "bitwise", fr);
    }
  double f1 = floor_us(page, 1);
  double want = (13107200.0 + 20480 + 40960 + 10240 + 5120 + 5120) / 4.27e12 * 1e6;
  if (!(fabs(f1 - want) < 0.01)) fail_msg("floor at T=1: %g us, want %.3f", f1, want);
  if (strstr(page, "data-measured=\"0\"") == NULL || strstr(page, "nominal: 4.27 TB/s") == NULL)
    fail_msg("an H200 without a measured copy bandwidth: the page does not say 'nominal'");
  if (strstr(page, "class=\"floor\"><title>") == NULL) fail_msg("no floor line in the time plot");
  if (strstr(page, "class=\"klhead\"") == NULL) fail_msg("the kl parity chart has no heading");
}

/* A copy of the fixture with a measured copy bandwidth: the page says
 * "measured", every fraction scales by the nominal rate over it, and a
 * later probe's fingerprint (without one) keeps it. */
static void test_floor_measured(void **state) {
  (void)state;
  char db[256], cmd[600];
  snprintf(db, sizeof db, "%s/measured.db", dir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", fixture(), db);
  assert_int_equal(system(cmd), 0);
  char *nominal = render(db, "nominal.html");
  hct_db_t *h;
  assert_int_equal(hct__db_open(db, 0, &h), 0);
  hct_db_device_t *devs;
  int n;
  assert_int_equal(hct__db_devices_list(h, &devs, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(hct__db_device_copy_bw_set(h, devs[0].uuid, devs[0].host, 3.0e12), 0);
  assert_int_equal(hct__db_device_copy_bw_set(h, "GPU-none", devs[0].host, 3.0e12), HCT_ENOENT);
  assert_int_equal(hct__db_device_copy_bw_set(h, devs[0].uuid, devs[0].host, -1), HCT_ERANGE);
  /* the next probe records the card again: the measurement stays */
  hct_db_keys_t k = {0};
  hct__strlcpy(k.host, devs[0].host, sizeof k.host);
  hct__strlcpy(k.uuid, devs[0].uuid, sizeof k.uuid);
  hct__strlcpy(k.model_key, devs[0].model_key, sizeof k.model_key);
  assert_int_equal(hct__db_device_upsert(h, &k, devs[0].name, devs[0].arch,
                                         devs[0].fingerprint_json),
                   0);
  hct__db_devices_free(devs, n);
  hct__db_close(h);
  char *page = render(db, "measured.html");
  assert_non_null(strstr(page, "data-measured=\"1\""));
  assert_non_null(strstr(page, "measured: 3.00 TB/s copy by hctune probe"));
  for (int T = 1; T <= 8; T++) {
    double a = floor_fraction(nominal, "bitwise", T), b = floor_fraction(page, "bitwise", T);
    if (!(fabs(b / a - 4.27 / 3.0) < 0.01))
      fail_msg("T=%d: fraction %g measured, %g nominal: not 4.27/3 apart", T, b, a);
  }
  free(page);
  free(nominal);
}

/* The prefill op gets the same pages: a synthetic probe of hc_read_prefill
 * on an H100 SXM (its nominal row), decisions at 1.5x the floor; the floor
 * at T = 8192 is its bytes (R once, the weights, the three outputs) over
 * 3.35 TB/s, over the flops' 107 GFLOP at 989 TFLOP/s; the fractions 2/3. */
static void test_prefill_floor(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "%s/prefill.db", dir);
  hct_db_t *db;
  if (hct__db_open(path, 0, &db) != 0) fail_msg("%s", hct_last_error());
  hct_db_keys_t k = keys("GPU-11110000-2222-3333-4444-555566667777");
  assert_int_equal(hct__db_device_upsert(db, &k, "NVIDIA H100 80GB HBM3", "sm_90", "{}"), 0);
  static const int Ts[] = {16, 128, 512, 2048, 8192, 32768};
  const double S = 4, C = 2560, D = 10240, K = 320;
  for (int par = 0; par < 2; par++) {
    hct_db_decision_t d[6];
    memset(d, 0, sizeof d);
    for (int i = 0; i < 6; i++) {
      double T = Ts[i];
      double bytes = T * S * C * 4 + S * C * 2 + 2 * K * D * 2 + T * C * (4 + 2 + 2);
      double floor_us = fmax(bytes / 3.35e12, 4 * T * K * D / 989e12) * 1e6;
      hct_db_decision_t *x = &d[i];
      x->keys = k;
      strcpy(x->op, "hc_read_prefill");
      strcpy(x->parity, par ? "kl" : "bitwise");
      x->tmin = x->tmax = Ts[i];
      strcpy(x->variant, par ? "pair_mma" : "pair_simt");
      strcpy(x->params, "{}");
      strcpy(x->variant_class, par ? "kl" : "baseline");
      strcpy(x->source, "probe");
      x->median_us = 1.5 * floor_us;
      x->baseline_us = 2 * floor_us;
      x->samples = 6;
      x->decided_at = hct__unix_time();
    }
    assert_int_equal(hct__db_decisions_replace(db, d, 6), 0);
  }
  hct__db_close(db);
  char *page = render(path, "prefill.html");
  assert_non_null(strstr(page, "data-op=\"hc_read_prefill\""));
  assert_non_null(strstr(page, "nominal: 3.35 TB/s"));
  assert_non_null(strstr(page, "over the card's peak"));
  double bytes = 8192.0 * 4 * 2560 * 4 + 4 * 2560 * 2 + 2 * 320 * 10240 * 2 + 8192.0 * 2560 * 8;
  double want = bytes / 3.35e12 * 1e6;
  double got = floor_us(page, 8192);
  if (!(fabs(got / want - 1) < 0.01)) fail_msg("prefill floor at T=8192: %g us, want %.1f", got, want);
  for (int i = 0; i < 6; i++)
    for (int par = 0; par < 2; par++) {
      double fr = floor_fraction(page, par ? "kl" : "bitwise", Ts[i]);
      if (!(fabs(fr - 2.0 / 3) < 0.01)) fail_msg("T=%d: fraction %g, want 2/3", Ts[i], fr);
    }
  free(page);
}

/* The styles of the variants' lines (and of the history's T lines): no two
 * the same colour and dash.  The old palette's neighbours were near-identical
 * pastels. */
static void check_styles(const char *page, const char *cls) {
  char seen[64][64];
  int n = 0;
  char needle[64];
  snprintf(needle, sizeof needle, "class=\"%s", cls);
  const char *sec_end = strstr(page, "</section>");
  for (const char *p = page; (p = strstr(p, needle)) != NULL && p < sec_end; p++) {
    char colour[16], dash[24], key[64];
    if (!attr(page, p, "data-colour", colour, sizeof colour)) continue;
    if (!attr(page, p, "data-dash", dash, sizeof dash)) dash[0] = '\0';
    char par[16] = "";
    attr(page, p, "data-parity", par, sizeof par);
    snprintf(key, sizeof key, "%s %s %s", par, colour, dash);
    for (int i = 0; i < n; i++)
      if (strcmp(seen[i], key) == 0) fail_msg("two %s lines styled '%s'", cls, key);
    if (n < 64) hct__strlcpy(seen[n++], key, sizeof seen[0]);
  }
  if (n < 2) fail_msg("fewer than two %s lines with a style", cls);
}

static void test_fixture_in_chromium(void **state) {
  (void)state;
  const char *fx = fixture();
  char *page = render(fx, "h200.html");
  assert_null(strstr(page, "<script"));
  assert_null(strstr(page, "src="));
  assert_null(strstr(page, "href=\"http"));
  /* The fixture: hc_read at T = 1..8 with relay, persist and pipe winning
   * somewhere. */
  for (int T = 1; T <= 8; T++) {
    char li[32];
    snprintf(li, sizeof li, "<li data-t=\"%d\">", T);
    if (strstr(page, li) == NULL) fail_msg("no summary line for T=%d", T);
  }
  static const char *const winners[] = {"relay", "persist", "pipe"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(winners); i++) {
    char w[64];
    snprintf(w, sizeof w, "class=\"winner\" data-parity=\"%s\"", i == 0 ? "bitwise" : "kl");
    char v[64];
    snprintf(v, sizeof v, "data-variant=\"%s\"", winners[i]);
    int hit = 0;
    for (const char *p = page; (p = strstr(p, "class=\"winner\"")) != NULL; p++) {
      const char *end = strchr(p, '>');
      const char *q = strstr(p, v);
      if (q && end && q < end) hit = 1;
    }
    if (!hit) fail_msg("the fixture's page marks no %s winner", winners[i]);
  }
  /* On the text, the same checks as in the DOM. */
  check_marks(page, fx);
  check_winners(page, fx);
  check_floor(page);
  check_styles(page, "variant");
  check_styles(page, "history");
  free(page);
  if (UNDER_ASAN) {
    printf("chromium part skipped under the sanitizers: it ran in the plain pass (the browser "
           "is not sanitized; the page's text was checked above)\n");
    return;
  }
  const char *browser = chromium();
  if (browser == NULL) {
    const char *allow = getenv("HCT_ALLOW_NO_CHROMIUM");
    if (allow && strcmp(allow, "1") == 0) {
      printf("chromium part skipped: no chromium (Debian's package 'chromium', installed by "
             "make deps) and HCT_ALLOW_NO_CHROMIUM=1\n");
      return;
    }
    fail_msg("no chromium on PATH: install it (make deps) or set HCT_ALLOW_NO_CHROMIUM=1");
  }
  char html[256], dom[256], shot[512];
  snprintf(html, sizeof html, "%s/h200.html", dir);
  if (html[0] != '/') fail_msg("temporary folder %s is not absolute", dir);
  snprintf(dom, sizeof dom, "%s/dom.html", dir);
  const char *keep = getenv("HCT_REPORT_SHOT");
  if (keep && keep[0]) snprintf(shot, sizeof shot, "%s", keep);
  else snprintf(shot, sizeof shot, "%s/shot.png", dir);
  browse(browser, "--dump-dom", html, dom);
  char *text = slurp(dom);
  check_marks(text, fx);
  int nwin = check_winners(text, fx);
  assert_true(nwin >= 16);
  check_floor(text);
  free(text);
  char arg[600];
  snprintf(arg, sizeof arg, "--screenshot='%s'", shot);
  browse(browser, arg, html, NULL);
  /* A PNG of the whole first screen: its signature and some size. */
  FILE *f = fopen(shot, "rb");
  assert_non_null(f);
  unsigned char sig[8] = {0};
  assert_int_equal(fread(sig, 1, 8, f), 8);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
  assert_true(size > 20000);
  printf("chromium: DOM checked (%d winner marks), screenshot %s (%ld bytes)\n", nwin, shot, size);
}

int main(void) {
  if (getenv("HCT_BIN") == NULL) {
    printf("skipped: HCT_BIN is not set (run through tests/run.sh)\n");
    return 0;
  }
  snprintf(bin, sizeof bin, "%s/hctune", getenv("HCT_BIN"));
  snprintf(dir, sizeof dir, "/tmp/hct_test_report.XXXXXX");
  if (mkdtemp(dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_probes),
      cmocka_unit_test(test_filters),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_faults_only),
      cmocka_unit_test(test_hostile),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_fixture_in_chromium),
      cmocka_unit_test(test_floor_measured),
      cmocka_unit_test(test_prefill_floor),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  /* HCT_TEST_KEEP=1 keeps the pages (and DBs) to look at. */
  const char *keep = getenv("HCT_TEST_KEEP");
  if (keep && strcmp(keep, "1") == 0) {
    printf("kept %s\n", dir);
    return rc;
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return rc;
}
