/*
 * test_softkey.c: the software key (jit/softkey.c) without a GPU: its
 * canonical form (what the fleet's merge relies on), and that a changed
 * template, header, option, compiler version or driver version each makes
 * a recorded key stale, naming that part; and the probe's choice of work
 * under --stale (tuner/stale.c) on a seeded database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "db.h"
#include "jit.h"
#include "tuner.h"

static char tmpdir[256];

static void write_file(const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

#define TOY_MANIFEST                                                                        \
  "{\"op\":\"toy\",\"tokens\":[1,8],\"constants\":{\"N\":256},"                             \
  "\"buffers\":[{\"name\":\"x\",\"dtype\":\"f32\",\"role\":\"input\",\"elems\":\"T*N\"},"   \
  "{\"name\":\"y\",\"dtype\":\"f32\",\"role\":\"output\",\"elems\":\"T*N\"}],"              \
  "\"variants\":[{\"name\":\"base\",\"template\":\"base.cu\",\"class\":\"baseline\","       \
  "\"reference\":null,\"params\":[],\"launches\":[{\"entry\":\"k\",\"grid\":[\"T\"],"       \
  "\"block\":[256],\"args\":[\"@x\",\"@y\",\"T\"]}]},"                                      \
  "{\"name\":\"fast\",\"template\":\"fast.cu\",\"class\":\"bitwise\",\"reference\":\"base\"," \
  "\"params\":[{\"name\":\"P\",\"values\":[1,2]}],\"launches\":[{\"entry\":\"k\","          \
  "\"grid\":[\"T\"],\"block\":[256],\"args\":[\"@x\",\"@y\",\"T\"]}]}]}"

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hct_softkey_XXXXXX");
  if (mkdtemp(tmpdir) == NULL) return -1;
  char p[512];
  snprintf(p, sizeof p, "%s/common", tmpdir);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/toy", tmpdir);
  mkdir(p, 0755);
  write_file("common/hct_kernel.h", "// common\n");
  write_file("toy/toy.h", "// toy header v1\n");
  write_file("toy/base.cu", "#include \"hct_kernel.h\"\n// base\n");
  write_file("toy/fast.cu", "#include \"hct_kernel.h\"\n#include \"toy.h\"\n// fast v1\n");
  write_file("toy/manifest.json", TOY_MANIFEST);
  unsetenv("HCTUNE_TEST_COMPILER_VERSION");
  unsetenv("HCTUNE_TEST_DRIVER_VERSION");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* The exact text and hash the fleet's merge relies on. */
static void test_canonical_form(void **state) {
  (void)state;
  hct_softkey_t k;
  memset(&k, 0, sizeof k);
  strcpy(k.template_hash, "0123456789abcdef0123456789abcdef");
  strcpy(k.options, "fedcba9876543210fedcba9876543210");
  strcpy(k.compiler, "nvrtc 12.8");
  strcpy(k.driver, "12080");
  strcpy(k.hctune, "0.1.0");
  assert_int_equal(hct__softkey_finish(&k), 0);
  assert_string_equal(k.json, "{\"compiler\":\"nvrtc 12.8\",\"driver\":\"12080\",\"hctune\":\"0.1.0\","
                              "\"options\":\"fedcba9876543210fedcba9876543210\","
                              "\"template\":\"0123456789abcdef0123456789abcdef\"}");
  XXH128_hash_t h = XXH3_128bits(k.json, strlen(k.json));
  char want[33];
  snprintf(want, sizeof want, "%016llx%016llx", (unsigned long long)h.high64,
           (unsigned long long)h.low64);
  assert_string_equal(k.key, want);
  assert_int_equal(strlen(k.key), 32);
  hct_softkey_t back;
  assert_int_equal(hct__softkey_parse(k.json, &back), 0);
  assert_string_equal(back.key, k.key);
  /* Bad stored keys are stale, never an error or a match. */
  char why[256];
  assert_int_equal(hct__softkey_compare(NULL, &k, why, sizeof why), 1);
  assert_string_equal(why, "no software key recorded");
  assert_int_equal(hct__softkey_compare("{\"template\":1}", &k, why, sizeof why), 1);
  assert_non_null(strstr(why, "unreadable"));
  assert_int_equal(hct__softkey_compare(k.json, &k, why, sizeof why), 0);
}

static hct_op_t *toy_op(void) {
  hct_op_t *op = NULL;
  int rc = hct__manifest_load(tmpdir, "toy", &op);
  if (rc != 0) fail_msg("toy manifest: %s", hct_last_error());
  return op;
}

/* NVRTC gives the option list its arch flags; without it the test cannot
 * build the options a compile would get, and says so. */
