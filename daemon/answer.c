/*
 * answer.c: the answer policy, the one place that decides what an engine
 * is told to run: a live pin, else the card's own decision, else one of a
 * card of the same model (the fleet), else the op's baseline.  The verbs
 * choose and module both resolve through it.  Loop thread only; it reads
 * the snapshot (daemon/index.c) and the manifests, never SQLite, except
 * module's read of the recorded binary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "client_kernel.h"
#include "daemon.h"

typedef struct choice_s {
  const char *device;            /* the card asked about, NULL when none */
  const hct_db_pin_t *pin;
  const hct_db_decision_t *dec;
  const char *body;              /* rendered reply of dec, card's own */
  size_t body_len;
  int fleet;
  const char *base;              /* default: the baseline's name */
  char base_params[256];
  const char *model;             /* fleet: the model key matched */
} choice_t;

/* The first parameter point of v whose constraints hold at T
 * (hct__point_default, the rule the library's own fallback uses too).
 * Constraints that need the card's figures (SMEM_OPTIN ...) cannot be told
 * here and count as holding. */
static void default_params(const hct_op_t *op, const hct_variant_t *v, int tokens, char *buf,
                           size_t len) {
  hct_point_t pt;
  hct__strlcpy(buf, "{}", len);
  if (hct__point_default(op, v, NULL, tokens, &pt) == 0) hct__point_json(v, &pt, buf, len);
  hct__error_clear();
}

static const hct_db_decision_t *faster(const hct_db_decision_t *a, const hct_db_decision_t *b) {
  if (a == NULL) return b;
  if (b == NULL) return a;
  return b->median_us > 0 && b->median_us < a->median_us ? b : a;
}

/* Resolves a choose or module request.  "kl" may use either class: the DB
 * keeps the best bitwise and the best of all as separate decisions, so the
 * faster of the two wins. */
static int resolve(hct_daemon_t *d, const hct_req_t *r, choice_t *ch) {
  /* Decisions of a self-test op may sit in the database (a probe of it
   * records them like any other): they are never served. */
  const hct_op_t *raw = hct__op_find(d, r->op);
  if (raw != NULL && raw->selftest) return hct__op_get(d, r->op) == NULL ? HCT_ENOENT : 0;
  hct__error_clear();
  memset(ch, 0, sizeof *ch);
  const char *bitwise = hct__parity_name(HCT_PARITY_BITWISE), *kl_name = hct__parity_name(HCT_PARITY_KL);
  int kl = strcmp(r->parity, kl_name) == 0;
  ch->device = r->device != NULL ? r->device : hct__index_default_device(d->ix);
  ch->pin = hct__index_pin(d->ix, ch->device, r->op, r->tokens, hct__unix_time());
  if (ch->pin != NULL) return 0;
  if (ch->device != NULL) {
    const char *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    const hct_db_decision_t *x =
        hct__index_decision(d->ix, ch->device, r->op, bitwise, r->tokens, &b1, &l1);
    const hct_db_decision_t *y =
        kl ? hct__index_decision(d->ix, ch->device, r->op, kl_name, r->tokens, &b2, &l2) : NULL;
    ch->dec = faster(x, y);
    if (ch->dec != NULL) {
      ch->body = ch->dec == x ? b1 : b2;
      ch->body_len = ch->dec == x ? l1 : l2;
      return 0;
    }
  }
  const char *model = r->model;
  if (model == NULL && ch->device != NULL) {
    const hct_db_device_t *dev = hct__index_device(d->ix, ch->device);
    if (dev != NULL) model = dev->model_key;
    else if (strchr(ch->device, '|') != NULL) model = ch->device;
  }
  if (model != NULL) {
    const hct_db_decision_t *x = hct__index_fleet(d->ix, model, r->op, bitwise, r->tokens);
    const hct_db_decision_t *y = kl ? hct__index_fleet(d->ix, model, r->op, kl_name, r->tokens) : NULL;
    ch->dec = faster(x, y);
    if (ch->dec != NULL) {
      ch->fleet = 1;
      ch->model = model;
      return 0;
    }
  }
  const hct_op_t *op = hct__op_get(d, r->op);
  if (op != NULL) {
    const hct_variant_t *v = hct__op_baseline(op);
    if (v == NULL) return hct__error(HCT_EMANIFEST, "op '%s': its manifest has no baseline", r->op);
    ch->base = v->name;
    default_params(op, v, r->tokens, ch->base_params, sizeof ch->base_params);
    return 0;
  }
  /* No manifest here: the client's table still knows the safe answer. */
  ch->base = hct__builtin_baseline(r->op);
  if (ch->base == NULL) return hct__error(HCT_ENOENT, "op '%s': no decision and no manifest", r->op);
  hct__strlcpy(ch->base_params, "{}", sizeof ch->base_params);
  hct__error_clear();
  return 0;
}

