/*
 * test_compile.c: `hctune compile` as a user runs it: the compile matrix
 * (read from the manifests: every product op, every variant, every arch
 * NVRTC and hiprtc compile for), every point for sm_90, a broken
 * template, a missing header, and an unknown arch.  Runs $HCT_BIN/hctune;
 * needs NVRTC (skips, saying why, where it cannot be loaded), no GPU.  The
 * compiles of one run share a compile cache; under the sanitizers the
 * compiler-bound tests skip (the plain pass runs them).
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

#include "tuner.h"
#include "cli_test.h"

static char bin[1024], kernels[1024], tmp[128];

/* Runs `hctune <args>` with HCTUNE_KERNELS=`kdir`; returns the exit status,
 * stdout and stderr in malloc'd strings. */
static int run(const char *kdir, const char *args, char **out, char **err) {
  char env[1200];
  snprintf(env, sizeof env, "HCTUNE_KERNELS='%s' ", kdir);
  return cli_run(env, bin, tmp, args, out, err);
}

static int setup(void **state) {
  (void)state;
  const char *b = hct_test_bin("test_compile");
  if (b == NULL) return -1;
  snprintf(bin, sizeof bin, "%s/hctune", b);
  const char *k = getenv("HCTUNE_KERNELS");
  snprintf(kernels, sizeof kernels, "%s", k ? k : "kernels-src");
  snprintf(tmp, sizeof tmp, "/tmp/hct_test_compile_%d", (int)getpid());
  char p[256];
  snprintf(p, sizeof p, "%s/x", tmp);
  return hct__mkdir_parents(p);
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : -1;
}

static int need_nvrtc(void) {
  char v[64];
  if (hct__compiler_version(HCT_BACKEND_CUDA, v, sizeof v) == 0) return 1;
  printf("SKIP: nvrtc cannot be loaded here: %s\n", hct_last_error());
  return 0;
}

/* The sanitizers instrument hctune's C, not NVRTC or hiprtc: a compile
 * costs the same under them and tells nothing new, so the compiler-bound
 * tests run in the plain pass only (make check runs both). */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
#define SKIP_IF_SANITIZED()                                                              \
  do {                                                                                   \
    if (SANITIZED) {                                                                     \
      printf("SKIP: sanitizer build: compiles are NVRTC's and hiprtc's, not hctune's C; " \
             "the plain pass runs them\n");                                              \
      skip();                                                                            \
    }                                                                                    \
  } while (0)

/* The compile cache every compile of a run shares ($tmp/cache.db, through
 * --db): a binary that an earlier test compiled is loaded, not compiled. */
static const char *cache_arg(void) {
  static char arg[200];
  snprintf(arg, sizeof arg, "--db '%s/cache.db'", tmp);
  return arg;
}

/* The product ops under the kernels folder, loaded; selftest ops are left
 * out (their variants fail on purpose: test_worker checks them). */
static int load_product_ops(hct_op_t **ops, int max) {
  char names[64][32];
  int n = hct__manifest_list(kernels, names, 64), k = 0;
  if (n < 0) fail_msg("%s: %s", kernels, hct_last_error());
  for (int i = 0; i < n && k < max; i++) {
    hct_op_t *op = NULL;
    if (hct__manifest_load(kernels, names[i], &op) != 0)
      fail_msg("%s: %s", names[i], hct_last_error());
    if (op->selftest) {
      printf("%s: a selftest op, left to test_worker\n", op->name);
      hct__manifest_free(op);
      continue;
    }
    ops[k++] = op;
  }
  if (k == 0) fail_msg("%s: no product op", kernels);
  return k;
}

/* Does `backend` know `arch` exactly (a binary, not PTX)?  *arch_num and
 * *warp as the backend reads them. */
static int arch_known(hct_backend_kind_t backend, const char *arch, int *arch_num, int *warp) {
  hct_compile_opts_t *o = calloc(1, sizeof *o);
  assert_non_null(o);
  int rc = hct__backend(backend)->target_options(arch, o), known = rc == 0 && !o->is_ptx;
  *arch_num = o->arch_num;
  *warp = o->warp;
  free(o);
  hct__error_clear();
  return known;
}

