/*
 * test_fleet_daemon.c: hctuned --fleet-db: a fleet file's decisions answer
 * under the DB's own (local decisions win), with source "fleet" and their
 * provenance; a bad fleet file stops the daemon at start with one line; a
 * replaced fleet file is read again.  The daemon runs on a temporary
 * socket and folder (tests/daemon_test.h).  Needs HCT_BIN.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon_test.h"
#include "fleet.h"

#define OTHER_MODEL "nvidia|Other Card|sm_80|108|80"

static dt_env_t env;
static char fleet_path[400];

static void fleet_decision(hct_fleet_decision_t *d, const char *uuid, const char *model,
                           const char *parity, const char *variant, const char *params,
                           const char *cls, double us) {
  memset(d, 0, sizeof *d);
  static int serial;
  snprintf(d->uid, sizeof d->uid, "%032x", ++serial);
  strcpy(d->host, "fleet");
  hct__strlcpy(d->uuid, uuid, sizeof d->uuid);
  hct__strlcpy(d->model_key, model, sizeof d->model_key);
  d->software_json = strdup("");
  strcpy(d->op, "hc_read");
  hct__strlcpy(d->parity, parity, sizeof d->parity);
  d->tmin = 1;
  d->tmax = 8;
  hct__strlcpy(d->variant, variant, sizeof d->variant);
  hct__strlcpy(d->params, params, sizeof d->params);
  hct__strlcpy(d->variant_class, cls, sizeof d->variant_class);
  strcpy(d->source, "fleet");
  d->median_us = us;
  d->baseline_us = 5.0;
  d->samples = 120;
  d->decided_at = 1764500000;
  strcpy(d->evidence_json, "{\"fleet\":{\"cards\":5,\"outliers\":1},\"per_T\":[]}");
}

/* A merged fleet file: one decision for the seeded card's model (which the
 * local DB must win over), one for another model, one for the seeded card
 * itself. */
static void write_fleet(const char *other_variant, const char *other_params) {
  hct_fleet_t f;
  memset(&f, 0, sizeof f);
  strcpy(f.meta.kind, "merge");
  strcpy(f.meta.host, "merger");
  strcpy(f.meta.hctune_version, HCT_VERSION_STRING);
  f.meta.created_at = 1764500000;
  f.meta.inputs = 3;
  f.meta.outlier_pct = 10;
  f.n_decisions = 3;
  f.decisions = calloc(3, sizeof *f.decisions);
  fleet_decision(&f.decisions[0], DT_CARD, DT_MODEL, "bitwise", "v1", "{\"W\":8}", "baseline", 5);
  fleet_decision(&f.decisions[1], "fleet-00000000000000aa", DT_MODEL, "bitwise", "v1", "{\"W\":8}",
                 "baseline", 5);
  fleet_decision(&f.decisions[2], "fleet-00000000000000bb", OTHER_MODEL, "bitwise", other_variant,
                 other_params, "bitwise", 1.25);
  /* Replace, as a distributor would: a new file renamed over the old. */
  char tmp[420];
  snprintf(tmp, sizeof tmp, "%s.new", fleet_path);
  unlink(tmp);
  if (hct__fleet_write(&f, tmp) != 0) fail_msg("%s", hct_last_error());
  if (rename(tmp, fleet_path) != 0) fail_msg("rename");
  hct__fleet_free(&f);
}

static int setup(void **state) {
  (void)state;
  dt_env_init(&env);
  dt_seed(&env);
  snprintf(fleet_path, sizeof fleet_path, "%s/fleet.fleet", env.dir);
  write_fleet("v2", "{\"R\":1}");
  const char *extra[] = {"--fleet-db", fleet_path, NULL};
  dt_start(&env, extra);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  dt_stop(&env);
  dt_env_remove(&env);
  return 0;
}

static json_t *choose(int fd, dt_reader_t *r, const char *device, const char *model, int T) {
  char line[600];
  if (model)
    snprintf(line, sizeof line,
             "{\"cmd\":\"choose\",\"op\":\"hc_read\",\"tokens\":%d,\"device\":\"%s\",\"model\":\"%s\"}",
             T, device, model);
  else
    snprintf(line, sizeof line, "{\"cmd\":\"choose\",\"op\":\"hc_read\",\"tokens\":%d,\"device\":\"%s\"}",
             T, device);
  json_t *j = dt_ask(fd, r, line);
  if (j == NULL) fail_msg("no answer to %s", line);
  return j;
}

