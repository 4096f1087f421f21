/*
 * test_fleet.c: fleet files (db/fleet.h, `hctune db`): exports of a
 * synthesized fleet (3 hosts x 2 identical cards, and a card of another
 * model), their merge (decisions by the probe's rule, an outlier card left
 * out, a variant that fails on one identical card quarantined, the same
 * decisions in any input order and when merged again), import into a local
 * DB, and hostile files of many kinds refused by `db import` and `db
 * merge` with the local DB byte-identical.  Needs HCT_BIN and
 * HCTUNE_KERNELS (set by tests/run.sh).
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

#include "fleet.h"
#include "tuner.h"
#include "cli_test.h"

#define MODEL_A "NVIDIA|NVIDIA H200|sm_90|132|141"
#define MODEL_B "NVIDIA|NVIDIA L4|sm_89|58|22"
#define V3_PARAMS "{\"DOWN_WARPS\":8,\"TPL\":1,\"UP_WARPS\":4}"

static char dir[64];
static char kdir[1024];
static char bin[1100];
/* exports[i]: host i+1's; exports[3]: the other model's card */
static char exports[4][160];

typedef struct cand_spec_s {
  const char *variant, *params;
  double us; /* median on a normal card of model A */
  double us_b; /* on model B */
} cand_spec_t;

static const cand_spec_t cands[] = {
    {"v1", "{\"DOWN_WARPS\":4,\"UP_WARPS\":4}", 10.0, 20.0},
    {"v2", "{\"DOWN_WARPS\":8,\"UP_WARPS\":4}", 9.0, 16.0},
    {"relay", "{\"G\":1,\"GB\":1,\"LT\":0,\"NG\":1,\"PDL\":1}", 8.0, 19.0},
    {"persist", "{\"GB\":1,\"PDL\":1,\"RG\":2}", 7.0, 21.0},
    {"v3", V3_PARAMS, 6.0, 30.0},
};

