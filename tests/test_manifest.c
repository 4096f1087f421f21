/* test_manifest.c: manifest expressions and loading, and their errors. */
#include <limits.h>
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

#include "tuner.h"
#include "templates_test.h"

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
  /* arch_specific: the arch must be min_arch exactly, older and newer fail. */
  v.hip = 0;
  v.min_arch = 90;
  v.arch_specific = 1;
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_CUDA, 90, 32, why, sizeof why), 1);
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_CUDA, 100, 32, why, sizeof why), 0);
  assert_non_null(strstr(why, "arch-specific: compiled for sm_90a, runs on sm_90 only"));
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_CUDA, 89, 32, why, sizeof why), 0);
  assert_non_null(strstr(why, "needs sm_90"));
  v.arch_specific = 0;
  assert_int_equal(hct__variant_fits(&v, HCT_BACKEND_CUDA, 100, 32, why, sizeof why), 1);

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
  tt_touch_templates(path);
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

/* A variant with arch_specific, a tensor map `map0` over scratch and one
 * over a buffer, and `arg` as its first launch argument. */
#define TMAP_VARIANT(asp, map0, arg)                                                          \
  "{\"name\":\"w\",\"template\":\"a.cu\",\"class\":\"kl\",\"min_arch\":90,"              \
  "\"arch_specific\":" asp ",\"params\":[{\"name\":\"BM\",\"values\":[64,128]}],"           \
  "\"scratch\":[{\"name\":\"xn\",\"bytes\":\"T*N*2\"}],"                                       \
  "\"tensor_maps\":[" map0 ",{\"name\":\"x_b\",\"buffer\":\"x\",\"dtype\":\"f32\","             \
  "\"dims\":[\"N\",\"T\"],\"box\":[32,\"BM\"],\"swizzle\":\"128B\"}],"                          \
  "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[128],"                                \
  "\"args\":[" arg ",\"@tmap(x_b)\",\"@y\",\"T\"]}]}"
#define TMAP0 "{\"name\":\"xn_a\",\"buffer\":\"xn\",\"dtype\":\"bf16\",\"dims\":[\"N\",\"T\"]," \
  "\"box\":[64,\"BM\"],\"swizzle\":\"128B\"}"

/* jit/plan.c: the plan the tuner and the library both launch, evaluated
 * from the manifest at T=4, BM=64: numbers and indices, tensor maps over
 * scratch and over a buffer, the scratch sizing rule, and the errors. */
static void test_plan_eval(void **state) {
  (void)state;
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") ","
                 TMAP_VARIANT("true", TMAP0, "\"@tmap(xn_a)\"") "]}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  const hct_variant_t *v = hct__variant_find(op, "w");
  hct_point_t pt = {{64}};
  hct_symtab_t syms;
  hct__point_symtab(op, v, &pt, &syms);
  hct__symtab_set(&syms, "T", 4);
  hct__card_symbols(&syms, 90, 132, 232448, 32, 0);
  hct_plan_spec_t spec;
  hct__plan_spec(op, v, 232448, &spec);
  hct_plan_t plan;
  if (hct__plan_eval(&spec, &syms, NULL, NULL, &plan) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(plan.n_scratch, 1);
  assert_int_equal(plan.scratch_bytes[0], 4 * 1024 * 2 + 4); /* T*N*2, whole words, + 4 */
  assert_int_equal(plan.scratch_zero[0], HCT_ZERO_NEVER);
  assert_int_equal(plan.n_launches, 1);
  const hct_plan_launch_t *P = &plan.launches[0];
  assert_int_equal(P->grid[0], 1);
  assert_int_equal(P->block[0], 128);
  assert_int_equal(P->smem, 0);
  assert_int_equal(P->pdl, 0);
  assert_int_equal(P->n_args, 4);
  assert_int_equal(P->args[0].kind, HCT_PLAN_TMAP);
  assert_int_equal(P->tmaps[P->args[0].index].over, HCT_PLAN_SCRATCH);
  assert_int_equal(P->tmaps[P->args[0].index].index, 0);
  assert_int_equal(P->tmaps[P->args[0].index].dims.box[1], 64);
  assert_int_equal(P->args[1].kind, HCT_PLAN_TMAP);
  assert_int_equal(P->tmaps[P->args[1].index].over, HCT_PLAN_BUFFER);
  assert_int_equal(P->tmaps[P->args[1].index].index, 0); /* x */
  assert_int_equal(P->tmaps[P->args[1].index].dims.dims[1], 4);
  assert_int_equal(P->args[2].kind, HCT_PLAN_BUFFER);
  assert_int_equal(P->args[2].index, 1); /* y */
  assert_int_equal(P->args[3].kind, HCT_PLAN_INT);
  assert_int_equal(P->args[3].value, 4);
  /* What was allocated decides: an absent buffer under a map is refused,
   * naming the map; memory smaller than the map spans too. */
  size_t bufs[2] = {0, 4 * 1024 * 4}, scr[1] = {plan.scratch_bytes[0]};
  assert_int_equal(hct__plan_eval(&spec, &syms, bufs, scr, &plan), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "tensor map 'x_b' over 'x', which is absent"));
  bufs[0] = 4 * 1024 * 4;
  scr[0] = 100;
  assert_int_equal(hct__plan_eval(&spec, &syms, bufs, scr, &plan), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "w: tensor map 'xn_a'"));
  /* A launch expression out of range names the variant, kernel and field. */
  hct_launch_t big = v->launches[0];
  hct__strlcpy(big.block[0], "2048", sizeof big.block[0]);
  spec.launches = &big;
  assert_int_equal(hct__plan_eval(&spec, &syms, NULL, NULL, &plan), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "w: kernel 'k': block '2048' = 2048, outside 1..1024"));
  hct__strlcpy(big.block[0], "128", sizeof big.block[0]);
  hct__strlcpy(big.smem, "SMEM_OPTIN+1", sizeof big.smem);
  assert_int_equal(hct__plan_eval(&spec, &syms, NULL, NULL, &plan), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "shared memory 'SMEM_OPTIN+1' = 232449"));
  hct__manifest_free(op);
}

