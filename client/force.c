/*
 * force.c: HCTUNE_FORCE, the operator's override, with parameters.
 *
 *   HCTUNE_FORCE='hc_read=relay{"PDL":1,"GB":0,"G":1,"NG":4,"LT":1},hc_read_prefill=upmix'
 *
 * An entry is op=variant, optionally followed at once by the point as a
 * JSON object; entries are separated by commas outside braces.  What is
 * forced is checked against the op's manifest with the one strict reader
 * of a point (hct__point_parse): a variant or a point the manifest does not
 * have is refused with one line on stderr, never passed on to run
 * something else than the operator asked for.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

int hct__force_lookup(const char *op, char *variant, size_t vlen, char *params, size_t plen) {
  const char *env = getenv("HCTUNE_FORCE");
  if (env == NULL || env[0] == '\0') return 0;
  int found = 0;
  for (const char *p = env; *p;) {
    /* The entry ends at the first comma outside braces. */
    const char *end = p;
    int depth = 0;
    for (; *end && !(depth == 0 && *end == ','); end++) {
      if (*end == '{') depth++;
      else if (*end == '}' && --depth < 0) break;
    }
    size_t n = (size_t)(end - p);
    const char *eq = memchr(p, '=', n);
    const char *brace = eq ? memchr(eq, '{', (size_t)(end - eq)) : NULL;
    const char *vend = brace ? brace : end;
    if (depth != 0 || eq == NULL || eq == p || vend == eq + 1 || (size_t)(vend - eq - 1) >= vlen ||
        (brace && (end[-1] != '}' || (size_t)(end - brace) >= plen)))
      return hct__error(HCT_EINVAL,
                        "HCTUNE_FORCE '%s': entry '%.*s' is not op=variant or "
                        "op=variant{\"PARAM\":value,...}",
                        env, (int)n, p);
    if (!found && (size_t)(eq - p) == strlen(op) && memcmp(p, op, (size_t)(eq - p)) == 0) {
      memcpy(variant, eq + 1, (size_t)(vend - eq - 1));
      variant[vend - eq - 1] = '\0';
      size_t pn = brace ? (size_t)(end - brace) : 0;
      if (pn) memcpy(params, brace, pn);
      params[pn] = '\0';
      found = 1;
    }
    p = *end ? end + 1 : end;
  }
  return found;
}

/* The refusal is printed once per value of HCTUNE_FORCE, not on every
 * call of an engine that asks per step. */
static pthread_mutex_t printed_lock = PTHREAD_MUTEX_INITIALIZER;
static char printed[1024];

static int refuse(const char *fmt, ...) HCT_PRINTF(1, 2);
static int force_check_manifest(const char *op, const char *variant, const char *params);
static int refuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = hct__verror(HCT_EINVAL, fmt, ap);
  va_end(ap);
  const char *env = getenv("HCTUNE_FORCE");
  pthread_mutex_lock(&printed_lock);
  if (env != NULL && strncmp(printed, env, sizeof printed - 1) != 0) {
    hct__strlcpy(printed, env, sizeof printed);
    fprintf(stderr, "hctune: %s\n", hct_last_error());
  }
  pthread_mutex_unlock(&printed_lock);
  return rc;
}

/* The last entry that passed, so that an engine asking per step reads the
 * manifest once, not per call. */
static pthread_mutex_t passed_lock = PTHREAD_MUTEX_INITIALIZER;
static char passed[400];

int hct__force_check(const char *op, const char *variant, const char *params) {
  char entry[400];
  snprintf(entry, sizeof entry, "%s=%s%s", op, variant, params);
  pthread_mutex_lock(&passed_lock);
  int known = strcmp(passed, entry) == 0;
  pthread_mutex_unlock(&passed_lock);
  if (known) return 0;
  int rc = force_check_manifest(op, variant, params);
  if (rc == 0) {
    pthread_mutex_lock(&passed_lock);
    hct__strlcpy(passed, entry, sizeof passed);
    pthread_mutex_unlock(&passed_lock);
  }
  return rc;
}

static int force_check_manifest(const char *op, const char *variant, const char *params) {
  char dir[4096];
  hct_op_t *m = NULL;
  if (hct__kernels_dir(dir, sizeof dir) < 0 || hct__manifest_load(dir, op, &m) < 0) {
    hct__error_clear();
    return HCT_ENOENT;
  }
  const hct_variant_t *v = hct__variant_find(m, variant);
  int rc = 0;
  if (v == NULL) {
    char names[512] = "";
    size_t off = 0;
    for (int i = 0; i < m->n_variants && off < sizeof names; i++)
      off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "",
                              m->variants[i].name);
    rc = refuse("HCTUNE_FORCE: op '%s' has no variant '%s' in '%s/manifest.json' (it has %s)",
                op, variant, m->dir, names);
  } else if (params[0] != '\0') {
    hct_point_t pt;
    if (hct__point_parse(v, params, &pt) < 0) {
      char why[512];
      hct__strlcpy(why, hct_last_error(), sizeof why);
      rc = refuse("HCTUNE_FORCE: %s=%s%s refused: %s", op, variant, params, why);
    }
  }
  hct__manifest_free(m);
  return rc;
}
