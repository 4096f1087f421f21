/*
 * test_compile.c: `hctune compile` as a user runs it: the hc_read templates
 * for every NVIDIA arch from sm_75 to sm_120, a broken template, a missing
 * header, and an unknown arch.  Runs $HCT_BIN/hctune; needs NVRTC (skips,
 * saying why, where it cannot be loaded), no GPU.
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

#include "jit.h"
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
  const char *b = getenv("HCT_BIN");
  snprintf(bin, sizeof bin, "%s/hctune", b ? b : "bin");
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

/* A line of the table for variant v that says ok. */
static int variant_ok(const char *out, const char *v) {
  char want[64];
  snprintf(want, sizeof want, " %s ", v);
  for (const char *line = out; *line;) {
    const char *eol = strchr(line, '\n');
    size_t n = eol ? (size_t)(eol - line) : strlen(line);
    if (memmem(line, n, want, strlen(want)) && n >= 2 && memmem(line, n, "  ok", 4)) return 1;
    line += n + (eol ? 1 : 0);
  }
  return 0;
}

static void test_hc_read_all_archs(void **state) {
  (void)state;
  char manifest[1100];
  snprintf(manifest, sizeof manifest, "%s/hc_read/manifest.json", kernels);
  struct stat st;
  if (stat(manifest, &st) != 0) {
    printf("SKIP: %s does not exist yet\n", manifest);
    skip();
  }
  if (!need_nvrtc()) skip();
  static const char *const archs[] = {"sm_75", "sm_80", "sm_86", "sm_89",
                                      "sm_90", "sm_100", "sm_120"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(archs); i++) {
    char args[128], *out, *err;
    /* Every variant and parameter point on every arch (the space was
     * trimmed on the H200's measurements: about 8 s an arch here). */
    snprintf(args, sizeof args, "compile --arch %s --op hc_read", archs[i]);
    uint64_t t0 = hct__now_ns();
    int rc = run(kernels, args, &out, &err);
    printf("hc_read for %s: exit %d in %.1f s\n", archs[i], rc,
           (double)(hct__now_ns() - t0) / 1e9);
    if (rc != 0) fail_msg("%s: exit %d\n%s\n%s", archs[i], rc, out, err);
    /* The persistent variants use the copy engine's bulk copies (pipe also
     * thread block clusters): sm_90 on (min_arch in the manifest; compile
     * skips them below). */
    static const struct {
      const char *name;
      int min_sm;
    } variants[] = {{"v1", 0},     {"v2", 0},        {"v3", 0},      {"tg", 0},
                    {"up4", 0},    {"upmix_dec", 0}, {"splitk", 0},  {"persist", 90},
                    {"persist_bw", 90}, {"pipe", 90}};
    const int sm = atoi(archs[i] + 3);
    for (size_t v = 0; v < HCT_ARRAY_SIZE(variants); v++) {
      const int ok = variant_ok(out, variants[v].name);
      if (sm >= variants[v].min_sm && !ok)
        fail_msg("%s: no ok line for %s in\n%s", archs[i], variants[v].name, out);
      if (sm < variants[v].min_sm && strstr(out, variants[v].name) != NULL && ok)
        fail_msg("%s: %s compiled below its min_arch in\n%s", archs[i], variants[v].name, out);
    }
    assert_null(strstr(out, "FAILED"));
    free(out);
    free(err);
  }
}

/* Every variant and point of hc_read for the card we tune on. */
static void test_hc_read_space(void **state) {
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
  uint64_t t0 = hct__now_ns();
  int rc = run(kernels, "compile --arch sm_90 --op hc_read", &out, &err);
  const char *summary = strstr(out, " binaries for sm_90");
  printf("hc_read space for sm_90: exit %d in %.1f s:%.*s\n", rc,
         (double)(hct__now_ns() - t0) / 1e9, summary ? (int)strcspn(summary, "\n") : 0,
         summary ? summary : "");
  if (rc != 0) fail_msg("exit %d\n%s\n%s", rc, out, err);
  assert_non_null(summary);
  assert_null(strstr(out, "FAILED"));
  free(out);
  free(err);
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
  int rc = run(kernels, "compile --arch sm_90 --op hc_read --variant v1 --json", &out, &err);
  if (rc != 0) fail_msg("exit %d: %s", rc, err);
  assert_int_equal(out[0], '[');
  assert_non_null(strstr(out, "\"variant\": \"v1\""));
  assert_non_null(strstr(out, "\"status\": \"ok\""));
  assert_non_null(strstr(out, "\"regs\""));
  assert_null(strstr(out, "\"variant\": \"v2\""));
  free(out);
  free(err);
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
      cmocka_unit_test(test_hc_read_all_archs),
      cmocka_unit_test(test_hc_read_space),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_broken_template),
      cmocka_unit_test(test_bad_usage),
      cmocka_unit_test(test_devices_no_driver),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
