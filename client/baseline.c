/*
 * baseline.c: the op's baseline as the library knows it without a daemon:
 * the variant of class baseline in the op's own manifest
 * (kernels-src/<op>/manifest.json, found as hct__kernels_dir finds the
 * templates the library compiles its fallback from), never a table of
 * names copied into C that a new or changed op would leave behind.
 *
 * hct_choose falls back on every call while no daemon answers, so the
 * name is remembered per (kernels folder, op) after the first read: a
 * manifest is parsed once per process, not once per call.  Any thread.
 * For a bit family (parity "bits:<head>", issue 29) the default is the
 * family's head, compiled by the library like the baseline.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "client.h"

/* Ops remembered; past that the manifest is read on every call (correct,
 * slower). */
#define MAX_KNOWN 32

typedef struct known_s {
  char dir[PATH_MAX];
  char op[32];
  char parity[HCT_PARITY_LEN];
  char variant[64];
  char cls[16];
} known_t;

static known_t known[MAX_KNOWN];
static int n_known;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

static int remembered(const char *dir, const char *op, const char *parity, known_t *out) {
  int found = 0;
  pthread_mutex_lock(&known_lock);
  for (int i = 0; i < n_known && !found; i++)
    if (strcmp(known[i].op, op) == 0 && strcmp(known[i].dir, dir) == 0 &&
        strcmp(known[i].parity, parity) == 0) {
      *out = known[i];
      found = 1;
    }
  pthread_mutex_unlock(&known_lock);
  return found;
}

static void remember(const known_t *k) {
  pthread_mutex_lock(&known_lock);
  if (n_known < MAX_KNOWN) known[n_known++] = *k;
  pthread_mutex_unlock(&known_lock);
}

int hct__default_here(const char *op, const char *parity, char *variant, size_t len, char *cls,
                      size_t cls_len) {
  known_t k;
  memset(&k, 0, sizeof k);
  int rc = hct__kernels_dir(k.dir, sizeof k.dir);
  if (rc < 0) return hct__error(HCT_ENOENT, "op '%s': no baseline known here: %s", op, hct_last_error());
  hct__strlcpy(k.op, op, sizeof k.op);
  hct__strlcpy(k.parity, parity != NULL ? parity : "bitwise", sizeof k.parity);
  if (!remembered(k.dir, op, k.parity, &k)) {
    hct_op_t *m = NULL;
    if ((rc = hct__manifest_load(k.dir, op, &m)) < 0)
      return hct__error(HCT_ENOENT, "op '%s': no baseline known here: %s", op, hct_last_error());
    /* The baseline, or a bit family's head (issue 29): its bits, never
     * the baseline's, are what an engine asking for the family needs. */
    const hct_variant_t *v = hct__op_parity_variant(m, k.parity);
    if (v != NULL) {
      hct__strlcpy(k.variant, v->name, sizeof k.variant);
      hct__strlcpy(k.cls, hct__parity_name(hct__variant_competes(m, v)), sizeof k.cls);
      remember(&k);
    } else if (hct__parity_family(k.parity) == NULL) {
      hct__error(HCT_ENOENT, "op '%s': its manifest has no baseline", op);
    }
    hct__manifest_free(m);
    if (v == NULL) return HCT_ENOENT;
  }
  hct__strlcpy(variant, k.variant, len);
  if (cls != NULL) hct__strlcpy(cls, k.cls, cls_len);
  return 0;
}
