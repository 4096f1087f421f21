/*
 * cmd_list.c: `hctune list`: the recorded decisions, the quarantined
 * candidates (--faults) or the pins (--pins), as a table or as JSON.
 * Also the aligned table printer the CLI commands share.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "db.h"
#include "jit.h"

/* ---- tables ------------------------------------------------------------- */

void hct__table_init(hct_table_t *t, int ncols, const char *const *head, const char *align) {
  memset(t, 0, sizeof *t);
  t->ncols = ncols;
  t->head = head;
  t->align = align;
}

int hct__table_add(hct_table_t *t, const char *const *cells) {
  if (t->nrows == t->cap) {
    int ncap = t->cap ? t->cap * 2 : 16;
    char **nc = realloc(t->cells, (size_t)ncap * (size_t)t->ncols * sizeof *nc);
    if (nc == NULL) return hct__error(HCT_ENOMEM, "out of memory building a table");
    t->cells = nc;
    t->cap = ncap;
  }
  char **row = t->cells + (size_t)t->nrows * (size_t)t->ncols;
  for (int c = 0; c < t->ncols; c++) {
    row[c] = strdup(cells[c] ? cells[c] : "-");
    if (row[c] == NULL) {
      while (c-- > 0) free(row[c]);
      return hct__error(HCT_ENOMEM, "out of memory building a table");
    }
  }
  t->nrows++;
  return 0;
}

void hct__table_print(const hct_table_t *t, FILE *f) {
  int width[32] = {0};
  int n = HCT_MIN(t->ncols, 32);
  for (int c = 0; c < n; c++) width[c] = (int)strlen(t->head[c]);
  for (int r = 0; r < t->nrows; r++)
    for (int c = 0; c < n; c++)
      width[c] = HCT_MAX(width[c], (int)strlen(t->cells[(size_t)r * (size_t)t->ncols + (size_t)c]));
  for (int r = -1; r < t->nrows; r++) {
    for (int c = 0; c < n; c++) {
      const char *s = r < 0 ? t->head[c] : t->cells[(size_t)r * (size_t)t->ncols + (size_t)c];
      int right = t->align && t->align[c] == 'r';
      int last = c == n - 1;
      /* No trailing blanks: the last left-aligned column is not padded. */
      if (right) fprintf(f, "%*s", width[c], s);
      else if (last) fputs(s, f);
      else fprintf(f, "%-*s", width[c], s);
      if (!last) fputs("  ", f);
    }
    fputc('\n', f);
  }
}