static int have_nvrtc(void) {
  char v[64];
  if (hct__compiler_version(HCT_BACKEND_CUDA, v, sizeof v) == 0) return 1;
  fprintf(stderr, "skipped: NVRTC does not load here (%s)\n", hct_last_error());
  return 0;
}

static void expect_stale(const hct_op_t *op, const char *variant, const char *params,
                         const char *driver, const char *stored, const char *part) {
  char why[512] = "";
  int rc = hct__softkey_check(op, variant, params, HCT_BACKEND_CUDA, "sm_90", driver, stored, why,
                              sizeof why);
  if (part == NULL) {
    if (rc != 0) fail_msg("%s %s: stale (%s), want current", variant, params, why);
    return;
  }
  if (rc != 1) fail_msg("%s %s: rc %d, want stale by %s", variant, params, rc, part);
  char want[64];
  snprintf(want, sizeof want, "%s changed", part);
  if (strncmp(why, want, strlen(want)) != 0) fail_msg("reason '%s', want '%s ...'", why, want);
}

/* Each part, changed alone, makes the recorded key stale, by name. */
static void test_each_part_makes_stale(void **state) {
  (void)state;
  if (!have_nvrtc()) skip();
  hct_op_t *op = toy_op();
  const hct_variant_t *v = hct__variant_find(op, "fast");
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  job.backend = HCT_BACKEND_CUDA;
  strcpy(job.arch, "sm_90");
  job.op = op;
  job.variant = v;
  assert_int_equal(hct__point_parse(v, "{\"P\":1}", &job.point), 0);
  hct_softkey_t rec;
  if (hct__softkey_now(&job, "555.10", &rec) != 0) fail_msg("%s", hct_last_error());
  const char *stored = rec.json;

  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, NULL);
  /* The template. */
  write_file("toy/fast.cu", "#include \"hct_kernel.h\"\n#include \"toy.h\"\n// fast v2\n");
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, "template");
  write_file("toy/fast.cu", "#include \"hct_kernel.h\"\n#include \"toy.h\"\n// fast v1\n");
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, NULL);
  /* A header it includes, in its folder and in common/. */
  write_file("toy/toy.h", "// toy header v2\n");
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, "template");
  write_file("toy/toy.h", "// toy header v1\n");
  write_file("common/hct_kernel.h", "// common v2\n");
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, "template");
  write_file("common/hct_kernel.h", "// common\n");
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, NULL);
  /* An option: another point's define, or an op constant. */
  expect_stale(op, "fast", "{\"P\":2}", "555.10", stored, "options");
  hct__symtab_set(&op->constants, "N", 512);
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, "options");
  hct__symtab_set(&op->constants, "N", 256);
  /* The compiler and the driver. */
  setenv("HCTUNE_TEST_COMPILER_VERSION", "nvrtc 99.9", 1);
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, "compiler");
  unsetenv("HCTUNE_TEST_COMPILER_VERSION");
  expect_stale(op, "fast", "{\"P\":1}", "555.11", stored, "driver");
  setenv("HCTUNE_TEST_DRIVER_VERSION", "555.12", 1);
  expect_stale(op, "fast", "{\"P\":1}", "555.10", stored, "driver");
  unsetenv("HCTUNE_TEST_DRIVER_VERSION");
  /* A card not on this host: the driver is not checked, the rest is. */
  expect_stale(op, "fast", "{\"P\":1}", NULL, stored, NULL);
  /* A variant gone, params no longer listed. */
  expect_stale(op, "gone", "{}", "555.10", stored, "template");
  expect_stale(op, "fast", "{\"P\":3}", "555.10", stored, "options");
  hct__manifest_free(op);
}

static hct_db_decision_t decision(const hct_device_t *dev, const char *parity, int tmin, int tmax,
                                  const char *variant, const char *params, const char *json) {
  hct_db_decision_t d;
  memset(&d, 0, sizeof d);
  hct__strlcpy(d.keys.uuid, dev->uuid, sizeof d.keys.uuid);
  hct__strlcpy(d.keys.host, "h", sizeof d.keys.host);
  hct__device_model_key(dev, d.keys.model_key, sizeof d.keys.model_key);
  strcpy(d.op, "toy");
  hct__strlcpy(d.parity, parity, sizeof d.parity);
  d.tmin = tmin;
  d.tmax = tmax;
  hct__strlcpy(d.variant, variant, sizeof d.variant);
  hct__strlcpy(d.params, params, sizeof d.params);
  strcpy(d.variant_class, "bitwise");
  if (json) {
    hct_softkey_t k;
    assert_int_equal(hct__softkey_parse(json, &k), 0);
    strcpy(d.software_key, k.key);
    strcpy(d.software_json, k.json);
  }
  return d;
}

/* probe --stale: of the token counts asked, those whose decision (either
 * class) is missing or stale on this card, each with its reason. */
