/*
 * worker_load.c: the worker's requests that set it up: open (the card),
 * reference (an op's float64 reference) and load, unload (candidates'
 * binaries read from the DB and loaded on the card).
 *
 * Loop thread only.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker_serve.h"

/* The hostbuf pinning hooks over the worker's GPU. */
static int pin_cb(void *arg, void *p, size_t bytes) {
  return hct__gpu_host_register(((worker_t *)arg)->gpu, p, bytes);
}

static void unpin_cb(void *arg, void *p) { hct__gpu_host_unregister(((worker_t *)arg)->gpu, p); }

int hct__ws_req_open(worker_t *W, json_t *req, json_t *reply) {
  const char *spec;
  int rc = hct__ws_get_str(req, "device", 0, &spec);
  if (rc != 0) return rc;
  if (W->gpu != NULL) return hct__error(HCT_EBUSY, "a device is already open in this worker");
  if ((rc = hct__device_find(spec ? spec : "0", &W->dev)) != 0) return rc;
  if ((rc = hct__gpu_open(&W->dev, &W->gpu)) != 0) return rc;
  /* The check's output buffers pinned: its five downloads a run are
   * gigabytes at large T. */
  hct__hostbuf_pin(pin_cb, unpin_cb, W);
  json_object_set_new(reply, "uuid", json_string(W->dev.uuid));
  json_object_set_new(reply, "name", json_string(W->dev.name));
  json_object_set_new(reply, "arch", json_string(W->dev.arch));
  return 0;
}

/* The manifest of `name` under `kdir`, loaded once per worker. */
static int get_op(worker_t *W, const char *kdir, const char *name, hct_op_t **out) {
  char dir[1024];
  int rc;
  if (kdir != NULL) hct__strlcpy(dir, kdir, sizeof dir);
  else if ((rc = hct__kernels_dir(dir, sizeof dir)) != 0) return rc;
  for (int i = 0; i < W->n_ops; i++)
    if (strcmp(W->ops[i].dir, dir) == 0 && strcmp(W->ops[i].op->name, name) == 0) {
      *out = W->ops[i].op;
      return 0;
    }
  if (W->n_ops == MAX_OPS) return hct__error(HCT_ERANGE, "more than %d ops in one worker", MAX_OPS);
  if ((rc = hct__manifest_load(dir, name, out)) != 0) return rc;
  hct__strlcpy(W->ops[W->n_ops].dir, dir, sizeof W->ops[W->n_ops].dir);
  W->ops[W->n_ops++].op = *out;
  return 0;
}

/* The binary `key` from the DB at dbpath, read-only: the probe (the only
 * writer) holds the database open too.  One connection for every load:
 * each open runs a quick check of the whole file. */
static int read_binary(worker_t *W, const char *dbpath, const char *key, void **image, size_t *size) {
  int rc;
  if (W->db == NULL || strcmp(W->dbpath, dbpath) != 0) {
    hct__db_close(W->db);
    W->db = NULL;
    if ((rc = hct__db_open(dbpath, HCT_DB_READONLY | HCT_DB_NOCREATE, &W->db)) != 0) return rc;
    hct__strlcpy(W->dbpath, dbpath, sizeof W->dbpath);
  }
  int is_ptx = 0;
  char *log = NULL;
  rc = hct__db_binary_get(W->db, key, image, size, &is_ptx, &log);
  free(log);
  if (rc == HCT_ENOENT) rc = hct__error(HCT_ENOENT, "binary '%s' is not in '%s'", key, dbpath);
  return rc;
}

/* reference {kernels_dir, op, binary_key, db}: loads the op's float64
 * reference (compiled by the parent, like a candidate), which every check
 * and verify of the op runs on its inputs. */
