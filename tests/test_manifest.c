/* test_manifest.c: manifest expressions and loading, and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "jit.h"

static int64_t eval(const char *e, int *rc) {
  hct_symtab_t t = {0};
  hct__symtab_set(&t, "K", 320);
  hct__symtab_set(&t, "ROWS", 4);
  hct__symtab_set(&t, "T", 3);
  int64_t v = -999;
  *rc = hct__expr_eval(e, &t, &v);
  return v;
}

static void test_expr_values(void **state) {
  (void)state;
  static const struct {
    const char *e;
    int64_t want;
  } cases[] = {
      {"1+2*3", 7},         {"(1+2)*3", 9},         {"cdiv(K,ROWS)", 80},  {"cdiv(T,2)", 2},
      {"min(T,2)+max(1,K)", 322}, {"K/ROWS%7", 3},  {"T<=3 && K>300", 1}, {"T<3 || 0", 0},
      {"!0", 1},            {"-T+4", 1},            {"T==3", 1},           {"T!=3", 0},
      {" 10 - 2 - 3 ", 5},  {"T >= 4", 0},          {"T > 2", 1},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    int rc;
    int64_t v = eval(cases[i].e, &rc);
    if (rc != 0 || v != cases[i].want)
      fail_msg("'%s' gave %lld (rc %d), want %lld", cases[i].e, (long long)v, rc,
               (long long)cases[i].want);
  }
}

static void test_expr_errors(void **state) {
  (void)state;
  static const char *const bad[] = {"1/0", "cdiv(1,0)", "NOPE+1", "1+", "(1", "foo(1,2)",
                                    "1 2", "min(1)", ""};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    int rc;
    eval(bad[i], &rc);
    /* An unknown name has its own code (callers without a card tell it
     * from an error); every other error is EINVAL. */
    if (rc != (strcmp(bad[i], "NOPE+1") == 0 ? HCT_ENOENT : HCT_EINVAL)) fail_msg("'%s' gave %d", bad[i], rc);
    assert_non_null(strstr(hct_last_error(), "expression"));
  }
}

/* The one rule of which variants run where, and of constraints: an
 * evaluation error is a failed constraint that says so; only a value the
 * caller does not know (partial) leaves a constraint undecided. */
static void test_fits_and_constraints(void **state) {
  (void)state;
  static hct_variant_t v;
  memset(&v, 0, sizeof v);
  v.min_arch = 80;
  char why[256] = "";
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_CUDA, 75, 32, why, sizeof why), 0);
  assert_non_null(strstr(why, "needs sm_80"));
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_CUDA, 90, 32, why, sizeof why), 1);
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_HIP, 0, 32, why, sizeof why), 0);
  assert_non_null(strstr(why, "HIP"));
  v.hip = 1;
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_HIP, 0, 64, why, sizeof why), 0);
  assert_non_null(strstr(why, "64-wide"));

  hct_symtab_t syms;
  memset(&syms, 0, sizeof syms);
  hct__symtab_set(&syms, "A", 4);
  v.n_constraints = 1;
  hct__strlcpy(v.constraints[0], "A*2 <= 8", sizeof v.constraints[0]);
  assert_int_equal(hct__constraints_hold(&v, &syms, 0, why, sizeof why), 1);
  hct__strlcpy(v.constraints[0], "A > 4", sizeof v.constraints[0]);
  assert_int_equal(hct__constraints_hold(&v, &syms, 1, why, sizeof why), 0);
  assert_non_null(strstr(why, "'A > 4' is false"));
  /* An error fails, with or without partial. */
  hct__strlcpy(v.constraints[0], "cdiv(A, 0) > 0", sizeof v.constraints[0]);
  for (int partial = 0; partial <= 1; partial++) {
    assert_int_equal(hct__constraints_hold(&v, &syms, partial, why, sizeof why), 0);
    assert_non_null(strstr(why, "cannot be evaluated"));
    assert_non_null(strstr(why, "division by zero"));
  }
  /* A value the caller lacks: undecided (holds) only when partial. */
  hct__strlcpy(v.constraints[0], "A <= SMEM_OPTIN", sizeof v.constraints[0]);
  assert_int_equal(hct__constraints_hold(&v, &syms, 1, why, sizeof why), 1);
  assert_int_equal(hct__constraints_hold(&v, &syms, 0, why, sizeof why), 0);
  assert_non_null(strstr(why, "unknown name 'SMEM_OPTIN'"));
}