static const char *variant_class(hct_daemon_t *d, const char *op_name, const char *variant) {
  const hct_op_t *op = hct__op_get(d, op_name);
  const hct_variant_t *v = op != NULL ? hct__variant_find(op, variant) : NULL;
  hct__error_clear();
  return v != NULL ? hct__parity_name(v->parity) : "";
}

/* The reply object of a choice that is not a cached card decision. */
static json_t *choice_json(hct_daemon_t *d, const hct_req_t *r, const choice_t *ch) {
  if (ch->dec != NULL)
    return hct__decision_json(ch->dec, hct_source_name(ch->fleet ? HCT_SOURCE_FLEET : HCT_SOURCE_PROBE));
  if (ch->pin != NULL) {
    const hct_db_pin_t *p = ch->pin;
    char at[40] = "", until[40] = "";
    hct__iso_time(p->created_at, at, sizeof at);
    if (p->until != 0) hct__iso_time(p->until, until, sizeof until);
    return json_pack("{s:b, s:s, s:o, s:s, s:s, s:s, s:s, s:[i,i], s:{s:s, s:o}}", "ok", 1,
                     "variant", p->variant, "params", hct__params_json(p->params), "class",
                     variant_class(d, r->op, p->variant), "source",
                     hct_source_name(HCT_SOURCE_PIN), "template_hash", "", "device", p->uuid,
                     "tokens", p->tmin, p->tmax, "evidence", "pinned_at", at, "until",
                     p->until != 0 ? json_string(until) : json_null());
  }
  return json_pack("{s:b, s:s, s:o, s:s, s:s, s:s, s:o, s:[i,i], s:{}}", "ok", 1, "variant",
                   ch->base, "params", hct__params_json(ch->base_params), "class",
                   hct__parity_name(HCT_PARITY_BASELINE), "source",
                   hct_source_name(HCT_SOURCE_DEFAULT), "template_hash", "", "device",
                   ch->device != NULL ? json_string(ch->device) : json_null(), "tokens",
                   r->tokens, r->tokens, "evidence");
}

/* (op, card) as one 64-bit key for the per-connection log memory: a
 * separator byte keeps ("ab","c") and ("a","bc") apart. */
static uint64_t pair_hash(const char *op, const char *dev) {
  char key[300];
  int n = snprintf(key, sizeof key, "%s\x1f%s", op, dev);
  return XXH3_64bits(key, n > 0 && (size_t)n < sizeof key ? (size_t)n : sizeof key - 1);
}

void hct__log_decision(hct_daemon_t *d, const char *op, const char *device,
                       const hct_db_decision_t *dec, const char *how) {
  const hct_db_device_t *dev = hct__index_device(d->ix, device);
  const hct_op_t *o = hct__op_get(d, op);
  const hct_variant_t *base = o != NULL ? hct__op_baseline(o) : NULL;
  hct__error_clear();
  char name[160] = "";
  if (dev != NULL && dev->name[0]) snprintf(name, sizeof name, " (%s)", dev->name);
  hct__log(HCT_LOG_INFO, "%s on %s%s: %s for T=%d-%d, %s against %s%s", op, device, name,
           dec->variant, dec->tmin, dec->tmax, dec->variant_class,
           base != NULL ? base->name : "the baseline", how);
}

