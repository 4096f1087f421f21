/*
 * test_kernel.c: libhctune's loader without a GPU: the library's own
 * compile of the baseline (NVRTC, as hct_kernel_load does without a
 * daemon) and of a forced variant, HCTUNE_FORCE with parameters (parsed,
 * checked against the manifest, refused with one line), the default point,
 * and hct_kernel_* argument errors.  What needs a card (module load,
 * launches, graphs) is tests/gpu-engine.sh's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "daemon_test.h"

/* An H200's figures: what the constraints and shared memory expressions
 * see. */
static hct_ecard_t h200(void) {
  hct_ecard_t c;
  memset(&c, 0, sizeof c);
  c.arch_num = 90;
  c.sm_count = 132;
  c.smem_optin = 232448;
  return c;
}

static int have_nvrtc(void) {
  char v[64];
  if (hct__compiler_version(HCT_BACKEND_CUDA, v, sizeof v) == 0) return 1;
  printf("skipped: no NVRTC here (%s)\n", hct_last_error());
  return 0;
}

static void test_baseline_compiled_here(void **state) {
  if (!have_nvrtc()) return;
  hct_ecard_t card = h200();
  hct_choice_t ch;
  memset(&ch, 0, sizeof ch);
  strcpy(ch.variant, "v1");
  strcpy(ch.params, "{}");
  void *image = NULL;
  size_t size = 0;
  assert_int_equal(hct__kernel_compile_here("hc_read", &card, &ch, 4, &image, &size), 0);
  /* The first point that fits, written back. */
  assert_string_equal(ch.params, "{\"DOWN_WARPS\":4,\"UP_WARPS\":4}");
  assert_true(size > 1000);
  assert_memory_equal(image, "\177ELF", 4);
  /* Every entry of the plan is in the cubin (names are stored as text). */
  static const char *const entries[] = {"hc_v1_norm", "hc_v1_down", "hc_v1_up", "hc_v1_mix"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(entries); i++)
    assert_non_null(memmem(image, size, entries[i], strlen(entries[i])));
  printf("v1 for sm_90 compiled here: %zu bytes\n", size);
  free(image);
}

static void test_forced_point_compiled(void **state) {
  if (!have_nvrtc()) return;
  hct_ecard_t card = h200();
  hct_choice_t ch;
  memset(&ch, 0, sizeof ch);
  strcpy(ch.variant, "relay");
  strcpy(ch.params, "{\"PDL\":1,\"GB\":0,\"G\":1,\"NG\":4,\"LT\":1}");
  void *image = NULL;
  size_t size = 0;
  assert_int_equal(hct__kernel_compile_here("hc_read", &card, &ch, 8, &image, &size), 0);
  assert_non_null(memmem(image, size, "hc_rl_read", 10));
  free(image);
  /* A point the manifest does not list is refused, not compiled. */
  strcpy(ch.params, "{\"PDL\":1,\"GB\":0,\"G\":1,\"NG\":3,\"LT\":1}");
  assert_int_equal(hct__kernel_compile_here("hc_read", &card, &ch, 8, &image, &size), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "NG=3"));
  strcpy(ch.variant, "nosuch");
  assert_int_equal(hct__kernel_compile_here("hc_read", &card, &ch, 8, &image, &size), HCT_ENOENT);
  assert_non_null(strstr(hct_last_error(), "nosuch"));
}

static void test_force_parse(void **state) {
  char v[64], p[256];
  setenv("HCTUNE_FORCE", "hc_read=relay{\"PDL\":1,\"GB\":0,\"G\":1,\"NG\":4,\"LT\":1},hc_read_prefill=upmix", 1);
  assert_int_equal(hct__force_lookup("hc_read", v, sizeof v, p, sizeof p), 1);
  assert_string_equal(v, "relay");
  assert_string_equal(p, "{\"PDL\":1,\"GB\":0,\"G\":1,\"NG\":4,\"LT\":1}");
  assert_int_equal(hct__force_lookup("hc_read_prefill", v, sizeof v, p, sizeof p), 1);
  assert_string_equal(v, "upmix");
  assert_string_equal(p, "");
  assert_int_equal(hct__force_lookup("other", v, sizeof v, p, sizeof p), 0);
  static const char *const bad[] = {"hc_read",        "=v1",           "hc_read=",
                                    "hc_read=v1{\"A\":1", "hc_read=v1}", "hc_read={\"A\":1}",
                                    "hc_read=v1{\"A\":1}x"};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(bad); i++) {
    setenv("HCTUNE_FORCE", bad[i], 1);
    assert_int_equal(hct__force_lookup("hc_read", v, sizeof v, p, sizeof p), HCT_EINVAL);
    assert_non_null(strstr(hct_last_error(), "HCTUNE_FORCE"));
  }
  unsetenv("HCTUNE_FORCE");
}