/* The shipped ops' folder into dir and their names; skips the test where
 * there is none. */
static int shipped_ops(char dir[1024], char names[32][32]) {
  if (hct__kernels_dir(dir, 1024) != 0) skip();
  int n = hct__manifest_list(dir, names, 32);
  assert_true(n > 0);
  return n;
}

/* Every shipped op's float64 reference evaluates to a plan whose "@rows"
 * and "@ref.<output>" arguments are bound by the caller (HCT_PLAN_EXTRA,
 * in the order tuner/reference.c lists them), and without those names the
 * evaluation fails naming the argument.  (A plan evaluator that knew only
 * buffers and scratch once broke every probe on a GPU, at its first
 * reference run, with no CPU test to see it.) */
static void test_reference_plan_extras(void **state) {
  (void)state;
  char dir[1024], names[32][32];
  const int n = shipped_ops(dir, names);
  int checked = 0;
  for (int i = 0; i < n; i++) {
    hct_op_t *op;
    if (hct__manifest_load(dir, names[i], &op) != 0) fail_msg("%s", hct_last_error());
    if (!op->reference.present) {
      hct__manifest_free(op);
      continue;
    }
    char store[HCT_MAX_BUFFERS][40];
    const char *extra[HCT_MAX_BUFFERS + 1] = {"rows"};
    int n_extra = 1;
    for (int b = 0; b < op->n_buffers; b++)
      if (op->buffers[b].role == HCT_BUF_OUTPUT || op->buffers[b].role == HCT_BUF_INOUT) {
        snprintf(store[n_extra], sizeof store[0], "ref.%s", op->buffers[b].name);
        extra[n_extra] = store[n_extra];
        n_extra++;
      }
    const hct_variant_t *v = &op->reference.v;
    hct_point_t pt;
    memset(&pt, 0, sizeof pt);
    hct_symtab_t syms;
    hct__point_symtab(op, v, &pt, &syms);
    hct__symtab_set(&syms, "T", v->tmin > 16 ? v->tmin : 16);
    hct__symtab_set(&syms, "NROWS", 3);
    hct__card_symbols(&syms, 90, 132, 232448, 32, 0);
    hct_plan_spec_t spec;
    hct__plan_spec(op, v, 232448, &spec);
    spec.extra = extra;
    spec.n_extra = n_extra;
    hct_plan_t *plan = malloc(sizeof *plan);
    assert_non_null(plan);
    if (hct__plan_eval(&spec, &syms, NULL, NULL, plan) != 0) fail_msg("%s: %s", op->name, hct_last_error());
    int bound = 0;
    for (int l = 0; l < plan->n_launches; l++)
      for (int a = 0; a < plan->launches[l].n_args; a++) {
        const char *text = v->launches[l].args[a].text;
        const hct_plan_arg_t *pa = &plan->launches[l].args[a];
        if (strcmp(text, "@rows") != 0 && strncmp(text, "@ref.", 5) != 0) continue;
        assert_int_equal(pa->kind, HCT_PLAN_EXTRA);
        assert_string_equal(extra[pa->index], text + 1);
        bound++;
      }
    assert_true(bound >= 2); /* the rows, and at least one output */
    spec.n_extra = 0;
    assert_int_equal(hct__plan_eval(&spec, &syms, NULL, NULL, plan), HCT_EMANIFEST);
    assert_non_null(strstr(hct_last_error(), "is no buffer or scratch"));
    free(plan);
    hct__manifest_free(op);
    checked++;
  }
  assert_true(checked >= 2); /* hc_read and hc_read_prefill */
}