static void path_in(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

/* A software key per variant (what jit/softkey.c would give its binary
 * here: the same on every card of one environment). */
static void softkey_of(const char *variant, char key[33], char *json, size_t len) {
  unsigned h = 2166136261u;
  for (const char *p = variant; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
  snprintf(key, 33, "%08x%08x%08x%08x", h, h ^ 0x5a5a5a5au, h * 3u, h + 7u);
  snprintf(json, len, "{\"template\":\"%s\",\"driver\":\"12.8\"}", variant);
}

/* Set by a test: the software key every trial gets instead of its
 * variant's (a host whose compiler or templates differ). */
static const char *forced_softkey;
/* Set by a test: the op of every trial instead of hc_read. */
static const char *trial_op;

static void add_trial(hct_db_t *db, const hct_db_keys_t *k, const cand_spec_t *c, const char *kind,
                      const char *status, int T, double us) {
  hct_db_trial_t t;
  memset(&t, 0, sizeof t);
  t.keys = *k;
  hct__strlcpy(t.op, trial_op ? trial_op : "hc_read", sizeof t.op);
  hct__strlcpy(t.variant, c->variant, sizeof t.variant);
  hct__strlcpy(t.params, c->params, sizeof t.params);
  hct__strlcpy(t.template_hash, "0123456789abcdef0123456789abcdef", sizeof t.template_hash);
  hct__strlcpy(t.kind, kind, sizeof t.kind);
  hct__strlcpy(t.status, status, sizeof t.status);
  t.tokens = T;
  softkey_of(c->variant, t.software_key, t.software_json, sizeof t.software_json);
  if (forced_softkey != NULL) hct__strlcpy(t.software_key, forced_softkey, sizeof t.software_key);
  if (strcmp(kind, "timing") == 0) {
    t.samples = 20;
    t.median_us = us;
    t.min_us = us * 0.99;
    t.p10_us = us * 0.995;
    t.p90_us = us * 1.005;
    t.ci_lo_us = us * 0.995;
    t.ci_hi_us = us * 1.005;
    t.converged = 1;
    t.figures_json = "{\"decides\":1}";
  } else {
    t.figures_json = "{\"y\":{\"mismatches\":0}}";
  }
  assert_int_equal(hct__db_trial_add(db, &t, NULL), 0);
}

/*
 * One host's DB: its cards probed for T = 1..4.  slow: a factor on every
 * timing of card `slow_card` (0: none); v3_fails: v3 fails parity on card
 * 0 of this host.
 */
static void make_host_faulty(const char *dbpath, const char *host, const char *model, int ncards,
                             int slow_card, double slow, int v3_fails, const char *fault_variant) {
  hct_db_t *db;
  assert_int_equal(hct__db_open(dbpath, 0, &db), 0);
  for (int card = 0; card < ncards; card++) {
    hct_db_keys_t k;
    memset(&k, 0, sizeof k);
    hct__strlcpy(k.host, host, sizeof k.host);
    snprintf(k.uuid, sizeof k.uuid, "GPU-%s-%d", host, card);
    hct__strlcpy(k.model_key, model, sizeof k.model_key);
    hct__strlcpy(k.driver_version, "12.8", sizeof k.driver_version);
    hct__strlcpy(k.compiler_version, "12.8", sizeof k.compiler_version);
    hct__strlcpy(k.hctune_version, HCT_VERSION_STRING, sizeof k.hctune_version);
    assert_int_equal(hct__db_device_upsert(db, &k, "NVIDIA H200", "sm_90", "{}"), 0);
    int is_b = strcmp(model, MODEL_B) == 0;
    for (size_t c = 0; c < HCT_ARRAY_SIZE(cands); c++) {
      int fails = v3_fails && card == 0 && strcmp(cands[c].variant, "v3") == 0;
      for (int T = 1; T <= 4; T++) {
        add_trial(db, &k, &cands[c], "parity", fails ? "parity" : "pass", T, 0);
        if (fails) continue;
        double us = (is_b ? cands[c].us_b : cands[c].us) * (1 + 0.01 * T);
        if (slow_card == card + 1) us *= slow;
        add_trial(db, &k, &cands[c], "timing", "pass", T, us);
      }
    }
    /* A fault of a later probe on this host's last card: a conflict by
     * fault rather than by trial. */
    if (fault_variant != NULL && card == ncards - 1) {
      hct_db_fault_t ft;
      memset(&ft, 0, sizeof ft);
      ft.keys = k;
      strcpy(ft.op, "hc_read");
      hct__strlcpy(ft.variant, fault_variant, sizeof ft.variant);
      for (size_t c = 0; c < HCT_ARRAY_SIZE(cands); c++)
        if (strcmp(cands[c].variant, fault_variant) == 0)
          hct__strlcpy(ft.params, cands[c].params, sizeof ft.params);
      strcpy(ft.template_hash, "0123456789abcdef0123456789abcdef");
      strcpy(ft.reason, "unwritten");
      assert_int_equal(hct__db_fault_add(db, &ft), 0);
    }
    /* The card's own probe decision, which a merge recomputes. */
    hct_db_decision_t d;
    memset(&d, 0, sizeof d);
    d.keys = k;
    strcpy(d.op, "hc_read");
    strcpy(d.parity, "bitwise");
    d.tmin = 1;
    d.tmax = 4;
    strcpy(d.variant, "relay");
    strcpy(d.params, cands[2].params);
    strcpy(d.variant_class, "bitwise");
    strcpy(d.source, "probe");
    d.median_us = 8;
    d.baseline_us = 10;
    assert_int_equal(hct__db_decisions_replace(db, &d, 1), 0);
    /* Issue 29: the card's decision of the bit family of relay's bits,
     * relay itself (v3, 6 us, is in the family here too, but fails its
     * check on one card: a conflict, out of the pool; persist, 7 us, is
     * faster than relay and not in the family). */
    strcpy(d.parity, "bits:relay");
    strcpy(d.variant, v3_fails && card == 0 ? "relay" : "v3");
    strcpy(d.params, v3_fails && card == 0 ? cands[2].params : V3_PARAMS);
    strcpy(d.variant_class, "kl");
    assert_int_equal(hct__db_decisions_replace(db, &d, 1), 0);
  }
  hct__db_close(db);
}

static void make_host(const char *dbpath, const char *host, const char *model, int ncards,
                      int slow_card, double slow, int v3_fails) {
  make_host_faulty(dbpath, host, model, ncards, slow_card, slow, v3_fails, NULL);
}

static void export_db(const char *dbpath, const char *out) {
  hct_db_t *db;
  assert_int_equal(hct__db_open(dbpath, HCT_DB_READONLY, &db), 0);
  hct_fleet_t f;
  int rc = hct__fleet_export(db, NULL, kdir, &f);
  if (rc != 0) fail_msg("export: %s", hct_last_error());
  hct__db_close(db);
  rc = hct__fleet_write(&f, out);
  if (rc != 0) fail_msg("write: %s", hct_last_error());
  hct__fleet_free(&f);
}

static int setup_fleet(void **state) {
  (void)state;
  char db[160];
  for (int h = 0; h < 3; h++) {
    char name[32], host[16];
    snprintf(name, sizeof name, "host%d.db", h + 1);
    snprintf(host, sizeof host, "host%d", h + 1);
    path_in(db, sizeof db, name);
    /* host2's second card runs 25% slow; v3 fails on host1's first card;
     * host3's second card recorded a fault of v2 */
    make_host_faulty(db, host, MODEL_A, 2, h == 1 ? 2 : 0, 1.25, h == 0, h == 2 ? "v2" : NULL);
    snprintf(name, sizeof name, "host%d.fleet", h + 1);
    path_in(exports[h], sizeof exports[h], name);
    export_db(db, exports[h]);
  }
  path_in(db, sizeof db, "other.db");
  make_host(db, "host4", MODEL_B, 1, 0, 1, 0);
  path_in(exports[3], sizeof exports[3], "other.fleet");
  export_db(db, exports[3]);
  return 0;
}

static void read_all(hct_fleet_t *in, const int *order, int n) {
  for (int i = 0; i < n; i++) {
    int rc = hct__fleet_read(exports[order[i]], &in[i]);
    if (rc != 0) fail_msg("read %s: %s", exports[order[i]], hct_last_error());
  }
}

static const hct_fleet_decision_t *find_dec(const hct_fleet_t *m, const char *model,
                                            const char *parity, int T) {
  for (int i = 0; i < m->n_decisions; i++) {
    const hct_fleet_decision_t *d = &m->decisions[i];
    if (strcmp(d->model_key, model) == 0 && strcmp(d->parity, parity) == 0 && d->tmin <= T &&
        d->tmax >= T)
      return d;
  }
  return NULL;
}

static int same_decisions(const hct_fleet_t *a, const hct_fleet_t *b) {
  if (a->n_decisions != b->n_decisions) return 0;
  const hct_fleet_table_t *T = hct__fleet_table("decisions");
  for (int i = 0; i < a->n_decisions; i++)
    for (int c = 0; c < T->ncols; c++) {
      const hct_fleet_col_t *C = &T->cols[c];
      const char *x = (const char *)&a->decisions[i] + C->off;
      const char *y = (const char *)&b->decisions[i] + C->off;
      if (C->kind == 'i' || C->kind == 'r') {
        if (memcmp(x, y, 8) != 0) return 0;
      } else if (strcmp(C->heap ? *(char *const *)x : x, C->heap ? *(char *const *)y : y) != 0) {
        return 0;
      }
    }
  return 1;
}

static void merge_order(const int *order, int n, double pct, hct_fleet_t *m) {
  hct_fleet_t in[8];
  memset(in, 0, sizeof in);
  read_all(in, order, n);
  hct_fleet_merge_opts_t o = {pct, 0};
  int rc = hct__fleet_merge(in, n, &o, m);
  if (rc != 0) fail_msg("merge: %s", hct_last_error());
  for (int i = 0; i < n; i++) hct__fleet_free(&in[i]);
}

static int count_flags(const hct_fleet_t *m, const char *kind) {
  int n = 0;
  for (int i = 0; i < m->n_flags; i++) n += strcmp(m->flags[i].kind, kind) == 0;
  return n;
}

/* The merged decisions: relay (bitwise) and persist (kl) on model A, v2 on
 * model B; v3, fastest on A, quarantined for failing on one card. */
static void test_merged_decisions(void **state) {
  (void)state;
  const int order[] = {0, 1, 2, 3};
  hct_fleet_t m;
  merge_order(order, 4, 0, &m);
  assert_string_equal(m.meta.kind, "merge");
  assert_int_equal(m.n_devices, 7);
  for (int T = 1; T <= 4; T++) {
    const hct_fleet_decision_t *b = find_dec(&m, MODEL_A, "bitwise", T);
    const hct_fleet_decision_t *k = find_dec(&m, MODEL_A, "kl", T);
    const hct_fleet_decision_t *b2 = find_dec(&m, MODEL_B, "bitwise", T);
    const hct_fleet_decision_t *k2 = find_dec(&m, MODEL_B, "kl", T);
    assert_non_null(b);
    assert_non_null(k);
    assert_non_null(b2);
    assert_non_null(k2);
    assert_string_equal(b->variant, "relay");
    assert_string_equal(k->variant, "persist");
    assert_string_equal(k->variant_class, "kl");
    assert_string_equal(b2->variant, "v2");
    assert_string_equal(k2->variant, "v2");
    assert_string_equal(b->source, "fleet");
    /* Pooled over the five normal cards: exactly their median. */
    if (b->tmin == T) assert_true(fabs(b->median_us - 8.0 * (1 + 0.01 * T)) < 1e-9);
    if (b->tmin == T) assert_true(fabs(b->baseline_us - 10.0 * (1 + 0.01 * T)) < 1e-9);
  }
  /* Issue 29: the bit family of relay's bits, pooled over its members
   * only: relay, never persist (faster, not relay's bits) nor v3 (in the
   * family, out of the pool by its failed check on GPU-host1-0). */
  for (int T = 1; T <= 4; T++) {
    const hct_fleet_decision_t *f = find_dec(&m, MODEL_A, "bits:relay", T);
    if (f == NULL) fail_msg("no merged bits:relay decision at T=%d", T);
    assert_string_equal(f->variant, "relay");
    assert_string_equal(f->source, "fleet");
  }
  /* One range per class, family and model. */
  assert_int_equal(m.n_decisions, 6);
  const hct_fleet_decision_t *b = find_dec(&m, MODEL_A, "bitwise", 1);
  assert_int_equal(b->tmin, 1);
  assert_int_equal(b->tmax, 4);
  assert_non_null(strstr(b->evidence_json, "\"cards\":5,\"outliers\":1"));
  /* The winner's software key travels with its decision. */
  char key[33], json[320];
  softkey_of("relay", key, json, sizeof json);
  assert_string_equal(b->software_key, key);
  assert_string_equal(b->software_json, json);
  /* The conflicts (v3 by a parity trial, v2 by a fault) and the outlier,
   * reported. */
  assert_int_equal(count_flags(&m, "conflict"), 2);
  assert_int_equal(count_flags(&m, "outlier"), 1);
  for (int i = 0; i < m.n_flags; i++) {
    if (strcmp(m.flags[i].kind, "outlier") == 0) {
      assert_string_equal(m.flags[i].uuid, "GPU-host2-1");
      assert_non_null(strstr(m.flags[i].detail, "\"median_ratio\":1.25"));
    } else if (strcmp(m.flags[i].variant, "v3") == 0) {
      assert_string_equal(m.flags[i].params, V3_PARAMS);
      assert_non_null(strstr(m.flags[i].detail, "\"failed_on\":[\"GPU-host1-0\"]"));
    } else {
      assert_string_equal(m.flags[i].variant, "v2");
      assert_non_null(strstr(m.flags[i].detail, "\"failed_on\":[\"GPU-host3-1\"]"));
    }
  }
  hct__fleet_free(&m);
}

/* A higher threshold keeps the slow card in the pool: no outlier, six
 * cards, and a pooled median that moves. */
static void test_outlier_threshold(void **state) {
  (void)state;
  const int order[] = {0, 1, 2};
  hct_fleet_t m;
  merge_order(order, 3, 30, &m);
  assert_int_equal(count_flags(&m, "outlier"), 0);
  const hct_fleet_decision_t *b = find_dec(&m, MODEL_A, "bitwise", 1);
  assert_non_null(b);
  assert_non_null(strstr(b->evidence_json, "\"cards\":6,\"outliers\":0"));
  /* The union of the cards' intervals reaches up to the slow card's. */
  assert_true(b->ci_hi_us > 8.08 * 1.25);
  hct__fleet_free(&m);
}

/* Without the card that fails it, v3 wins: the quarantine is what keeps
 * it out. */
static void test_conflict_is_what_quarantines(void **state) {
  (void)state;
  const int order[] = {1, 2};
  hct_fleet_t m;
  merge_order(order, 2, 0, &m);
  for (int i = 0; i < m.n_flags; i++) assert_string_not_equal(m.flags[i].variant, "v3");
  const hct_fleet_decision_t *b = find_dec(&m, MODEL_A, "bitwise", 2);
  assert_non_null(b);
  assert_string_equal(b->variant, "v3");
  hct__fleet_free(&m);
}

static void test_order_and_idempotence(void **state) {
  (void)state;
  const int fwd[] = {0, 1, 2, 3}, rev[] = {3, 2, 1, 0}, mix[] = {2, 0, 3, 1, 0};
  hct_fleet_t a, b, c;
  merge_order(fwd, 4, 0, &a);
  merge_order(rev, 4, 0, &b);
  merge_order(mix, 5, 0, &c); /* one input twice */
  assert_true(same_decisions(&a, &b));
  assert_true(same_decisions(&a, &c));
  assert_int_equal(a.n_trials, c.n_trials);
  /* The merge written and merged again, alone, with itself and with an
   * input, decides the same. */
  char mpath[160];
  path_in(mpath, sizeof mpath, "merged.fleet");
  assert_int_equal(hct__fleet_write(&a, mpath), 0);
  hct_fleet_t in[3], again;
  assert_int_equal(hct__fleet_read(mpath, &in[0]), 0);
  assert_int_equal(hct__fleet_read(mpath, &in[1]), 0);
  assert_int_equal(hct__fleet_read(exports[1], &in[2]), 0);
  assert_int_equal(hct__fleet_merge(in, 3, NULL, &again), 0);
  assert_true(same_decisions(&a, &again));
  assert_int_equal(again.n_flags, a.n_flags);
  hct__fleet_free(&again);
  assert_int_equal(hct__fleet_merge(in, 1, NULL, &again), 0);
  assert_true(same_decisions(&a, &again));
  hct__fleet_free(&again);
  for (int i = 0; i < 3; i++) hct__fleet_free(&in[i]);
  hct__fleet_free(&a);
  hct__fleet_free(&b);
  hct__fleet_free(&c);
}

/* One export merged alone decides what its cards' own figures say. */
static void test_single_export(void **state) {
  (void)state;
  const int one[] = {3};
  hct_fleet_t m;
  merge_order(one, 1, 0, &m);
  assert_int_equal(m.n_flags, 0);
  const hct_fleet_decision_t *b = find_dec(&m, MODEL_B, "bitwise", 3);
  assert_non_null(b);
  assert_string_equal(b->variant, "v2");
  assert_int_equal(b->tmin, 1);
  assert_true(fabs(b->median_us - 16.0 * 1.01) < 1e-9);
  hct__fleet_free(&m);
}

/* ---- sparse token counts ------------------------------------------------ */

/* Prefill's kind of probe: counts 16, 128, 2048 of a range 16..32768.  kl
 * winners pair_mma, pair_mma, wgmma_pu (the baseline pair_simt alone in
 * bitwise). */
static const int sparse_T[] = {16, 128, 2048};
static const cand_spec_t sparse_cands[] = {
    {"pair_simt", "{}", 10.0, 10.0},
    {"pair_mma", "{}", 5.0, 9.0},  /* us: at 16 and 128; us_b: at 2048 */
    {"wgmma_pu", "{}", 8.0, 4.0},
};

/* One host's DB of one card probed at sparse_T, its figures times f, and
 * the decisions its probe made (hct__cover_ranges over the counts). */
static void make_sparse_host(const char *dbpath, const char *host, double f) {
  hct_db_t *db;
  assert_int_equal(hct__db_open(dbpath, 0, &db), 0);
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  hct__strlcpy(k.host, host, sizeof k.host);
  snprintf(k.uuid, sizeof k.uuid, "GPU-%s-0", host);
  hct__strlcpy(k.model_key, MODEL_A, sizeof k.model_key);
  hct__strlcpy(k.driver_version, "12.8", sizeof k.driver_version);
  hct__strlcpy(k.compiler_version, "12.8", sizeof k.compiler_version);
  hct__strlcpy(k.hctune_version, HCT_VERSION_STRING, sizeof k.hctune_version);
  assert_int_equal(hct__db_device_upsert(db, &k, "NVIDIA H200", "sm_90", "{}"), 0);
  trial_op = "hc_read_prefill";
  for (size_t c = 0; c < HCT_ARRAY_SIZE(sparse_cands); c++)
    for (size_t i = 0; i < HCT_ARRAY_SIZE(sparse_T); i++) {
      add_trial(db, &k, &sparse_cands[c], "parity", "pass", sparse_T[i], 0);
      double us = sparse_T[i] < 2048 ? sparse_cands[c].us : sparse_cands[c].us_b;
      add_trial(db, &k, &sparse_cands[c], "timing", "pass", sparse_T[i], us * f);
    }
  /* upmix: the fastest timings, but no check passed on any card (timed
   * where its checks did not run: "unchecked"). */
  static const cand_spec_t unchecked = {"upmix", "{}", 1.0, 1.0};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(sparse_T); i++) {
    add_trial(db, &k, &unchecked, "parity", "unchecked", sparse_T[i], 0);
    add_trial(db, &k, &unchecked, "timing", "pass", sparse_T[i], f);
  }
  trial_op = NULL;
  /* Its probe's decisions: kl by the probe's rule, bitwise the baseline. */
  const char *w[] = {"pair_mma", "pair_mma", "wgmma_pu"};
  hct_cover_t r[3];
  int nr = hct__cover_ranges(sparse_T, w, 3, sparse_T, 3, 16, 32768, r, 3);
  assert_int_equal(nr, 2);
  hct_db_decision_t d[3];
  memset(d, 0, sizeof d);
  for (int i = 0; i <= nr; i++) {
    d[i].keys = k;
    strcpy(d[i].op, "hc_read_prefill");
    strcpy(d[i].parity, i < nr ? "kl" : "bitwise");
    d[i].tmin = i < nr ? r[i].tmin : 16;
    d[i].tmax = i < nr ? r[i].tmax : 32768;
    strcpy(d[i].variant, i < nr ? r[i].winner : "pair_simt");
    strcpy(d[i].params, "{}");
    strcpy(d[i].variant_class, i < nr ? "kl" : "baseline");
    strcpy(d[i].source, "probe");
    d[i].median_us = 5;
    d[i].baseline_us = 10;
  }
  /* One call per class: a replace holds the ranges of one. */
  for (int i = 0; i <= nr; i += i < nr ? nr : 1)
    if (hct__db_decisions_replace(db, &d[i], i < nr ? nr : 1) != 0)
      fail_msg("decisions: %s", hct_last_error());
  hct__db_close(db);
}

/*
 * Issue 27: a merge of two hosts' sparse results decides the ranges their
 * probes did (one function, hct__cover_ranges): kl pair_mma 16..512 (to
 * the geometric midpoint of 128 and 2048), wgmma_pu 513..32768, bitwise the
 * baseline over the whole range.  The merge's own rule (adjacent T only)
 * left 17..127 and everything between the counts undecided.  upmix, timed
 * fastest but checked on no card, is served nowhere (issue 29).
 */
static void test_merge_sparse(void **state) {
  (void)state;
  char db[160], ex[2][160];
  hct_fleet_t in[2], m;
  for (int h = 0; h < 2; h++) {
    char name[32], host[32];
    snprintf(name, sizeof name, "sparse%d.db", h);
    snprintf(host, sizeof host, "sparse%d", h);
    path_in(db, sizeof db, name);
    make_sparse_host(db, host, h ? 1.02 : 1.0);
    snprintf(name, sizeof name, "sparse%d.fleet", h);
    path_in(ex[h], sizeof ex[h], name);
    export_db(db, ex[h]);
    if (hct__fleet_read(ex[h], &in[h]) != 0) fail_msg("read %s: %s", ex[h], hct_last_error());
  }
  if (hct__fleet_merge(in, 2, NULL, &m) != 0) fail_msg("merge: %s", hct_last_error());
  static const struct {
    const char *parity, *variant;
    int tmin, tmax;
  } want[] = {{"bitwise", "pair_simt", 16, 32768}, {"kl", "pair_mma", 16, 512}, {"kl", "wgmma_pu", 513, 32768}};
  int n = 0;
  for (int i = 0; i < m.n_decisions; i++) n += strcmp(m.decisions[i].op, "hc_read_prefill") == 0;
  assert_int_equal(n, (int)HCT_ARRAY_SIZE(want));
  for (size_t i = 0; i < HCT_ARRAY_SIZE(want); i++) {
    const hct_fleet_decision_t *d = find_dec(&m, MODEL_A, want[i].parity, want[i].tmin);
    if (d == NULL || strcmp(d->variant, want[i].variant) != 0 || d->tmin != want[i].tmin ||
        d->tmax != want[i].tmax)
      fail_msg("%s at T=%d: %s %lld..%lld, want %s %d..%d", want[i].parity, want[i].tmin,
               d ? d->variant : "none", d ? (long long)d->tmin : 0, d ? (long long)d->tmax : 0,
               want[i].variant, want[i].tmin, want[i].tmax);
  }
  /* The evidence names the counts measured, not the counts covered. */
  const hct_fleet_decision_t *a = find_dec(&m, MODEL_A, "kl", 16);
  assert_non_null(strstr(a->evidence_json, "\"T\":128"));
  assert_null(strstr(a->evidence_json, "\"T\":17,"));
  for (int h = 0; h < 2; h++) hct__fleet_free(&in[h]);
  hct__fleet_free(&m);
}

static int cli(const char *args, char **out, char **err) {
  return cli_run("", bin, dir, args, out, err);
}

static void test_cli_merge_import(void **state) {
  (void)state;
  char args[1024], local[160], out_path[160];
  path_in(local, sizeof local, "fresh.db");
  path_in(out_path, sizeof out_path, "cli.fleet");
  snprintf(args, sizeof args, "db merge --json '%s' '%s' '%s' '%s' '%s'", out_path, exports[0],
           exports[1], exports[2], exports[3]);
  char *out = NULL, *err = NULL;
  int st = cli(args, &out, &err);
  if (st != 0) fail_msg("%s: %d %s", args, st, err);
  json_t *j = json_loads(out, 0, NULL);
  assert_non_null(j);
  assert_int_equal(json_integer_value(json_object_get(j, "decisions")), 6);
  assert_int_equal(json_array_size(json_object_get(j, "flags")), 3);
  json_decref(j);
  free(out);
  free(err);
  snprintf(args, sizeof args, "db import --json --db '%s' '%s'", local, out_path);
  st = cli(args, &out, &err);
  if (st != 0) fail_msg("%s: %d %s", args, st, err);
  j = json_loads(out, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(j, "decisions")), 6);
  assert_true(json_integer_value(json_object_get(j, "trials")) > 100);
  json_decref(j);
  free(out);
  free(err);
  /* Twice: nothing new. */
  st = cli(args, &out, &err);
  assert_int_equal(st, 0);
  j = json_loads(out, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(j, "trials")), 0);
  assert_int_equal(json_integer_value(json_object_get(j, "decisions")), 6);
  json_decref(j);
  free(out);
  free(err);
  hct_db_t *db;
  assert_int_equal(hct__db_open(local, HCT_DB_READONLY, &db), 0);
  hct_db_decision_t *d;
  int n;
  assert_int_equal(hct__db_decisions_list(db, &d, &n), 0);
  assert_int_equal(n, 6);
  int fam = 0;
  for (int i = 0; i < n; i++) {
    /* Issue 29: the family's decisions travel export -> merge -> import. */
    if (strcmp(d[i].parity, "bits:relay") == 0 && strcmp(d[i].variant, "relay") == 0) fam++;
    assert_string_equal(d[i].source, "fleet");
    char key[33], json[320];
    softkey_of(d[i].variant, key, json, sizeof json);
    assert_string_equal(d[i].software_key, key);
    assert_string_equal(d[i].software_json, json);
  }
  assert_int_equal(fam, 2); /* one per model */
  free(d);
  hct__db_close(db);

  /* A host's own export back into its own DB: its cards' decisions stay. */
  char host1[160];
  path_in(host1, sizeof host1, "host1.db");
  snprintf(args, sizeof args, "db import --json --db '%s' '%s'", host1, exports[0]);
  st = cli(args, &out, &err);
  if (st != 0) fail_msg("%s: %d %s", args, st, err);
  j = json_loads(out, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(j, "decisions_local")), 4);
  assert_int_equal(json_integer_value(json_object_get(j, "trials")), 0);
  assert_true(json_integer_value(json_object_get(j, "trials_local")) > 50);
  json_decref(j);
  free(out);
  free(err);

  /* export --device: one card. */
  char one[160];
  path_in(one, sizeof one, "one.fleet");
  snprintf(args, sizeof args, "db export --json --db '%s' --device GPU-host1-1 '%s'", host1, one);
  st = cli(args, &out, &err);
  if (st != 0) fail_msg("%s: %d %s", args, st, err);
  j = json_loads(out, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(j, "cards")), 1);
  assert_int_equal(json_integer_value(json_object_get(j, "decisions")), 2);
  json_decref(j);
  free(out);
  free(err);
}