static void test_force_check(void **state) {
  setenv("HCTUNE_FORCE", "hc_read=relay{\"PDL\":7}", 1);
  assert_int_equal(hct__force_check("hc_read", "relay", "{\"PDL\":7}"), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "relay"));
  setenv("HCTUNE_FORCE", "hc_read=v9", 1);
  assert_int_equal(hct__force_check("hc_read", "v9", ""), HCT_EINVAL);
  /* The message lists what the manifest has. */
  assert_non_null(strstr(hct_last_error(), "no variant 'v9'"));
  assert_non_null(strstr(hct_last_error(), "v1, v2"));
  assert_int_equal(hct__force_check("hc_read", "v1", ""), 0);
  assert_int_equal(hct__force_check("hc_read", "v1", "{\"DOWN_WARPS\":8,\"UP_WARPS\":4}"), 0);
  /* No manifest here: not refused, nothing to check against. */
  assert_int_equal(hct__force_check("no_such_op", "v1", ""), HCT_ENOENT);
  unsetenv("HCTUNE_FORCE");
}

/* hct_choose takes the same HCTUNE_FORCE, parameters included, and
 * refuses what the manifest does not have instead of passing it on. */
static void test_choose_force(void **state) {
  hct_client_t *c;
  hct_connect("/nonexistent/hctune.sock", 20, &c);
  hct_choice_t ch;
  setenv("HCTUNE_FORCE", "hc_read=relay{\"PDL\":1,\"GB\":0,\"G\":1,\"NG\":4,\"LT\":1}", 1);
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), 0);
  assert_string_equal(ch.variant, "relay");
  assert_string_equal(ch.params, "{\"PDL\":1,\"GB\":0,\"G\":1,\"NG\":4,\"LT\":1}");
  assert_int_equal(ch.source, HCT_SOURCE_ENV);
  setenv("HCTUNE_FORCE", "hc_read=relay{\"PDL\":2,\"GB\":0,\"G\":1,\"NG\":4,\"LT\":1}", 1);
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "PDL=2"));
  setenv("HCTUNE_FORCE", "hc_read=v7", 1);
  assert_int_equal(hct_choose(c, "hc_read", 4, NULL, NULL, &ch), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "no variant 'v7'"));
  unsetenv("HCTUNE_FORCE");
  hct_close(c);
}

static void test_default_point(void **state) {
  char dir[4096];
  hct_op_t *m;
  assert_int_equal(hct__kernels_dir(dir, sizeof dir), 0);
  assert_int_equal(hct__manifest_load(dir, "hc_read", &m), 0);
  hct_symtab_t card = {0};
  hct__card_symbols(&card, 90, 132, 232448, 32, 0);
  hct_point_t pt;
  const hct_variant_t *relay = hct__variant_find(m, "relay");
  assert_int_equal(hct__point_default(m, relay, &card, 8, &pt), 0);
  char buf[256];
  hct__point_json(relay, &pt, buf, sizeof buf);
  assert_string_equal(buf, "{\"PDL\":0,\"GB\":0,\"G\":1,\"NG\":1,\"LT\":0}");
  /* A card too small for it: relay needs 64 SMs; no point fits. */
  hct_symtab_t tiny = {0};
  hct__card_symbols(&tiny, 90, 16, 232448, 32, 0);
  assert_int_equal(hct__point_default(m, relay, &tiny, 8, &pt), HCT_ENOENT);
  assert_non_null(strstr(hct_last_error(), "relay"));
  hct__manifest_free(m);
}