static void test_manifest_tmaps(void **state) {
  (void)state;
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") ","
                 TMAP_VARIANT("true", TMAP0, "\"@tmap(xn_a)\"") "]}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  const hct_variant_t *v = hct__variant_find(op, "w");
  assert_int_equal(v->arch_specific, 1);
  assert_int_equal(hct__variant_find(op, "base")->arch_specific, 0);
  assert_int_equal(v->n_tmaps, 2);
  assert_string_equal(v->tmaps[0].target, "xn");
  assert_int_equal(v->tmaps[0].dtype, HCT_DT_BF16);
  assert_int_equal(v->tmaps[0].rank, 2);
  assert_int_equal(v->tmaps[0].swizzle, 128);
  assert_string_equal(v->tmaps[0].box[1], "BM");
  const hct_launch_t *l = &v->launches[0];
  assert_int_equal(l->args[0].tmap, 1);
  assert_int_equal(l->args[0].is_pointer, 0);
  assert_int_equal(l->args[1].tmap, 2);
  assert_int_equal(l->args[2].is_pointer, 1);
  assert_int_equal(l->args[2].tmap, 0);

  /* Evaluated at T=100, BM=128: dims innermost first, dense strides. */
  hct_point_t pt = {{128}};
  hct_symtab_t syms;
  hct__point_symtab(op, v, &pt, &syms);
  hct__symtab_set(&syms, "T", 100);
  hct_tmap_dims_t d;
  if (hct__tmap_eval(&v->tmaps[0], &syms, 100 * 1024 * 2, &d) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(d.dims[0], 1024);
  assert_int_equal(d.dims[1], 100);
  assert_int_equal(d.strides[0], 2);
  assert_int_equal(d.strides[1], 2048);
  assert_int_equal(d.box[0], 64);
  assert_int_equal(d.box[1], 128);
  /* Memory smaller than the map spans, and an inner box wider than the
   * swizzle (32 f32 = 128 bytes fits; T*N as the box does not). */
  assert_int_equal(hct__tmap_eval(&v->tmaps[0], &syms, 1000, &d), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "tensor map 'xn_a': spans 204800 bytes of 'xn'"));
  hct_tmap_spec_t wide = v->tmaps[1];
  hct__strlcpy(wide.box[0], "64", sizeof wide.box[0]);
  assert_int_equal(hct__tmap_eval(&wide, &syms, 1 << 30, &d), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "256 bytes exceeds the 128-byte swizzle"));
  hct__strlcpy(wide.box[0], "300", sizeof wide.box[0]);
  assert_int_equal(hct__tmap_eval(&wide, &syms, 1 << 30, &d), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "box[0] = 300"));
  hct__manifest_free(op);

  /* Each broken field is named. */
  static const struct {
    const char *map0, *arg, *asp, *needle;
  } bad[] = {
      {TMAP0, "\"@tmap(nope)\"", "true", "argument '@tmap(nope)' names no entry of tensor_maps"},
      {"{\"name\":\"xn_a\",\"buffer\":\"zz\",\"dtype\":\"bf16\",\"dims\":[1],\"box\":[1]}",
       "\"T\"", "true", "tensor_maps[0]: buffer names no buffer or scratch"},
      {"{\"name\":\"xn_a\",\"buffer\":\"x\",\"dtype\":\"bf16\",\"dims\":[1],\"box\":[1]}",
       "\"T\"", "true", "tensor_maps[0]: dtype differs from the buffer's"},
      {"{\"name\":\"xn_a\",\"buffer\":\"xn\",\"dtype\":\"bf16\",\"dims\":[1,2],\"box\":[1]}",
       "\"T\"", "true", "box must be an array of as many expressions as dims"},
      {"{\"name\":\"xn_a\",\"buffer\":\"xn\",\"dtype\":\"bf16\",\"dims\":[1],\"box\":[1],"
       "\"swizzle\":\"96B\"}",
       "\"T\"", "true", "swizzle must be none, 32B, 64B or 128B"},
      {"{\"name\":\"xn_a\",\"buffer\":\"xn\",\"dtype\":\"bf16\",\"dims\":[\"QQ\"],\"box\":[1]}",
       "\"T\"", "true", "unknown name 'QQ'"},
      {"{\"name\":\"x_b\",\"buffer\":\"xn\",\"dtype\":\"bf16\",\"dims\":[1],\"box\":[1]}",
       "\"T\"", "true", "tensor_maps[1]: name used twice"},
      {TMAP0, "\"T\"", "1", "arch_specific must be true or false"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    /* The variant text with this case's pieces. */
    char text[4096], var[2048];
    snprintf(var, sizeof var,
             "{\"name\":\"w\",\"template\":\"a.cu\",\"class\":\"kl\",\"min_arch\":90,"
             "\"arch_specific\":%s,\"params\":[{\"name\":\"BM\",\"values\":[64,128]}],"
             "\"scratch\":[{\"name\":\"xn\",\"bytes\":\"T*N*2\"}],"
             "\"tensor_maps\":[%s,{\"name\":\"x_b\",\"buffer\":\"x\",\"dtype\":\"f32\","
             "\"dims\":[\"N\",\"T\"],\"box\":[32,\"BM\"],\"swizzle\":\"128B\"}],"
             "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[128],"
             "\"args\":[%s,\"@tmap(x_b)\",\"@y\",\"T\"]}]}",
             bad[i].asp, bad[i].map0, bad[i].arg);
    snprintf(text, sizeof text, "%s\"variants\":[%s,%s]}", GOOD_HEAD,
             GOOD_VARIANT("base", "baseline", "null"), var);
    write_manifest("t", text);
    op = NULL;
    int rc = hct__manifest_load(tmpdir, "t", &op);
    if (rc == 0) fail_msg("tensor map case %zu was accepted", i);
    if (strstr(hct_last_error(), bad[i].needle) == NULL)
      fail_msg("tensor map case %zu: message '%s' lacks '%s'", i, hct_last_error(), bad[i].needle);
  }
  /* arch_specific below sm_90, and on HIP. */
  write_manifest("t", GOOD_HEAD "\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\","
                 "\"class\":\"baseline\",\"min_arch\":80,\"arch_specific\":true,"
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[]}]}]}");
  assert_int_equal(hct__manifest_load(tmpdir, "t", &op), HCT_EMANIFEST);
  assert_non_null(strstr(hct_last_error(), "arch_specific needs a min_arch of 90"));
  write_manifest("t", GOOD_HEAD "\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\","
                 "\"class\":\"baseline\",\"min_arch\":90,\"arch_specific\":true,\"hip\":true,"
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[]}]}]}");
  assert_int_equal(hct__manifest_load(tmpdir, "t", &op), HCT_EMANIFEST);
  assert_non_null(strstr(hct_last_error(), "CUDA only: hip must be false"));
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
      /* References: never the variant itself, only on a bitwise variant,
       * and a chain that ends off the bitwise class (no cycle). */
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("b", "baseline", "null") ","
                 GOOD_VARIANT("a", "bitwise", "\"a\"") "]}", "'a': reference names the variant itself"},
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("b", "baseline", "null") ","
                 GOOD_VARIANT("k", "kl", "\"b\"") "]}", "'k': only a bitwise variant names a reference"},
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("b", "baseline", "\"b\"") "]}", "only a bitwise variant"},
      {GOOD_HEAD "\"variants\":[" GOOD_VARIANT("b", "baseline", "null") ","
                 GOOD_VARIANT("x", "bitwise", "\"y\"") "," GOOD_VARIANT("y", "bitwise", "\"z\"") ","
                 GOOD_VARIANT("z", "bitwise", "\"x\"") "]}", "'x': its references go round in a cycle"},
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

/* ---- inputs and reference (ops as data) ---------------------------------- */

#define DATA_HEAD(inputs, ref)                                                                  \
  "{\"op\":\"t\",\"tokens\":[1,4],\"constants\":{\"N\":1024,\"F\":64},"                         \
  "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"        \
  "{\"name\":\"w\",\"dtype\":\"bf16\",\"role\":\"weight\",\"elems\":\"N\"},"                     \
  "{\"name\":\"r\",\"dtype\":\"f32\",\"role\":\"inout\",\"elems\":\"T*N\",\"row\":\"N/2\"},"     \
  "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*N\"}],"                   \
  "\"inputs\":" inputs ",\"reference\":" ref ","                                                 \
  "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}"