/* ---- hostile files ------------------------------------------------------ */

static void copy_file(const char *from, const char *to) {
  char *data;
  size_t len;
  assert_int_equal(hct__read_file(from, &data, &len), 0);
  FILE *f = fopen(to, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
  free(data);
}

static void write_bytes(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (len) assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
}

/* A copy of a good export with `sql` run on it (by plain SQLite, as an
 * attacker would). */
static void edited(const char *path, const char *sql) {
  copy_file(exports[0], path);
  sqlite3 *h;
  assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
  char *msg = NULL;
  if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
  assert_int_equal(sqlite3_close(h), SQLITE_OK);
}

static void patched(const char *path, long off, const void *bytes, size_t n) {
  copy_file(exports[0], path);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, off, SEEK_SET), 0);
  assert_int_equal(fwrite(bytes, 1, n, f), n);
  fclose(f);
}

static void truncated(const char *path, long cut) {
  char *data;
  size_t len;
  assert_int_equal(hct__read_file(exports[0], &data, &len), 0);
  write_bytes(path, data, len - (size_t)cut);
  free(data);
}

typedef struct hostile_s {
  const char *name;
  const char *sql;         /* run on a copy of a good export */
  const char *needle;      /* in the one line of stderr */
} hostile_t;

static const hostile_t hostile_sql[] = {
    {"extra_table", "CREATE TABLE extra (x)", "unexpected table 'extra'"},
    {"trigger", "CREATE TRIGGER t AFTER INSERT ON trials BEGIN DELETE FROM decisions; END",
     "unexpected trigger 't'"},
    {"view", "CREATE VIEW v AS SELECT * FROM trials", "unexpected view 'v'"},
    {"expr_index", "CREATE INDEX ix ON trials (lower(host))", "unexpected index 'ix'"},
    {"extra_column", "ALTER TABLE trials ADD COLUMN x BLOB", "table 'trials' differs"},
    {"generated", "ALTER TABLE flags ADD COLUMN g INT GENERATED ALWAYS AS (1) VIRTUAL",
     "table 'flags' differs"},
    {"dropped", "DROP TABLE flags", "lacks table 'flags'"},
    {"retyped", "DROP TABLE flags; CREATE TABLE flags (kind BLOB NOT NULL, model_key TEXT NOT NULL,"
                " env TEXT NOT NULL, uuid TEXT NOT NULL, host TEXT NOT NULL, op TEXT NOT NULL,"
                " variant TEXT NOT NULL, params TEXT NOT NULL, template_hash TEXT NOT NULL,"
                " detail TEXT NOT NULL)", "table 'flags' differs"},
    {"not_utf8", "UPDATE trials SET host = CAST(X'486f73C0AF74' AS TEXT)", "column 'host': not UTF-8"},
    {"control", "UPDATE trials SET model_key = 'a' || char(27) || '[2J'", "column 'model_key': not UTF-8"},
    {"nul", "UPDATE trials SET host = CAST(X'610062' AS TEXT)", "NUL"},
    {"bidi", "UPDATE trials SET host = 'host' || char(0x202e) || '1'", "column 'host': not UTF-8"},
    {"overlong", "UPDATE trials SET op = CAST(X'C1A1' AS TEXT)", "column 'op': not UTF-8"},
    {"surrogate", "UPDATE trials SET host = CAST(X'EDA080' AS TEXT)", "column 'host': not UTF-8"},
    {"oversized", "UPDATE trials SET params = '{\"a\":\"' || printf('%.9000c', 'x') || '\"}'",
     "column 'params': text of"},
    {"huge_text", "UPDATE trials SET figures_json = printf('%.900000c', 'x')", "column 'figures_json'"},
    {"negative", "UPDATE trials SET tokens = -5", "column 'tokens': -5 is outside"},
    {"huge_number", "UPDATE trials SET samples = 9223372036854775807", "column 'samples'"},
    {"infinite", "UPDATE trials SET median_us = 9e999", "column 'median_us': inf"},
    {"wrong_type", "UPDATE trials SET tokens = 'abc'", "column 'tokens': not an integer"},
    {"blob_text", "UPDATE trials SET op = X'68635f72656164'", "column 'op': not text"},
    {"bad_json", "UPDATE trials SET params = '{\"a\":1'", "column 'params': not a JSON object"},
    {"dup_json_key", "UPDATE trials SET params = '{\"a\":1,\"a\":2}'", "not a JSON object"},
    {"bad_kind", "UPDATE trials SET kind = 'rm -rf'", "column 'kind': not a name"},
    {"bad_enum", "UPDATE decisions SET variant_class = 'fast'", "column 'variant_class': 'fast' is not one"},
    /* Issue 29: a parity is bitwise, kl or a well-formed bit family. */
    {"bad_parity", "UPDATE decisions SET parity = 'fast' WHERE parity = 'bitwise'",
     "column 'parity': 'fast' is not 'bitwise', 'kl' or 'bits:<variant>'"},
    {"bad_family", "UPDATE decisions SET parity = 'bits:a b' WHERE parity = 'bitwise'",
     "column 'parity': 'bits:a b' is not 'bitwise', 'kl' or 'bits:<variant>'"},
    {"empty_family", "UPDATE decisions SET parity = 'bits:' WHERE parity = 'bitwise'", "column 'parity': 'bits:' is not"},
    {"bad_uid", "UPDATE trials SET uid = 'x' || substr(uid, 2)", "column 'uid'"},
    {"bad_name", "UPDATE trials SET variant = '../v1'", "column 'variant': not a name"},
    {"meta_format", "UPDATE meta SET value = 'other' WHERE key = 'format'", "format 'other'"},
    {"meta_extra", "INSERT INTO meta VALUES ('evil', '1')", "unexpected meta key 'evil'"},
    {"meta_missing", "DELETE FROM meta WHERE key = 'kind'", "meta lacks 'kind'"},
    {"meta_version", "UPDATE meta SET value = '2' WHERE key = 'format_version'", "format version '2'"},
    {"user_version", "PRAGMA user_version = 7", "format version 7"},
    {"app_id", "PRAGMA application_id = 1", "application id 0x00000001"},
    {"wal", "PRAGMA journal_mode = WAL", "WAL mode"},
    {"overlap", "INSERT INTO decisions SELECT lower(hex(randomblob(16))), host, uuid, model_key,"
                " driver_version, compiler_version, hctune_version, software_key, software_json,"
                " op, parity, tmin + 2, tmax + 2, variant, params, variant_class, template_hash,"
                " binary_key, source, median_us, baseline_us, ci_lo_us, ci_hi_us, samples,"
                " decided_at, run_id, evidence_json FROM decisions", "overlap"},
    {"backwards", "UPDATE decisions SET tmax = 0", "column 'tmax'"},
};