static void test_stale_tokens(void **state) {
  (void)state;
  if (!have_nvrtc()) skip();
  hct_op_t *op = toy_op();
  hct_device_t dev;
  memset(&dev, 0, sizeof dev);
  dev.backend = HCT_BACKEND_CUDA;
  strcpy(dev.uuid, "GPU-toy");
  strcpy(dev.name, "Toy");
  strcpy(dev.vendor, "nvidia");
  strcpy(dev.arch, "sm_90");
  dev.arch_num = 90;
  strcpy(dev.driver_version, "555.10");
  char dbpath[600];
  snprintf(dbpath, sizeof dbpath, "%s/t.db", tmpdir);
  hct_db_t *db;
  assert_int_equal(hct__db_open(dbpath, 0, &db), 0);

  hct_softkey_t base_key, fast_key;
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  job.backend = HCT_BACKEND_CUDA;
  strcpy(job.arch, "sm_90");
  job.op = op;
  job.variant = hct__variant_find(op, "base");
  assert_int_equal(hct__softkey_now(&job, "555.10", &base_key), 0);
  job.variant = hct__variant_find(op, "fast");
  assert_int_equal(hct__point_parse(job.variant, "{\"P\":2}", &job.point), 0);
  assert_int_equal(hct__softkey_now(&job, "555.10", &fast_key), 0);

  /* bitwise: base at 1-2, fast at 3-6 (current), base at 7 with no key;
   * kl: base at 1-4, fast at 5-7; nothing at 8 in either. */
  hct_db_decision_t bw[3] = {decision(&dev, "bitwise", 1, 2, "base", "{}", base_key.json),
                             decision(&dev, "bitwise", 3, 6, "fast", "{\"P\":2}", fast_key.json),
                             decision(&dev, "bitwise", 7, 7, "base", "{}", NULL)};
  hct_db_decision_t kl[2] = {decision(&dev, "kl", 1, 4, "base", "{}", base_key.json),
                             decision(&dev, "kl", 5, 7, "fast", "{\"P\":2}", fast_key.json)};
  assert_int_equal(hct__db_decisions_replace(db, bw, 3), 0);
  assert_int_equal(hct__db_decisions_replace(db, kl, 2), 0);

  hct_tokens_t asked, out;
  assert_int_equal(hct__parse_token_list("1-8", &asked), 8);
  char report[2048];
  assert_int_equal(hct__stale_tokens(db, op, &dev, &asked, &out, report, sizeof report), 0);
  /* 7: no key recorded (bitwise); 8: missing in both. */
  assert_int_equal(out.n, 2);
  assert_int_equal(out.t[0], 7);
  assert_int_equal(out.t[1], 8);
  assert_non_null(strstr(report, "T=7"));
  assert_non_null(strstr(report, "no software key recorded"));
  assert_non_null(strstr(report, "T=8"));
  assert_non_null(strstr(report, "missing"));

  /* fast's template changes: 3-6 (bitwise) and 5-7 (kl) go stale too. */
  write_file("toy/fast.cu", "// fast, edited\n");
  assert_int_equal(hct__stale_tokens(db, op, &dev, &asked, &out, report, sizeof report), 0);
  assert_int_equal(out.n, 6);
  assert_int_equal(out.t[0], 3);
  assert_int_equal(out.t[5], 8);
  assert_non_null(strstr(report, "template changed"));
  write_file("toy/fast.cu", "#include \"hct_kernel.h\"\n#include \"toy.h\"\n// fast v1\n");

  /* A new driver: everything is stale; asked 1-2 only: just those. */
  strcpy(dev.driver_version, "556.0");
  assert_int_equal(hct__parse_token_list("1-2", &asked), 2);
  assert_int_equal(hct__stale_tokens(db, op, &dev, &asked, &out, report, sizeof report), 0);
  assert_int_equal(out.n, 2);
  assert_non_null(strstr(report, "driver changed ('555.10', now '556.0')"));
  /* Current again: nothing to do. */
  strcpy(dev.driver_version, "555.10");
  assert_int_equal(hct__stale_tokens(db, op, &dev, &asked, &out, report, sizeof report), 0);
  assert_int_equal(out.n, 0);

  /* Another card of the same model, with no decisions of its own: every
   * count is stale (the model was seen with other keys), not unknown. */
  hct_device_t twin = dev;
  strcpy(twin.uuid, "GPU-twin");
  strcpy(twin.driver_version, "556.0");
  assert_int_equal(hct__stale_tokens(db, op, &twin, &asked, &out, report, sizeof report), 0);
  assert_int_equal(out.n, 2);
  assert_non_null(strstr(report, "stale"));
  assert_non_null(strstr(report, "driver changed"));
  hct__db_close(db);
  hct__manifest_free(op);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_canonical_form, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_part_makes_stale, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stale_tokens, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