static void log_first_answer(hct_conn_t *c, const hct_req_t *r, const choice_t *ch) {
  const char *dev = ch->device != NULL ? ch->device : "(no card)";
  uint64_t h = pair_hash(r->op, dev);
  for (int i = 0; i < c->n_seen; i++)
    if (c->seen[i] == h) return;
  if (c->n_seen == HCT_MAX_SEEN) return; /* a client asking about many cards: log the first */
  c->seen[c->n_seen++] = h;
  if (ch->dec != NULL) {
    char how[300] = "";
    if (ch->fleet) snprintf(how, sizeof how, ", from the fleet (%s)", ch->model);
    hct__log_decision(c->d, r->op, dev, ch->dec, how);
  } else if (ch->pin != NULL) {
    hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d-%d, pinned", r->op, dev, ch->pin->variant,
             ch->pin->tmin, ch->pin->tmax);
  } else {
    hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d, the baseline (no decision)", r->op, dev,
             ch->base, r->tokens);
  }
}

int hct__req_choose(hct_conn_t *c, hct_req_t *r) {
  choice_t ch;
  int rc = resolve(c->d, r, &ch);
  if (rc < 0) return rc;
  log_first_answer(c, r, &ch);
  if (ch.body != NULL && !ch.fleet) hct__reply_body(c, r->id, ch.body, ch.body_len);
  else hct__reply_json(c, r->id, choice_json(c->d, r, &ch));
  return 0;
}

/* ---- module -------------------------------------------------------------- */

static json_t *expr_value(const char *e, const hct_symtab_t *syms) {
  int64_t val;
  if (hct__expr_eval(e, syms, &val) < 0) {
    hct__error_clear();
    return json_null();
  }
  return json_integer(val);
}

/* The card's figures the launch expressions name (SM_COUNT, SMEM_OPTIN,
 * ARCH, WARP, HIP), from the fingerprint its probe recorded; 0 when the
 * card was never probed here. */
static int card_symbols(const hct_db_device_t *dev, hct_symtab_t *syms) {
  if (dev == NULL || dev->fingerprint_json == NULL) return 0;
  json_t *f = json_loads(dev->fingerprint_json, 0, NULL);
  if (f == NULL) return 0;
  int arch = 0, hip = strncmp(dev->arch, "sm_", 3) != 0;
  if (!hip) arch = atoi(dev->arch + 3);
  hct__card_symbols(syms, arch, (int)json_integer_value(json_object_get(f, "sm_count")),
                    json_integer_value(json_object_get(f, "smem_optin")),
                    (int)json_integer_value(json_object_get(f, "warp_size")), hip);
  json_decref(f);
  return 1;
}

static const char *const zero_names[] = {[HCT_ZERO_NEVER] = "never",
                                         [HCT_ZERO_EACH_RUN] = "each_run",
                                         [HCT_ZERO_ONCE] = "once"};
static const char *const role_names[] = {[HCT_BUF_INPUT] = "input",   [HCT_BUF_WEIGHT] = "weight",
                                         [HCT_BUF_OUTPUT] = "output", [HCT_BUF_INOUT] = "inout",
                                         [HCT_BUF_OPTIONAL] = "optional"};
static const char *const dtype_names[] = {[HCT_DT_F32] = "f32", [HCT_DT_BF16] = "bf16",
                                          [HCT_DT_F16] = "f16", [HCT_DT_U32] = "u32",
                                          [HCT_DT_I32] = "i32"};

/*
 * The launch plan of v at pt for T (docs/protocol.md, verb module): the
 * symbols the expressions use (the op's constants, the point and, when the
 * card was probed here, its figures), the op's buffers, v's scratch with
 * its zeroing, and each launch's entry, grid, block, dynamic shared
 * memory, PDL flag and arguments, as expressions and evaluated (null where
 * a value needs figures of a card not known here).  A client evaluates the
 * expressions itself for each T it serves.
 */