static void snapshot(const char *path, char **data, size_t *len) {
  assert_int_equal(hct__read_file(path, data, len), 0);
}

/* The file is refused by the reader, by `db import` (the local DB byte
 * for byte as it was) and by `db merge` (no output written). */
static void expect_refused(const char *file, const char *what, const char *needle,
                           const char *local) {
  hct_fleet_t f;
  int rc = hct__fleet_read(file, &f);
  if (rc == 0) fail_msg("%s: read accepted it", what);
  if (needle && strstr(hct_last_error(), needle) == NULL)
    fail_msg("%s: message '%s' lacks '%s'", what, hct_last_error(), needle);
  char *before, *after;
  size_t lb, la;
  snapshot(local, &before, &lb);
  char args[1024], *err = NULL, *out = NULL;
  snprintf(args, sizeof args, "db import --db '%s' '%s'", local, file);
  int st = cli(args, &out, &err);
  if (st != 1 || cli_lines(err) != 1 || (needle && strstr(err, needle) == NULL))
    fail_msg("%s: import: status %d, stderr '%s' (want one line with '%s')", what, st, err,
             needle ? needle : "");
  snapshot(local, &after, &la);
  if (la != lb || memcmp(before, after, lb) != 0) fail_msg("%s: the local DB changed", what);
  char wal[200];
  struct stat sb;
  snprintf(wal, sizeof wal, "%s-wal", local);
  if (stat(wal, &sb) == 0 && sb.st_size > 0) fail_msg("%s: a WAL was left", what);
  free(err);
  free(out);
  char mout[160];
  path_in(mout, sizeof mout, "refused.fleet");
  unlink(mout);
  snprintf(args, sizeof args, "db merge '%s' '%s' '%s'", mout, exports[1], file);
  st = cli(args, &out, &err);
  if (st != 1 || cli_lines(err) != 1) fail_msg("%s: merge: status %d, stderr '%s'", what, st, err);
  if (stat(mout, &sb) == 0) fail_msg("%s: merge wrote its output", what);
  free(err);
  free(out);
  free(before);
  free(after);
}