void hct__table_free(hct_table_t *t) {
  for (size_t i = 0; i < (size_t)t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
  free(t->cells);
  memset(t, 0, sizeof *t);
}

/* ---- list ---------------------------------------------------------------- */

static const char usage[] =
    "usage: hctune list [--db PATH] [--json] [--faults | --pins]\n"
    "\n"
    "Shows the recorded decisions: for each card, op, parity (bitwise, kl, or a\n"
    "bit family bits:VARIANT) and token\n"
    "range, the variant chosen, its time per call against the baseline's, and\n"
    "where the decision came from; after 'probe --device all', a model's pooled\n"
    "rows (CARD \"pooled (MODEL)\") beside each card's own.\n"
    "\n"
    "  --db PATH   the database (default: $HCTUNE_DB, else\n"
    "              $XDG_STATE_HOME/hctune/hctune.db, else\n"
    "              ~/.local/state/hctune/hctune.db)\n"
    "  --json      print a JSON array instead of a table\n"
    "  --faults    list the quarantined candidates instead\n"
    "  --pins      list the pins instead\n"
    "  --help      print this and exit\n";

/* "GPU-8d1c2e3f (NVIDIA H200)": the UUID cut to 12 characters, and the card
 * name when the devices table knows it. */
static void card_label(const char *uuid, const hct_db_device_t *devs, int ndev, char *buf,
                       size_t len) {
  const char *name = NULL;
  for (int i = 0; i < ndev; i++)
    if (strcmp(devs[i].uuid, uuid) == 0 && devs[i].name[0]) name = devs[i].name;
  if (strcmp(uuid, "*") == 0) name = "every card";
  if (name) snprintf(buf, len, "%.12s (%s)", uuid, name);
  else snprintf(buf, len, "%.12s", uuid);
}

static const char *device_name(const char *uuid, const hct_db_device_t *devs, int ndev) {
  for (int i = 0; i < ndev; i++)
    if (strcmp(devs[i].uuid, uuid) == 0) return devs[i].name;
  return NULL;
}

static void range_text(int tmin, int tmax, char *buf, size_t len) {
  if (tmin == tmax) snprintf(buf, len, "%d", tmin);
  else snprintf(buf, len, "%d-%d", tmin, tmax);
}

/* JSON text kept as JSON when it parses, as a string otherwise. */
static json_t *json_text(const char *s) {
  json_t *v = s && s[0] ? json_loads(s, JSON_DECODE_ANY, NULL) : NULL;
  return v ? v : json_string(s ? s : "");
}

static int print_json(json_t *arr) {
  char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(arr);
  if (s == NULL) return hct__cli_fail(hct__error(HCT_ENOMEM, "out of memory writing JSON"));
  puts(s);
  free(s);
  return HCT_EXIT_OK;
}

/* ---- staleness ------------------------------------------------------------ */

/* What a decision is checked against: the manifests under the kernels
 * folder (loaded once per op) and the cards of this host (their drivers). */
typedef struct stale_ctx_s {
  char kdir[1024];
  struct {
    char name[32];
    hct_op_t *op;          /* NULL: no manifest here */
  } ops[16];
  int n_ops;
  hct_device_t live[16];
  int n_live;
} stale_ctx_t;

static void stale_ctx_init(stale_ctx_t *x) {
  memset(x, 0, sizeof *x);
  if (hct__kernels_dir(x->kdir, sizeof x->kdir) != 0) x->kdir[0] = '\0';
  /* No card or no driver here: drivers are then not compared. */
  x->n_live = hct__devices(x->live, (int)HCT_ARRAY_SIZE(x->live));
  if (x->n_live < 0) x->n_live = 0;
  hct__error_clear();
}

static void stale_ctx_free(stale_ctx_t *x) {
  for (int i = 0; i < x->n_ops; i++) hct__manifest_free(x->ops[i].op);
}

static const hct_op_t *stale_op(stale_ctx_t *x, const char *name) {
  for (int i = 0; i < x->n_ops; i++)
    if (strcmp(x->ops[i].name, name) == 0) return x->ops[i].op;
  if (x->n_ops == (int)HCT_ARRAY_SIZE(x->ops)) return NULL;
  hct__strlcpy(x->ops[x->n_ops].name, name, sizeof x->ops[x->n_ops].name);
  if (x->kdir[0] == '\0' || hct__manifest_load(x->kdir, name, &x->ops[x->n_ops].op) != 0)
    x->ops[x->n_ops].op = NULL;
  hct__error_clear();
  return x->ops[x->n_ops++].op;
}

/* 1 with why when the decision would not be served here now (its software
 * key is not what this host would compile: hct__softkey_check, the
 * daemon's rule), else 0.  A decision recorded before software keys has
 * none to check: served as recorded (the daemon's rule too), and `probe
 * --stale` re-probes it. */
static int decision_stale(stale_ctx_t *x, const hct_db_decision_t *d, const hct_db_device_t *devs,
                          int ndev, char *why, size_t len) {
  if (d->software_json[0] == '\0') {
    snprintf(why, len, "unkeyed");
    return 0;
  }
  const hct_op_t *op = stale_op(x, d->op);
  if (op == NULL) {
    snprintf(why, len, "template changed (op '%s' has no manifest in '%.200s')", d->op, x->kdir);
    return 1;
  }
  const hct_db_device_t *card = NULL;
  for (int i = 0; i < ndev; i++)
    if (strcmp(devs[i].uuid, d->keys.uuid) == 0) card = &devs[i];
  hct_backend_kind_t backend = HCT_BACKEND_CUDA;
  char arch[64] = "";
  if (card == NULL) {
    snprintf(why, len, "card '%s' is not in the devices table", d->keys.uuid);
    return 1;
  }
  /* The arch column where an old fingerprint lacks it (then by vendor). */
  if (hct__softkey_card(card->fingerprint_json, &backend, arch, sizeof arch) != 0) {
    hct__error_clear();
    hct__strlcpy(arch, card->arch, sizeof arch);
    backend = strncmp(card->model_key, "amd|", 4) == 0 ? HCT_BACKEND_HIP : HCT_BACKEND_CUDA;
  }
  const char *driver = NULL;
  for (int i = 0; i < x->n_live; i++)
    if (strcmp(x->live[i].uuid, d->keys.uuid) == 0) driver = x->live[i].driver_version;
  return hct__softkey_check(op, d->variant, d->params, backend, arch, driver, d->software_json,
                            why, len) != 0;
}

/* The ops of the kernels folder that do not load, one line each, after
 * the table: the daemon serves the others, and this op's decisions from
 * the manifest it read before, or not at all. */
static void print_broken_ops(const char *kdir) {
  char names[64][32];
  int n = kdir[0] != '\0' ? hct__manifest_list(kdir, names, 64) : 0;
  for (int i = 0; i < n; i++) {
    hct_op_t *op;
    if (hct__manifest_load(kdir, names[i], &op) == 0) hct__manifest_free(op);
    else printf("broken op '%s': %s\n", names[i], hct_last_error());
  }
  hct__error_clear();
}

static int list_decisions(hct_db_t *db, int json, const hct_db_device_t *devs, int ndev) {
  hct_db_decision_t *d;
  int n;
  int err = hct__db_decisions_list(db, &d, &n);
  if (err) return hct__cli_fail(err);
  stale_ctx_t *sx = calloc(1, sizeof *sx);
  if (sx == NULL) {
    free(d);
    return hct__cli_fail(hct__error(HCT_ENOMEM, "out of memory"));
  }
  stale_ctx_init(sx);
  if (json) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
      const char *name = device_name(d[i].keys.uuid, devs, ndev);
      json_t *o = json_pack(
          "{s:s, s:s?, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:o, s:s, s:s, s:s,"
          " s:s, s:f, s:f, s:f, s:f, s:f, s:i, s:I, s:s, s:o}",
          "uuid", d[i].keys.uuid, "device_name", name, "host", d[i].keys.host, "model_key",
          d[i].keys.model_key, "driver_version", d[i].keys.driver_version, "compiler_version",
          d[i].keys.compiler_version, "hctune_version", d[i].keys.hctune_version, "op", d[i].op,
          "parity", d[i].parity, "tmin", d[i].tmin, "tmax", d[i].tmax, "variant", d[i].variant,
          "params", json_text(d[i].params), "variant_class", d[i].variant_class,
          "template_hash", d[i].template_hash, "binary_key", d[i].binary_key, "source",
          d[i].source, "median_us", d[i].median_us, "baseline_us", d[i].baseline_us,
          "speedup", d[i].median_us > 0 ? d[i].baseline_us / d[i].median_us : 0.0, "ci_lo_us",
          d[i].ci_lo_us, "ci_hi_us", d[i].ci_hi_us, "samples", d[i].samples, "decided_at",
          (json_int_t)d[i].decided_at, "run_id", d[i].run_id, "evidence",
          json_text(d[i].evidence_json));
      char why[512];
      int stale = decision_stale(sx, &d[i], devs, ndev, why, sizeof why);
      json_object_set_new(o, "software_key", json_string(d[i].software_key));
      json_object_set_new(o, "software", json_text(d[i].software_json));
      json_object_set_new(o, "stale", json_boolean(stale));
      if (d[i].software_json[0] == '\0') json_object_set_new(o, "unkeyed", json_true());
      if (stale) json_object_set_new(o, "stale_reason", json_string(why));
      json_array_append_new(arr, o);
    }
    free(d);
    stale_ctx_free(sx);
    free(sx);
    return print_json(arr);
  }
  if (n == 0) {
    printf("no decisions recorded\n");
    print_broken_ops(sx->kdir);
    stale_ctx_free(sx);
    free(sx);
    free(d);
    return HCT_EXIT_OK;
  }
  static const char *const head[] = {"CARD", "OP", "PARITY", "TOKENS", "VARIANT", "PARAMS",
                                     "MEDIAN_US", "BASELINE_US", "SPEEDUP", "SOURCE",
                                     "DECIDED", "STALE"};
  hct_table_t t;
  hct__table_init(&t, (int)HCT_ARRAY_SIZE(head), head, "llllllrrrlll");
  int n_stale = 0, n_unkeyed = 0;
  for (int i = 0; i < n && err == 0; i++) {
    char card[160], tokens[32], med[32], base[32], speed[32], when[32];
    card_label(d[i].keys.uuid, devs, ndev, card, sizeof card);
    /* A model's pooled row (probe --device all): named by its model. */
    if (strncmp(d[i].keys.uuid, "pooled-", 7) == 0)
      snprintf(card, sizeof card, "pooled (%.140s)", d[i].keys.model_key);
    range_text(d[i].tmin, d[i].tmax, tokens, sizeof tokens);
    snprintf(med, sizeof med, "%.2f", d[i].median_us);
    snprintf(base, sizeof base, "%.2f", d[i].baseline_us);
    if (d[i].median_us > 0 && d[i].baseline_us > 0)
      snprintf(speed, sizeof speed, "%.2fx", d[i].baseline_us / d[i].median_us);
    else
      snprintf(speed, sizeof speed, "-");
    hct__iso_time(d[i].decided_at, when, sizeof when);
    char why[512], stale[520];
    if (decision_stale(sx, &d[i], devs, ndev, why, sizeof why)) {
      snprintf(stale, sizeof stale, "STALE: %s", why);
      n_stale++;
    } else {
      /* "unkeyed": recorded before software keys. */
      snprintf(stale, sizeof stale, "%s", d[i].software_json[0] ? "-" : why);
      n_unkeyed += d[i].software_json[0] == '\0';
    }
    const char *row[] = {card, d[i].op, d[i].parity, tokens, d[i].variant, d[i].params,
                         med, base, speed, d[i].source, when, stale};
    err = hct__table_add(&t, row);
  }
  free(d);
  if (err == 0) hct__table_print(&t, stdout);
  if (err == 0) print_broken_ops(sx->kdir);
  stale_ctx_free(sx);
  free(sx);
  if (err == 0 && n_stale > 0)
    printf("%d of %d decisions stale: not served (the baseline is); 'hctune probe --stale' "
           "re-probes them\n", n_stale, n);
  if (err == 0 && n_unkeyed > 0)
    printf("%d of %d decisions unkeyed (recorded before software keys): served as recorded; "
           "'hctune probe --stale' re-probes them\n", n_unkeyed, n);
  hct__table_free(&t);
  return err ? hct__cli_fail(err) : HCT_EXIT_OK;
}

