/*
 * fleet_format.c: the fleet file format, defined once: the schema below,
 * and one column table per SQL table that says how each value is checked
 * (hct__fleet_check_text) and where it lives in its row struct.  The
 * reader of untrusted files (db/untrusted.c) checks a file's sqlite_schema
 * against what this schema creates in an empty database, and every value
 * against these column tables; the writer (db/export.c) binds from the
 * same tables; the export reads the local DB through them too, so whatever
 * hctune writes, hctune accepts.  Both call down to this file; it calls
 * neither.
 *
 * Why the columns differ from the local DB's: no autoincrement id (a
 * local handle), no compiler logs of trials, logs of faults cut to 8000
 * characters, and the software key always present ("" when the local DB
 * predates it).  Binaries never travel: they are compiled locally.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleet.h"

/* Bump HCT_FLEET_FORMAT_VERSION with any change here: readers refuse every
 * version but their own. */
const char hct__fleet_schema_sql[] =
    "CREATE TABLE meta (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE devices (uuid TEXT NOT NULL, host TEXT NOT NULL, model_key TEXT NOT NULL,"
    " name TEXT NOT NULL, arch TEXT NOT NULL, driver_version TEXT NOT NULL,"
    " compiler_version TEXT NOT NULL, hctune_version TEXT NOT NULL,"
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL,"
    " PRIMARY KEY (uuid, host)) WITHOUT ROWID;"
    "CREATE TABLE variants (op TEXT NOT NULL, variant TEXT NOT NULL, class TEXT NOT NULL,"
    " PRIMARY KEY (op, variant)) WITHOUT ROWID;"
    "CREATE TABLE trials (uid TEXT NOT NULL PRIMARY KEY, host TEXT NOT NULL,"
    " uuid TEXT NOT NULL, model_key TEXT NOT NULL, driver_version TEXT NOT NULL,"
    " compiler_version TEXT NOT NULL, hctune_version TEXT NOT NULL,"
    " software_key TEXT NOT NULL, software_json TEXT NOT NULL, run_id TEXT NOT NULL,"
    " op TEXT NOT NULL, variant TEXT NOT NULL, params TEXT NOT NULL,"
    " template_hash TEXT NOT NULL, binary_key TEXT NOT NULL, tokens INTEGER NOT NULL,"
    " pending INTEGER NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL,"
    " seed INTEGER NOT NULL, samples INTEGER NOT NULL, median_us REAL NOT NULL,"
    " min_us REAL NOT NULL, p10_us REAL NOT NULL, p90_us REAL NOT NULL,"
    " ci_lo_us REAL NOT NULL, ci_hi_us REAL NOT NULL, converged INTEGER NOT NULL,"
    " throttled INTEGER NOT NULL, cold INTEGER NOT NULL, figures_json TEXT NOT NULL,"
    " created_at INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE decisions (uid TEXT NOT NULL UNIQUE, host TEXT NOT NULL,"
    " uuid TEXT NOT NULL, model_key TEXT NOT NULL, driver_version TEXT NOT NULL,"
    " compiler_version TEXT NOT NULL, hctune_version TEXT NOT NULL,"
    " software_key TEXT NOT NULL, software_json TEXT NOT NULL, op TEXT NOT NULL,"
    " parity TEXT NOT NULL, tmin INTEGER NOT NULL, tmax INTEGER NOT NULL,"
    " variant TEXT NOT NULL, params TEXT NOT NULL, variant_class TEXT NOT NULL,"
    " template_hash TEXT NOT NULL, binary_key TEXT NOT NULL, source TEXT NOT NULL,"
    " median_us REAL NOT NULL, baseline_us REAL NOT NULL, ci_lo_us REAL NOT NULL,"
    " ci_hi_us REAL NOT NULL, samples INTEGER NOT NULL, decided_at INTEGER NOT NULL,"
    " run_id TEXT NOT NULL, evidence_json TEXT NOT NULL,"
    " PRIMARY KEY (uuid, op, parity, tmin)) WITHOUT ROWID;"
    "CREATE TABLE faults (uid TEXT NOT NULL PRIMARY KEY, host TEXT NOT NULL,"
    " uuid TEXT NOT NULL, model_key TEXT NOT NULL, driver_version TEXT NOT NULL,"
    " compiler_version TEXT NOT NULL, hctune_version TEXT NOT NULL, op TEXT NOT NULL,"
    " variant TEXT NOT NULL, params TEXT NOT NULL, template_hash TEXT NOT NULL,"
    " tokens INTEGER NOT NULL, reason TEXT NOT NULL, log TEXT NOT NULL,"
    " created_at INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE flags (kind TEXT NOT NULL, model_key TEXT NOT NULL, env TEXT NOT NULL,"
    " uuid TEXT NOT NULL, host TEXT NOT NULL, op TEXT NOT NULL, variant TEXT NOT NULL,"
    " params TEXT NOT NULL, template_hash TEXT NOT NULL, detail TEXT NOT NULL);";