static void test_kernel_args(void **state) {
  hct_kernel_t *k = (hct_kernel_t *)0x1;
  assert_int_equal(hct_kernel_load(NULL, "hc_read", 1, 8, NULL, "bitwise", NULL), HCT_EINVAL);
  assert_int_equal(hct_kernel_load(NULL, "", 1, 8, NULL, NULL, &k), HCT_EINVAL);
  assert_null(k);
  assert_int_equal(hct_kernel_load(NULL, "hc_read", 0, 8, NULL, NULL, &k), HCT_EINVAL);
  assert_int_equal(hct_kernel_load(NULL, "hc_read", 5, 4, NULL, NULL, &k), HCT_EINVAL);
  /* Any range up to the one ceiling of token counts (a prefill kernel
   * spans T = 16..32768): only past it is the range refused. */
  assert_int_equal(hct_kernel_load(NULL, "hc_read", 1, HCT_MAX_TOKENS + 1, NULL, NULL, &k), HCT_ERANGE);
  assert_non_null(strstr(hct_last_error(), "at most"));
  assert_int_equal(hct_kernel_load(NULL, "hc_read", 1, 8, NULL, "exact", &k), HCT_EINVAL);
  assert_non_null(strstr(hct_last_error(), "exact"));
  /* Good arguments and no card: the driver's absence, said. */
  int rc = hct_kernel_load(NULL, "hc_read", 1, 8, NULL, "bitwise", &k);
  if (rc == HCT_ENODRIVER || rc == HCT_ENODEV) {
    assert_null(k);
    assert_non_null(strstr(hct_last_error(), "cuda"));
    printf("no GPU: hct_kernel_load says: %s\n", hct_last_error());
  } else {
    assert_true(rc >= 0);
    hct_kernel_free(k);
  }
  uint64_t bufs[8] = {0};
  assert_int_equal(hct_kernel_launch(NULL, NULL, 1, bufs, 8), HCT_EINVAL);
  hct_choice_t ch;
  assert_int_equal(hct_kernel_choice(NULL, 1, &ch, NULL), HCT_EINVAL);
  assert_int_equal(hct_kernel_buffer_count(NULL), HCT_EINVAL);
  hct_kernel_free(NULL);
}

/* The module verb as the library reads it: the image scanned out of the
 * line, the plan from "entries"; errors as the daemon gave them. */
static void test_module_fetch(void **state) {
  dt_env_t e;
  dt_env_init(&e);
  dt_seed(&e);
  dt_start(&e, NULL);
  hct_client_t *c;
  assert_int_equal(hct_connect(e.sock, 2000, &c), 0);
  void *image = NULL;
  size_t size = 0;
  json_t *entries = NULL;
  int rc = hct__module_fetch(c, "hc_read", 3, DT_CARD, NULL, &image, &size, &entries);
  if (rc != 0) fail_msg("module: %s", hct_last_error());
  unsigned char want[DT_IMAGE_SIZE];
  dt_image(want, sizeof want);
  assert_int_equal(size, DT_IMAGE_SIZE);
  assert_memory_equal(image, want, size);
  assert_string_equal(json_string_value(json_object_get(entries, "variant")), "v2");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(entries, "symbols"), "R")), 2);
  json_t *l0 = json_array_get(json_object_get(entries, "launches"), 0);
  assert_string_equal(json_string_value(json_object_get(l0, "smem_expr")), "R*1024");
  free(image);
  json_decref(entries);
  /* The baseline at T=6: the daemon's compile error, passed on (its
   * template taken away under the running daemon: the load refuses an op
   * whose template is missing, so it goes only for this call). */
  char v1[600];
  snprintf(v1, sizeof v1, "%s/hc_read/v1.cu", e.kernels);
  assert_int_equal(unlink(v1), 0);
  int rc6 = hct__module_fetch(c, "hc_read", 6, DT_CARD, NULL, &image, &size, &entries);
  snprintf(v1, sizeof v1, "%s/hc_read/manifest.json", e.kernels);
  tt_touch_templates(v1);
  assert_int_equal(rc6, HCT_ETEMPLATE);
  assert_non_null(strstr(hct_last_error(), "v1.cu"));
  assert_int_equal(hct__module_fetch(c, "nope", 1, DT_CARD, NULL, &image, &size, &entries),
                   HCT_ENOENT);
  hct_close(c);
  assert_int_equal(dt_stop(&e), 0);
  dt_env_remove(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_force_parse),     cmocka_unit_test(test_force_check),
      cmocka_unit_test(test_choose_force),    cmocka_unit_test(test_module_fetch),
      cmocka_unit_test(test_default_point),   cmocka_unit_test(test_kernel_args),
      cmocka_unit_test(test_baseline_compiled_here), cmocka_unit_test(test_forced_point_compiled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
