/*
 * cmd_show.c: `hctune show`: the trials behind the decisions: every check
 * and timing a probe recorded, with its figures.  The table is built from
 * the same JSON that --json prints, so the two never disagree.
 */
#include <limits.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>
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
    "(median, the larger half of its 95% interval, samples) and the parity\n"
    "figures, or for a failure what the check found.  A '*' before the id\n"
    "marks a timing\n"
    "trial whose variant and parameters are the recorded decision for its\n"
    "card, op and T; a timing's KIND is its mode (cold or hot), its FIGURES\n"
    "its sample count.  The table fits $COLUMNS (else the terminal, else 80\n"
    "columns): a card or op the same on every row is said once above it, long\n"
    "cells are cut with a final '~'; --json prints every field of every trial\n"
    "(seed, samples, the whole parameters and figures).\n"
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

/* One buffer's parity figures, as "(kl 2.2e-10 err 9.7e-08)": the two a
 * class's limits judge (docs/manifest.md), else every number; --json has
 * the rest. */
static void nested_text(json_t *o, char *buf, size_t len) {
  static const struct { const char *key, *name; } judged[] = {
      {"kl_mean", "kl"}, {"max_err_ratio", "err"}, {"mismatches", "mismatches"}};
  size_t off = (size_t)snprintf(buf, len, "(");
  for (size_t i = 0; i < HCT_ARRAY_SIZE(judged) && off < len; i++) {
    json_t *v = json_object_get(o, judged[i].key);
    if (!json_is_number(v)) continue;
    off += (size_t)snprintf(buf + off, len - off, "%s%s %.2g", off > 1 ? " " : "",
                            judged[i].name, json_number_value(v));
  }
  if (off >= len) return;
  const char *key;
  json_t *v;
  if (off == 1)
    json_object_foreach(o, key, v) {
      if (!json_is_number(v) || off >= len) continue;
      off += (size_t)snprintf(buf + off, len - off, "%s%s %.2g", off > 1 ? " " : "", key,
                              json_number_value(v));
    }
  if (off < len) snprintf(buf + off, len - off, ")");
}

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
    else if (json_is_object(v)) nested_text(v, val, sizeof val);
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

/* "PDL=1 GB=0 NG=4": a parameter point as a person reads it. */
static void params_summary(json_t *params, char *buf, size_t len) {
  size_t off = 0;
  const char *key;
  json_t *v;
  buf[0] = '\0';
  json_object_foreach(params, key, v) {
    if (off >= len) break;
    char *val = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    off += (size_t)snprintf(buf + off, len - off, "%s%s=%s", off ? " " : "", key, val ? val : "?");
    free(val);
  }
  if (buf[0] == '\0') hct__strlcpy(buf, "-", len);
}

/*
 * The columns of the table, and how they give way when the terminal is
 * narrow: `cut` orders the columns that may be shortened (1 first; 0
 * never), each down to `min` bytes with a final '~'.  A column whose cell
 * is the same on every row (the card, the op, when the trials were
 * filtered) is printed once above the table instead.
 */
enum { C_ID, C_CARD, C_OP, C_VARIANT, C_PARAMS, C_T, C_KIND, C_STATUS, C_MEDIAN, C_CI,
       C_FIG, C_N };
static const struct {
  const char *head;
  char align;
  int cut, min, hoist;
} cols[C_N] = {
    [C_ID] = {"ID", 'r', 0, 0, 0},
    [C_CARD] = {"CARD", 'l', 0, 0, 1},     [C_OP] = {"OP", 'l', 5, 8, 1},
    [C_VARIANT] = {"VARIANT", 'l', 4, 8, 0}, [C_PARAMS] = {"PARAMS", 'l', 2, 14, 0},
    [C_T] = {"T", 'r', 0, 0, 0},           [C_KIND] = {"KIND", 'l', 3, 6, 0},
    [C_STATUS] = {"STATUS", 'l', 0, 0, 0}, [C_MEDIAN] = {"MEDIAN_US", 'r', 0, 0, 0},
    [C_CI] = {"CI95_US", 'r', 0, 0, 0},      [C_FIG] = {"FIGURES", 'l', 1, 7, 0},
};

/* The width to fit: $COLUMNS, else the terminal's, else 80. */
static int screen_width(void) {
  const char *env = getenv("COLUMNS");
  int w = env != NULL ? atoi(env) : 0;
  if (w > 0) return w;
  struct winsize ws;
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 80;
}

/* Cuts s to n bytes (n >= 2), at a UTF-8 boundary, ending in '~'. */
static void cut_cell(char *s, int n) {
  if ((int)strlen(s) <= n) return;
  int k = n - 1;
  while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
  s[k] = '~';
  s[k + 1] = '\0';
}