static void first_line(const char *s, char *buf, size_t len) {
  if (s == NULL) {
    hct__strlcpy(buf, "-", len);
    return;
  }
  while (*s == '\n') s++;
  size_t n = strcspn(s, "\n");
  if (n >= len) n = len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
}

static int list_faults(hct_db_t *db, int json, const hct_db_device_t *devs, int ndev) {
  hct_db_fault_t *f;
  int n;
  int err = hct__db_faults_list(db, &f, &n);
  if (err) return hct__cli_fail(err);
  if (json) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
      json_array_append_new(
          arr, json_pack("{s:s, s:s?, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:i, s:s, s:s?,"
                         " s:I}",
                         "uuid", f[i].keys.uuid, "device_name",
                         device_name(f[i].keys.uuid, devs, ndev), "host", f[i].keys.host,
                         "driver_version", f[i].keys.driver_version, "compiler_version",
                         f[i].keys.compiler_version, "op", f[i].op, "variant", f[i].variant,
                         "template_hash", f[i].template_hash, "params", json_text(f[i].params),
                         "reason", f[i].reason, "tokens", f[i].tokens, "model_key",
                         f[i].keys.model_key, "log", f[i].log, "created_at",
                         (json_int_t)f[i].created_at));
    hct__db_faults_free(f, n);
    return print_json(arr);
  }
  if (n == 0) {
    hct__db_faults_free(f, n);
    printf("no quarantined candidates\n");
    return HCT_EXIT_OK;
  }
  static const char *const head[] = {"CARD", "REASON", "OP", "VARIANT", "PARAMS", "TOKENS",
                                     "WHEN", "LOG"};
  hct_table_t t;
  hct__table_init(&t, (int)HCT_ARRAY_SIZE(head), head, NULL);
  for (int i = 0; i < n && err == 0; i++) {
    char card[160], tokens[32], when[32], log[120];
    card_label(f[i].keys.uuid, devs, ndev, card, sizeof card);
    /* The quarantine's reach, as hct__db_fault_check reads it. */
    if (f[i].tokens == 0) snprintf(tokens, sizeof tokens, "all");
    else if (strcmp(f[i].reason, "timeout") == 0) snprintf(tokens, sizeof tokens, "%d+", f[i].tokens);
    else snprintf(tokens, sizeof tokens, "%d", f[i].tokens);
    hct__iso_time(f[i].created_at, when, sizeof when);
    first_line(f[i].log, log, sizeof log);
    const char *row[] = {card, f[i].reason, f[i].op, f[i].variant, f[i].params, tokens, when, log};
    err = hct__table_add(&t, row);
  }
  hct__db_faults_free(f, n);
  if (err == 0) hct__table_print(&t, stdout);
  hct__table_free(&t);
  return err ? hct__cli_fail(err) : HCT_EXIT_OK;
}