/* One arch of the matrix: `hctune compile --first-point --json` for each
 * op, then each variant checked against its manifest: one ok binary when
 * the arch can run it (min_arch and arch_specific for CUDA; hip, wave64 for HIP), none
 * otherwise, and nothing failed. */
static void check_arch(hct_backend_kind_t backend, const char *arch, int arch_num, int warp,
                       hct_op_t *const *ops, int n_ops) {
  for (int i = 0; i < n_ops; i++) {
    const hct_op_t *op = ops[i];
    char args[512], *out, *err;
    snprintf(args, sizeof args, "compile --backend %s --arch %s --op %s --first-point --json %s",
             hct__backend(backend)->name, arch, op->name, cache_arg());
    uint64_t t0 = hct__now_ns();
    int rc = run(kernels, args, &out, &err);
    printf("%s for %s: exit %d in %.1f s\n", op->name, arch, rc,
           (double)(hct__now_ns() - t0) / 1e9);
    if (rc != 0) fail_msg("%s %s: exit %d\n%s", op->name, arch, rc, err);
    json_error_t jerr;
    json_t *arr = json_loads(out, 0, &jerr);
    if (!json_is_array(arr)) fail_msg("%s %s: not a JSON array: %s\n%s", op->name, arch, jerr.text, out);
    for (int v = 0; v < op->n_variants; v++) {
      const hct_variant_t *var = &op->variants[v];
      /* arch_specific (sm_90a): compiled for its own arch and no other. */
      const int runs = backend == HCT_BACKEND_CUDA
                           ? var->min_arch <= arch_num &&
                                 (!var->arch_specific || var->min_arch == arch_num)
                           : var->hip && (warp != 64 || var->wave64);
      int ok = 0, seen = 0;
      size_t k;
      json_t *o;
      json_array_foreach(arr, k, o) {
        if (strcmp(json_string_value(json_object_get(o, "variant")), var->name) != 0) continue;
        seen++;
        ok += strcmp(json_string_value(json_object_get(o, "status")), "ok") == 0;
      }
      if (runs && (seen != 1 || ok != 1))
        fail_msg("%s %s %s: %d binaries, %d ok; want one ok\n%s\n%s", op->name, var->name, arch,
                 seen, ok, out, err);
      if (!runs && seen != 0)
        fail_msg("%s %s %s: compiled although the manifest rules it out\n%s", op->name,
                 var->name, arch, out);
    }
    json_decref(arr);
    free(out);
    free(err);
  }
}

/*
 * Every variant of every product op, once, for each NVIDIA arch family
 * this NVRTC compiles binaries for (from sm_75 up: the manifests' lowest
 * min_arch is 70, which NVRTC 13 no longer builds).  The templates hold no
 * arch conditionals (no __CUDA_ARCH__), so what can differ between archs
 * is the instruction set: an instruction that comes in with a later arch
 * fails at a variant's own min_arch, one that a later family drops fails
 * at that family's first arch, and the minors of a family (sm_86 .. sm_89,
 * sm_103, sm_121) add to it, never take away.  So the matrix compiles the
 * first arch of each major, the first at or above each variant's min_arch,
 * and the newest (half of the twelve: NVRTC's compiles were two thirds of
 * make check's critical path).
 */
static int arch_in_matrix(const int *known, int n, int i, hct_op_t *const *ops, int n_ops) {
  if (i == 0 || i == n - 1 || known[i] / 10 != known[i - 1] / 10) return 1;
  for (int o = 0; o < n_ops; o++)
    for (int v = 0; v < ops[o]->n_variants; v++)
      if (known[i] >= ops[o]->variants[v].min_arch && known[i - 1] < ops[o]->variants[v].min_arch)
        return 1;
  return 0;
}