static json_t *plan_json(const hct_op_t *op, const hct_variant_t *v, const hct_point_t *pt,
                         const hct_db_device_t *dev, int tokens) {
  hct_symtab_t syms;
  hct__point_symtab(op, v, pt, &syms);
  json_t *sj = json_object();
  for (int i = 0; i < syms.n; i++)
    json_object_set_new(sj, syms.syms[i].name, json_integer(syms.syms[i].value));
  card_symbols(dev, &syms);
  hct__symtab_set(&syms, "T", tokens);
  json_t *bufs = json_array();
  for (int i = 0; i < op->n_buffers; i++) {
    const hct_buffer_t *b = &op->buffers[i];
    json_array_append_new(bufs, json_pack("{s:s, s:s, s:s, s:s, s:o}", "name", b->name, "dtype",
                                          dtype_names[b->dtype], "role", role_names[b->role],
                                          "elems", b->elems, "elems_value",
                                          expr_value(b->elems, &syms)));
  }
  json_t *scratch = json_array();
  for (int i = 0; i < v->n_scratch; i++) {
    const hct_scratch_t *x = &v->scratch[i];
    json_array_append_new(scratch, json_pack("{s:s, s:s, s:o, s:s}", "name", x->name,
                                             "bytes_expr", x->bytes, "bytes",
                                             expr_value(x->bytes, &syms), "zero",
                                             zero_names[x->zero]));
  }
  json_t *arr = json_array();
  for (int i = 0; i < v->n_launches; i++) {
    const hct_launch_t *l = &v->launches[i];
    json_t *g = json_array(), *b = json_array(), *ge = json_array(), *be = json_array();
    for (int k = 0; k < 3; k++) {
      json_array_append_new(g, expr_value(l->grid[k], &syms));
      json_array_append_new(b, expr_value(l->block[k], &syms));
      json_array_append_new(ge, json_string(l->grid[k]));
      json_array_append_new(be, json_string(l->block[k]));
    }
    json_t *args = json_array(), *values = json_array();
    for (int k = 0; k < l->n_args; k++) {
      json_array_append_new(args, json_string(l->args[k].text));
      json_array_append_new(values, l->args[k].is_pointer ? json_string(l->args[k].text + 1)
                                                          : expr_value(l->args[k].text, &syms));
    }
    const char *pdl = l->pdl[0] ? l->pdl : "0";
    json_array_append_new(arr, json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:s, s:o, s:o}",
                                         "entry", l->entry, "grid", g, "block", b, "smem",
                                         expr_value(l->smem, &syms), "grid_expr", ge,
                                         "block_expr", be, "smem_expr", l->smem, "pdl",
                                         expr_value(pdl, &syms), "pdl_expr", pdl, "args", args,
                                         "arg_values", values));
  }
  return json_pack("{s:o, s:o, s:o, s:o}", "symbols", sj, "buffers", bufs, "scratch", scratch,
                   "launches", arr);
}

/* The binary of an answer that has none recorded (a pin, the baseline):
 * from the compile cache for the card's arch, compiled when absent.  The
 * cache is read, not written: the daemon's database handle is read-only,
 * and a probe of the card puts every candidate's binary there, the
 * baseline's included, so a miss (an unprobed variant pinned) compiles on
 * each request, on the loop thread. */
static int cached_binary(hct_daemon_t *d, const hct_op_t *op, const hct_variant_t *v,
                         const hct_point_t *pt, const hct_db_device_t *dev, hct_compile_job_t *job) {
  memset(job, 0, sizeof *job);
  if (dev == NULL || dev->arch[0] == '\0')
    return hct__error(HCT_ENOENT, "no arch known for the card (probe it first); an engine's "
                                  "library compiles it itself");
  job->backend = strncmp(dev->arch, "sm_", 3) == 0 ? HCT_BACKEND_CUDA : HCT_BACKEND_HIP;
  hct__strlcpy(job->arch, dev->arch, sizeof job->arch);
  job->op = op;
  job->variant = v;
  job->point = *pt;
  hct_binary_store_t store;
  hct__db_binary_store(d->db, &store);
  store.put = NULL;
  int rc = hct__compile_all(job, 1, &store, NULL, NULL);
  if (rc == 0 && job->status < 0) rc = hct__error(job->status, "%s", job->error);
  if (rc < 0) hct__compile_job_clear(job);
  return rc;
}

