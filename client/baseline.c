/*
 * baseline.c: what the library serves without a daemon's decision, from
 * the op's own manifest (kernels-src/<op>/manifest.json, found as
 * hct__kernels_dir finds the templates the library compiles its fallback
 * from), never a table of names copied into C that a new or changed op
 * would leave behind: the variant of class baseline, or for a bit family
 * (parity "bits:<head>", issue 29) the family's head, whose bits and not
 * the baseline's are what an engine asking for the family needs.
 *
 * Its point at T is the daemon's rule (hct__point_default without card
 * figures), so an answer without a daemon, the daemon's default answer and
 * HCTUNE_FORCE naming the variant are one answer (issue 30).
 *
 * hct_choose falls back on every call while no daemon answers, so the
 * manifest is kept per (kernels folder, op) after the first read: it is
 * parsed once per process, not once per call.  Any thread.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "client.h"

/* Ops remembered; past that the manifest is read on every call (correct,
 * slower). */
#define MAX_KNOWN 32

/* A manifest read once and kept for the process's life: the answers
 * point into it and nothing frees it. */
typedef struct known_s {
  char dir[PATH_MAX];
  char op[32];
  hct_op_t *m;
} known_t;

static known_t known[MAX_KNOWN];
static int n_known;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

static hct_op_t *remembered(const char *dir, const char *op) {
  hct_op_t *m = NULL;
  pthread_mutex_lock(&known_lock);
  for (int i = 0; i < n_known && m == NULL; i++)
    if (strcmp(known[i].op, op) == 0 && strcmp(known[i].dir, dir) == 0) m = known[i].m;
  pthread_mutex_unlock(&known_lock);
  return m;
}

/* Keeps m (returns 1) or, with no room left, leaves it to the caller (0). */
static int remember(const char *dir, const char *op, hct_op_t *m) {
  int kept = 0;
  pthread_mutex_lock(&known_lock);
  if (n_known < MAX_KNOWN) {
    known_t *k = &known[n_known++];
    hct__strlcpy(k->dir, dir, sizeof k->dir);
    hct__strlcpy(k->op, op, sizeof k->op);
    k->m = m;
    kept = 1;
  }
  pthread_mutex_unlock(&known_lock);
  return kept;
}

/* The variant served: the one named, else the parity's default (the
 * baseline, or a family's head); NULL with the error set. */
static const hct_variant_t *served(const hct_op_t *m, const char *op, const char *parity,
                                   const char *variant) {
  if (variant != NULL) {
    const hct_variant_t *v = hct__variant_find(m, variant);
    if (v == NULL) hct__error(HCT_ENOENT, "op '%s': no variant '%s' here", op, variant);
    return v;
  }
  const char *p = parity != NULL ? parity : "bitwise";
  const hct_variant_t *v = hct__op_parity_variant(m, p);
  if (v == NULL && hct__parity_family(p) == NULL)
    hct__error(HCT_ENOENT, "op '%s': its manifest has no baseline", op);
  else if (v == NULL)
    hct__error(HCT_ENOENT, "op '%s': no family '%s' (its manifest's \"families\" does not name it)",
               op, hct__parity_family(p));
  return v;
}

int hct__default_answer_here(const char *op, const char *parity, const char *variant, int tokens,
                             hct_default_t *out) {
  char dir[PATH_MAX];
  memset(out, 0, sizeof *out);
  hct__strlcpy(out->params, "{}", sizeof out->params);
  int rc = hct__kernels_dir(dir, sizeof dir);
  if (rc < 0) return hct__error(HCT_ENOENT, "op '%s': no baseline known here: %s", op, hct_last_error());
  hct_op_t *m = remembered(dir, op), *mine = NULL;
  if (m == NULL) {
    if ((rc = hct__manifest_load(dir, op, &m)) < 0)
      return hct__error(HCT_ENOENT, "op '%s': no baseline known here: %s", op, hct_last_error());
    if (!remember(dir, op, m)) mine = m;
  }
  const hct_variant_t *v = served(m, op, parity, variant);
  if (v == NULL) {
    rc = HCT_ENOENT;
  } else {
    hct__strlcpy(out->variant, v->name, sizeof out->variant);
    hct__strlcpy(out->cls, hct__parity_name(hct__variant_competes(m, v)), sizeof out->cls);
    /* The rule the daemon's default answer uses (daemon/answer.c): the
     * first point whose constraints hold at T, without card figures. */
    hct_point_t pt;
    if (tokens > 0 && hct__point_default(m, v, NULL, tokens, &pt) == 0)
      hct__point_json(v, &pt, out->params, sizeof out->params);
    hct__error_clear();
  }
  hct__manifest_free(mine);
  return rc;
}