/* ---- columns -------------------------------------------------------------- */

static const char *const classes[] = {"baseline", "bitwise", "kl", NULL};
static const char *const sources[] = {"probe", "fleet", NULL};
static const char *const flag_kinds[] = {"outlier", "conflict", NULL};

#define FIELD_SIZE(st, f) sizeof(((st *)0)->f)
/* Text in a char array; lo: the shortest length accepted. */
#define TXT(st, f, kind, lo) {#f, kind, 0, offsetof(st, f), FIELD_SIZE(st, f), lo, 0, NULL}
#define NAMED(name, st, f, kind, lo) {name, kind, 0, offsetof(st, f), FIELD_SIZE(st, f), lo, 0, NULL}
/* Text in a malloc'd char * of at most max bytes. */
#define HEAP(st, f, kind, max) {#f, kind, 1, offsetof(st, f), (max) + 1, 0, 0, NULL}
#define ENUM(st, f, list) {#f, 'e', 0, offsetof(st, f), FIELD_SIZE(st, f), 0, 0, list}
#define INT(st, f, lo, hi) {#f, 'i', 0, offsetof(st, f), sizeof(int64_t), lo, hi, NULL}
#define REAL(st, f) {#f, 'r', 0, offsetof(st, f), sizeof(double), 0, 0, NULL}
#define KEYS(st)                                                              \
  TXT(st, host, 't', 1), TXT(st, uuid, 't', 1), TXT(st, model_key, 't', 1),   \
      TXT(st, driver_version, 't', 0), TXT(st, compiler_version, 't', 0),     \
      TXT(st, hctune_version, 't', 0)

/* Unix seconds up to the year 36812: anything larger is not a time. */
#define TIME_MAX (1LL << 40)

static const hct_fleet_col_t device_cols[] = {
    TXT(hct_fleet_device_t, uuid, 't', 1),
    TXT(hct_fleet_device_t, host, 't', 1),
    TXT(hct_fleet_device_t, model_key, 't', 1),
    TXT(hct_fleet_device_t, name, 't', 0),
    TXT(hct_fleet_device_t, arch, 't', 0),
    TXT(hct_fleet_device_t, driver_version, 't', 0),
    TXT(hct_fleet_device_t, compiler_version, 't', 0),
    TXT(hct_fleet_device_t, hctune_version, 't', 0),
    INT(hct_fleet_device_t, first_seen, 0, TIME_MAX),
    INT(hct_fleet_device_t, last_seen, 0, TIME_MAX),
};

static const hct_fleet_col_t variant_cols[] = {
    TXT(hct_fleet_variant_t, op, 'n', 1),
    TXT(hct_fleet_variant_t, variant, 'n', 1),
    {"class", 'e', 0, offsetof(hct_fleet_variant_t, vclass), FIELD_SIZE(hct_fleet_variant_t, vclass),
     0, 0, classes},
};

static const hct_fleet_col_t trial_cols[] = {
    TXT(hct_fleet_trial_t, uid, 'h', 32),
    KEYS(hct_fleet_trial_t),
    TXT(hct_fleet_trial_t, software_key, 'H', 0),
    HEAP(hct_fleet_trial_t, software_json, 'J', 319),
    TXT(hct_fleet_trial_t, run_id, 'H', 0),
    TXT(hct_fleet_trial_t, op, 'n', 1),
    TXT(hct_fleet_trial_t, variant, 'n', 1),
    TXT(hct_fleet_trial_t, params, 'j', 2),
    TXT(hct_fleet_trial_t, template_hash, 'H', 0),
    TXT(hct_fleet_trial_t, binary_key, 'H', 0),
    INT(hct_fleet_trial_t, tokens, 0, 65536),
    INT(hct_fleet_trial_t, pending, 0, 1),
    /* Kinds, statuses and reasons are names, not a closed list: the
     * probe's checks grow, and a merge reads only those it knows. */
    TXT(hct_fleet_trial_t, kind, 'n', 1),
    TXT(hct_fleet_trial_t, status, 'n', 1),
    INT(hct_fleet_trial_t, seed, INT64_MIN, INT64_MAX),
    INT(hct_fleet_trial_t, samples, 0, 100000000),
    REAL(hct_fleet_trial_t, median_us),
    REAL(hct_fleet_trial_t, min_us),
    REAL(hct_fleet_trial_t, p10_us),
    REAL(hct_fleet_trial_t, p90_us),
    REAL(hct_fleet_trial_t, ci_lo_us),
    REAL(hct_fleet_trial_t, ci_hi_us),
    INT(hct_fleet_trial_t, converged, 0, 1),
    INT(hct_fleet_trial_t, throttled, 0, 100000000),
    INT(hct_fleet_trial_t, cold, 0, 1),
    HEAP(hct_fleet_trial_t, figures_json, 'J', 8191),
    INT(hct_fleet_trial_t, created_at, 0, TIME_MAX),
};