static char tmpdir[256];

static void write_manifest(const char *op, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, op);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/%s/manifest.json", tmpdir, op);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

#define GOOD_HEAD                                                                          \
  "{\"op\":\"t\",\"tokens\":[1,4],\"constants\":{\"N\":1024},"                              \
  "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"   \
  "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*N\"}],"
#define GOOD_VARIANT(name, cls, ref)                                                       \
  "{\"name\":\"" name "\",\"template\":\"a.cu\",\"class\":\"" cls "\",\"reference\":" ref  \
  ",\"params\":[{\"name\":\"B\",\"values\":[128,256]},{\"name\":\"U\",\"values\":[1,2,4]}]," \
  "\"constraints\":[\"B*U<=512\"],"                                                         \
  "\"launches\":[{\"entry\":\"k\",\"grid\":[\"cdiv(T*N,B)\"],\"block\":[\"B\"],"          \
  "\"args\":[\"@x\",\"@y\",\"T\"]}]}"

static void test_manifest_good(void **state) {
  (void)state;
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") ","
                 GOOD_VARIANT("fast", "bitwise", "\"base\"") "]}");
  hct_op_t *op;
  int rc = hct__manifest_load(tmpdir, "t", &op);
  if (rc != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(op->n_variants, 2);
  assert_int_equal(op->tmax, 4);
  assert_true(op->baseline_max_rel_err == 1e-5); /* the default, no "kl" given */
  const hct_variant_t *v = hct__variant_find(op, "fast");
  assert_non_null(v);
  assert_int_equal(v->parity, HCT_PARITY_BITWISE);
  assert_string_equal(v->launches[0].grid[0], "cdiv(T*N,B)");
  assert_string_equal(v->launches[0].grid[1], "1");
  assert_string_equal(v->launches[0].pdl, "0"); /* no "pdl": a plain launch */
  assert_int_equal(v->launches[0].args[0].is_pointer, 1);
  hct_point_t pts[32];
  int n = hct__param_points(v, pts, 32);
  assert_int_equal(n, 6);
  char js[128];
  hct__point_json(v, &pts[5], js, sizeof js);
  assert_string_equal(js, "{\"B\":256,\"U\":4}");
  hct_symtab_t syms;
  hct__point_symtab(op, v, &pts[5], &syms);
  hct__symtab_set(&syms, "T", 4);
  int64_t val;
  assert_int_equal(hct__expr_eval(v->constraints[0], &syms, &val), 0);
  assert_int_equal(val, 0); /* 256*4 > 512 */
  assert_int_equal(hct__expr_eval(v->launches[0].grid[0], &syms, &val), 0);
  assert_int_equal(val, 16);
  hct__manifest_free(op);
}