static void test_overlay(void **state) {
  (void)state;
  int fd = dt_connect(env.sock);
  assert_true(fd >= 0);
  static dt_reader_t r;
  /* The card's own decision wins over the fleet file's for it. */
  json_t *j = choose(fd, &r, DT_CARD, NULL, 2);
  assert_string_equal(dt_str(j, "variant"), "v2");
  assert_string_equal(dt_str(j, "source"), "probe");
  json_decref(j);
  /* A new card of the DB's model: the DB's card of that model wins too. */
  j = choose(fd, &r, "GPU-new", DT_MODEL, 2);
  assert_string_equal(dt_str(j, "variant"), "v2");
  /* The card answered for, and the card it was measured on (issue 30). */
  assert_string_equal(dt_str(j, "device"), "GPU-new");
  assert_string_equal(dt_str(j, "measured_on"), DT_CARD);
  json_decref(j);
  /* A model only the fleet file knows: its answer, source fleet, with its
   * provenance. */
  j = choose(fd, &r, "GPU-other", OTHER_MODEL, 3);
  assert_string_equal(dt_str(j, "variant"), "v2");
  assert_string_equal(dt_str(j, "source"), "fleet");
  assert_string_equal(dt_str(j, "device"), "GPU-other");
  assert_string_equal(dt_str(j, "measured_on"), "fleet-00000000000000bb");
  json_t *ev = json_object_get(j, "evidence");
  assert_true(json_number_value(json_object_get(ev, "median_us")) == 1.25);
  json_t *fl = json_object_get(json_object_get(ev, "parity"), "fleet");
  assert_int_equal(json_integer_value(json_object_get(fl, "cards")), 5);
  json_decref(j);
  /* The model key as the device. */
  j = choose(fd, &r, OTHER_MODEL, NULL, 8);
  assert_string_equal(dt_str(j, "source"), "fleet");
  json_decref(j);
  /* Unknown everywhere: the baseline. */
  j = choose(fd, &r, "GPU-x", "nvidia|Nothing|sm_1|1|1", 3);
  assert_string_equal(dt_str(j, "source"), "default");
  json_decref(j);

  /* A newer fleet file replaces the overlay. */
  sleep(1); /* a new mtime even on coarse clocks */
  write_fleet("v2", "{\"R\":2}");
  int seen = 0;
  for (int i = 0; i < 100 && !seen; i++) {
    usleep(50000);
    j = choose(fd, &r, "GPU-other", OTHER_MODEL, 3);
    seen = strcmp(dt_str(j, "variant"), "v2") == 0 &&
           json_integer_value(json_object_get(json_object_get(j, "params"), "R")) == 2;
    json_decref(j);
  }
  assert_true(seen);
  /* A bad replacement is refused; the overlay read before stays. */
  dt_write(fleet_path, "not a fleet file, just text that is long enough to be read whole.......");
  usleep(400000);
  j = choose(fd, &r, "GPU-other", OTHER_MODEL, 3);
  assert_string_equal(dt_str(j, "source"), "fleet");
  json_decref(j);
  assert_true(dt_log_has(&env, "keeping the fleet decisions read before"));
  close(fd);
}

/* At start a bad or missing fleet file stops the daemon. */
static void test_refused_at_start(void **state) {
  (void)state;
  dt_env_t e;
  dt_env_init(&e);
  dt_seed(&e);
  char bad[400];
  snprintf(bad, sizeof bad, "%s/bad.fleet", e.dir);
  dt_write(bad, "SQLite format 3 but not really: a text file pretending to be a database.");
  const char *extra[] = {"--fleet-db", bad, NULL};
  assert_int_equal(dt_run_refused(&e, extra), 1);
  assert_true(dt_log_has(&e, "not an hctune fleet file") || dt_log_has(&e, "too short"));
  snprintf(bad, sizeof bad, "%s/missing.fleet", e.dir);
  assert_int_equal(dt_run_refused(&e, extra), 1);
  dt_env_remove(&e);
}

int main(void) {
  if (hct_test_bin("test_fleet_daemon") == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_overlay),
      cmocka_unit_test(test_refused_at_start),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