#define RULE_X "{\"buffer\":\"x\",\"mean\":0,\"sd\":1}"
#define RULE_W "{\"buffer\":\"w\",\"mean\":1.0,\"sd\":0.1,\"fan_in\":\"F\"}"
#define RULE_R "{\"buffer\":\"r\",\"mean\":0.5,\"sd\":2}"
#define GOOD_INPUTS "[" RULE_X "," RULE_W "," RULE_R "]"
#define REF_WITH(rows, launches)                                                                \
  "{\"template\":\"ref.cu\"," rows "\"scratch\":[{\"name\":\"tmp\",\"bytes\":\"NROWS*N*8\"}],"   \
  "\"launches\":" launches "}"
#define GOOD_ROWS "\"rows\":{\"sample\":8,\"why\":\"the edges and six from the seed\"},"
#define REF_LAUNCH(args)                                                                        \
  "[{\"entry\":\"rk\",\"grid\":[\"NROWS\",\"cdiv(N,64)\"],\"block\":[64],\"args\":[" args "]}]"
#define GOOD_ARGS "\"@rows\",\"@x\",\"@w\",\"@r\",\"@ref.r\",\"@ref.y\",\"@tmp\",\"NROWS\""
#define GOOD_REF REF_WITH(GOOD_ROWS, REF_LAUNCH(GOOD_ARGS))

static void test_manifest_inputs_reference(void **state) {
  (void)state;
  write_manifest("t", DATA_HEAD(GOOD_INPUTS, GOOD_REF));
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_true(op->has_inputs);
  const hct_buffer_t *x = &op->buffers[0], *w = &op->buffers[1], *r = &op->buffers[2], *y = &op->buffers[3];
  assert_true(x->rule.set && w->rule.set && r->rule.set && !y->rule.set);
  assert_true(w->rule.mean == 1.0 && w->rule.sd == 0.1);
  assert_string_equal(w->rule.fan_in, "F");
  assert_string_equal(x->rule.fan_in, "");
  assert_true(r->rule.mean == 0.5 && r->rule.sd == 2.0);
  assert_string_equal(r->row, "N/2");
  assert_string_equal(y->row, "");
  const hct_reference_t *ref = &op->reference;
  assert_true(ref->present);
  assert_int_equal(ref->sample, 8);
  assert_string_equal(ref->why, "the edges and six from the seed");
  assert_string_equal(ref->v.template_file, "ref.cu");
  assert_string_equal(ref->v.name, "reference");
  assert_int_equal(ref->v.n_scratch, 1);
  assert_int_equal(ref->v.n_launches, 1);
  assert_int_equal(ref->v.launches[0].n_args, 8);
  assert_int_equal(ref->v.launches[0].args[4].is_pointer, 1);
  assert_string_equal(ref->v.launches[0].args[4].text, "@ref.r");
  assert_int_equal(ref->v.launches[0].args[7].is_pointer, 0);
  assert_true(ref->v.hip && ref->v.wave64 && ref->v.min_arch == 0);
  hct__manifest_free(op);

  /* Neither field: the op loads (it compiles and is served), but is not
   * one the tuner can check. */
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_false(op->has_inputs);
  assert_false(op->reference.present);
  assert_int_equal(hct__reference_ready(op), HCT_EMANIFEST);
  assert_non_null(strstr(hct_last_error(), "op 't': its manifest has no \"inputs\""));
  hct_compile_job_t job;
  assert_int_equal(hct__reference_job(op, HCT_BACKEND_CUDA, "sm_90", &job), HCT_EMANIFEST);
  hct__manifest_free(op);
  /* The probe refuses it before it looks for a card: no GPU needed here. */
  hct_probe_opts_t po;
  memset(&po, 0, sizeof po);
  po.op = "t";
  po.kernels_dir = tmpdir;
  po.quiet = 1;
  assert_int_equal(hct__probe(&po), HCT_EMANIFEST);
  assert_non_null(strstr(hct_last_error(), "no \"inputs\": the tuner cannot draw its inputs"));
  /* Inputs without a reference: the same, naming "reference". */
  write_manifest("t", "{\"op\":\"t\",\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\","
                      "\"elems\":\"T\"},{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T\"}],"
                      "\"inputs\":[" RULE_X "],\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\","
                      "\"class\":\"baseline\",\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],"
                      "\"args\":[\"@x\",\"@y\"]}]}]}");
  assert_int_equal(hct__probe(&po), HCT_EMANIFEST);
  assert_non_null(strstr(hct_last_error(), "op 't': its manifest has no \"reference\": the tuner cannot check it"));
}

/* Hostile inputs and references: each refused, the message naming the
 * file, the field and the cause. */