static void test_matrix_cuda(void **state) {
  (void)state;
  SKIP_IF_SANITIZED();
  if (!need_nvrtc()) skip();
  hct_op_t *ops[64];
  int n_ops = load_product_ops(ops, 64), n_known = 0, n_archs = 0, known[64];
  for (int num = 70; num <= 130 && n_known < 64; num++) {
    char arch[16];
    int arch_num, warp;
    snprintf(arch, sizeof arch, "sm_%d", num);
    if (arch_known(HCT_BACKEND_CUDA, arch, &arch_num, &warp)) known[n_known++] = num;
  }
  for (int i = 0; i < n_known; i++) {
    char arch[16];
    int arch_num, warp;
    snprintf(arch, sizeof arch, "sm_%d", known[i]);
    if (!arch_in_matrix(known, n_known, i, ops, n_ops)) {
      int head = i;
      while (head > 0 && known[head - 1] / 10 == known[i] / 10) head--;
      printf("%s: covered by sm_%d (its family's first; no variant starts here)\n", arch, known[head]);
      continue;
    }
    arch_known(HCT_BACKEND_CUDA, arch, &arch_num, &warp);
    check_arch(HCT_BACKEND_CUDA, arch, arch_num, warp, ops, n_ops);
    n_archs++;
  }
  printf("%d archs of %d\n", n_archs, n_known);
  assert_true(n_known >= 5); /* sm_75 .. sm_120 at least */
  assert_true(n_archs >= 4); /* sm_75, sm_80, sm_90, the newest at least */
  for (int i = 0; i < n_ops; i++) hct__manifest_free(ops[i]);
}

/* The same for the AMD targets of both wave sizes that Debian's hiprtc
 * compiles (a target it does not know is skipped with a note: hctune
 * refuses it, which test_hip checks). */
static void test_matrix_hip(void **state) {
  (void)state;
  SKIP_IF_SANITIZED();
  char v[64];
  if (hct__compiler_version(HCT_BACKEND_HIP, v, sizeof v) != 0) {
    printf("SKIP: hiprtc cannot be loaded here: %s\n", hct_last_error());
    skip();
  }
  static const char *const targets[] = {"gfx906", "gfx908", "gfx90a", "gfx1030"};
  hct_op_t *ops[64];
  int n_ops = load_product_ops(ops, 64), n_archs = 0;
  for (size_t t = 0; t < HCT_ARRAY_SIZE(targets); t++) {
    int arch_num, warp;
    if (!arch_known(HCT_BACKEND_HIP, targets[t], &arch_num, &warp)) {
      printf("%s: not a target of %s, skipped\n", targets[t], v);
      continue;
    }
    check_arch(HCT_BACKEND_HIP, targets[t], arch_num, warp, ops, n_ops);
    n_archs++;
  }
  assert_true(n_archs >= 1);
  for (int i = 0; i < n_ops; i++) hct__manifest_free(ops[i]);
}

/* Every op's float64 reference template (its manifest's "reference")
 * compiles through the product's path for sm_90 and, where hiprtc loads,
 * for gfx90a (wave 64) and gfx1030 (wave 32): the reference runs wherever
 * a candidate of the op does.  Selftest ops included. */
static void test_references_compile(void **state) {
  (void)state;
  SKIP_IF_SANITIZED();
  if (!need_nvrtc()) skip();
  char names[64][32], v[64];
  int n = hct__manifest_list(kernels, names, 64), done = 0;
  const int hip = hct__compiler_version(HCT_BACKEND_HIP, v, sizeof v) == 0;
  hct__error_clear();
  static const struct {
    hct_backend_kind_t backend;
    const char *arch;
  } targets[] = {{HCT_BACKEND_CUDA, "sm_90"}, {HCT_BACKEND_HIP, "gfx90a"}, {HCT_BACKEND_HIP, "gfx1030"}};
  for (int i = 0; i < n; i++) {
    hct_op_t *op = NULL;
    if (hct__manifest_load(kernels, names[i], &op) != 0) fail_msg("%s: %s", names[i], hct_last_error());
    if (!op->reference.present) fail_msg("%s: no reference in its manifest", op->name);
    for (size_t t = 0; t < HCT_ARRAY_SIZE(targets); t++) {
      if (targets[t].backend == HCT_BACKEND_HIP && !hip) continue;
      int arch_num, warp;
      if (!arch_known(targets[t].backend, targets[t].arch, &arch_num, &warp)) continue;
      hct_compile_job_t job;
      assert_int_equal(hct__reference_job(op, targets[t].backend, targets[t].arch, &job), 0);
      hct__compile_one(&job);
      if (job.status != 0) fail_msg("%s reference for %s: %s", op->name, targets[t].arch, job.error);
      printf("%s reference for %s: %.0f ms\n", op->name, targets[t].arch, job.compile_ms);
      hct__compile_job_clear(&job);
      done++;
    }
    hct__manifest_free(op);
  }
  assert_true(done >= 3);
}