int hct__ws_req_reference(worker_t *W, json_t *req, json_t *reply) {
  const char *kdir, *opname, *key, *dbpath;
  int rc;
  if ((rc = hct__ws_get_str(req, "kernels_dir", 0, &kdir)) != 0 || (rc = hct__ws_get_str(req, "op", 1, &opname)) != 0 ||
      (rc = hct__ws_get_str(req, "binary_key", 1, &key)) != 0 || (rc = hct__ws_get_str(req, "db", 1, &dbpath)) != 0)
    return rc;
  hct_op_t *op;
  if ((rc = get_op(W, kdir, opname, &op)) != 0) return rc;
  int slot = 0;
  while (W->ops[slot].op != op) slot++;
  if (W->ops[slot].ref_loaded) return hct__error(HCT_EEXIST, "op '%s': its reference is already loaded", opname);
  void *image = NULL;
  size_t size = 0;
  if ((rc = read_binary(W, dbpath, key, &image, &size)) != 0) return rc;
  rc = hct__reference_load(W->gpu, op, image, size, &W->ops[slot].ref);
  free(image);
  if (rc != 0) return rc;
  W->ops[slot].ref_loaded = 1;
  /* The comparison kernels compiled by the parent (issue 34: no compile
   * here, about a second a worker): loaded now, unless the host's figures
   * are asked for; one that does not load is compiled at the first check
   * as before (pcheck_ready). */
  const char *pkey = json_string_value(json_object_get(req, "pcheck_key"));
  const char *env = getenv("HCTUNE_CHECK_ON_HOST");
  if (pkey != NULL && W->pcheck_state == 0 && !(env != NULL && env[0] != '\0' && strcmp(env, "0") != 0) &&
      read_binary(W, dbpath, pkey, &image, &size) == 0) {
    if (hct__pcheck_load(W->gpu, image, size, &W->pcheck) == 0) W->pcheck_state = 1;
    free(image);
  }
  hct__error_clear();
  json_object_set_new(reply, "label", json_string(W->ops[slot].ref.label));
  return 0;
}

int hct__ws_req_load(worker_t *W, json_t *req, json_t *reply) {
  int64_t id;
  const char *kdir, *opname, *vname, *key, *dbpath;
  int rc;
  if ((rc = hct__ws_get_int(req, "cand", 1, 0, &id)) != 0 || (rc = hct__ws_get_str(req, "kernels_dir", 0, &kdir)) != 0 ||
      (rc = hct__ws_get_str(req, "op", 1, &opname)) != 0 || (rc = hct__ws_get_str(req, "variant", 1, &vname)) != 0 ||
      (rc = hct__ws_get_str(req, "binary_key", 1, &key)) != 0 || (rc = hct__ws_get_str(req, "db", 1, &dbpath)) != 0)
    return rc;
  if (hct__ws_find_cand(W, id) != NULL) return hct__error(HCT_EEXIST, "candidate %lld is already loaded", (long long)id);
  wcand_t *slot = NULL;
  for (int i = 0; i < MAX_CANDS && slot == NULL; i++)
    if (!W->cands[i].used) slot = &W->cands[i];
  if (slot == NULL) return hct__error(HCT_ERANGE, "more than %d candidates in one worker", MAX_CANDS);
  hct_op_t *op;
  if ((rc = get_op(W, kdir, opname, &op)) != 0) return rc;
  const hct_variant_t *v = hct__variant_find(op, vname);
  if (v == NULL) return hct__error(HCT_ENOENT, "op '%s' has no variant '%s'", opname, vname);
  hct_point_t pt;
  if ((rc = hct__point_from_json(v, json_object_get(req, "params"), &pt)) != 0) return rc;

  void *image = NULL;
  size_t size = 0;
  if ((rc = read_binary(W, dbpath, key, &image, &size)) != 0) return rc;
  rc = hct__run_load(W->gpu, op, v, &pt, image, size, &slot->c);
  free(image);
  if (rc != 0) return rc;
  slot->id = (int)id;
  slot->used = 1;
  json_object_set_new(reply, "label", json_string(slot->c.label));
  return 0;
}

int hct__ws_req_unload(worker_t *W, json_t *req, json_t *reply) {
  int64_t id;
  wcand_t *c;
  int rc;
  if ((rc = hct__ws_get_int(req, "cand", 1, 0, &id)) != 0 || (rc = hct__ws_need_cand(W, id, &c)) != 0) return rc;
  if (W->in.ref_id == id) hct__ws_inset_clear(W);
  hct__run_unload(W->gpu, &c->c);
  memset(c, 0, sizeof *c);
  return 0;
}
