/*
 * test_probe_fake.c: a whole `hctune probe` on the CPU: hctune's own
 * discovery against the fake CUDA driver (tests/fake/fake_cuda.c, built
 * here), real NVRTC compiles of a small op, and tests/fake/fake_worker.c
 * in its probe mode standing in for the GPU (every check passes unless a
 * variant is named wrong*, times come from a cost function of the
 * parameters).  What it pins down, from the worker's log and the decisions
 * recorded:
 *   - a bitwise variant whose reference is a kl variant (upmix against
 *     mma) is checked and verified against the reference's first-values
 *     point, competes in kl only, and its decision says kl;
 *   - issue 29: the op's bit family of mma ("families") is decided too,
 *     parity "bits:mma": its winner is a variant bit-equal to mma that
 *     passed its checks (upmix), never a faster one that is not (bigk) or
 *     one that failed its check (wrongfast);
 *   - a variant whose reference fails its class is never checked, and says
 *     why in an "unsupported" trial;
 *   - with no --tokens, the op's probe_tokens are probed; decisions cover
 *     the counts between them up to the geometric midpoints;
 *   - timing.batch is evaluated per T;
 *   - a family with "search": halving is searched (rounds of 3, 6, ...
 *     samples) and only its survivors reach the deciding timing, whose
 *     winner is the family's best point;
 *   - verify-decisions --exhaustive times every point and finds no gap;
 *   - above the manifest's checks.all_points_up_to (op "budget") the
 *     counts are timed first and only the search's finalists checked, a
 *     finalist that fails is replaced by the next of its family's
 *     ranking, and the points never checked say so ("unchecked");
 *   - a worker that holds only a few candidates' memory at once gets its
 *     timings in groups, the contenders timed again together and
 *     verified; one that holds none ends the probe naming the cause;
 *   - issue 29: a winner is checked at the counts its decision serves
 *     (the range's ends, a partial tile after and before a whole one): a
 *     variant wrong only off its tiles wins every probed count of a
 *     sparse op and is served at none; where every count is probed
 *     (decode) no count is checked after the timing;
 *   - issue 34: the same for a kl variant and for a member of a bit
 *     family (checked against the family's head), each the fastest of
 *     its decision at every probed count and wrong off 16-row tiles:
 *     served at no T; the winners of every decision at a count are
 *     checked on one input set per pending (the baseline once); a decode
 *     variant wrong after its first runs (the repeat check) or only in
 *     its timed launches (the verification) is never decided for;
 *   - issue 34: the probe ends with where its time went: --json's result
 *     has a breakdown whose stages add up to its total and whose checks
 *     are the worker's check requests, the text ends with its table, the
 *     run keeps it and hctune report shows it.
 * Skips without NVRTC or cuda.h.  Needs HCT_BIN (tests/run.sh).
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
#include <jansson.h>

#include "cli.h"
#include "common.h"
#include "cli_test.h"
#include "db.h"
#include "tuner.h"

static char dir[64], env[2048], fake[1100];
static const char *bin_dir; /* $HCT_BIN (main refuses to run without it) */

/* A variant of the test op on good.cu or base.cu (selftest's templates). */
#define VARIANT(name, cls, ref, tpl, entry, params, extra)                                          \
  "{\"name\":\"" name "\",\"template\":\"" tpl "\",\"class\":\"" cls "\",\"reference\":" ref        \
  ",\"min_arch\":70,\"params\":[" params "]," extra                                                 \
  "\"scratch\":[{\"name\":\"ws\",\"bytes\":\"64\",\"zero\":true}],"                                \
  "\"launches\":[{\"entry\":\"" entry "\",\"grid\":[\"cdiv(T*ROW,256)\",1,1],\"block\":[256,1,1],"  \
  "\"args\":[\"@x\",\"@y\",\"@ws\",\"T\"]}]}"

static const char manifest[] =
    "{\"op\":\"selftest\",\"selftest\":true,\"tokens\":[1,4096],\"probe_tokens\":[1,16,256,4096],"
    "\"constants\":{\"ROW\":1024},"
    "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*ROW\"},"
    "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*ROW\",\"row\":\"ROW\"}],"
    /* Ops as data (issue 23's opdata work): how inputs are drawn and the
     * float64 reference template, as kernels-src/selftest has them there;
     * a tree without them ignores these fields. */
    "\"inputs\":[{\"buffer\":\"x\",\"mean\":0.0,\"sd\":1.0}],"
    "\"reference\":{\"template\":\"reference.cu\",\"rows\":{\"sample\":64,\"why\":\"a test op\"},"
    "\"launches\":[{\"entry\":\"st_reference\",\"grid\":[\"cdiv(ROW,256)\",\"NROWS\",1],\"block\":[256,1,1],"
    "\"args\":[\"@rows\",\"@x\",\"@ref.y\"]}]},"
    "\"timing\":{\"mode\":\"cold\",\"batch\":\"max(2, min(32, 512 / T))\"},"
    /* Issue 29: mma's bits are a family an engine may ask for. */
    "\"families\":[\"mma\"],"
    "\"variants\":["
    VARIANT("base", "baseline", "null", "base.cu", "st_base", "", "") ","
    VARIANT("fam", "bitwise", "\"base\"", "good.cu", "st_good",
            "{\"name\":\"P0\",\"values\":[0,1,2,3,4]},{\"name\":\"P1\",\"values\":[0,1,2]}",
            "\"search\":{\"strategy\":\"halving\"},") ","
    VARIANT("mma", "kl", "null", "good.cu", "st_good", "{\"name\":\"Q0\",\"values\":[4,3]}", "") ","
    VARIANT("upmix", "bitwise", "\"mma\"", "good.cu", "st_good", "{\"name\":\"U0\",\"values\":[2]}", "") ","
    VARIANT("wrongfast", "bitwise", "\"mma\"", "good.cu", "st_good", "", "") ","
    VARIANT("wrongk", "kl", "null", "good.cu", "st_good", "", "") ","
    VARIANT("wdep", "bitwise", "\"wrongk\"", "good.cu", "st_good", "{\"name\":\"W0\",\"values\":[2]}", "") ","
    VARIANT("bigk", "kl", "null", "good.cu", "st_good", "", "")
    "]}";

