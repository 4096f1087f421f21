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
  char variant[64];
} known_t;

static known_t known[MAX_KNOWN];
static int n_known;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

static int remembered(const char *dir, const char *op, char *variant, size_t len) {
  int found = 0;
  pthread_mutex_lock(&known_lock);
  for (int i = 0; i < n_known && !found; i++)
    if (strcmp(known[i].op, op) == 0 && strcmp(known[i].dir, dir) == 0) {
      hct__strlcpy(variant, known[i].variant, len);
      found = 1;
    }
  pthread_mutex_unlock(&known_lock);
  return found;
}

static void remember(const char *dir, const char *op, const char *variant) {
  pthread_mutex_lock(&known_lock);
  if (n_known < MAX_KNOWN) {
    known_t *k = &known[n_known++];
    hct__strlcpy(k->dir, dir, sizeof k->dir);
    hct__strlcpy(k->op, op, sizeof k->op);
    hct__strlcpy(k->variant, variant, sizeof k->variant);
  }
  pthread_mutex_unlock(&known_lock);
}

int hct__baseline_here(const char *op, char *variant, size_t len) {
  char dir[PATH_MAX];
  int rc = hct__kernels_dir(dir, sizeof dir);
  if (rc < 0) return hct__error(HCT_ENOENT, "op '%s': no baseline known here: %s", op, hct_last_error());
  if (remembered(dir, op, variant, len)) return 0;
  hct_op_t *m = NULL;
  if ((rc = hct__manifest_load(dir, op, &m)) < 0)
    return hct__error(HCT_ENOENT, "op '%s': no baseline known here: %s", op, hct_last_error());
  const hct_variant_t *v = hct__op_baseline(m);
  if (v != NULL) {
    hct__strlcpy(variant, v->name, len);
    remember(dir, op, v->name);
  }
  hct__manifest_free(m);
  if (v == NULL) return hct__error(HCT_ENOENT, "op '%s': its manifest has no baseline", op);
  return 0;
}