static const hct_fleet_col_t decision_cols[] = {
    TXT(hct_fleet_decision_t, uid, 'h', 32),
    KEYS(hct_fleet_decision_t),
    TXT(hct_fleet_decision_t, software_key, 'H', 0),
    HEAP(hct_fleet_decision_t, software_json, 'J', 319),
    TXT(hct_fleet_decision_t, op, 'n', 1),
    TXT(hct_fleet_decision_t, parity, 'p', 1),
    INT(hct_fleet_decision_t, tmin, 1, HCT_MAX_TOKENS),
    INT(hct_fleet_decision_t, tmax, 1, HCT_MAX_TOKENS),
    TXT(hct_fleet_decision_t, variant, 'n', 1),
    TXT(hct_fleet_decision_t, params, 'j', 2),
    ENUM(hct_fleet_decision_t, variant_class, classes),
    TXT(hct_fleet_decision_t, template_hash, 'H', 0),
    TXT(hct_fleet_decision_t, binary_key, 'H', 0),
    ENUM(hct_fleet_decision_t, source, sources),
    REAL(hct_fleet_decision_t, median_us),
    REAL(hct_fleet_decision_t, baseline_us),
    REAL(hct_fleet_decision_t, ci_lo_us),
    REAL(hct_fleet_decision_t, ci_hi_us),
    INT(hct_fleet_decision_t, samples, 0, 100000000),
    INT(hct_fleet_decision_t, decided_at, 0, TIME_MAX),
    TXT(hct_fleet_decision_t, run_id, 'H', 0),
    TXT(hct_fleet_decision_t, evidence_json, 'j', 2),
};

static const hct_fleet_col_t fault_cols[] = {
    TXT(hct_fleet_fault_t, uid, 'h', 32),
    KEYS(hct_fleet_fault_t),
    TXT(hct_fleet_fault_t, op, 'n', 1),
    TXT(hct_fleet_fault_t, variant, 'n', 1),
    TXT(hct_fleet_fault_t, params, 'j', 2),
    TXT(hct_fleet_fault_t, template_hash, 'H', 0),
    INT(hct_fleet_fault_t, tokens, 0, HCT_MAX_TOKENS),
    TXT(hct_fleet_fault_t, reason, 'n', 1),
    HEAP(hct_fleet_fault_t, log, 'l', 32767),
    INT(hct_fleet_fault_t, created_at, 0, TIME_MAX),
};

static const hct_fleet_col_t flag_cols[] = {
    ENUM(hct_fleet_flag_t, kind, flag_kinds),
    TXT(hct_fleet_flag_t, model_key, 't', 1),
    TXT(hct_fleet_flag_t, env, 't', 0),
    TXT(hct_fleet_flag_t, uuid, 't', 0),
    TXT(hct_fleet_flag_t, host, 't', 0),
    TXT(hct_fleet_flag_t, op, 'n', 1),
    TXT(hct_fleet_flag_t, variant, 't', 0),
    TXT(hct_fleet_flag_t, params, 'J', 0),
    TXT(hct_fleet_flag_t, template_hash, 'H', 0),
    TXT(hct_fleet_flag_t, detail, 'j', 2),
};

#define TABLE(name, cols, st, arr, n, order, max)                                           \
  {name, cols, (int)HCT_ARRAY_SIZE(cols), sizeof(st), offsetof(hct_fleet_t, arr),            \
   offsetof(hct_fleet_t, n), order, max}
#define FIFTH (HCT_FLEET_MAX_ROWS / 5)