static void test_hostile(void **state) {
  (void)state;
  char local[160], bad[160];
  path_in(local, sizeof local, "victim.db");
  make_host(local, "victim", MODEL_A, 1, 0, 1, 0);
  path_in(bad, sizeof bad, "bad.fleet");
  int kinds = 0;

  write_bytes(bad, "", 0);
  expect_refused(bad, "empty", "too short", local), kinds++;
  char text[4096];
  memset(text, 'A', sizeof text);
  write_bytes(bad, text, sizeof text);
  expect_refused(bad, "text", "not an SQLite database", local), kinds++;
  /* An hctune results DB is not a fleet file. */
  expect_refused(local, "local db", "application id 0x00000000", local), kinds++;
  /* Another format version, in the header. */
  const unsigned char v2[4] = {0, 0, 0, 2};
  patched(bad, 60, v2, 4);
  expect_refused(bad, "version", "format version 2", local), kinds++;
  /* Truncated: the last page gone, and half a page gone. */
  truncated(bad, 4096);
  expect_refused(bad, "truncated page", "truncated", local), kinds++;
  truncated(bad, 100);
  expect_refused(bad, "truncated bytes", "truncated", local), kinds++;
  /* Corrupt: page 2's b-tree header overwritten. */
  const unsigned char junk[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  patched(bad, 4096, junk, sizeof junk);
  expect_refused(bad, "corrupt page", NULL, local), kinds++;
  /* A header that promises more pages than there are. */
  const unsigned char pages[4] = {0, 0, 0x7f, 0xff};
  patched(bad, 28, pages, 4);
  expect_refused(bad, "page count", "truncated", local), kinds++;
  /* Larger than any fleet file may be (sparse, so it costs no disk). */
  FILE *f = fopen(bad, "wb");
  assert_non_null(f);
  assert_int_equal(fseek(f, HCT_FLEET_MAX_BYTES + 4096, SEEK_SET), 0);
  fputc(0, f);
  fclose(f);
  expect_refused(bad, "oversized file", "more than", local), kinds++;
  /* A folder, and a FIFO (which must not hang the reader). */
  expect_refused(dir, "folder", "not a regular file", local), kinds++;
  char fifo[160];
  path_in(fifo, sizeof fifo, "fifo.fleet");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  expect_refused(fifo, "fifo", "not a regular file", local), kinds++;
  /* A NaN written into a record's bytes (SQL cannot store one): a figure
   * set to a marker value, whose 8 bytes are then replaced. */
  edited(bad, "UPDATE trials SET ci_lo_us = 12345.6875");
  {
    char *data;
    size_t len;
    assert_int_equal(hct__read_file(bad, &data, &len), 0);
    const unsigned char marker[8] = {0x40, 0xc8, 0x1c, 0xd8, 0, 0, 0, 0}; /* 12345.6875 */
    const unsigned char nan[8] = {0x7f, 0xf8, 0, 0, 0, 0, 0, 1};
    int found = 0;
    for (size_t i = 0; i + 8 <= len; i++)
      if (memcmp(data + i, marker, 8) == 0) memcpy(data + i, nan, 8), found++;
    assert_true(found > 0);
    write_bytes(bad, data, len);
    free(data);
  }
  expect_refused(bad, "nan", NULL, local), kinds++;

  for (size_t i = 0; i < HCT_ARRAY_SIZE(hostile_sql); i++) {
    edited(bad, hostile_sql[i].sql);
    expect_refused(bad, hostile_sql[i].name, hostile_sql[i].needle, local);
    kinds++;
  }
  assert_true(kinds >= 10);
  printf("hostile files refused: %d kinds\n", kinds);
}

/* A file that passes every check but whose import fails in the middle (a
 * decision's uid already taken by another group of the local DB): the
 * transaction is rolled back, the local DB byte for byte as it was. */
static void test_import_rolls_back(void **state) {
  (void)state;
  char local[160], bad[160];
  path_in(local, sizeof local, "rollback.db");
  make_host(local, "rb", MODEL_A, 1, 0, 1, 0);
  sqlite3 *h;
  assert_int_equal(sqlite3_open(local, &h), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(h, "SELECT uid FROM decisions LIMIT 1", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  char sql[200];
  snprintf(sql, sizeof sql, "UPDATE decisions SET uid = '%s' WHERE uuid = 'GPU-host1-1' AND parity = 'bitwise'",
           (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  path_in(bad, sizeof bad, "collide.fleet");
  edited(bad, sql);
  char *before, *after;
  size_t lb, la;
  snapshot(local, &before, &lb);
  char args[1024], *out = NULL, *err = NULL;
  snprintf(args, sizeof args, "db import --db '%s' '%s'", local, bad);
  int rc = cli(args, &out, &err);
  if (rc != 1 || cli_lines(err) != 1 || strstr(err, "UNIQUE") == NULL)
    fail_msg("status %d, stderr '%s'", rc, err);
  snapshot(local, &after, &la);
  assert_true(la == lb && memcmp(before, after, lb) == 0);
  free(before);
  free(after);
  free(out);
  free(err);
}

/* Random damage: bytes of a good export overwritten at random places
 * (seeded, so a failure replays).  Whatever the damage, the reader returns
 * (no crash, no hang: ASan and the time limit watch) and either refuses
 * the file or hands back rows that passed every check, which a merge then
 * takes. */
static void test_random_damage(void **state) {
  (void)state;
  char *good;
  size_t len;
  assert_int_equal(hct__read_file(exports[0], &good, &len), 0);
  char bad[160];
  path_in(bad, sizeof bad, "damaged.fleet");
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int refused = 0, accepted = 0;
  char *buf = malloc(len);
  assert_non_null(buf);
  for (int round = 0; round < 400; round++) {
    memcpy(buf, good, len);
    int flips = 1 + round % 8;
    for (int k = 0; k < flips; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      /* Past the header half of the time: the header has its own checks. */
      size_t at = round % 2 ? 100 + x % (len - 100) : x % len;
      buf[at] = (char)(x >> 40);
    }
    write_bytes(bad, buf, len);
    hct_fleet_t f;
    if (hct__fleet_read(bad, &f) != 0) {
      refused++;
      continue;
    }
    accepted++;
    hct_fleet_t m;
    int rc = hct__fleet_merge(&f, 1, NULL, &m);
    if (rc != 0 && strstr(hct_last_error(), "merge:") == NULL)
      fail_msg("round %d: merge of an accepted file: %s", round, hct_last_error());
    hct__fleet_free(&m);
    hct__fleet_free(&f);
  }
  free(buf);
  free(good);
  printf("random damage: %d files refused, %d accepted (damage in data the checks allow)\n",
         refused, accepted);
  assert_true(refused > 200);
}

/* Two inputs holding the same trial with other figures: the merge is
 * refused, nothing written. */
static void test_conflicting_copies(void **state) {
  (void)state;
  char bad[160], mout[160];
  path_in(bad, sizeof bad, "forged.fleet");
  edited(bad, "UPDATE trials SET median_us = median_us * 0.5");
  path_in(mout, sizeof mout, "forged_out.fleet");
  char args[1024], *out = NULL, *err = NULL;
  snprintf(args, sizeof args, "db merge '%s' '%s' '%s'", mout, exports[0], bad);
  int st = cli(args, &out, &err);
  if (st != 1 || cli_lines(err) != 1 || strstr(err, "differs from its copy") == NULL)
    fail_msg("status %d, stderr '%s'", st, err);
  struct stat sb;
  assert_int_not_equal(stat(mout, &sb), 0);
  free(out);
  free(err);
}

/* merge never replaces a file that is not a fleet file (a results DB given
 * as OUT by mistake). */
static void test_merge_keeps_non_fleet_out(void **state) {
  (void)state;
  char local[160];
  path_in(local, sizeof local, "host3.db");
  char *before, *after;
  size_t lb, la;
  snapshot(local, &before, &lb);
  char args[1024], *out = NULL, *err = NULL;
  snprintf(args, sizeof args, "db merge '%s' '%s'", local, exports[0]);
  int st = cli(args, &out, &err);
  if (st != 1 || strstr(err, "not a fleet file") == NULL) fail_msg("status %d, '%s'", st, err);
  snapshot(local, &after, &la);
  assert_true(la == lb && memcmp(before, after, lb) == 0);
  free(before);
  free(after);
  free(out);
  free(err);
}

static void test_usage(void **state) {
  (void)state;
  static const struct {
    const char *args;
    int status;
    const char *needle;
  } cases[] = {
      {"db", 2, "need a subcommand"},
      {"db nope", 2, "unexpected argument 'nope'"},
      {"db export", 2, "need exactly one FILE"},
      {"db merge out.fleet", 2, "need OUT and at least one IN"},
      {"db import a b", 2, "need exactly one FILE"},
      {"db merge --outlier-pct 0 o i", 2, "--outlier-pct '0'"},
      {"db merge --outlier-pct x o i", 2, "--outlier-pct 'x'"},
      {"db import --outlier-pct 5 f", 2, "unknown option '--outlier-pct'"},
      {"db merge --device x o i", 2, "unknown option '--device'"},
      {"db merge --margin=60 o i", 2, "--margin '60': want a number from 0 to 50"},
      {"db import --bogus f", 2, "unknown option '--bogus'"},
      {"db import /nonexistent/f.fleet", 1, "No such file"},
      {"probe --fleet-db x.fleet", 2, "--fleet-db needs --verify-fleet"},
      {"probe --verify-fleet --device 7", 1, "no gpu driver found"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    char *err = NULL;
    int st = cli(cases[i].args, NULL, &err);
    /* One line, the cause; a probe without a GPU adds what to do next
     * below its line (test_cli_probe checks that advice). */
    int lines_ok = cli_lines(err) == 1 ||
                   (strncmp(cases[i].args, "probe", 5) == 0 && cli_lines(err) > 1 &&
                    strstr(err, cases[i].needle) < strchr(err, '\n'));
    if (st != cases[i].status || !lines_ok || strstr(err, cases[i].needle) == NULL)
      fail_msg("hctune %s: status %d (want %d), stderr '%s' (want '%s')", cases[i].args, st,
               cases[i].status, err, cases[i].needle);
    free(err);
  }
  char *out = NULL, *err = NULL;
  assert_int_equal(cli("db --help", &out, &err), 0);
  assert_non_null(strstr(out, "hctune db merge"));
  free(out);
  free(err);
}

/* ---- verify-only adoption ----------------------------------------------- */

/* A stand-in for the card and the probe: what the GPU would do, recorded
 * in the DB the way the probe records it. */
typedef struct fake_s {
  const char *model_name; /* the card's name: "NVIDIA H200" is model A */
  const char *fail;       /* a variant whose parity check fails */
  int check_runs, full_runs;
  char variants[256];
  char points[512];
  hct_tokens_t tokens;
} fake_t;

static int fake_find(void *arg, const char *spec, hct_device_t *dev) {
  fake_t *f = arg;
  (void)spec;
  memset(dev, 0, sizeof *dev);
  strcpy(dev->vendor, "NVIDIA");
  hct__strlcpy(dev->name, f->model_name, sizeof dev->name);
  strcpy(dev->arch, "sm_90");
  strcpy(dev->uuid, "GPU-new-0");
  dev->sm_count = 132;
  dev->mem_bytes = 141LL << 30;
  strcpy(dev->driver_version, "12.8");
  strcpy(dev->compiler_version, "12.8");
  return 0;
}

static int fake_probe(void *arg, const hct_probe_opts_t *o) {
  fake_t *f = arg;
  if (!o->check_only) {
    f->full_runs++;
    return 0;
  }
  f->check_runs++;
  hct__strlcpy(f->variants, o->only_variants ? o->only_variants : "", sizeof f->variants);
  hct__strlcpy(f->points, o->only_points ? o->only_points : "", sizeof f->points);
  f->tokens = o->tokens;
  hct_db_t *db;
  assert_int_equal(hct__db_open(o->db_path, 0, &db), 0);
  hct_db_keys_t k;
  memset(&k, 0, sizeof k);
  strcpy(k.host, "new");
  strcpy(k.uuid, "GPU-new-0");
  strcpy(k.model_key, MODEL_A);
  for (size_t c = 0; c < HCT_ARRAY_SIZE(cands); c++) {
    char pat[40], have[300];
    snprintf(pat, sizeof pat, ",%s,", cands[c].variant);
    snprintf(have, sizeof have, ",%s,", f->variants);
    if (strstr(have, pat) == NULL && strcmp(cands[c].variant, "v1") != 0) continue;
    int fails = f->fail && strcmp(f->fail, cands[c].variant) == 0;
    for (int i = 0; i < o->tokens.n; i++) {
      int T = o->tokens.t[i];
      add_trial(db, &k, &cands[c], "parity", fails && T == 3 ? "parity" : "pass", T, 0);
    }
  }
  hct__db_close(db);
  return 0;
}

static int count_own(const char *dbpath, const char *uuid, hct_db_decision_t *first) {
  hct_db_t *db;
  assert_int_equal(hct__db_open(dbpath, HCT_DB_READONLY, &db), 0);
  hct_db_decision_t *d;
  int n, own = 0;
  assert_int_equal(hct__db_decisions_list(db, &d, &n), 0);
  for (int i = 0; i < n; i++)
    if (strcmp(d[i].keys.uuid, uuid) == 0) {
      if (own++ == 0 && first) *first = d[i];
    }
  free(d);
  hct__db_close(db);
  return own;
}

static void verify_with(const char *name, fake_t *f, int use_file, int import_first) {
  const int all[] = {0, 1, 2, 3};
  hct_fleet_t m;
  merge_order(all, 4, 0, &m);
  char mpath[160], local[160];
  path_in(mpath, sizeof mpath, "verify.fleet");
  unlink(mpath);
  assert_int_equal(hct__fleet_write(&m, mpath), 0);
  path_in(local, sizeof local, name);
  hct_db_t *db;
  assert_int_equal(hct__db_open(local, 0, &db), 0);
  if (import_first) assert_int_equal(hct__fleet_import(db, &m, NULL), 0);
  hct__db_close(db);
  hct__fleet_free(&m);
  hct_fleet_verify_opts_t vo;
  memset(&vo, 0, sizeof vo);
  vo.probe.db_path = local;
  vo.probe.quiet = 1;
  vo.fleet_db = use_file ? mpath : NULL;
  vo.run_probe = fake_probe;
  vo.find_device = fake_find;
  vo.hook_arg = f;
  int rc = hct__fleet_verify(&vo);
  if (rc != 0) fail_msg("verify: %s", hct_last_error());
}

/* The fleet's winners checked here and adopted: no timing, no full probe. */
static void test_verify_adopts(void **state) {
  (void)state;
  fake_t f = {"NVIDIA H200", NULL, 0, 0, "", "", {0, {0}}};
  verify_with("verify1.db", &f, 0, 1);
  assert_int_equal(f.check_runs, 1);
  assert_int_equal(f.full_runs, 0);
  assert_non_null(strstr(f.variants, "relay"));
  assert_non_null(strstr(f.variants, "persist"));
  /* Only the winning points are checked (each one more compile on a cold
   * cache), as "variant {params}" lines. */
  assert_non_null(strstr(f.points, "relay {\"G\":1,\"GB\":1,\"LT\":0,\"NG\":1,\"PDL\":1}"));
  assert_non_null(strstr(f.points, "persist {\"GB\":1,\"PDL\":1,\"RG\":2}"));
  assert_null(strstr(f.points, "v2 "));
  assert_true(hct__tokens_index(&f.tokens, 1) >= 0 && hct__tokens_index(&f.tokens, 4) >= 0 &&
              hct__tokens_index(&f.tokens, 5) < 0);
  char local[160];
  path_in(local, sizeof local, "verify1.db");
  hct_db_decision_t d;
  /* bitwise, kl and the bit family bits:relay (issue 29) */
  assert_int_equal(count_own(local, "GPU-new-0", &d), 3);
  assert_string_equal(d.source, "fleet");
  assert_string_equal(d.keys.model_key, MODEL_A);
  assert_non_null(strstr(d.evidence_json, "\"verified\""));
}

/* A winner that fails here: nothing adopted, a full probe instead. */
static void test_verify_falls_back(void **state) {
  (void)state;
  fake_t f = {"NVIDIA H200", "persist", 0, 0, "", "", {0, {0}}};
  verify_with("verify2.db", &f, 1, 0);
  assert_int_equal(f.check_runs, 1);
  assert_int_equal(f.full_runs, 1);
  char local[160];
  path_in(local, sizeof local, "verify2.db");
  assert_int_equal(count_own(local, "GPU-new-0", NULL), 0);
  /* Every check passes here, but this host builds other binaries (its
   * software key differs): nothing adopted, a full probe. */
  fake_t h = {"NVIDIA H200", NULL, 0, 0, "", "", {0, {0}}};
  forced_softkey = "0123456789abcdef0123456789abcdef";
  verify_with("verify4.db", &h, 1, 0);
  forced_softkey = NULL;
  assert_int_equal(h.check_runs, 1);
  assert_int_equal(h.full_runs, 1);
  path_in(local, sizeof local, "verify4.db");
  assert_int_equal(count_own(local, "GPU-new-0", NULL), 0);
  /* A card model the fleet has not measured: a full probe at once. */
  fake_t g = {"NVIDIA B200", NULL, 0, 0, "", "", {0, {0}}};
  verify_with("verify3.db", &g, 1, 0);
  assert_int_equal(g.check_runs, 0);
  assert_int_equal(g.full_runs, 1);
}

int main(void) {
  const char *b = hct_test_bin("test_fleet");
  if (b == NULL) return 1;
  snprintf(bin, sizeof bin, "%s/hctune", b);
  if (hct__kernels_dir(kdir, sizeof kdir) != 0) {
    printf("cannot find the kernel templates: %s\n", hct_last_error());
    return 1;
  }
  snprintf(dir, sizeof dir, "/tmp/hct_test_fleet.XXXXXX");
  if (mkdtemp(dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_merged_decisions),
      cmocka_unit_test(test_merge_sparse),
      cmocka_unit_test(test_outlier_threshold),
      cmocka_unit_test(test_conflict_is_what_quarantines),
      cmocka_unit_test(test_order_and_idempotence),
      cmocka_unit_test(test_single_export),
      cmocka_unit_test(test_cli_merge_import),
      cmocka_unit_test(test_hostile),
      cmocka_unit_test(test_random_damage),
      cmocka_unit_test(test_conflicting_copies),
      cmocka_unit_test(test_import_rolls_back),
      cmocka_unit_test(test_merge_keeps_non_fleet_out),
      cmocka_unit_test(test_usage),
      cmocka_unit_test(test_verify_adopts),
      cmocka_unit_test(test_verify_falls_back),
  };
  int rc = cmocka_run_group_tests(tests, setup_fleet, NULL);
  /* HCT_TEST_KEEP=1 keeps the files for a look at them. */
  if (getenv("HCT_TEST_KEEP") != NULL) {
    printf("files kept in %s\n", dir);
    return rc;
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return rc;
}