/* Shortens the cut columns of t, in their order, until a row fits width. */
static int fit_width(hct_table_t *t, const int *map, int n, int width) {
  int w[C_N] = {0}, total = 2 * (n - 1), cut = 0;
  for (int c = 0; c < n; c++) {
    w[c] = (int)strlen(t->head[c]);
    for (int r = 0; r < t->nrows; r++)
      w[c] = HCT_MAX(w[c], (int)strlen(t->cells[(size_t)r * (size_t)n + (size_t)c]));
    total += w[c];
  }
  for (int order = 1; order <= 5 && total > width; order++) {
    for (int c = 0; c < n; c++) {
      if (cols[map[c]].cut != order || w[c] <= cols[map[c]].min) continue;
      int to = HCT_MAX(cols[map[c]].min, w[c] - (total - width));
      for (int r = 0; r < t->nrows; r++) cut_cell(t->cells[(size_t)r * (size_t)n + (size_t)c], to);
      total -= w[c] - to;
      w[c] = to;
      cut = 1;
    }
  }
  return cut;
}

/* One trial's cells, in the order of cols[]; strings in buf. */
typedef struct row_s {
  char id[24], card[16], T[16], median[32], ci[64], kind[24], params[512], fig[512];
} row_t;

static void row_cells(json_t *t, const hct_db_decision_t *d, int nd, row_t *b,
                      const char **cell) {
  snprintf(b->id, sizeof b->id, "%s%lld", is_decided(t, d, nd) ? "*" : "",
           (long long)num_i(t, "id"));
  snprintf(b->card, sizeof b->card, "%.12s", str(t, "uuid"));
  snprintf(b->T, sizeof b->T, "%lld", (long long)num_i(t, "tokens"));
  params_summary(json_object_get(t, "params"), b->params, sizeof b->params);
  int timing = strcmp(str(t, "kind"), "timing") == 0;
  /* A timing is said by its mode alone: its median says it is one. */
  snprintf(b->kind, sizeof b->kind, "%s%s", timing ? (num_i(t, "cold") ? "cold" : "hot")
                                                   : str(t, "kind"),
           num_i(t, "pending") ? " pending" : "");
  if (timing) {
    snprintf(b->median, sizeof b->median, "%.2f", num_r(t, "median_us"));
    /* The interval's larger half: the table's width goes to the params. */
    double lo = num_r(t, "median_us") - num_r(t, "ci_lo_us");
    double hi = num_r(t, "ci_hi_us") - num_r(t, "median_us");
    snprintf(b->ci, sizeof b->ci, "+-%.2f", lo > hi ? lo : hi);
  } else {
    strcpy(b->median, "-");
    strcpy(b->ci, "-");
  }
  /* A failed check: what it found says more than its figures. */
  const char *log = str(t, "log");
  if (strcmp(str(t, "status"), "pass") != 0 && strcmp(str(t, "status"), "pruned") != 0 && log[0])
    snprintf(b->fig, sizeof b->fig, "%.*s", (int)strcspn(log, "\n"), log);
  else if (timing) /* the rest of a timing's figures are in --json */
    snprintf(b->fig, sizeof b->fig, "n=%lld", (long long)num_i(t, "samples"));
  else
    figures_text(json_object_get(t, "figures"), b->fig, sizeof b->fig);
  const char *c[C_N] = {b->id, b->card, str(t, "op"),
                        str(t, "variant"), b->params, b->T, b->kind, str(t, "status"),
                        b->median, b->ci, b->fig};
  memcpy(cell, c, sizeof c);
}

/* Which columns hold one value on every row: printed once, above. */
static void find_constant(json_t *arr, const hct_db_decision_t *d, int nd, int *same,
                          char (*first)[512]) {
  size_t i;
  json_t *t;
  for (int c = 0; c < C_N; c++) same[c] = cols[c].hoist;
  json_array_foreach(arr, i, t) {
    row_t b;
    const char *cell[C_N];
    row_cells(t, d, nd, &b, cell);
    for (int c = 0; c < C_N; c++) {
      if (i == 0) hct__strlcpy(first[c], cell[c], sizeof first[c]);
      else if (strcmp(first[c], cell[c]) != 0) same[c] = 0;
    }
  }
}

static int print_table(json_t *arr, const hct_db_decision_t *d, int nd) {
  int same[C_N], map[C_N], n = 0;
  char first[C_N][512];
  const char *head[C_N];
  char align[C_N + 1];
  find_constant(arr, d, nd, same, first);
  for (int c = 0; c < C_N; c++) {
    if (same[c]) continue;
    head[n] = cols[c].head;
    align[n] = cols[c].align;
    map[n++] = c;
  }
  align[n] = '\0';
  hct_table_t tab;
  hct__table_init(&tab, n, head, align);
  size_t i;
  json_t *t;
  int err = 0;
  json_array_foreach(arr, i, t) {
    row_t b;
    const char *cell[C_N], *row[C_N];
    row_cells(t, d, nd, &b, cell);
    for (int c = 0; c < n; c++) row[c] = cell[map[c]];
    if ((err = hct__table_add(&tab, row)) != 0) break;
  }
  if (err == 0) {
    for (int c = 0; c < C_N; c++)
      if (same[c]) printf("%s %s\n", c == C_CARD ? "card" : "op", first[c]);
    int cut = fit_width(&tab, map, n, screen_width());
    hct__table_print(&tab, stdout);
    printf("%zu trial(s)%s\n", json_array_size(arr),
           cut ? "; cells ending in '~' are cut to the width: --json has every field" : "");
  }
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