static int have_tools(void) {
  char v[64];
  if (hct__compiler_version(HCT_BACKEND_CUDA, v, sizeof v) != 0) {
    printf("skipped: no NVRTC here (%s)\n", hct_last_error());
    return 0;
  }
  return 1;
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/hct-probe-fake-XXXXXX");
  if (mkdtemp(dir) == NULL) return -1;
  /* The product's common headers, the test op's templates (tests/kernels-src). */
  const char *root = hct_test_root();
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/k/selftest' && ln -s \"$(cd '%s/kernels-src/common' && pwd)\" '%s/k/common' && "
           "cp '%s/tests/kernels-src/selftest/selftest.h' '%s/tests/kernels-src/selftest/base.cu' "
           "'%s/tests/kernels-src/selftest/good.cu' '%s/k/selftest/' && "
           "{ cp '%s/tests/kernels-src/selftest/reference.cu' '%s/k/selftest/' 2>/dev/null || true; } && "
           "cc -shared -fPIC -w -I'%s/jit' -o '%s/libcuda.so.1' '%s/tests/fake/fake_cuda.c'",
           dir, root, dir, root, root, root, dir, root, dir, root, dir, root);
  if (system(cmd) != 0) return -1;
  snprintf(cmd, sizeof cmd, "%s/k/selftest/manifest.json", dir);
  FILE *f = fopen(cmd, "w");
  if (f == NULL) return -1;
  fputs(manifest, f);
  fclose(f);
  /* The fake worker is built beside this test program. */
  char self[1024];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  snprintf(fake, sizeof fake, "%s/fake_worker", self);
  snprintf(env, sizeof env,
           "LD_LIBRARY_PATH='%s' FAKE_CUDA_LOG=/dev/null HCTUNE_WORKER='%s' FAKE_WORKER_PROBE='%s/worker.log' "
           "HCTUNE_KERNELS='%s/k' ASAN_OPTIONS=detect_leaks=0 ",
           dir, fake, dir, dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int hctune(const char *args, char **out, char **err) {
  char bin[1100];
  snprintf(bin, sizeof bin, "%s/hctune", bin_dir);
  return cli_run(env, bin, dir, args, out, err);
}

/* The candidate id the worker was loaded with for "variant params". */
static int cand_id(const char *log, const char *variant, const char *params) {
  char key[300];
  snprintf(key, sizeof key, " %s %s\n", variant, params);
  for (const char *p = log; (p = strstr(p, "load ")) != NULL; p += 5) {
    int id;
    const char *e = strchr(p, '\n');
    if (sscanf(p, "load %d", &id) == 1 && e && strncmp(strchr(p + 5, ' '), key, strlen(key)) == 0) return id;
  }
  return -1;
}

static int count(const char *log, const char *needle) {
  int n = 0;
  for (const char *p = log; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

/* The worker's log after its last timing request. */
static const char *after_timing(const char *log) {
  const char *last = log;
  for (const char *p = log; (p = strstr(p, "time T ")) != NULL; p++) last = p;
  return last;
}

static const hct_db_decision_t *decision(const hct_db_decision_t *d, int nd, const char *parity, int T) {
  for (int i = 0; i < nd; i++)
    if (strcmp(d[i].parity, parity) == 0 && d[i].tmin <= T && T <= d[i].tmax) return &d[i];
  return NULL;
}

static void test_probe_flow(void **state) {
  (void)state;
  if (!have_tools()) skip();
  char *out = NULL, *err = NULL, *log = NULL, args[512];
  snprintf(args, sizeof args, "probe --op selftest --db '%s/p.db'", dir);
  int st = hctune(args, &out, &err);
  if (st != 0) fail_msg("hctune probe: status %d: %s", st, err);
  char path[256];
  snprintf(path, sizeof path, "%s/worker.log", dir);
  assert_int_equal(hct__read_file(path, &log, NULL), 0);

  /* The op's reference: loaded once, found in the DB's compile cache (the
   * fake reads it there as the worker does), before any check; no load,
   * check or verify refused. */
  assert_int_equal(count(log, "reference selftest "), 1);
  const char *ref_line = strstr(log, "reference selftest "), *first_check = strstr(log, "check ");
  if (strncmp(strchr(ref_line + 19, ' '), " ok\n", 4) != 0) fail_msg("the reference was not loaded:\n%s", log);
  assert_true(first_check != NULL && ref_line < first_check);
  if (count(log, "refused") != 0) fail_msg("the worker refused a request:\n%s", log);

  /* The counts probed: probe_tokens, and no other (T = 2, a count T = 1's
   * decision serves, is checked there, never timed). */
  assert_true(count(log, " T 1 pending") > 0 && count(log, " T 16 pending") > 0);
  assert_true(count(log, " T 256 pending") > 0 && count(log, " T 4096 pending") > 0);
  assert_int_equal(count(log, "time T 2 "), 0);
  assert_true(count(log, " T 2 pending") > 0);
  /* timing.batch per T: 32 at T = 16, 2 at T = 256 and 4096. */
  assert_true(count(log, "time T 16 samples 6 batch 32") > 0);
  assert_true(count(log, "time T 4096 samples 6 batch 2") > 0);

  /* upmix against mma's first-values point ({"Q0":4}), checked and verified. */
  const int up = cand_id(log, "upmix", "{\"U0\":2}"), mma4 = cand_id(log, "mma", "{\"Q0\":4}");
  const int wdep = cand_id(log, "wdep", "{\"W0\":2}"), wrongk = cand_id(log, "wrongk", "{}");
  assert_true(up >= 0 && mma4 >= 0 && wdep >= 0 && wrongk >= 0);
  char want[128];
  snprintf(want, sizeof want, "check %d ref %d T 16 pending 0", up, mma4);
  if (count(log, want) != 1) fail_msg("no '%s' in the worker's log:\n%s", want, log);
  snprintf(want, sizeof want, "check %d ref -1 T 16 pending 0", mma4);
  assert_int_equal(count(log, want), 1); /* the reference's own run made the worker's reference */
  snprintf(want, sizeof want, "verify ref %d cands %d\n", mma4, up);
  if (count(log, want) < 1) fail_msg("no '%s' in the worker's log", want);
  /* wdep's reference failed: wdep was never checked. */
  snprintf(want, sizeof want, "check %d ", wdep);
  assert_int_equal(count(log, want), 0);

  /* The family's search: rounds of 3 samples over its 15 points, and the
   * deciding timing held at most its survivors. */
  assert_true(count(log, "time T 1 samples 3 ") == 1);
  assert_true(count(log, "time T 4096 samples 3 ") == 1);

  hct_db_t *db;
  snprintf(path, sizeof path, "%s/p.db", dir);
  assert_int_equal(hct__db_open(path, HCT_DB_READONLY, &db), 0);
  hct_db_decision_t *d = NULL;
  int nd = 0;
  assert_int_equal(hct__db_decisions_list(db, &d, &nd), 0);
  /* bitwise: the family's best point everywhere, one range over the op. */
  const hct_db_decision_t *b = decision(d, nd, "bitwise", 3000);
  if (b == NULL) {
    for (int i = 0; i < nd; i++) fprintf(stderr, "%s %d-%d %s\n", d[i].parity, d[i].tmin, d[i].tmax, d[i].variant);
    fail_msg("no bitwise decision at 3000:\n%s", err);
  }
  assert_string_equal(b->variant, "fam");
  assert_string_equal(b->params, "{\"P0\":2,\"P1\":2}");
  assert_true(b->tmin == 1 && b->tmax == 4096);
  assert_string_equal(b->variant_class, "bitwise");
  /* kl: upmix below T = 256, bigk from there: the boundary is the
   * geometric midpoint of 16 and 256. */
  const hct_db_decision_t *k1 = decision(d, nd, "kl", 1), *k2 = decision(d, nd, "kl", 65);
  assert_non_null(k1);
  assert_non_null(k2);
  assert_string_equal(k1->variant, "upmix");
  assert_string_equal(k1->variant_class, "kl");
  assert_true(k1->tmin == 1 && k1->tmax == 64);
  assert_string_equal(k2->variant, "bigk");
  assert_true(k2->tmin == 65 && k2->tmax == 4096);
  for (int i = 0; i < nd; i++)
    if (strcmp(d[i].parity, "bitwise") == 0) assert_string_not_equal(d[i].variant, "upmix");
  /* Issue 29: the family of mma's bits, decided over the whole op by the
   * same range rule: upmix (bit-equal to mma, 40 us against mma's 43 and
   * 46) everywhere; never bigk (30 us from T = 256, but not mma's bits),
   * fam (the baseline's bits) or wrongfast (mma's bits by its manifest,
   * 20 us, but it failed its check). */
  const hct_db_decision_t *f1 = decision(d, nd, "bits:mma", 1), *f2 = decision(d, nd, "bits:mma", 4096);
  if (f1 == NULL || f2 == NULL) fail_msg("no decision of parity bits:mma at T = 1 or 4096");
  assert_string_equal(f1->variant, "upmix");
  assert_string_equal(f2->variant, "upmix");
  assert_true(f1->tmin == 1 && f2->tmax == 4096);
  for (int i = 0; i < nd; i++)
    if (strcmp(d[i].parity, "bits:mma") == 0 && strcmp(d[i].variant, "upmix") != 0 &&
        strcmp(d[i].variant, "mma") != 0)
      fail_msg("bits:mma decided for %s at T=%d-%d", d[i].variant, d[i].tmin, d[i].tmax);
  free(d);

  /* wdep's trials say why it was not checked. */
  char *tj = NULL;
  assert_int_equal(hct__db_trials_json(db, NULL, "selftest", "wdep", 0, &tj), 0);
  hct__db_close(db);
  if (strstr(tj, "\"unsupported\"") == NULL || strstr(tj, "its reference wrongk {} did not pass its class here") == NULL)
    fail_msg("wdep's trials do not say why it was not checked: %s", tj);
  free(tj);
  free(out);
  free(err);
  free(log);

  /* verify-decisions --exhaustive: every point of the family timed, and
   * the decision is its family's best (the fake times without noise). */
  snprintf(path, sizeof path, "%s/worker.log", dir);
  unlink(path);
  snprintf(args, sizeof args, "verify-decisions --exhaustive --db '%s/p.db'", dir);
  st = hctune(args, &out, &err);
  if (st != 0) fail_msg("verify-decisions --exhaustive: status %d:\n%s%s", st, out, err);
  assert_non_null(strstr(out, "0.00%"));
  assert_null(strstr(out, "OVER LIMIT"));
  assert_true(cli_lines(out) >= 4); /* the header, rows, the summary */
  assert_int_equal(hct__read_file(path, &log, NULL), 0);
  assert_int_equal(count(log, "samples 3 "), 0); /* no search */
  free(out);
  free(err);
  free(log);
}

/* The op of the large-count tests: its own folder beside selftest's, on
 * the same templates; every count above 16 checks only finalists. */
static const char budget_manifest[] =
    "{\"selftest\":true,\"tokens\":[1,4096],\"probe_tokens\":[1,16,256,4096],"
    "\"checks\":{\"all_points_up_to\":16,\"why\":\"a test: the large counts check finalists only\"},"
    "\"constants\":{\"ROW\":1024},"
    "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*ROW\"},"
    "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*ROW\",\"row\":\"ROW\"}],"
    "\"inputs\":[{\"buffer\":\"x\",\"mean\":0.0,\"sd\":1.0}],"
    "\"reference\":{\"template\":\"reference.cu\",\"rows\":{\"sample\":64,\"why\":\"a test op\"},"
    "\"launches\":[{\"entry\":\"st_reference\",\"grid\":[\"cdiv(ROW,256)\",\"NROWS\",1],\"block\":[256,1,1],"
    "\"args\":[\"@rows\",\"@x\",\"@ref.y\"]}]},"
    "\"timing\":{\"mode\":\"cold\",\"batch\":\"max(2, min(32, 512 / T))\"},"
    "\"variants\":["
    VARIANT("base", "baseline", "null", "base.cu", "st_base", "", "") ","
    VARIANT("fam", "bitwise", "\"base\"", "good.cu", "st_good",
            "{\"name\":\"P0\",\"values\":[0,1,2,3,4]},{\"name\":\"P1\",\"values\":[0,1,2]}",
            "\"search\":{\"strategy\":\"halving\"},") ","
    VARIANT("late", "kl", "null", "good.cu", "st_good",
            "{\"name\":\"L0\",\"values\":[1,2,3,4]},{\"name\":\"L1\",\"values\":[2,3,4]}",
            "\"search\":{\"strategy\":\"halving\"},")
    "]}";

/* The first line of log holding needle at or after from, or NULL. */
static const char *first_at(const char *log, const char *needle) { return strstr(log, needle); }

/* The most candidates any time request the worker answered held. */
static int widest_time(const char *log) {
  int widest = 0;
  for (const char *p = log; (p = strstr(p, "time T ")) != NULL; p++) {
    const char *e = strchr(p, '\n'), *c = strstr(p, " cands");
    if (e == NULL || c == NULL || c > e) continue;
    int n = 0;
    for (const char *q = c + 6; q < e; q++) n += *q == ' ';
    widest = n > widest ? n : widest;
  }
  return widest;
}

static void serve_setup(const char *op, const char *manifest_text);

static void budget_setup(void) { serve_setup("budget", budget_manifest); }

/* Above checks.all_points_up_to: time first, check the finalists. */
static void test_probe_late_checks(void **state) {
  (void)state;
  if (!have_tools()) skip();
  budget_setup();
  char *out = NULL, *err = NULL, *log = NULL, args[512], path[256];
  snprintf(path, sizeof path, "%s/worker.log", dir);
  unlink(path);
  snprintf(args, sizeof args, "probe --op budget --db '%s/late.db'", dir);
  int st = hctune(args, &out, &err);
  if (st != 0) fail_msg("hctune probe: status %d: %s", st, err);
  assert_int_equal(hct__read_file(path, &log, NULL), 0);
  /* 28 candidates: every one checked at 1 and 16, fewer above. */
  assert_int_equal(count(log, " T 16 pending 0\n"), 28);
  assert_int_equal(count(log, " T 16 pending 1\n"), 28);
  const int late256 = count(log, " T 256 pending 0\n"), late4096 = count(log, " T 4096 pending 0\n");
  if (late4096 < 3 || late4096 > 14) fail_msg("%d checks at T = 4096 (finalists only: 3..14)", late4096);
  assert_true(late256 >= 3 && late256 < 28);
  /* Checked after the search's timing there, before it at 16. */
  const char *t16 = first_at(log, "time T 16 "), *c16 = first_at(log, " T 16 pending 0\n");
  const char *t4096 = first_at(log, "time T 4096 "), *c4096 = first_at(log, " T 4096 pending 0\n");
  assert_true(t16 && c16 && c16 < t16);
  assert_true(t4096 && c4096 && t4096 < c4096);
  /* late's best point fails at 256: checked there, replaced by the next. */
  const int best = cand_id(log, "late", "{\"L0\":2,\"L1\":3}");
  assert_true(best >= 0);
  const int base = cand_id(log, "base", "{}");
  char want[96];
  snprintf(want, sizeof want, "check %d ref %d T 256 pending 0\n", best, base);
  if (count(log, want) != 1) fail_msg("no '%s' in the worker's log:\n%s", want, log);
  snprintf(want, sizeof want, "check %d ref %d T 4096 ", best, base);
  assert_int_equal(count(log, want), 0); /* out everywhere after */
  if (strstr(err, "checked in place of a finalist that failed") == NULL)
    fail_msg("no replacement said in the progress:\n%s", err);
  hct_db_t *db;
  snprintf(path, sizeof path, "%s/late.db", dir);
  assert_int_equal(hct__db_open(path, HCT_DB_READONLY, &db), 0);
  char *tj = NULL;
  /* fam's points the search left out at 4096: unchecked, and said so. */
  assert_int_equal(hct__db_trials_json(db, NULL, "budget", "fam", 4096, &tj), 0);
  if (strstr(tj, "\"unchecked\"") == NULL || strstr(tj, "only the search's finalists are") == NULL)
    fail_msg("fam's trials at 4096 do not say which points were not checked: %.2000s", tj);
  free(tj);
  /* late keeps a checked, passing point at 4096 all the same. */
  assert_int_equal(hct__db_trials_json(db, NULL, "budget", "late", 4096, &tj), 0);
  if (strstr(tj, "\"pass\"") == NULL) fail_msg("late has no passing trial at 4096: %.2000s", tj);
  free(tj);
  hct_db_decision_t *d = NULL;
  int nd = 0;
  assert_int_equal(hct__db_decisions_list(db, &d, &nd), 0);
  const hct_db_decision_t *b = decision(d, nd, "bitwise", 4096), *k = decision(d, nd, "kl", 4096);
  assert_non_null(b);
  assert_non_null(k);
  assert_string_equal(b->variant, "fam");
  assert_string_equal(b->params, "{\"P0\":2,\"P1\":2}");
  /* Not the point that failed: out everywhere. */
  for (int i = 0; i < nd; i++) assert_string_not_equal(d[i].params, "{\"L0\":2,\"L1\":3}");
  free(d);
  hct__db_close(db);
  free(out);
  free(err);
  free(log);
}

/* A small card: timings in groups; none fitting ends the probe. */
static void test_probe_memory_groups(void **state) {
  (void)state;
  if (!have_tools()) skip();
  budget_setup();
  char *out = NULL, *err = NULL, *log = NULL, args[512], path[256];
  static char saved[sizeof env];
  snprintf(path, sizeof path, "%s/worker.log", dir);
  unlink(path);
  snprintf(saved, sizeof saved, "%s", env);
  if (strlen(saved) + 32 > sizeof env) fail_msg("the test's environment is too long");
  memcpy(env + strlen(saved), "FAKE_WORKER_TIME_FITS=3 ", 25);
  snprintf(args, sizeof args, "probe --op budget --db '%s/mem.db'", dir);
  int st = hctune(args, &out, &err);
  snprintf(env, sizeof env, "%s", saved);
  if (st != 0) fail_msg("hctune probe: status %d: %s", st, err);
  assert_int_equal(hct__read_file(path, &log, NULL), 0);
  assert_true(count(log, "time refused T ") > 0);
  if (widest_time(log) > 3) fail_msg("a time request of %d candidates went through:\n%s", widest_time(log), log);
  if (strstr(err, "fit the card's memory at once: timed in groups") == NULL ||
      strstr(err, "contenders again, in one request") == NULL)
    fail_msg("the grouping is not in the progress:\n%s", err);
  /* The decision still comes out verified: fam's best at 16 and 4096. */
  assert_true(count(log, "verify ref ") > 0);
  hct_db_t *db;
  snprintf(path, sizeof path, "%s/mem.db", dir);
  assert_int_equal(hct__db_open(path, HCT_DB_READONLY, &db), 0);
  hct_db_decision_t *d = NULL;
  int nd = 0;
  assert_int_equal(hct__db_decisions_list(db, &d, &nd), 0);
  for (int T = 16; T <= 4096; T *= 256) {
    const hct_db_decision_t *b = decision(d, nd, "bitwise", T);
    assert_non_null(b);
    assert_string_equal(b->variant, "fam");
    assert_string_equal(b->params, "{\"P0\":2,\"P1\":2}");
  }
  free(d);
  hct__db_close(db);
  free(out);
  free(err);
  free(log);

  /* Not one candidate fits: one line naming the cause, status non-zero. */
  memcpy(env + strlen(saved), "FAKE_WORKER_TIME_FITS=0 ", 25);
  snprintf(args, sizeof args, "probe --op budget --db '%s/mem0.db'", dir);
  st = hctune(args, &out, &err);
  snprintf(env, sizeof env, "%s", saved);
  assert_int_not_equal(st, 0);
  if (strstr(err, "cannot be timed on this card") == NULL) fail_msg("status %d, no cause named:\n%s", st, err);
  free(out);
  free(err);
}


/* Issue 29's ops, on the same templates: "tiles" probed sparsely at whole
 * tiles (16, 256, 4096), where "tiled" is the fastest and right, and
 * wrong at every T that is not a multiple of 16 (tests/fake/fake_worker.c);
 * "dense" probed at every count of 1..8, as hc_read's decode is. */
#define SERVE_MANIFEST(tokens, probe)                                                               \
  "{\"selftest\":true,\"tokens\":" tokens "," probe "\"constants\":{\"ROW\":1024},"               \
  "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*ROW\"},"         \
  "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*ROW\",\"row\":\"ROW\"}],"    \
  "\"inputs\":[{\"buffer\":\"x\",\"mean\":0.0,\"sd\":1.0}],"                                        \
  "\"reference\":{\"template\":\"reference.cu\",\"rows\":{\"sample\":64,\"why\":\"a test op\"},"    \
  "\"launches\":[{\"entry\":\"st_reference\",\"grid\":[\"cdiv(ROW,256)\",\"NROWS\",1],"             \
  "\"block\":[256,1,1],\"args\":[\"@rows\",\"@x\",\"@ref.y\"]}]},"                                  \
  "\"timing\":{\"mode\":\"cold\",\"batch\":\"max(2, min(32, 512 / T))\"},"                          \
  "\"variants\":["                                                                                  \
  VARIANT("base", "baseline", "null", "base.cu", "st_base", "", "") ","                             \
  VARIANT("tiled", "bitwise", "\"base\"", "good.cu", "st_good", "", "") ","                         \
  VARIANT("good", "bitwise", "\"base\"", "good.cu", "st_good", "{\"name\":\"G0\",\"values\":[3]}", "") \
  "]}"

/* Op `op` beside selftest, on its templates, with manifest_text. */
static void serve_setup(const char *op, const char *manifest_text) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/k/%s' && cp '%s/k/selftest/'*.cu '%s/k/selftest/'*.h '%s/k/%s/'",
           dir, op, dir, dir, dir, op);
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/k/%s/manifest.json", dir, op);
  FILE *f = fopen(cmd, "w");
  assert_non_null(f);
  fputs(manifest_text, f);
  fclose(f);
}

/* Probes op into its own DB; the worker's log and the decisions back. */
static void serve_probe(const char *op, char **log, hct_db_decision_t **d, int *nd) {
  char *out = NULL, *err = NULL, args[512], path[256];
  snprintf(path, sizeof path, "%s/worker.log", dir);
  unlink(path);
  snprintf(args, sizeof args, "probe --op %s --db '%s/%s.db'", op, dir, op);
  int st = hctune(args, &out, &err);
  if (st != 0) fail_msg("hctune probe --op %s: status %d: %s", op, st, err);
  assert_int_equal(hct__read_file(path, log, NULL), 0);
  hct_db_t *db;
  snprintf(path, sizeof path, "%s/%s.db", dir, op);
  assert_int_equal(hct__db_open(path, HCT_DB_READONLY, &db), 0);
  assert_int_equal(hct__db_decisions_list(db, d, nd), 0);
  hct__db_close(db);
  free(out);
  free(err);
}


static void test_probe_serves_checked(void **state) {
  (void)state;
  if (!have_tools()) skip();
  serve_setup("tiles", SERVE_MANIFEST("[16,4096]", "\"probe_tokens\":[16,256,4096],"));
  char *log = NULL, want[96];
  hct_db_decision_t *d = NULL;
  int nd = 0;
  serve_probe("tiles", &log, &d, &nd);
  const int tiled = cand_id(log, "tiled", "{}"), base = cand_id(log, "base", "{}");
  assert_true(tiled >= 0 && base >= 0);
  /* It won T = 16, so it was timed and verified there, then checked at a
   * partial tile that decision would serve (16 + 1) before it was decided
   * for, where it failed: out everywhere, never checked again. */
  snprintf(want, sizeof want, "check %d ref %d T 16 pending 0\n", tiled, base);
  if (count(log, want) != 1) fail_msg("no '%s' in the worker's log:\n%s", want, log);
  snprintf(want, sizeof want, "verify ref %d cands %d\n", base, tiled);
  const char *verified = strstr(log, want);
  snprintf(want, sizeof want, "check %d ref %d T 17 pending 0\n", tiled, base);
  const char *partial = strstr(log, want);
  if (verified == NULL || partial == NULL || partial < verified)
    fail_msg("tiled was not verified at 16 then checked at 17:\n%s", log);
  snprintf(want, sizeof want, "check %d ref %d T 256 ", tiled, base);
  assert_int_equal(count(log, want), 0);
  /* Never served, at any T: the next candidate, checked at the counts it
   * serves, has every range. */
  assert_true(nd >= 2);
  for (int i = 0; i < nd; i++) {
    if (strcmp(d[i].variant, "tiled") == 0)
      fail_msg("%s T=%lld..%lld serves tiled", d[i].parity, (long long)d[i].tmin, (long long)d[i].tmax);
    if (strcmp(d[i].variant, "good") != 0)
      fail_msg("%s T=%lld..%lld serves %s, not good:\n%s", d[i].parity, (long long)d[i].tmin,
               (long long)d[i].tmax, d[i].variant, log);
  }
  for (int T = 16; T <= 4096; T++) {
    const hct_db_decision_t *b = decision(d, nd, "bitwise", T);
    if (b == NULL) fail_msg("no bitwise decision at T=%d", T);
  }
  const int good = cand_id(log, "good", "{\"G0\":3}");
  /* The next one checked where it is served: a partial tile after 16 and
   * one before 4096 (4096 covers 1025..4096). */
  snprintf(want, sizeof want, "check %d ref %d T 17 pending 1\n", good, base);
  if (strstr(log, want) == NULL) fail_msg("no '%s' in the worker's log:\n%s", want, log);
  snprintf(want, sizeof want, "check %d ref %d T 4095 pending 0\n", good, base);
  if (strstr(log, want) == NULL) fail_msg("no '%s' in the worker's log:\n%s", want, log);
  free(d);
  free(log);

  /* Decode: every count probed, so every count a decision serves was
   * checked before it was timed: nothing is checked after the timing. */
  serve_setup("dense", SERVE_MANIFEST("[1,8]", ""));
  serve_probe("dense", &log, &d, &nd);
  if (strstr(after_timing(log), "check ") != NULL)
    fail_msg("a check after the timing of a dense probe:\n%s", after_timing(log));
  assert_true(count(log, "time T 8 ") > 0);
  free(d);
  free(log);
}

/* Issue 34's sparse op: the fastest kl variant (tiledk) and the fastest
 * member of the bit family of mma (tiledfam, its bits checked against
 * mma's) are both wrong at every T that is not a multiple of 16, right at
 * every probed count; famgood is an honest member of the family, good an
 * honest bitwise one.  With `planted` 0 only the honest ones. */
#define SERVE_KL_MANIFEST(planted)                                                                  \
  "{\"selftest\":true,\"tokens\":[16,4096],\"probe_tokens\":[16,256,4096],\"families\":[\"mma\"],"   \
  "\"constants\":{\"ROW\":1024},"                                                                    \
  "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*ROW\"},"         \
  "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*ROW\",\"row\":\"ROW\"}],"    \
  "\"inputs\":[{\"buffer\":\"x\",\"mean\":0.0,\"sd\":1.0}],"                                        \
  "\"reference\":{\"template\":\"reference.cu\",\"rows\":{\"sample\":64,\"why\":\"a test op\"},"    \
  "\"launches\":[{\"entry\":\"st_reference\",\"grid\":[\"cdiv(ROW,256)\",\"NROWS\",1],"             \
  "\"block\":[256,1,1],\"args\":[\"@rows\",\"@x\",\"@ref.y\"]}]},"                                  \
  "\"timing\":{\"mode\":\"cold\",\"batch\":\"max(2, min(32, 512 / T))\"},"                          \
  "\"variants\":["                                                                                  \
  VARIANT("base", "baseline", "null", "base.cu", "st_base", "", "") ","                             \
  VARIANT("good", "bitwise", "\"base\"", "good.cu", "st_good", "{\"name\":\"G0\",\"values\":[3]}", "") "," \
  VARIANT("mma", "kl", "null", "good.cu", "st_good", "{\"name\":\"Q0\",\"values\":[4,3]}", "") ","     \
  VARIANT("famgood", "bitwise", "\"mma\"", "good.cu", "st_good", "{\"name\":\"F0\",\"values\":[2]}", "") \
  planted "]}"
#define PLANTED_KL                                                                                  \
  "," VARIANT("tiledk", "kl", "null", "good.cu", "st_good", "", "") ","                             \
  VARIANT("tiledfam", "bitwise", "\"mma\"", "good.cu", "st_good", "", "")

/* The variant decided at T for parity, or NULL. */
static const char *decided(const hct_db_decision_t *d, int nd, const char *parity, int T) {
  const hct_db_decision_t *x = decision(d, nd, parity, T);
  return x ? x->variant : NULL;
}

static void test_probe_serves_checked_kl_family(void **state) {
  (void)state;
  if (!have_tools()) skip();
  serve_setup("tilesk", SERVE_KL_MANIFEST(PLANTED_KL));
  char *log = NULL, want[128];
  hct_db_decision_t *d = NULL;
  int nd = 0;
  serve_probe("tilesk", &log, &d, &nd);
  const int tk = cand_id(log, "tiledk", "{}"), tf = cand_id(log, "tiledfam", "{}");
  const int base = cand_id(log, "base", "{}"), mma = cand_id(log, "mma", "{\"Q0\":4}");
  assert_true(tk >= 0 && tf >= 0 && base >= 0 && mma >= 0);
  /* Each won a probed count, passed there, and was caught where a decision
   * would have served it: a partial tile (T = 17, the first after 16). */
  snprintf(want, sizeof want, "verify ref %d cands", base);
  if (strstr(log, want) == NULL) fail_msg("nothing verified against the baseline:\n%s", log);
  snprintf(want, sizeof want, "check %d ref %d T 17 pending 0\n", tk, base);
  if (strstr(log, want) == NULL) fail_msg("tiledk was not checked at T=17 against the baseline:\n%s", log);
  snprintf(want, sizeof want, "check %d ref %d T 17 pending 0\n", tf, mma);
  if (strstr(log, want) == NULL) fail_msg("tiledfam was not checked at T=17 against mma's head:\n%s", log);
  /* Served nowhere, in any decision; every T of the op has a kl and a
   * family decision, by an honest variant. */
  for (int i = 0; i < nd; i++)
    if (strncmp(d[i].variant, "tiled", 5) == 0)
      fail_msg("%s T=%lld..%lld serves %s", d[i].parity, (long long)d[i].tmin, (long long)d[i].tmax, d[i].variant);
  for (int T = 16; T <= 4096; T++) {
    const char *k = decided(d, nd, "kl", T), *f = decided(d, nd, "bits:mma", T), *b = decided(d, nd, "bitwise", T);
    if (k == NULL || f == NULL || b == NULL) fail_msg("T=%d: a decision is missing (kl %s, bits:mma %s, bitwise %s)",
                                                      T, k ? k : "-", f ? f : "-", b ? b : "-");
    if (strcmp(f, "famgood") != 0 && strcmp(f, "mma") != 0) fail_msg("T=%d: bits:mma serves %s", T, f);
  }
  free(d);
  free(log);
}

/* The baseline's checks at T with and without pending in the worker's log. */
static int base_checks_at(const char *log, int base, int T) {
  char want[96];
  int n = 0;
  for (int pending = 0; pending <= 1; pending++) {
    snprintf(want, sizeof want, "check %d ref -1 T %d pending %d\n", base, T, pending);
    n += count(log, want);
  }
  return n;
}

/* Issue 34: one input set per (count, pending) for every decision's winner. */
static void test_probe_serve_one_set(void **state) {
  (void)state;
  if (!have_tools()) skip();
  serve_setup("tilesok", SERVE_KL_MANIFEST(""));
  char *log = NULL;
  hct_db_decision_t *d = NULL;
  int nd = 0;
  serve_probe("tilesok", &log, &d, &nd);
  const int base = cand_id(log, "base", "{}");
  assert_true(base >= 0);
  /* Two winners (good: bitwise; famgood: kl and the family), three
   * decisions, checked together at the counts they serve: the baseline
   * once with and once without pending at each. */
  static const int counts[] = {17, 63, 64, 65, 1023, 1024, 1025, 4095};
  for (size_t j = 0; j < HCT_ARRAY_SIZE(counts); j++) {
    const int n = base_checks_at(log, base, counts[j]);
    if (n != 2) fail_msg("T=%d: the baseline checked %d times (one input set per pending wanted):\n%s", counts[j], n, log);
  }
  assert_string_equal(decided(d, nd, "bitwise", 100), "good");
  assert_string_equal(decided(d, nd, "kl", 100), "famgood");
  assert_string_equal(decided(d, nd, "bits:mma", 3000), "famgood");
  free(d);
  free(log);
}

/* Issue 34's decode planted variants: every count probed (T = 1..8), each
 * the fastest; firstruns wrong on its third run in an allocation (only
 * the repeat check sees it), firstruns16 right in every check and wrong
 * in its timed launches (only the verification sees it). */
static void test_probe_decode_first_runs(void **state) {
  (void)state;
  if (!have_tools()) skip();
  serve_setup("densefr",
              "{\"selftest\":true,\"tokens\":[1,8],\"constants\":{\"ROW\":1024},"
              "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*ROW\"},"
              "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*ROW\",\"row\":\"ROW\"}],"
              "\"inputs\":[{\"buffer\":\"x\",\"mean\":0.0,\"sd\":1.0}],"
              "\"reference\":{\"template\":\"reference.cu\",\"rows\":{\"sample\":64,\"why\":\"a test op\"},"
              "\"launches\":[{\"entry\":\"st_reference\",\"grid\":[\"cdiv(ROW,256)\",\"NROWS\",1],"
              "\"block\":[256,1,1],\"args\":[\"@rows\",\"@x\",\"@ref.y\"]}]},"
              "\"timing\":{\"mode\":\"cold\",\"batch\":32},\"variants\":["
              VARIANT("base", "baseline", "null", "base.cu", "st_base", "", "") ","
              VARIANT("good", "bitwise", "\"base\"", "good.cu", "st_good", "{\"name\":\"G0\",\"values\":[3]}", "") ","
              VARIANT("firstruns", "bitwise", "\"base\"", "good.cu", "st_good", "", "") ","
              VARIANT("firstruns16", "bitwise", "\"base\"", "good.cu", "st_good", "", "") "]}");
  char *log = NULL, *tj = NULL, path[256];
  hct_db_decision_t *d = NULL;
  int nd = 0;
  serve_probe("densefr", &log, &d, &nd);
  for (int i = 0; i < nd; i++)
    if (strncmp(d[i].variant, "firstruns", 9) == 0)
      fail_msg("%s T=%lld..%lld serves %s", d[i].parity, (long long)d[i].tmin, (long long)d[i].tmax, d[i].variant);
  for (int T = 1; T <= 8; T++) assert_string_equal(decided(d, nd, "bitwise", T), "good");
  /* Each caught by the check that can see it, and said so. */
  hct_db_t *db;
  snprintf(path, sizeof path, "%s/densefr.db", dir);
  assert_int_equal(hct__db_open(path, HCT_DB_READONLY, &db), 0);
  assert_int_equal(hct__db_trials_json(db, NULL, "densefr", "firstruns", 0, &tj), 0);
  if (strstr(tj, "\"status\": \"repeat\"") == NULL) fail_msg("firstruns not caught by the repeat check: %.2000s", tj);
  free(tj);
  assert_int_equal(hct__db_trials_json(db, NULL, "densefr", "firstruns16", 0, &tj), 0);
  if (strstr(tj, "\"status\": \"timed\"") == NULL) fail_msg("firstruns16 not caught in its timed launches: %.2000s", tj);
  free(tj);
  hct__db_close(db);
  free(d);
  free(log);
}

/* The integer at "key": in text, or -1. */
static long long json_int_at(const char *text, const char *key) {
  const char *p = strstr(text, key);
  return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* Issue 34: where the probe's time went, in --json, the text, the run's
 * record and the report. */
static void test_probe_breakdown(void **state) {
  (void)state;
  if (!have_tools()) skip();
  budget_setup();
  char *out = NULL, *err = NULL, *log = NULL, args[512], path[256];
  snprintf(path, sizeof path, "%s/worker.log", dir);
  unlink(path);
  snprintf(args, sizeof args, "probe --op budget --json --db '%s/bd.db'", dir);
  int st = hctune(args, &out, &err);
  if (st != 0) fail_msg("hctune probe --json: status %d: %s", st, err);
  assert_int_equal(hct__read_file(path, &log, NULL), 0);
  const char *res = strstr(out, "{\"event\":\"result\"");
  if (res == NULL) fail_msg("no result event:\n%s", out);
  json_t *r = json_loads(res, JSON_DISABLE_EOF_CHECK, NULL), *b = json_object_get(r, "breakdown");
  if (!json_is_object(b)) fail_msg("the result has no breakdown: %s", res);
  /* Every stage's milliseconds add up to the total (each rounded). */
  long long sum = 0, total = json_integer_value(json_object_get(b, "total_ms")), checks = 0;
  size_t i;
  json_t *x;
  json_array_foreach(json_object_get(b, "stages"), i, x) {
    const char *stage = json_string_value(json_object_get(x, "stage"));
    sum += json_integer_value(json_object_get(x, "ms"));
    if (strncmp(stage, "checks_", 7) == 0) checks += json_integer_value(json_object_get(x, "n"));
    /* Above checks.all_points_up_to the finalists' own stage, and the
     * range ends' (this op's counts 1, 16, 256, 4096 serve 2..4095). */
    if (strcmp(stage, "checks_finalists") == 0 || strcmp(stage, "checks_ranges") == 0 ||
        strcmp(stage, "checks_all") == 0 || strcmp(stage, "timing") == 0 || strcmp(stage, "search") == 0 ||
        strcmp(stage, "verify") == 0 || strcmp(stage, "record") == 0)
      if (json_integer_value(json_object_get(x, "n")) <= 0) fail_msg("stage %s counted nothing: %s", stage, res);
  }
  if (i != 13 || llabs(sum - total) > 13) fail_msg("%zu stages add up to %lld ms of %lld: %s", i, sum, total, res);
  if (checks != count(log, "check ")) fail_msg("%lld checks in the breakdown, %d in the worker's log", checks, count(log, "check "));
  json_decref(r);
  free(out);
  free(err);
  /* The text ends with its table; the run keeps it; the report shows it. */
  snprintf(args, sizeof args, "probe --op budget --db '%s/bd.db'", dir);
  if ((st = hctune(args, &out, &err)) != 0) fail_msg("hctune probe: status %d: %s", st, err);
  if (strstr(out, "where the time went (") == NULL || strstr(out, "  checks, every point ") == NULL ||
      strstr(out, "  checks, range ends ") == NULL)
    fail_msg("no breakdown table at the end:\n%s", out);
  free(out);
  free(err);
  hct_db_t *db;
  snprintf(path, sizeof path, "%s/bd.db", dir);
  assert_int_equal(hct__db_open(path, HCT_DB_READONLY, &db), 0);
  char *bj = NULL, run[33];
  int64_t at = 0;
  assert_int_equal(hct__db_run_breakdown(db, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", "budget", &bj, run, &at), 0);
  hct__db_close(db);
  if (bj == NULL || json_int_at(bj, "\"total_ms\":") < 0) fail_msg("the run keeps no breakdown: %s", bj ? bj : "(none)");
  free(bj);
  snprintf(args, sizeof args, "report --db '%s/bd.db' --out '%s/bd.html'", dir, dir);
  if ((st = hctune(args, &out, &err)) != 0) fail_msg("hctune report: status %d: %s", st, err);
  char *html = NULL;
  snprintf(path, sizeof path, "%s/bd.html", dir);
  assert_int_equal(hct__read_file(path, &html, NULL), 0);
  if (strstr(html, "Where the probe's time went") == NULL || strstr(html, "<td>checks, range ends</td>") == NULL)
    fail_msg("the report does not show where the time went");
  free(html);
  free(out);
  free(err);
  free(log);
}

int main(void) {
  if ((bin_dir = hct_test_bin("test_probe_fake")) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_probe_flow),
      cmocka_unit_test(test_probe_late_checks),
      cmocka_unit_test(test_probe_memory_groups),
      cmocka_unit_test(test_probe_serves_checked),
      cmocka_unit_test(test_probe_serves_checked_kl_family),
      cmocka_unit_test(test_probe_serve_one_set),
      cmocka_unit_test(test_probe_decode_first_runs),
      cmocka_unit_test(test_probe_breakdown),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