int hct__req_module(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  choice_t ch;
  int rc = resolve(d, r, &ch);
  if (rc < 0) return rc;
  const char *variant = ch.dec != NULL ? ch.dec->variant : ch.pin != NULL ? ch.pin->variant : ch.base;
  const char *params = ch.dec != NULL ? ch.dec->params : ch.pin != NULL ? ch.pin->params : ch.base_params;
  const char *source = hct_source_name(ch.dec != NULL ? (ch.fleet ? HCT_SOURCE_FLEET : HCT_SOURCE_PROBE)
                                       : ch.pin != NULL ? HCT_SOURCE_PIN : HCT_SOURCE_DEFAULT);
  char what[256];
  snprintf(what, sizeof what, "module of '%s' for T=%d on '%s': %s %s", r->op, r->tokens,
           ch.device != NULL ? ch.device : "(no card)", source, variant);
  const hct_op_t *op = hct__op_get(d, r->op);
  const hct_variant_t *v = op != NULL ? hct__variant_find(op, variant) : NULL;
  if (v == NULL)
    return hct__error(HCT_ENOENT, "%s: no manifest here has that variant", what);
  hct__error_clear();
  hct_point_t pt;
  if (hct__point_parse(v, params, &pt) < 0) return hct__error_prefixed(HCT_EINVAL, what);
  const hct_db_device_t *dev = ch.device != NULL ? hct__index_device(d->ix, ch.device) : NULL;
  void *image = NULL;
  size_t size = 0;
  int is_ptx = 0;
  char key[40] = "";
  if (ch.dec != NULL && ch.dec->binary_key[0] != '\0') {
    char *log = NULL;
    hct__strlcpy(key, ch.dec->binary_key, sizeof key);
    rc = hct__db_binary_get(d->db, key, &image, &size, &is_ptx, &log);
    free(log);
  } else {
    hct_compile_job_t job;
    rc = cached_binary(d, op, v, &pt, dev, &job);
    if (rc == 0) {
      image = job.image, size = job.image_size, is_ptx = job.is_ptx;
      hct__strlcpy(key, job.key, sizeof key);
      job.image = NULL;
      hct__compile_job_clear(&job);
    }
  }
  if (rc < 0) return hct__error_prefixed(rc, what);
  json_t *plan = plan_json(op, v, &pt, dev, r->tokens);
  size_t b64len;
  char *b64 = hct__base64_encode(image, size, &b64len);
  free(image);
  if (b64 == NULL || plan == NULL) {
    free(b64);
    json_decref(plan);
    return hct__error(HCT_ENOMEM, "%s: out of memory", what);
  }
  const char *cls = ch.dec != NULL ? ch.dec->variant_class : hct__parity_name(v->parity);
  /* "entries": what a client loads with: the answer and its plan. */
  json_object_set_new(plan, "variant", json_string(variant));
  json_object_set_new(plan, "params", hct__params_json(params));
  json_object_set_new(plan, "tokens", json_integer(r->tokens));
  json_object_set_new(plan, "class", json_string(cls));
  json_object_set_new(plan, "source", json_string(source));
  json_t *obj = json_pack("{s:b, s:s, s:o, s:s, s:s, s:o, s:s, s:s, s:I, s:o}", "ok", 1,
                          "variant", variant, "params", hct__params_json(params), "class", cls,
                          "source", source, "device",
                          ch.device != NULL ? json_string(ch.device) : json_null(), "binary_key",
                          key, "format", is_ptx ? "ptx" : "binary", "size", (json_int_t)size,
                          "entries", plan);
  /* The image is spliced in as text, last: jansson would take 1-6 ms to
   * dump a 150 KB string on the loop thread, base64 takes 0.1
   * (tests/test_module_transport.c, docs/protocol.md). */
  char *head = obj != NULL ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(obj);
  size_t hlen = head != NULL ? strlen(head) : 0;
  char *body = hlen > 1 ? malloc(hlen + b64len + 16) : NULL;
  if (body == NULL) {
    free(head);
    free(b64);
    return hct__error(HCT_ENOMEM, "%s: out of memory", what);
  }
  size_t n = hlen - 1; /* without the closing brace */
  memcpy(body, head, n);
  memcpy(body + n, ",\"image\":\"", 10);
  memcpy(body + n + 10, b64, b64len);
  memcpy(body + n + 10 + b64len, "\"}", 3);
  hct__reply_body(c, r->id, body, n + 10 + b64len + 2);
  free(body);
  free(head);
  free(b64);
  return 0;
}