static void test_manifest_inputs_reference_errors(void **state) {
  (void)state;
  static const struct {
    const char *text;
    const char *needle;
  } cases[] = {
      {DATA_HEAD("[" RULE_X "," RULE_R "]", GOOD_REF), "inputs: buffer 'w' (weight) has no rule"},
      {DATA_HEAD("[" RULE_X "," RULE_W "]", GOOD_REF), "buffer 'r' (inout) has no rule"},
      {DATA_HEAD("[" RULE_X "," RULE_W "," RULE_R "," RULE_X "]", GOOD_REF), "inputs[3] ('x'): a second rule"},
      {DATA_HEAD("[" RULE_X "," RULE_W "," RULE_R ",{\"buffer\":\"y\",\"mean\":0,\"sd\":1}]", GOOD_REF),
       "inputs[3] ('y'): an output is written by the op"},
      {DATA_HEAD("[{\"buffer\":\"x\",\"mean\":0,\"sd\":0}," RULE_W "," RULE_R "]", GOOD_REF),
       "inputs[0] ('x'): sd must be a finite number above 0"},
      {DATA_HEAD("[{\"buffer\":\"x\",\"mean\":0,\"sd\":-1}," RULE_W "," RULE_R "]", GOOD_REF), "sd must be"},
      {DATA_HEAD("[{\"buffer\":\"x\",\"mean\":0}," RULE_W "," RULE_R "]", GOOD_REF), "sd must be"},
      {DATA_HEAD("[{\"buffer\":\"x\",\"mean\":\"big\",\"sd\":1}," RULE_W "," RULE_R "]", GOOD_REF), "mean must be"},
      {DATA_HEAD("[" RULE_X ",{\"buffer\":\"w\",\"mean\":0,\"sd\":1,\"fan_in\":\"Q\"}," RULE_R "]", GOOD_REF),
       "inputs[1] ('w'): fan_in 'Q' is not a constant of the op"},
      {DATA_HEAD("[" RULE_X ",{\"buffer\":\"w\",\"mean\":0,\"sd\":1,\"fan_in\":3}," RULE_R "]", GOOD_REF),
       "inputs[1] ('w') fan_in: not a string"},
      {DATA_HEAD("[" RULE_X "," RULE_W "," RULE_R ",{\"buffer\":\"zz\",\"mean\":0,\"sd\":1}]", GOOD_REF),
       "inputs[3]: 'zz' is not a buffer of the op"},
      {DATA_HEAD("{}", GOOD_REF), "inputs: must be an array"},
      {DATA_HEAD("[" RULE_X "," RULE_W "," RULE_R ",7]", GOOD_REF), "inputs[3]: not an object"},
      {DATA_HEAD(GOOD_INPUTS, "{\"launches\":" REF_LAUNCH(GOOD_ARGS) "}"), "reference.template: missing"},
      {DATA_HEAD(GOOD_INPUTS, "[]"), "reference: not an object"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH(GOOD_ROWS, REF_LAUNCH("\"@rows\",\"@ref.x\",\"@ref.y\",\"@ref.r\""))),
       "argument '@ref.x': 'x' is not an output or inout buffer"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH(GOOD_ROWS, REF_LAUNCH("\"@ref.nope\",\"@ref.y\",\"@ref.r\""))),
       "argument '@ref.nope' names no buffer"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH(GOOD_ROWS, REF_LAUNCH("\"@y\",\"@ref.y\",\"@ref.r\""))),
       "argument '@y' is an output: the reference writes '@ref.y'"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH(GOOD_ROWS, REF_LAUNCH("\"@rows\",\"@ref.y\""))),
       "reference.launches: no launch writes '@ref.r'"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH(GOOD_ROWS, REF_LAUNCH("\"@ref.y\",\"@ref.r\",\"@nothing\""))),
       "reference launches[0]: argument '@nothing' names no buffer or scratch"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH(GOOD_ROWS, REF_LAUNCH(GOOD_ARGS ",\"ROWS+1\""))), "unknown name 'ROWS'"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH(GOOD_ROWS, "[]")), "reference: launches must be a non-empty array"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH("\"rows\":{\"sample\":1,\"why\":\"x\"},", REF_LAUNCH(GOOD_ARGS))),
       "reference.rows.sample"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH("\"rows\":{\"sample\":8},", REF_LAUNCH(GOOD_ARGS))),
       "reference.rows.why: missing"},
      {DATA_HEAD(GOOD_INPUTS, REF_WITH("\"rows\":{\"sample\":8,\"why\":\"\"},", REF_LAUNCH(GOOD_ARGS))),
       "reference.rows.why: empty"},
      {DATA_HEAD(GOOD_INPUTS, "{\"template\":\"ref.cu\",\"scratch\":[{\"name\":\"tmp\",\"bytes\":\"Z*8\"}],"
                              "\"launches\":" REF_LAUNCH(GOOD_ARGS) "}"), "unknown name 'Z'"},
      /* The reference's names and pointers are its own: not a variant's. */
      {GOOD_HEAD "\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\",\"class\":\"baseline\","
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[\"NROWS\"],\"block\":[1],\"args\":[]}]}]}",
       "unknown name 'NROWS'"},
      {GOOD_HEAD "\"variants\":[{\"name\":\"a\",\"template\":\"a.cu\",\"class\":\"baseline\","
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[\"@ref.y\"]}]}]}",
       "argument '@ref.y' names no buffer or scratch"},
      {"{\"op\":\"t\",\"constants\":{\"N\":4},\"buffers\":[{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\","
       "\"elems\":\"T*N\",\"row\":\"Q\"}],\"variants\":[]}", "buffers[0] row: "},
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
}

/* The class each variant competes in, the one rule of which decisions a
 * variant takes part in: bits equal to the baseline's (directly or through
 * another bitwise variant) are bitwise; bits equal to a kl variant's (the
 * prefill op's upmix against pair_mma) carry that variant's error, so kl;
 * and a chain that reaches a kl variant anywhere is kl. */
static void test_competing_class(void **state) {
  (void)state;
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") ","
                 GOOD_VARIANT("bw", "bitwise", "\"base\"") "," GOOD_VARIANT("bw2", "bitwise", "\"bw\"") ","
                 GOOD_VARIANT("mma", "kl", "null") "," GOOD_VARIANT("upmix", "bitwise", "\"mma\"") ","
                 GOOD_VARIANT("up2", "bitwise", "\"upmix\"") "]}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  static const struct {
    const char *name;
    hct_parity_t competes;
    int in_bitwise, in_kl;
    const char *reference;
  } cases[] = {
      {"base", HCT_PARITY_BASELINE, 1, 1, NULL}, {"bw", HCT_PARITY_BITWISE, 1, 1, "base"},
      {"bw2", HCT_PARITY_BITWISE, 1, 1, "bw"},   {"mma", HCT_PARITY_KL, 0, 1, NULL},
      {"upmix", HCT_PARITY_KL, 0, 1, "mma"},     {"up2", HCT_PARITY_KL, 0, 1, "upmix"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    const hct_variant_t *v = hct__variant_find(op, cases[i].name);
    assert_non_null(v);
    const hct_variant_t *r = hct__variant_reference(op, v);
    if (hct__variant_competes(op, v) != cases[i].competes ||
        hct__variant_in_decision(op, v, HCT_PARITY_BITWISE) != cases[i].in_bitwise ||
        hct__variant_in_decision(op, v, HCT_PARITY_KL) != cases[i].in_kl ||
        (r == NULL) != (cases[i].reference == NULL) ||
        (r != NULL && strcmp(r->name, cases[i].reference) != 0))
      fail_msg("%s: competes in %s, in bitwise %d, in kl %d, reference %s", cases[i].name,
               hct__parity_name(hct__variant_competes(op, v)),
               hct__variant_in_decision(op, v, HCT_PARITY_BITWISE),
               hct__variant_in_decision(op, v, HCT_PARITY_KL), r ? r->name : "none");
  }
  /* Its default point as a reference: the first value of every parameter. */
  hct_point_t pt;
  hct__point_first(hct__variant_find(op, "mma"), &pt);
  char js[64];
  hct__point_json(hct__variant_find(op, "mma"), &pt, js, sizeof js);
  assert_string_equal(js, "{\"B\":128,\"U\":1}");
  hct__manifest_free(op);
}

/* Issue 29: "families" names heads of bit families; a variant is in the
 * family when its bitwise chain reaches the head, and the parity strings
 * an engine may ask for are checked in one place. */
static void test_families(void **state) {
  (void)state;
#define FAM_VARIANTS                                                                         \
  "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") ","                              \
  GOOD_VARIANT("bw", "bitwise", "\"base\"") "," GOOD_VARIANT("mma", "kl", "null") ","          \
  GOOD_VARIANT("upmix", "bitwise", "\"mma\"") "," GOOD_VARIANT("up2", "bitwise", "\"upmix\"") \
  "," GOOD_VARIANT("other", "kl", "null") "]"
  write_manifest("t", GOOD_HEAD "\"families\":[\"mma\"]," FAM_VARIANTS "}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(op->n_families, 1);
  const hct_variant_t *head = hct__op_family(op, "mma");
  assert_non_null(head);
  assert_null(hct__op_family(op, "other"));
  static const struct {
    const char *name;
    int in;
  } members[] = {{"base", 0}, {"bw", 0}, {"mma", 1}, {"upmix", 1}, {"up2", 1}, {"other", 0}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(members); i++)
    if (hct__variant_in_family(op, hct__variant_find(op, members[i].name), head) != members[i].in)
      fail_msg("%s: in family mma %d, want %d", members[i].name,
               hct__variant_in_family(op, hct__variant_find(op, members[i].name), head),
               members[i].in);
  /* Without a decision a family is served by its head, bitwise by the
   * baseline; a family the op does not declare is an error. */
  assert_string_equal(hct__op_parity_variant(op, "bits:mma")->name, "mma");
  assert_string_equal(hct__op_parity_variant(op, "bitwise")->name, "base");
  assert_null(hct__op_parity_variant(op, "bits:other"));
  assert_non_null(strstr(hct_last_error(), "no family 'other'"));
  hct__manifest_free(op);

  static const struct {
    const char *families, *cause;
  } bad[] = {
      {"[\"nope\"]", "families[0]: 'nope' names no variant of this op"},
      {"[\"base\"]", "families[0]: 'base' is the baseline"},
      {"[\"mma\",\"mma\"]", "families[1]: 'mma' named twice"},
      {"[3]", "families[0]: not a string"},
      {"\"mma\"", "families: not an array"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    char text[4096];
    snprintf(text, sizeof text, "%s\"families\":%s,%s}", GOOD_HEAD, bad[i].families, FAM_VARIANTS);
    write_manifest("t", text);
    hct_op_t *o = NULL;
    if (hct__manifest_load(tmpdir, "t", &o) == 0) fail_msg("families %s loaded", bad[i].families);
    if (strstr(hct_last_error(), bad[i].cause) == NULL || strchr(hct_last_error(), '\n') != NULL)
      fail_msg("families %s: '%s', want '%s' on one line", bad[i].families, hct_last_error(),
               bad[i].cause);
  }
#undef FAM_VARIANTS

  static const struct {
    const char *parity;
    int ok;
  } asked[] = {{"bitwise", 1}, {"kl", 1},           {"bits:pair_mma", 1}, {"baseline", 0},
               {"bits:", 0},   {"bits:a b", 0},     {"bits:a\"b", 0},     {"BITWISE", 0},
               {"", 0},        {"bits:0123456789012345678901234567890123", 0}};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(asked); i++)
    if ((hct__parity_asked_ok(asked[i].parity) == 0) != asked[i].ok)
      fail_msg("parity '%s': accepted %d, want %d", asked[i].parity,
               hct__parity_asked_ok(asked[i].parity) == 0, asked[i].ok);
  hct__error_clear();
}

/* "probe_tokens" and a "timing.batch" that is an expression of T. */
static void test_probe_tokens_and_batch(void **state) {
  (void)state;
  write_manifest("t", "{\"op\":\"t\",\"tokens\":[16,32768],\"probe_tokens\":[16,512,32768],"
                 "\"constants\":{\"N\":1024},\"timing\":{\"batch\":\"max(2, min(96, 65536 / T))\"},"
                 "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"
                 "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*N\"}],"
                 "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  hct_tokens_t t;
  assert_int_equal(hct__op_probe_tokens(op, &t), 0);
  assert_int_equal(t.n, 3);
  assert_true(t.t[0] == 16 && t.t[1] == 512 && t.t[2] == 32768);
  assert_int_equal(hct__op_batch(op, 16), 96);
  assert_int_equal(hct__op_batch(op, 2048), 32);
  assert_int_equal(hct__op_batch(op, 32768), 2);
  assert_int_equal(op->batch, 96); /* at tmin, for display */
  /* Without probe_tokens a range too large for a list asks for --tokens. */
  op->n_probe_tokens = 0;
  assert_int_equal(hct__op_probe_tokens(op, &t), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "names no probe_tokens: name some with --tokens"));
  hct__manifest_free(op);

  /* An integer batch, and a small range probed densely by default. */
  write_manifest("t", GOOD_HEAD "\"timing\":{\"batch\":32},\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(hct__op_batch(op, 3), 32);
  assert_int_equal(hct__op_probe_tokens(op, &t), 0);
  assert_true(t.n == 4 && t.t[0] == 1 && t.t[3] == 4);
  hct__manifest_free(op);

  static const struct {
    const char *head, *needle;
  } bad[] = {
      {"\"probe_tokens\":[1,8],", "probe_tokens: item 1 (8) must be a count in the op's tokens 1..4"},
      {"\"probe_tokens\":[2,2],", "item 1 (2)"},
      {"\"probe_tokens\":[],", "probe_tokens: must be an array of 1 to 64"},
      {"\"probe_tokens\":[\"x\"],", "item 0 (-1)"},
      {"\"timing\":{\"batch\":\"4-T\"},", "timing.batch: at T=4: op 't': timing.batch '4-T' is 0 at T=4, outside 1..4096"},
      {"\"timing\":{\"batch\":\"Q*2\"},", "unknown name 'Q'"},
      {"\"timing\":{\"batch\":5000},", "is 5000 at T=1"},
      {"\"timing\":{\"batch\":[1]},", "timing.batch: must be a number or an expression"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    char text[4096];
    snprintf(text, sizeof text, GOOD_HEAD "%s\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}", bad[i].head);
    write_manifest("t", text);
    op = NULL;
    int rc = hct__manifest_load(tmpdir, "t", &op);
    if (rc != HCT_EMANIFEST || strstr(hct_last_error(), bad[i].needle) == NULL)
      fail_msg("case %zu: rc %d, message '%s' lacks '%s'", i, rc, hct_last_error(), bad[i].needle);
  }
}

/* "checks": the count up to which every point is checked before timing
 * (above it the probe checks only the search's finalists); absent, every
 * count checks every point. */
static void test_checks_field(void **state) {
  (void)state;
  write_manifest("t", "{\"op\":\"t\",\"tokens\":[16,32768],\"constants\":{\"N\":1024},"
                 "\"checks\":{\"all_points_up_to\":2048,\"why\":\"a check at 32768 copies 2 GB back per run\"},"
                 "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T\"},"
                 "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T\"}],"
                 "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(op->checks_all_up_to, 2048);
  assert_string_equal(op->checks_why, "a check at 32768 copies 2 GB back per run");
  hct__manifest_free(op);
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(op->checks_all_up_to, INT_MAX);
  hct__manifest_free(op);
  static const struct {
    const char *head, *needle;
  } bad[] = {
      {"\"checks\":[2],", "checks: must be an object"},
      {"\"checks\":{\"all_points_up_to\":8,\"why\":\"x\"},", "checks: all_points_up_to must be a token count in the op's tokens 1..4"},
      {"\"checks\":{\"all_points_up_to\":\"2\",\"why\":\"x\"},", "all_points_up_to must be a token count"},
      {"\"checks\":{\"all_points_up_to\":2},", "checks.why: missing"},
      {"\"checks\":{\"all_points_up_to\":2,\"why\":\"\"},", "checks.why: must say why"},
      {"\"checks\":{\"all_points_up_to\":2,\"why\":\"x\",\"every\":1},", "checks: unknown field 'every'"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    char text[4096];
    snprintf(text, sizeof text, GOOD_HEAD "%s\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}", bad[i].head);
    write_manifest("t", text);
    op = NULL;
    int rc = hct__manifest_load(tmpdir, "t", &op);
    if (rc != HCT_EMANIFEST || strstr(hct_last_error(), bad[i].needle) == NULL)
      fail_msg("case %zu: rc %d, message '%s' lacks '%s'", i, rc, hct_last_error(), bad[i].needle);
  }
}

/* "flops" (optional, an expression of T) and the floor's bytes: what the
 * report measures a winner against (issue 30). */
static void test_flops_and_floor_bytes(void **state) {
  (void)state;
  write_manifest("t", "{\"op\":\"t\",\"tokens\":[1,64],\"constants\":{\"N\":1024},"
                 "\"flops\":\"2*T*N\","
                 "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"
                 "{\"name\":\"w\",\"dtype\":\"bf16\",\"role\":\"weight\",\"elems\":\"N\"},"
                 "{\"name\":\"p\",\"dtype\":\"f32\",\"role\":\"optional\",\"elems\":\"T*N\"},"
                 "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T\"}],"
                 "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  double bytes, flops;
  assert_int_equal(hct__op_floor_bytes(op, 4, &bytes), 0);
  assert_true(bytes == 4.0 * 4 * 1024 + 2.0 * 1024 + 4.0 * 4); /* the optional one absent */
  assert_int_equal(hct__op_flops(op, 4, &flops), 0);
  assert_true(flops == 2.0 * 4 * 1024);
  hct__manifest_free(op);
  /* absent: no flops */
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(hct__op_flops(op, 4, &flops), 0);
  assert_true(flops == 0);
  hct__manifest_free(op);
  static const char *const bad[] = {"\"flops\":\"T*Q\",", "\"flops\":[1],"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    char text[4096];
    snprintf(text, sizeof text, GOOD_HEAD "%s\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}", bad[i]);
    write_manifest("t", text);
    op = NULL;
    int rc = hct__manifest_load(tmpdir, "t", &op);
    if (rc != HCT_EMANIFEST || strstr(hct_last_error(), "flops") == NULL)
      fail_msg("case %zu: rc %d, message '%s' does not name flops", i, rc, hct_last_error());
  }
  /* The prefill op's: 4*T*K*D, 107 GFLOP at T = 8192 (docs/ops/hc_read.md). */
  char dir[1024];
  if (hct__kernels_dir(dir, sizeof dir) != 0) return;
  if (hct__manifest_load(dir, "hc_read_prefill", &op) != 0) fail_msg("%s", hct_last_error());
  assert_int_equal(hct__op_flops(op, 8192, &flops), 0);
  assert_true(flops == 4.0 * 8192 * 320 * 10240);
  hct__manifest_free(op);
}

/* "search": op level, inherited and overridden by a variant. */
static void test_search_field(void **state) {
  (void)state;
  write_manifest("t", GOOD_HEAD "\"search\":{\"strategy\":\"halving\",\"keep\":0.5,\"min_points\":3},"
                 "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") ","
                 "{\"name\":\"x\",\"template\":\"a.cu\",\"class\":\"kl\",\"search\":{\"rule\":\"median\",\"carry\":0},"
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[]}]},"
                 "{\"name\":\"y\",\"template\":\"a.cu\",\"class\":\"kl\",\"search\":{\"strategy\":\"exhaustive\"},"
                 "\"launches\":[{\"entry\":\"k\",\"grid\":[1],\"block\":[1],\"args\":[]}]}]}");
  hct_op_t *op;
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  const hct_search_t *b = &hct__variant_find(op, "base")->search, *x = &hct__variant_find(op, "x")->search,
                     *y = &hct__variant_find(op, "y")->search;
  assert_true(b->strategy == HCT_SEARCH_HALVING && b->keep == 0.5 && b->ci_rule == 1 && b->min_points == 3);
  assert_true(b->first_samples == 3 && b->growth == 2 && b->max_samples == 24 && b->final_points == 2);
  assert_true(x->strategy == HCT_SEARCH_HALVING && x->ci_rule == 0 && x->carry == 0 && x->keep == 0.5);
  assert_true(y->strategy == HCT_SEARCH_EXHAUSTIVE);
  hct__manifest_free(op);
  write_manifest("t", GOOD_HEAD "\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}");
  if (hct__manifest_load(tmpdir, "t", &op) != 0) fail_msg("%s", hct_last_error());
  assert_true(op->search.strategy == HCT_SEARCH_EXHAUSTIVE && op->variants[0].search.keep == 0.25);
  hct__manifest_free(op);

  static const struct {
    const char *search, *needle;
  } bad[] = {
      {"{\"strategy\":\"random\"}", "search: strategy must be exhaustive or halving"},
      {"{\"keep\":1}", "keep must be a number between 0 and 1"},
      {"{\"rule\":\"mean\"}", "rule must be ci or median"},
      {"{\"growth\":1}", "growth must be an integer in 2..16"},
      {"{\"first_samples\":30}", "max_samples is below first_samples"},
      {"{\"budget\":3}", "unknown field 'budget'"},
      {"[]", "search: must be an object"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    char text[4096];
    snprintf(text, sizeof text, GOOD_HEAD "\"search\":%s,\"variants\":[" GOOD_VARIANT("base", "baseline", "null") "]}",
             bad[i].search);
    write_manifest("t", text);
    op = NULL;
    int rc = hct__manifest_load(tmpdir, "t", &op);
    if (rc != HCT_EMANIFEST || strstr(hct_last_error(), bad[i].needle) == NULL)
      fail_msg("case %zu: rc %d, message '%s' lacks '%s'", i, rc, hct_last_error(), bad[i].needle);
  }
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
  char dir[1024], names[32][32];
  const int n = shipped_ops(dir, names);
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

/* The folder names the op: every shipped op's folder copied under another
 * name, with nothing else changed, loads as that op (issue 23: an op is
 * data), and its templates are found in the copy. */
static void test_shipped_folder_copied(void **state) {
  (void)state;
  char dir[1024], names[32][32];
  const int n = shipped_ops(dir, names);
  for (int i = 0; i < n; i++) {
    char copy[64], cmd[4096], common[600];
    snprintf(copy, sizeof copy, "%.20s_copy", names[i]);
    hct_op_t *orig, *op;
    if (hct__manifest_load(dir, names[i], &orig) != 0) fail_msg("%s", hct_last_error());
    /* The op's own folder ($HCTUNE_KERNELS lists several); ../common is
     * shared by the ops: link it beside the copies. */
    hct__common_include_dir(orig, common, sizeof common);
    snprintf(cmd, sizeof cmd, "rm -rf '%s/%s' && cp -r '%s' '%s/%s' && ln -sfn '%s' '%s/common'",
             tmpdir, copy, orig->dir, tmpdir, copy, common, tmpdir);
    assert_int_equal(system(cmd), 0);
    if (hct__manifest_load(tmpdir, copy, &op) != 0) fail_msg("%s: %s", copy, hct_last_error());
    assert_string_equal(op->name, copy);
    assert_int_equal(op->n_variants, orig->n_variants);
    assert_string_equal(op->variants[0].name, orig->variants[0].name);
    hct__manifest_free(orig);
    hct__manifest_free(op);
  }
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hct-test-manifest-XXXXXX");
  if (mkdtemp(tmpdir) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expr_values),     cmocka_unit_test(test_expr_errors),
      cmocka_unit_test(test_manifest_good),   cmocka_unit_test(test_manifest_errors),
      cmocka_unit_test(test_plan_eval),       cmocka_unit_test(test_reference_plan_extras),
      cmocka_unit_test(test_manifest_list),   cmocka_unit_test(test_shipped_manifests_load),
      cmocka_unit_test(test_fits_and_constraints), cmocka_unit_test(test_manifest_inputs_reference),
      cmocka_unit_test(test_manifest_inputs_reference_errors),
      cmocka_unit_test(test_shipped_folder_copied),   cmocka_unit_test(test_competing_class),
      cmocka_unit_test(test_probe_tokens_and_batch),
      cmocka_unit_test(test_checks_field),
      cmocka_unit_test(test_flops_and_floor_bytes), cmocka_unit_test(test_search_field),
      cmocka_unit_test(test_manifest_tmaps),  cmocka_unit_test(test_families),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) return 1;
  return rc;
}