/* The comparison kernels of a check on the card (kernels-src/common/
 * parity_check.cu, tuner/parity_card.c) compile through the product's path
 * for sm_90 and, where hiprtc loads, gfx90a (wave 64) and gfx1030: the
 * worker falls back to the host's figures where they do not, so a
 * template that stopped compiling would only show as slow checks.  Their
 * results are tests/emu/parity_card_emu.cc's to check. */
static void test_parity_check_compiles(void **state) {
  (void)state;
  SKIP_IF_SANITIZED();
  if (!need_nvrtc()) skip();
  char v[64];
  const int hip = hct__compiler_version(HCT_BACKEND_HIP, v, sizeof v) == 0;
  hct__error_clear();
  hct_op_t *op = NULL;
  if (hct__manifest_load(kernels, "hc_read", &op) != 0) fail_msg("hc_read: %s", hct_last_error());
  static const struct {
    hct_backend_kind_t backend;
    const char *arch;
  } targets[] = {{HCT_BACKEND_CUDA, "sm_90"}, {HCT_BACKEND_HIP, "gfx90a"}, {HCT_BACKEND_HIP, "gfx1030"}};
  int done = 0;
  for (size_t t = 0; t < HCT_ARRAY_SIZE(targets); t++) {
    if (targets[t].backend == HCT_BACKEND_HIP && !hip) continue;
    int arch_num, warp;
    if (!arch_known(targets[t].backend, targets[t].arch, &arch_num, &warp)) continue;
    hct_compile_job_t job;
    hct_op_t *holder = NULL;
    assert_int_equal(hct__pcheck_job(op, targets[t].backend, targets[t].arch, &holder, &job), 0);
    hct__compile_one(&job);
    if (job.status != 0) fail_msg("parity_check.cu for %s: %s", targets[t].arch, job.error);
    printf("parity_check.cu for %s: %.0f ms, %d registers, %d bytes spilled\n", targets[t].arch,
           job.compile_ms, job.regs, job.spill_bytes);
    hct__compile_job_clear(&job);
    free(holder);
    done++;
  }
  hct__manifest_free(op);
  assert_true(done >= 1);
}

/* The edges of every product op's space for the card we tune on (sm_90,
 * the H200): a point's defines change the code, and the largest tiles,
 * stages and warps are where registers and shared memory run out.  The
 * whole space (hc_read_prefill's alone is 110 binaries, over three minutes
 * on two cores) is compiled by every probe on the GPU machine, which
 * quarantines a point that fails; `hctune compile --arch sm_90` does it
 * here.  The matrix's sm_90 binaries come from the shared cache. */
static void test_space_sm90(void **state) {
  (void)state;
  SKIP_IF_SANITIZED();
  if (!need_nvrtc()) skip();
  hct_op_t *ops[64];
  int n_ops = load_product_ops(ops, 64);
  for (int i = 0; i < n_ops; i++) {
    char args[512], *out, *err;
    snprintf(args, sizeof args, "compile --arch sm_90 --op %s --edge-points %s", ops[i]->name, cache_arg());
    uint64_t t0 = hct__now_ns();
    int rc = run(kernels, args, &out, &err);
    const char *summary = strstr(out, " binaries for sm_90");
    printf("%s space for sm_90: exit %d in %.1f s:%.*s\n", ops[i]->name, rc,
           (double)(hct__now_ns() - t0) / 1e9, summary ? (int)strcspn(summary, "\n") : 0,
           summary ? summary : "");
    if (rc != 0) fail_msg("exit %d\n%s\n%s", rc, out, err);
    assert_non_null(summary);
    assert_null(strstr(out, "FAILED"));
    free(out);
    free(err);
    hct__manifest_free(ops[i]);
  }
}