#define LONG20 "abcdefghijklmnopqrst"
#define LONG200 LONG20 LONG20 LONG20 LONG20 LONG20 LONG20 LONG20 LONG20 LONG20 LONG20
static void test_manifest_errors(void **state) {
  (void)state;
  static const struct {
    const char *text;
    const char *needle; /* must appear in the message */
  } cases[] = {
      {"{not json", "line 1"},
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("a", "bitwise", "\"zz\"") "]}", "reference"},
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("a", "bitwise", "null") "]}", "needs a reference"},
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("a", "fast", "null") "]}", "class"},
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("a", "baseline", "null") ","
                 GOOD_VARIANT("a", "baseline", "null") "]}", "twice"},
      {GOOD_HEAD "\"variants\":[]}", "variants"},
      {GOOD_HEAD "\"kl\":{\"baseline_max_rel_err\":2},\"variants\":[" GOOD_VARIANT("a", "baseline", "null") "]}",
       "kl.baseline_max_rel_err"},
      {"{\"op\":\"t\",\"buffers\":[{\"name\":\"x\",\"dtype\":\"f64\",\"role\":\"input\","
       "\"elems\":1}],\"variants\":[]}", "dtype"},
      {"{\"op\":\"t\",\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\","
       "\"elems\":\"Q*2\"}],\"variants\":[]}", "unknown name 'Q'"},
      {"{\"op\":\"t\",\"constants\":{\"N\":4},\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\","
       "\"elems\":1}],\"variants\":[" GOOD_VARIANT("a", "baseline", "null") "]}", "argument '@y'"},
      {GOOD_HEAD "\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\",\"class\":\"baseline\","
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"pdl\":\"PDQ\","
                 "\"args\":[]}]}]}", "unknown name 'PDQ'"},
      {GOOD_HEAD "\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\",\"class\":\"baseline\","
                 "\"scratch\":[{\"name\":\"ws\",\"bytes\":64,\"zero\":\"sometimes\"}],"
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[]}]}]}",
       "zero must be"},
      {GOOD_HEAD "\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\",\"class\":\"baseline\","
                 "\"description\":\"" LONG200 "\","
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[]}]}]}",
       "description too long: 200 characters, at most"},
      {"{\"op\":\"other\",\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\","
       "\"elems\":1}],\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\",\"class\":\"baseline\","
       "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[]}]}]}", "folder name"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    write_manifest("t", cases[i].text);
    hct_op_t *op = NULL;
    int rc = hct__manifest_load(tmpdir, "t", &op);
    if (rc == 0) fail_msg("case %zu was accepted", i);
    assert_int_equal(rc, HCT_EMANIFEST);
    if (strstr(hct_last_error(), cases[i].needle) == NULL || strstr(hct_last_error(), "manifest.json") == NULL)
      fail_msg("case %zu: message '%s' lacks '%s'", i, hct_last_error(), cases[i].needle);
  }
  assert_int_equal(hct__manifest_load(tmpdir, "absent", &(hct_op_t *){0}), HCT_ENOENT);
  assert_int_equal(hct__manifest_load(tmpdir, "../etc", &(hct_op_t *){0}), HCT_EINVAL);
}

static void test_manifest_list(void **state) {
  (void)state;
  write_manifest("t", "{}");
  write_manifest("b", "{}");
  char names[8][32];
  int n = hct__manifest_list(tmpdir, names, 8);
  assert_true(n >= 2);
  assert_string_equal(names[0], "b");
}

static void test_shipped_manifests_load(void **state) {
  (void)state;
  char dir[1024];
  if (hct__kernels_dir(dir, sizeof dir) != 0) skip();
  char names[32][32];
  int n = hct__manifest_list(dir, names, 32);
  assert_true(n >= 0);
  for (int i = 0; i < n; i++) {
    hct_op_t *op;
    if (hct__manifest_load(dir, names[i], &op) != 0) fail_msg("%s", hct_last_error());
    /* The prefill op's baseline rounds xn and lo to bf16 (about 9e-4 off
     * the exact math): its bound is its own. */
    if (strcmp(names[i], "hc_read_prefill") == 0) assert_true(op->baseline_max_rel_err == 5e-3);
    if (strcmp(names[i], "hc_read") == 0) assert_true(op->baseline_max_rel_err == 1e-5);
    /* The three kinds of scratch zeroing, as hc_read ships them. */
    for (int v = 0; strcmp(names[i], "hc_read") == 0 && v < op->n_variants; v++) {
      const hct_variant_t *var = &op->variants[v];
      for (int k = 0; k < var->n_scratch; k++) {
        const hct_scratch_t *sc = &var->scratch[k];
        if (strcmp(var->name, "persist") == 0 && strcmp(sc->name, "ws") == 0)
          assert_int_equal(sc->zero, HCT_ZERO_ONCE);
        if (strcmp(var->name, "splitk") == 0 && strcmp(sc->name, "ws") == 0)
          assert_int_equal(sc->zero, HCT_ZERO_EACH_RUN);
        if (strcmp(sc->name, "xn") == 0) assert_int_equal(sc->zero, HCT_ZERO_NEVER);
      }
    }
    hct__manifest_free(op);
  }
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hct-test-manifest-XXXXXX");
  if (mkdtemp(tmpdir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expr_values),     cmocka_unit_test(test_expr_errors),
      cmocka_unit_test(test_manifest_good),   cmocka_unit_test(test_manifest_errors),
      cmocka_unit_test(test_manifest_list),   cmocka_unit_test(test_shipped_manifests_load),
      cmocka_unit_test(test_fits_and_constraints),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) return 1;
  return rc;
}
