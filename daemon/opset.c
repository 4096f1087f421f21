/*
 * opset.c: the manifests the daemon serves from, an opset: every op of the
 * kernels folder, loaded at start and on SIGHUP (an op whose folder broke
 * keeps the manifest read before, or is not served, and says why), looked
 * up by name for the verbs, and the check that a DB row's variant and
 * params are the op's.  Calls nothing else of daemon/: the snapshot, the
 * answer and the pins call down to it.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

static const hct_op_t *opset_find(const hct_opset_t *s, const char *name);

/* Records op `name` of s as broken (the error just raised) and serves the
 * manifest prev holds for it, if any. */
static int opset_broken(hct_opset_t *s, const hct_opset_t *prev, const char *name) {
  if (s->n_broken == HCT_MAX_OPS) return 0;
  hct_broken_op_t *b = &s->broken[s->n_broken++];
  hct__strlcpy(b->name, name, sizeof b->name);
  hct__strlcpy(b->why, hct_last_error(), sizeof b->why);
  hct__error_clear();
  const hct_op_t *old = opset_find(prev, name);
  if (old != NULL && s->n < HCT_MAX_OPS && hct__manifest_copy(old, &s->ops[s->n]) == 0) {
    s->n++;
    b->kept = 1;
  }
  hct__log(HCT_LOG_WARN, "%s: %s", b->why,
           b->kept ? "keeping the manifest read before" : "op not served");
  return 0;
}

int hct__opset_load(const char *kernels_dir, const hct_opset_t *prev, hct_opset_t **out) {
  hct_opset_t *s = calloc(1, sizeof *s);
  if (s == NULL) return hct__error(HCT_ENOMEM, "manifests: out of memory");
  s->refs = 1;
  if (kernels_dir[0] != '\0') {
    char names[HCT_MAX_OPS][32];
    int n = hct__manifest_list(kernels_dir, names, HCT_MAX_OPS);
    for (int i = 0; n > 0 && i < n; i++) {
      int rc = hct__manifest_load(kernels_dir, names[i], &s->ops[s->n]);
      if (rc == HCT_ENOMEM) {
        n = rc;
        break;
      }
      if (rc < 0) opset_broken(s, prev, names[i]);
      else s->n++;
    }
    if (n < 0) {
      hct__opset_unref(s);
      return n;
    }
  }
  *out = s;
  return 0;
}

json_t *hct__opset_broken_json(const hct_opset_t *s) {
  json_t *arr = json_array();
  for (int i = 0; arr != NULL && s != NULL && i < s->n_broken; i++)
    json_array_append_new(arr, json_pack("{s:s, s:s, s:b}", "op", s->broken[i].name, "why",
                                         s->broken[i].why, "kept", s->broken[i].kept));
  return arr;
}

void hct__opset_unref(hct_opset_t *s) {
  if (s == NULL || --s->refs > 0) return;
  for (int i = 0; i < s->n; i++) hct__manifest_free(s->ops[i]);
  free(s);
}

static const hct_op_t *opset_find(const hct_opset_t *s, const char *name) {
  for (int i = 0; s != NULL && i < s->n; i++)
    if (strcmp(s->ops[i]->name, name) == 0) return s->ops[i];
  return NULL;
}

const char *hct__op_broken(const hct_daemon_t *d, const char *name) {
  for (int i = 0; d->ops != NULL && i < d->ops->n_broken; i++)
    if (strcmp(d->ops->broken[i].name, name) == 0 && !d->ops->broken[i].kept)
      return d->ops->broken[i].why;
  return NULL;
}

const hct_op_t *hct__op_find(hct_daemon_t *d, const char *name) {
  const hct_op_t *op = opset_find(d->ops, name);
  if (op != NULL) return op;
  /* The engine falls back either way; the asker learns why. */
  const char *why = hct__op_broken(d, name);
  if (why != NULL) {
    hct__error(HCT_ENOENT, "op '%s' is broken, not served: %s", name, why);
    return NULL;
  }
  if (d->kernels_dir[0] == '\0') hct__error(HCT_ENOENT, "op '%s': no kernel templates folder", name);
  else hct__error(HCT_ENOENT, "op '%s': no manifest in '%s'", name, d->kernels_dir);
  return NULL;
}

const hct_op_t *hct__op_get(hct_daemon_t *d, const char *name) {
  const hct_op_t *op = hct__op_find(d, name);
  if (op != NULL && op->selftest) {
    hct__error(HCT_ENOENT, "op '%s': a self-test op, never offered to engines", name);
    return NULL;
  }
  return op;
}

/* The row check the snapshot's index is built with (daemon/daemon.h). */
int hct__opset_row_check(void *ctx, const char *op_name, const char *variant, const char *params) {
  const hct_op_t *op = opset_find(ctx, op_name);
  if (op == NULL) return 0;
  const hct_variant_t *v = hct__variant_find(op, variant);
  if (v == NULL) return hct__error(HCT_ENOENT, "op '%s' has no variant '%s'", op_name, variant);
  hct_point_t pt;
  return hct__point_parse(v, params, &pt);
}