static void test_json(void **state) {
  (void)state;
  char manifest[1100];
  snprintf(manifest, sizeof manifest, "%s/hc_read/manifest.json", kernels);
  struct stat st;
  if (stat(manifest, &st) != 0) {
    printf("SKIP: %s does not exist yet\n", manifest);
    skip();
  }
  if (!need_nvrtc()) skip();
  char *out, *err;
  int rc = run(kernels, "compile --arch sm_90 --op hc_read --variant v1 --first-point --json",
               &out, &err);
  if (rc != 0) fail_msg("exit %d: %s", rc, err);
  assert_int_equal(out[0], '[');
  assert_non_null(strstr(out, "\"variant\": \"v1\""));
  assert_non_null(strstr(out, "\"status\": \"ok\""));
  assert_non_null(strstr(out, "\"regs\""));
  assert_null(strstr(out, "\"variant\": \"v2\""));
  free(out);
  free(err);
}

/* --edge-points on the prefill op's pair_mma (24 points; from the cache the
 * space test filled): fewer binaries than the space, and among them every
 * parameter's first and last value that some allowed point has. */
static void test_edge_points(void **state) {
  (void)state;
  SKIP_IF_SANITIZED();
  if (!need_nvrtc()) skip();
  hct_op_t *op = NULL;
  if (hct__manifest_load(kernels, "hc_read_prefill", &op) != 0) fail_msg("%s", hct_last_error());
  const hct_variant_t *v = hct__variant_find(op, "pair_mma");
  assert_non_null(v);
  char args[512], *out, *err;
  snprintf(args, sizeof args, "compile --arch sm_90 --op hc_read_prefill --variant pair_mma --edge-points --json %s",
           cache_arg());
  int rc = run(kernels, args, &out, &err);
  if (rc != 0) fail_msg("exit %d: %s", rc, err);
  json_error_t je;
  json_t *arr = json_loads(out, 0, &je);
  if (!json_is_array(arr)) fail_msg("not a JSON array: %s", je.text);
  hct_point_t pts[256];
  const int n_all = hct__param_points(v, pts, 256);
  printf("pair_mma: %zu edge points of %d\n", json_array_size(arr), n_all);
  assert_true(json_array_size(arr) >= 2 && (int)json_array_size(arr) < n_all);
  for (int p = 0; p < v->n_params; p++)
    for (int end = 0; end < 2; end++) {
      const int64_t want = v->params[p].values[end ? v->params[p].n_values - 1 : 0];
      int allowed = 0, seen = 0;
      for (int k = 0; k < n_all; k++) {
        hct_symtab_t syms;
        hct__point_symtab(op, v, &pts[k], &syms);
        char why[256];
        allowed |= pts[k].v[p] == want && hct__constraints_hold(v, &syms, 1, why, sizeof why);
      }
      hct__error_clear();
      size_t i;
      json_t *b;
      json_array_foreach(arr, i, b) {
        json_t *x = json_object_get(json_object_get(b, "params"), v->params[p].name);
        seen |= json_is_integer(x) && json_integer_value(x) == want;
      }
      if (allowed && !seen) fail_msg("%s = %lld: allowed but not among the edge points", v->params[p].name, (long long)want);
    }
  json_decref(arr);
  free(out);
  free(err);
  hct__manifest_free(op);
}