static int list_pins(hct_db_t *db, int json, const hct_db_device_t *devs, int ndev) {
  hct_db_pin_t *p;
  int n;
  int err = hct__db_pins_list(db, &p, &n);
  if (err) return hct__cli_fail(err);
  if (json) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
      json_array_append_new(arr, json_pack("{s:s, s:s?, s:s, s:i, s:i, s:s, s:o, s:I, s:I}",
                                           "uuid", p[i].uuid, "device_name",
                                           device_name(p[i].uuid, devs, ndev), "op", p[i].op,
                                           "tmin", p[i].tmin, "tmax", p[i].tmax, "variant",
                                           p[i].variant, "params", json_text(p[i].params),
                                           "until", (json_int_t)p[i].until, "created_at",
                                           (json_int_t)p[i].created_at));
    free(p);
    return print_json(arr);
  }
  if (n == 0) {
    free(p);
    printf("no pins\n");
    return HCT_EXIT_OK;
  }
  static const char *const head[] = {"CARD", "OP", "TOKENS", "VARIANT", "PARAMS", "UNTIL",
                                     "CREATED"};
  hct_table_t t;
  hct__table_init(&t, (int)HCT_ARRAY_SIZE(head), head, NULL);
  for (int i = 0; i < n && err == 0; i++) {
    char card[160], tokens[32], until[32], when[32];
    card_label(p[i].uuid, devs, ndev, card, sizeof card);
    range_text(p[i].tmin, p[i].tmax, tokens, sizeof tokens);
    if (p[i].until) hct__iso_time(p[i].until, until, sizeof until);
    else snprintf(until, sizeof until, "-");
    hct__iso_time(p[i].created_at, when, sizeof when);
    const char *row[] = {card, p[i].op, tokens, p[i].variant, p[i].params, until, when};
    err = hct__table_add(&t, row);
  }
  free(p);
  if (err == 0) hct__table_print(&t, stdout);
  hct__table_free(&t);
  return err ? hct__cli_fail(err) : HCT_EXIT_OK;
}

int cmd_list(int argc, char **argv) {
  int json = 0, faults = 0, pins = 0;
  const hct_option_t opts[] = {
      HCT_OPT_FLAG("json", &json),
      HCT_OPT_FLAG("faults", &faults),
      HCT_OPT_FLAG("pins", &pins),
      HCT_OPT_END,
  };
  hct_cli_env_t env;
  int err = hct__cli_options(argc, argv, opts, usage, &env);
  if (err) return err == HCT_OPTS_HELP ? HCT_EXIT_OK : err;
  hct_db_t *db = env.db;
  if (faults && pins) {
    hct__db_close(db);
    return hct__usage_error(argv[0], "--faults and --pins are exclusive");
  }
  hct_db_device_t *devs;
  int ndev;
  err = hct__db_devices_list(db, &devs, &ndev);
  if (err) {
    hct__db_close(db);
    return hct__cli_fail(err);
  }
  int rc = faults ? list_faults(db, json, devs, ndev)
           : pins ? list_pins(db, json, devs, ndev)
                  : list_decisions(db, json, devs, ndev);
  hct__db_devices_free(devs, ndev);
  hct__db_close(db);
  return rc;
}