const hct_fleet_table_t hct__fleet_tables[] = {
    TABLE("devices", device_cols, hct_fleet_device_t, devices, n_devices, "uuid, host", FIFTH),
    TABLE("variants", variant_cols, hct_fleet_variant_t, variants, n_variants, "op, variant",
          FIFTH),
    TABLE("trials", trial_cols, hct_fleet_trial_t, trials, n_trials, "uid", HCT_FLEET_MAX_ROWS),
    TABLE("decisions", decision_cols, hct_fleet_decision_t, decisions, n_decisions,
          "uuid, op, parity, tmin", FIFTH),
    TABLE("faults", fault_cols, hct_fleet_fault_t, faults, n_faults, "uid", FIFTH),
    TABLE("flags", flag_cols, hct_fleet_flag_t, flags, n_flags,
          "kind, model_key, env, uuid, host, op, variant, params, template_hash, detail", FIFTH),
};
const int hct__fleet_n_tables = (int)HCT_ARRAY_SIZE(hct__fleet_tables);

const hct_fleet_table_t *hct__fleet_table(const char *name) {
  for (int i = 0; i < hct__fleet_n_tables; i++)
    if (strcmp(hct__fleet_tables[i].name, name) == 0) return &hct__fleet_tables[i];
  return NULL;
}

void hct__fleet_free(hct_fleet_t *f) {
  if (f == NULL) return;
  for (int t = 0; t < hct__fleet_n_tables; t++) {
    const hct_fleet_table_t *T = &hct__fleet_tables[t];
    char *arr = *(char **)((char *)f + T->arr_off);
    int n = *(int *)((char *)f + T->n_off);
    for (int r = 0; arr != NULL && r < n; r++)
      for (int c = 0; c < T->ncols; c++)
        if (T->cols[c].heap) free(*(char **)(arr + (size_t)r * T->row_size + T->cols[c].off));
    free(arr);
  }
  memset(f, 0, sizeof *f);
}

/* ---- checking a value -------------------------------------------------- */

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF), without control characters other than tab and newline when
 * `ws`; returns the offset of the first bad byte, or len. */
static size_t utf8_bad(const unsigned char *s, size_t len, int ws) {
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    if (c < 0x80) {
      if ((c < 0x20 && !(ws && (c == '\n' || c == '\t'))) || c == 0x7f) return i;
      i++;
      continue;
    }
    int n;
    unsigned cp, min;
    if (c >= 0xc2 && c <= 0xdf) n = 1, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) n = 2, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) n = 3, cp = c & 0x07, min = 0x10000;
    else return i;
    if (i + (size_t)n >= len) return i; /* the sequence is cut short */
    for (int k = 1; k <= n; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return i;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
        (cp >= 0x80 && cp < 0xa0))
      return i;
    /* Invisible format characters: bidirectional overrides and isolates,
     * zero-width ones, line separators: text that shows other than it
     * reads ("Trojan Source") has no place in a name or a figure. */
    if ((cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
        (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb))
      return i;
    i += (size_t)n + 1;
  }
  return len;
}

static int is_hex32(const char *s, size_t len) {
  if (len != 32) return 0;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

int hct__fleet_check_text(const hct_fleet_col_t *c, const char *s, size_t len, char *why,
                          size_t wlen) {
  if (len + 1 > c->size) {
    snprintf(why, wlen, "text of %zu bytes, longer than %zu", len, c->size - 1);
    return HCT_EINVAL;
  }
  if (memchr(s, '\0', len) != NULL) {
    snprintf(why, wlen, "text holds a NUL byte");
    return HCT_EINVAL;
  }
  size_t bad = utf8_bad((const unsigned char *)s, len, c->kind == 'l');
  if (bad != len) {
    snprintf(why, wlen, "not UTF-8 text without control characters (byte %zu)", bad);
    return HCT_EINVAL;
  }
  if ((int64_t)len < c->lo) {
    snprintf(why, wlen, "empty");
    return HCT_EINVAL;
  }
  switch (c->kind) {
    case 'h':
    case 'H':
      if (!(c->kind == 'H' && len == 0) && !is_hex32(s, len)) {
        snprintf(why, wlen, "not 32 lowercase hex digits");
        return HCT_EINVAL;
      }
      return 0;
    case 'n':
      for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.')) {
          snprintf(why, wlen, "not a name (letters, digits, '_', '-', '.')");
          return HCT_EINVAL;
        }
      return 0;
    case 'p': {
      /* A decision's parity: "bitwise", "kl" or a bit family "bits:<name>"
       * (issue 29), the one rule engines' requests pass too. */
      char buf[HCT_PARITY_LEN];
      snprintf(buf, sizeof buf, "%.*s", (int)len, s);
      if (hct__parity_asked_ok(buf) == 0) return 0;
      hct__error_clear();
      snprintf(why, wlen, "'%.*s' is not 'bitwise', 'kl' or 'bits:<variant>'", (int)HCT_MIN(len, 40), s);
      return HCT_EINVAL;
    }
    case 'e':
      for (const char *const *p = c->choices; *p; p++)
        if (strlen(*p) == len && memcmp(*p, s, len) == 0) return 0;
      snprintf(why, wlen, "'%.*s' is not one of the accepted values", (int)HCT_MIN(len, 40), s);
      return HCT_EINVAL;
    case 'j':
    case 'J': {
      if (c->kind == 'J' && len == 0) return 0;
      json_error_t e;
      json_t *j = json_loadb(s, len, JSON_REJECT_DUPLICATES, &e);
      int ok = j != NULL && json_is_object(j);
      json_decref(j);
      if (!ok) {
        snprintf(why, wlen, "not a JSON object");
        return HCT_EINVAL;
      }
      return 0;
    }
    default: return 0;
  }
}