static void put(const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmp, rel);
  assert_int_equal(hct__mkdir_parents(path), 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char *const manifest_broken =
    "{\"op\":\"broken\",\"tokens\":[1,4],\"constants\":{\"N\":64},"
    "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"
    "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*N\"}],"
    "\"variants\":[{\"name\":\"v1\",\"template\":\"v1.cu\",\"class\":\"baseline\","
    "\"reference\":null,\"params\":[{\"name\":\"B\",\"values\":[64,128]}],"
    "\"launches\":[{\"entry\":\"k\",\"grid\":[\"T\"],\"block\":[\"B\"],"
    "\"args\":[\"@x\",\"@y\",\"T\"]}]}]}\n";

static void test_broken_template(void **state) {
  (void)state;
  if (!need_nvrtc()) skip();
  char kdir[256];
  snprintf(kdir, sizeof kdir, "%s/k", tmp);
  put("k/broken/manifest.json", manifest_broken);
  put("k/broken/v1.cu", "extern \"C\" __global__ void k(float *x, float *y, int T) {\n"
                        "  y[threadIdx.x] = x[threadIdx.x] + this_is_not_declared;\n"
                        "}\n");
  char *out, *err;
  int rc = run(kdir, "compile --arch sm_90 --op broken", &out, &err);
  if (rc == 0) fail_msg("a broken template compiled:\n%s", out);
  /* One line per failed binary (two points), each naming the template and
   * the compiler's error. */
  assert_int_equal(cli_lines(err), 2);
  assert_non_null(strstr(err, "hctune: template 'broken/v1.cu'"));
  assert_non_null(strstr(err, "this_is_not_declared"));
  assert_non_null(strstr(out, "FAILED"));
  free(out);
  free(err);

  /* A missing header is named, before any compile. */
  put("k/broken/v1.cu", "#include \"no_such_header.h\"\n"
                        "extern \"C\" __global__ void k(float *x, float *y, int T) {}\n");
  rc = run(kdir, "compile --arch sm_90 --op broken", &out, &err);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(err, "'no_such_header.h'"));
  assert_non_null(strstr(err, "broken/v1.cu"));
  free(out);
  free(err);

  /* Fixed, it compiles: the failures above were the template's. */
  put("k/broken/v1.cu", "extern \"C\" __global__ void k(float *x, float *y, int T) {\n"
                        "  y[threadIdx.x] = x[threadIdx.x] + N + B;\n"
                        "}\n");
  rc = run(kdir, "compile --arch sm_90 --op broken", &out, &err);
  if (rc != 0) fail_msg("exit %d: %s", rc, err);
  free(out);
  free(err);
}

static void test_bad_usage(void **state) {
  (void)state;
  static const struct {
    const char *args, *want;
  } cases[] = {
      {"compile --arch sm_91 --op hc_read", "unknown arch 'sm_91'"},
      {"compile --op hc_read", "--arch"},
      {"compile --arch sm_90 --bogus", "'--bogus'"},
      {"compile --arch sm_90 --backend metal", "'metal'"},
      {"compile --arch sm_90 --variant v1", "--variant needs --op"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(cases); i++) {
    char *out, *err;
    int rc = run(kernels, cases[i].args, &out, &err);
    if (rc != 2) fail_msg("'%s': exit %d, want 2", cases[i].args, rc);
    if (cli_lines(err) != 1 || strstr(err, cases[i].want) == NULL)
      fail_msg("'%s': stderr '%s' lacks '%s' on one line", cases[i].args, err, cases[i].want);
    free(out);
    free(err);
  }
  /* Names that do not exist are not usage errors: exit 1, one line. */
  static const struct {
    const char *args, *want;
  } missing[] = {
      {"compile --arch sm_90 --op no_such_op", "no_such_op"},
      {"compile --arch sm_90 --op hc_read --variant v1,nope", "variant 'nope'"},
  };
  for (size_t i = 0; i < HCT_ARRAY_SIZE(missing); i++) {
    char *out, *err;
    int rc = run(kernels, missing[i].args, &out, &err);
    if (rc != 1 || cli_lines(err) != 1 || strstr(err, missing[i].want) == NULL)
      fail_msg("'%s': exit %d, stderr '%s', want 1 and '%s'", missing[i].args, rc, err,
               missing[i].want);
    free(out);
    free(err);
  }
}

/* hctune devices with no driver: one line naming what was tried, exit 1. */
static void test_devices_no_driver(void **state) {
  (void)state;
  hct_device_t d[4];
  int n = hct__devices(d, 4);
  if (n != HCT_ENODRIVER) {
    printf("SKIP: a gpu driver loads on this machine (%d cards)\n", n);
    skip();
  }
  char *out, *err;
  int rc = run(kernels, "devices", &out, &err);
  assert_int_equal(rc, 1);
  assert_int_equal(cli_lines(err), 1);
  assert_non_null(strstr(err, "hctune: no gpu driver found: cuda: cannot load libcuda.so.1"));
  assert_string_equal(out, "");
  free(out);
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matrix_cuda),
      cmocka_unit_test(test_matrix_hip),
      cmocka_unit_test(test_space_sm90),
      cmocka_unit_test(test_edge_points),
      cmocka_unit_test(test_references_compile),
      cmocka_unit_test(test_parity_check_compiles),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_broken_template),
      cmocka_unit_test(test_bad_usage),
      cmocka_unit_test(test_devices_no_driver),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
