/*
 * cmd_show.c: `hctune show`: the trials behind the decisions: every check
 * and timing a probe recorded, with its figures.  The table is built from
 * the same JSON that --json prints, so the two never disagree.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "db.h"

static const char usage[] =
    "usage: hctune show [--db PATH] [--op OP] [--device UUID] [--variant V]\n"
    "                   [--tokens T] [--json]\n"
    "\n"
    "Shows the trials recorded by probes, newest first: per trial the variant,\n"
    "its parameters, the token count T, the kind (the check it records:\n"
    "compile, parity, repeat, determinism, producer, timed, or timing), the\n"
    "status (pass, or the reason it failed), the seed, the timing figures\n"
    "(median, confidence interval, samples) and the parity figures, or for a\n"
    "failure what the check found.  A '*' in the first column marks a\n"
    "timing trial whose variant and parameters are the recorded decision for\n"
    "its card, op and T.\n"
    "\n"
    "  --db PATH       the database (default as for 'hctune list')\n"
    "  --op OP         only trials of this op\n"
    "  --device UUID   only trials on this card (a prefix of the UUID is enough)\n"
    "  --variant V     only trials of this variant\n"
    "  --tokens T      only trials at T tokens\n"
    "  --json          print the trials as a JSON array\n"
    "  --help          print this and exit\n";

static const char *str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static json_int_t num_i(json_t *o, const char *key) {
  return json_integer_value(json_object_get(o, key));
}

static double num_r(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }

/* Parity figures and the rest: "max_abs=0 kl_mean=1.2e-09", compact. */
static void figures_text(json_t *fig, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  if (!json_is_object(fig)) {
    hct__strlcpy(buf, json_is_string(fig) ? json_string_value(fig) : "-", len);
    return;
  }
  const char *key;
  json_t *v;
  json_object_foreach(fig, key, v) {
    if (off >= len) break;
    char val[96];
    if (json_is_integer(v)) snprintf(val, sizeof val, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(val, sizeof val, "%.4g", json_real_value(v));
    else if (json_is_string(v)) snprintf(val, sizeof val, "%s", json_string_value(v));
    else if (json_is_boolean(v)) snprintf(val, sizeof val, "%s", json_is_true(v) ? "true" : "false");
    else {
      char *s = json_dumps(v, JSON_COMPACT);
      snprintf(val, sizeof val, "%s", s ? s : "?");
      free(s);
    }
    off += (size_t)snprintf(buf + off, len - off, "%s%s=%s", off ? " " : "", key, val);
  }
  if (buf[0] == '\0') hct__strlcpy(buf, "-", len);
}

/* The decision holding (uuid, op, T) names this trial's variant and params. */
static int is_decided(json_t *t, const hct_db_decision_t *d, int nd) {
  if (strcmp(str(t, "kind"), "timing") != 0) return 0;
  /* Only the pass in the mode that decides (the other mode's figures of
   * the same winner are recorded beside it with "decides": 0). */
  json_t *dec = json_object_get(json_object_get(t, "figures"), "decides");
  if (json_is_integer(dec) && json_integer_value(dec) == 0) return 0;
  int T = (int)num_i(t, "tokens");
  char *params = json_dumps(json_object_get(t, "params"), JSON_COMPACT | JSON_SORT_KEYS);
  int hit = 0;
  for (int i = 0; i < nd && !hit; i++) {
    if (T < d[i].tmin || T > d[i].tmax || strcmp(d[i].keys.uuid, str(t, "uuid")) != 0 ||
        strcmp(d[i].op, str(t, "op")) != 0 || strcmp(d[i].variant, str(t, "variant")) != 0)
      continue;
    /* Compare parameters as JSON, not as text: spacing may differ. */
    json_t *dp = json_loads(d[i].params, 0, NULL);
    char *dps = dp ? json_dumps(dp, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    hit = params && dps && strcmp(params, dps) == 0;
    free(dps);
    json_decref(dp);
  }
  free(params);
  return hit;
}

static int print_table(json_t *arr, const hct_db_decision_t *d, int nd) {
  static const char *const head[] = {"", "ID", "CARD", "OP", "VARIANT", "PARAMS", "T",
                                     "PENDING", "KIND", "STATUS", "SEED", "MEDIAN_US",
                                     "CI_US", "SAMPLES", "FIGURES"};
  hct_table_t tab;
  hct__table_init(&tab, (int)HCT_ARRAY_SIZE(head), head, "lrllllrlllrrlrl");
  size_t i;
  json_t *t;
  int err = 0;
  json_array_foreach(arr, i, t) {
    char id[24], card[16], T[16], pending[8], median[32], ci[64], samples[16], fig[512], kind[24];
    snprintf(id, sizeof id, "%lld", (long long)num_i(t, "id"));
    snprintf(card, sizeof card, "%.12s", str(t, "uuid"));
    snprintf(T, sizeof T, "%lld", (long long)num_i(t, "tokens"));
    snprintf(pending, sizeof pending, "%s", num_i(t, "pending") ? "yes" : "no");
    char *params = json_dumps(json_object_get(t, "params"), JSON_COMPACT | JSON_ENCODE_ANY);
    int timing = strcmp(str(t, "kind"), "timing") == 0;
    snprintf(kind, sizeof kind, "%s%s", str(t, "kind"),
             timing ? (num_i(t, "cold") ? " cold" : " hot") : "");
    if (timing) {
      snprintf(median, sizeof median, "%.2f", num_r(t, "median_us"));
      snprintf(ci, sizeof ci, "%.2f-%.2f", num_r(t, "ci_lo_us"), num_r(t, "ci_hi_us"));
      snprintf(samples, sizeof samples, "%lld", (long long)num_i(t, "samples"));
    } else {
      strcpy(median, "-");
      strcpy(ci, "-");
      strcpy(samples, "-");
    }
    /* A failed check: what it found says more than its figures. */
    const char *log = str(t, "log");
    if (strcmp(str(t, "status"), "pass") != 0 && strcmp(str(t, "status"), "pruned") != 0 && log[0])
      snprintf(fig, sizeof fig, "%.*s", (int)strcspn(log, "\n"), log);
    else
      figures_text(json_object_get(t, "figures"), fig, sizeof fig);
    const char *row[] = {is_decided(t, d, nd) ? "*" : "", id, card, str(t, "op"),
                         str(t, "variant"), params ? params : "{}", T, pending, kind,
                         str(t, "status"), str(t, "seed"), median, ci, samples, fig};
    err = hct__table_add(&tab, row);
    free(params);
    if (err) break;
  }
  if (err == 0) hct__table_print(&tab, stdout);
  hct__table_free(&tab);
  return err ? hct__cli_fail(err) : HCT_EXIT_OK;
}

int cmd_show(int argc, char **argv) {
  const char *op = NULL, *device = NULL, *variant = NULL;
  int json = 0, tokens = 0;
  const hct_option_t opts[] = {
      HCT_OPT_STRING("op", &op),
      HCT_OPT_STRING("device", &device),
      HCT_OPT_STRING("variant", &variant),
      HCT_OPT_INT("tokens", &tokens, 1, HCT_MAX_TOKENS),
      HCT_OPT_FLAG("json", &json),
      HCT_OPT_END,
  };
  hct_cli_env_t env;
  int err = hct__cli_options(argc, argv, opts, usage, &env);
  if (err) return err == HCT_OPTS_HELP ? HCT_EXIT_OK : err;
  hct_db_t *db = env.db;
  const char *db_path = env.db_path;
  char *text = NULL;
  hct_db_decision_t *d = NULL;
  int nd = 0;
  err = hct__db_trials_json(db, device, op, variant, tokens, &text);
  if (err == 0 && !json) err = hct__db_decisions_list(db, &d, &nd);
  hct__db_close(db);
  if (err) {
    free(text);
    return hct__cli_fail(err);
  }
  if (json) {
    puts(text);
    free(text);
    return HCT_EXIT_OK;
  }
  json_error_t jerr;
  json_t *arr = json_loads(text, 0, &jerr);
  free(text);
  int rc;
  if (arr == NULL) {
    rc = hct__cli_fail(hct__error(HCT_EINVAL, "trials of '%s': bad JSON: %s", db_path, jerr.text));
  } else if (json_array_size(arr) == 0) {
    printf("no trials recorded%s\n", op || device || variant || tokens ? " that match" : "");
    rc = HCT_EXIT_OK;
  } else {
    rc = print_table(arr, d, nd);
  }
  json_decref(arr);
  free(d);
  return rc;
}