/* ---- values the local DB holds that the format must carry ----------------- */

/*
 * A JSON text of the local DB that does not parse (a figure printed as
 * "nan" by an older probe) travels as {"text": "..."}: the export keeps
 * what was recorded and stays readable by the strict reader.
 */
char *hct__fleet_json_or_wrapped(const char *s, size_t max) {
  json_t *j = s[0] ? json_loads(s, JSON_REJECT_DUPLICATES, NULL) : NULL;
  int ok = j != NULL && json_is_object(j);
  json_decref(j);
  if (ok || s[0] == '\0') return strdup(s);
  char cut[1024];
  hct__strlcpy(cut, s, sizeof cut);
  /* The cut may end inside a UTF-8 sequence: back up to a boundary. */
  size_t n = strlen(cut);
  while (n > 0 && ((unsigned char)cut[n - 1] & 0xc0) == 0x80) n--;
  if (n > 0 && (unsigned char)cut[n - 1] >= 0xc0) n--;
  cut[n] = '\0';
  json_t *w = json_pack("{s:s}", "text", cut);
  char *out = w ? json_dumps(w, JSON_COMPACT) : NULL;
  json_decref(w);
  if (out != NULL && strlen(out) > max) {
    free(out);
    out = strdup("{}");
  }
  return out;
}

/* ---- rows ----------------------------------------------------------------- */

/* A decision of a fleet set as a local DB row (source "fleet"). */
void hct__fleet_decision_to_db(const hct_fleet_decision_t *fd, hct_db_decision_t *d) {
  memset(d, 0, sizeof *d);
  hct__strlcpy(d->keys.host, fd->host, sizeof d->keys.host);
  hct__strlcpy(d->keys.uuid, fd->uuid, sizeof d->keys.uuid);
  hct__strlcpy(d->keys.model_key, fd->model_key, sizeof d->keys.model_key);
  hct__strlcpy(d->keys.driver_version, fd->driver_version, sizeof d->keys.driver_version);
  hct__strlcpy(d->keys.compiler_version, fd->compiler_version, sizeof d->keys.compiler_version);
  hct__strlcpy(d->keys.hctune_version, fd->hctune_version, sizeof d->keys.hctune_version);
  hct__strlcpy(d->op, fd->op, sizeof d->op);
  hct__strlcpy(d->parity, fd->parity, sizeof d->parity);
  d->tmin = (int)fd->tmin;
  d->tmax = (int)fd->tmax;
  hct__strlcpy(d->variant, fd->variant, sizeof d->variant);
  hct__strlcpy(d->params, fd->params, sizeof d->params);
  hct__strlcpy(d->variant_class, fd->variant_class, sizeof d->variant_class);
  hct__strlcpy(d->template_hash, fd->template_hash, sizeof d->template_hash);
  hct__strlcpy(d->binary_key, fd->binary_key, sizeof d->binary_key);
  hct__strlcpy(d->source, "fleet", sizeof d->source);
  d->median_us = fd->median_us;
  d->baseline_us = fd->baseline_us;
  d->ci_lo_us = fd->ci_lo_us;
  d->ci_hi_us = fd->ci_hi_us;
  d->samples = (int)fd->samples;
  d->decided_at = fd->decided_at;
  hct__strlcpy(d->run_id, fd->run_id, sizeof d->run_id);
  hct__strlcpy(d->evidence_json, fd->evidence_json, sizeof d->evidence_json);
  hct__strlcpy(d->software_key, fd->software_key, sizeof d->software_key);
  hct__strlcpy(d->software_json, fd->software_json ? fd->software_json : "",
               sizeof d->software_json);
}
