/*
 * answer.c: the answer policy, the one place that decides what an engine
 * is told to run: a live pin, else the card's own decision, else one of a
 * card of the same model (the fleet), else the op's baseline (for a bit
 * family, parity "bits:<head>", the decisions of that family and then
 * its head: issue 29).  A decision
 * is served only while its software key is what this host would compile
 * now (jit/softkey.c); a stale one is answered with the baseline, "stale":
 * true and the reason.  The verbs choose and module both resolve through it.  Loop thread only; it reads
 * the snapshot (daemon/index.c) and the manifests, never SQLite, except
 * module's read of the recorded binary (or its compile from the cache, for
 * a pin or the baseline), which runs on the thread pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon.h"

typedef struct choice_s {
  const char *device;            /* the card asked about, NULL when none */
  const hct_db_pin_t *pin;
  const hct_db_decision_t *dec;
  const char *body;              /* rendered reply of dec, card's own */
  size_t body_len;
  int fleet;
  const char *base;              /* default: the baseline's name, or a
                                    bit family's head (issue 29) */
  const char *base_class;        /* its class in the reply: "baseline", or
                                    the class the head competes in */
  char base_params[256];
  const char *model;             /* fleet: the model key matched */
  const char *card_model;        /* the model key of the card asked about, NULL unknown */
  char stale[256];               /* why the decision found is not served */
} choice_t;

/* The first parameter point of v whose constraints hold at T
 * (hct__point_default, the rule the library's own fallback uses too: the
 * one constraint rule, partial, so a constraint that needs the card's
 * figures, SMEM_OPTIN ..., is left undecided here). */
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

/* Whether the default for a bit family, its head h, can run on a card of
 * `arch` ("sm_80", "gfx942"; NULL or "": unknown, the engine's load will
 * say): the head's min_arch on NVIDIA, its "hip" elsewhere. */
static int head_runs(const hct_variant_t *h, const char *arch) {
  if (arch == NULL || arch[0] == '\0') return 1;
  if (strncmp(arch, "sm_", 3) == 0) return atoi(arch + 3) >= h->min_arch;
  return h->hip;
}

/* The arch field of a model key ("nvidia|NVIDIA H200|sm_90|132|143"), or
 * "" when there is none. */
static void model_arch(const char *model, char *arch, size_t len) {
  const char *p = model != NULL ? strchr(model, '|') : NULL;
  p = p != NULL ? strchr(p + 1, '|') : NULL;
  arch[0] = '\0';
  if (p != NULL) snprintf(arch, len, "%.*s", (int)strcspn(p + 1, "|"), p + 1);
}

/* The default answer when no decision serves: the baseline, or for a bit
 * family (parity "bits:<head>", issue 29) its head at its default point,
 * never the baseline, whose bits are not the family's: a card the head
 * cannot run on is an error the engine sees. */
static int resolve_default(hct_daemon_t *d, const hct_req_t *r, const hct_op_t *op, choice_t *ch,
                           const char *model) {
  const hct_variant_t *v = hct__op_parity_variant(op, r->parity);
  if (v == NULL && hct__parity_family(r->parity) != NULL) return HCT_ENOENT;
  if (v == NULL) return hct__error(HCT_EMANIFEST, "op '%s': its manifest has no baseline", r->op);
  ch->base_class = hct__parity_name(HCT_PARITY_BASELINE);
  if (v->parity != HCT_PARITY_BASELINE) {
    const hct_db_device_t *dev = ch->device != NULL ? hct__index_device(d->ix, ch->device) : NULL;
    char arch[64] = "";
    if (dev != NULL) hct__strlcpy(arch, dev->arch, sizeof arch);
    else model_arch(model, arch, sizeof arch);
    if (!head_runs(v, arch))
      return hct__error(HCT_EUNSUPPORTED,
                        "op '%s': parity '%s' is %s's bits, which card %s (%s) cannot run (min_arch "
                        "%d): no other variant has them",
                        r->op, r->parity, v->name, ch->device != NULL ? ch->device : "(none)", arch,
                        v->min_arch);
    ch->base_class = hct__parity_name(hct__variant_competes(op, v));
  }
  ch->base = v->name;
  default_params(op, v, r->tokens, ch->base_params, sizeof ch->base_params);
  return 0;
}

/*
 * The card a request answers for (issue 30): a model key as given; else
 * the card its `device` names, a whole UUID or a unique prefix resolved
 * against the cards the daemon knows (daemon/cards.c), the error reply
 * when it names none or several; no device: the daemon's default card (the
 * DB's first, else this host's first), NULL when it knows none.  A card
 * the daemon does not know named with its `model` (an engine on a card
 * never probed, that knows what it is) is taken as given: its answer is
 * its model's.
 */
static int which_card(hct_daemon_t *d, const char *asked, const char *model, choice_t *ch) {
  if (asked != NULL && strchr(asked, '|') != NULL) {
    ch->device = ch->card_model = asked;
    return 0;
  }
  const char *name = asked != NULL ? asked : hct__index_default_device(d->ix);
  if (name == NULL && d->n_cards > 0) name = d->cards[0].uuid;
  if (name == NULL) return 0;
  const hct_card_t *card;
  int rc = hct__cards_resolve(d, name, &card);
  if (rc == HCT_ENODEV && model != NULL) {
    hct__error_clear();
    ch->device = asked;
    return 0;
  }
  if (rc < 0) return rc;
  ch->device = card->uuid;
  ch->card_model = card->model[0] ? card->model : NULL;
  return 0;
}

/* Resolves a choose or module request.  "kl" may use either class: the DB
 * keeps the best bitwise and the best of all as separate decisions, so the
 * faster of the two wins.  A bit family ("bits:<head>") is looked up under
 * its own name, alone. */
static int resolve(hct_daemon_t *d, const hct_req_t *r, choice_t *ch) {
  /* Decisions of a self-test op may sit in the database (a probe of it
   * records them like any other): they are never served. */
  const hct_op_t *raw = hct__op_find(d, r->op);
  if (raw != NULL && raw->selftest) {
    hct__op_get(d, r->op); /* its message */
    return HCT_ENOENT;
  }
  hct__error_clear();
  memset(ch, 0, sizeof *ch);
  const char *bitwise = hct__parity_name(HCT_PARITY_BITWISE), *kl_name = hct__parity_name(HCT_PARITY_KL);
  int kl = strcmp(r->parity, kl_name) == 0;
  if (hct__parity_family(r->parity) != NULL) bitwise = r->parity;
  int rc = which_card(d, r->device, r->model, ch);
  if (rc < 0) return rc;
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
    if (ch->dec != NULL && hct__softkeys_stale(d, ch->dec, ch->device, ch->stale, sizeof ch->stale)) {
      ch->dec = NULL; /* the baseline, saying why */
    } else if (ch->dec != NULL) {
      ch->body = ch->dec == x ? b1 : b2;
      ch->body_len = ch->dec == x ? l1 : l2;
      return 0;
    }
  }
  const char *model = r->model != NULL ? r->model : ch->card_model;
  if (model != NULL && ch->stale[0] == '\0') {
    const hct_db_decision_t *x = hct__index_fleet(d->ix, model, r->op, bitwise, r->tokens);
    const hct_db_decision_t *y = kl ? hct__index_fleet(d->ix, model, r->op, kl_name, r->tokens) : NULL;
    ch->dec = faster(x, y);
    /* A model seen before, under a software key this host would not
     * compile now: stale, not unknown. */
    if (ch->dec != NULL && hct__softkeys_stale(d, ch->dec, ch->device, ch->stale, sizeof ch->stale))
      ch->dec = NULL;
    /* The fleet file (--fleet-db) answers only where the DB has nothing it
     * may serve: local decisions win.  Its decisions pass the same
     * software-key check. */
    if (ch->dec == NULL && d->fleet_ix != NULL) {
      x = hct__index_fleet(d->fleet_ix, model, r->op, bitwise, r->tokens);
      y = kl ? hct__index_fleet(d->fleet_ix, model, r->op, kl_name, r->tokens) : NULL;
      const hct_db_decision_t *f = faster(x, y);
      char why[sizeof ch->stale];
      if (f != NULL && !hct__softkeys_stale(d, f, ch->device, why, sizeof why)) {
        ch->dec = f;
        ch->stale[0] = '\0';
      } else if (f != NULL && ch->stale[0] == '\0') {
        hct__strlcpy(ch->stale, why, sizeof ch->stale);
      }
    }
    if (ch->dec != NULL) {
      ch->fleet = 1;
      ch->model = model;
      return 0;
    }
  }
  const hct_op_t *op = hct__op_get(d, r->op);
  if (op != NULL) return resolve_default(d, r, op, ch, model);
  /* No manifest here: no baseline is known either (the baseline is the
   * manifest's), and the client falls back to the one its own manifest
   * names. */
  if (hct__op_broken(d, r->op) != NULL)
    return hct__error(HCT_ENOENT, "op '%s': no decision, and its folder is broken: %s", r->op,
                      hct__op_broken(d, r->op));
  return hct__error(HCT_ENOENT, "op '%s': no decision and no manifest", r->op);
}

static const char *variant_class(hct_daemon_t *d, const char *op_name, const char *variant) {
  const hct_op_t *op = hct__op_get(d, op_name);
  const hct_variant_t *v = op != NULL ? hct__variant_find(op, variant) : NULL;
  hct__error_clear();
  /* The class it competes in (hct__variant_competes): what its bits
   * promise, not the class it is checked by (upmix: bitwise vs a kl one). */
  return v != NULL ? hct__parity_name(hct__variant_competes(op, v)) : "";
}

/* The model key of the card answered for, else null. */
static json_t *model_of(const choice_t *ch) {
  return ch->card_model != NULL ? json_string(ch->card_model) : json_null();
}

/* The reply object of a choice that is not a cached card decision.  Its
 * `device` is the card answered for: a fleet decision was measured on
 * another card, which `measured_on` and `model` name.  measured_tokens is
 * null where no figures come with the answer (a pin, the baseline). */
static json_t *choice_json(hct_daemon_t *d, const hct_req_t *r, const choice_t *ch) {
  if (ch->dec != NULL) {
    json_t *o = hct__decision_json(ch->dec, hct_source_name(ch->fleet ? HCT_SOURCE_FLEET : HCT_SOURCE_PROBE));
    if (o != NULL && ch->device != NULL) {
      json_object_set_new(o, "measured_on", json_string(ch->dec->keys.uuid));
      json_object_set_new(o, "device", json_string(ch->device));
    }
    return o;
  }
  if (ch->pin != NULL) {
    const hct_db_pin_t *p = ch->pin;
    char at[40] = "", until[40] = "";
    hct__iso_time(p->created_at, at, sizeof at);
    if (p->until != 0) hct__iso_time(p->until, until, sizeof until);
    return json_pack("{s:b, s:s, s:o, s:s, s:s, s:s, s:o, s:o, s:[i,i], s:n, s:{s:s, s:o, s:s}}",
                     "ok", 1, "variant", p->variant, "params", hct__params_json(p->params),
                     "class", variant_class(d, r->op, p->variant), "source",
                     hct_source_name(HCT_SOURCE_PIN), "template_hash", "", "device",
                     ch->device != NULL ? json_string(ch->device) : json_string(p->uuid),
                     "model", model_of(ch), "tokens", p->tmin, p->tmax, "measured_tokens",
                     "evidence", "pinned_at", at, "until",
                     p->until != 0 ? json_string(until) : json_null(), "pinned_for", p->uuid);
  }
  json_t *o = json_pack("{s:b, s:s, s:o, s:s, s:s, s:s, s:o, s:o, s:[i,i], s:n, s:{}}", "ok", 1,
                        "variant", ch->base, "params", hct__params_json(ch->base_params), "class",
                        ch->base_class, "source",
                        hct_source_name(HCT_SOURCE_DEFAULT), "template_hash", "", "device",
                        ch->device != NULL ? json_string(ch->device) : json_null(), "model",
                        model_of(ch), "tokens", r->tokens, r->tokens, "measured_tokens",
                        "evidence");
  if (o != NULL && ch->stale[0] != '\0') {
    json_object_set_new(o, "stale", json_true());
    json_object_set_new(o, "stale_reason", json_string(ch->stale));
  }
  return o;
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
    /* The default: the baseline, or a bit family's head (issue 29). */
    const char *what = hct__parity_family(r->parity) != NULL ? "the family's head" : "the baseline";
    if (ch->stale[0] != '\0')
      hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d, %s (the decision is stale: %s)", r->op, dev,
               ch->base, r->tokens, what, ch->stale);
    else
      hct__log(HCT_LOG_INFO, "%s on %s: %s for T=%d, %s (no decision)", r->op, dev, ch->base,
               r->tokens, what);
  }
}

int hct__req_choose(hct_conn_t *c, hct_req_t *r) {
  choice_t ch;
  int rc = resolve(c->d, r, &ch);
  if (rc < 0) return rc;
  log_first_answer(c, r, &ch);
  if (ch.body != NULL && !ch.fleet) {
    hct__reply_answer(c, r->id, ch.body, ch.body_len);
    return 0;
  }
  json_t *obj = choice_json(c->d, r, &ch);
  if (obj != NULL && c->d->stale) json_object_set_new(obj, "stale", json_true());
  hct__reply_json(c, r->id, obj);
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
 * a value needs figures of a card not known here), and v's tensor maps.  A client evaluates the
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
  /* Tensor maps (docs/manifest.md) as their expressions: the client
   * evaluates them per T and encodes them against the addresses it has. */
  json_t *tmaps = json_array();
  for (int i = 0; i < v->n_tmaps; i++) {
    const hct_tmap_spec_t *t = &v->tmaps[i];
    json_t *dims = json_array(), *box = json_array();
    for (int d = 0; d < t->rank; d++) {
      json_array_append_new(dims, json_string(t->dims[d]));
      json_array_append_new(box, json_string(t->box[d]));
    }
    json_array_append_new(tmaps, json_pack("{s:s, s:s, s:s, s:o, s:o, s:i}", "name", t->name,
                                           "buffer", t->target, "dtype", dtype_names[t->dtype],
                                           "dims", dims, "box", box, "swizzle", t->swizzle));
  }
  return json_pack("{s:o, s:o, s:o, s:o, s:o}", "symbols", sj, "buffers", bufs, "scratch", scratch,
                   "launches", arr, "tensor_maps", tmaps);
}

/* A module reply in the making: the binary is read (or, for a pin or the
 * baseline, taken from the compile cache and compiled when absent),
 * encoded and the reply rendered on the thread pool (an image is up to
 * megabytes of base64), then written by the loop thread. */
typedef struct module_job_s {
  uv_work_t work;
  hct_daemon_t *d;
  uint64_t conn_serial;
  char id[HCT_ID_TEXT];
  char what[256];        /* "module of 'hc_read' for T=3 on '...': probe v2" */
  char binary_key[40];   /* the decision's recorded binary, or "" */
  /* Without one: what to compile, copied (a reload may free the manifests
   * meanwhile). */
  hct_op_t *op;
  hct_variant_t variant;
  hct_point_t point;
  char arch[64];
  json_t *head;          /* the reply without its image */
  int rc;
  char err[1024];
  char *reply;           /* the rendered body */
  size_t reply_len;
} module_job_t;

/* The compile cache's binary of the job's variant for its arch (the key
 * hashed here, looked up in the DB's cache), compiled on this pool thread
 * when absent.  The daemon's database handle is read-only, so a new binary
 * is not stored: a probe of the card puts every candidate's, the
 * baseline's included. */
static int cached_binary(module_job_t *m, void **image, size_t *size, int *is_ptx, char *key,
                         size_t key_len) {
  hct_compile_job_t job;
  memset(&job, 0, sizeof job);
  job.backend = strncmp(m->arch, "sm_", 3) == 0 ? HCT_BACKEND_CUDA : HCT_BACKEND_HIP;
  hct__strlcpy(job.arch, m->arch, sizeof job.arch);
  job.op = m->op;
  job.variant = &m->variant;
  job.point = m->point;
  int rc = hct__compile_key(&job);
  if (rc == 0) {
    hct__strlcpy(key, job.key, key_len);
    rc = hct__snapshot_binary(m->d, job.key, image, size, is_ptx);
    if (rc == 0) return 0;
    if (rc != HCT_ENOENT) return rc;
    rc = hct__compile_one(&job);
  }
  if (rc == 0) {
    *image = job.image, *size = job.image_size, *is_ptx = job.is_ptx;
    job.image = NULL;
  }
  hct__compile_job_clear(&job);
  return rc;
}

static void module_work(uv_work_t *w) {
  module_job_t *m = w->data;
  void *image = NULL;
  size_t size = 0;
  int is_ptx = 0;
  char key[40];
  hct__error_clear();
  hct__strlcpy(key, m->binary_key, sizeof key);
  int rc = key[0] != '\0' ? hct__snapshot_binary(m->d, key, &image, &size, &is_ptx)
           : m->arch[0] != '\0'
               ? cached_binary(m, &image, &size, &is_ptx, key, sizeof key)
               : hct__error(HCT_ENOENT, "no arch known for the card (probe it first); an "
                                        "engine's library compiles it itself");
  size_t b64len = 0;
  char *b64 = NULL;
  if (rc == 0 && (b64 = hct__base64_encode(image, size, &b64len)) == NULL)
    rc = hct__error(HCT_ENOMEM, "out of memory");
  free(image);
  char *head = NULL;
  if (rc == 0) {
    json_object_set_new(m->head, "binary_key", json_string(key));
    json_object_set_new(m->head, "format", json_string(is_ptx ? "ptx" : "binary"));
    json_object_set_new(m->head, "size", json_integer((json_int_t)size));
    /* The image is spliced in as text, last: jansson takes 1-6 ms to dump
     * a 150 KB string, base64 0.1, and a reader finds it without parsing
     * (tests/test_module_transport.c, docs/protocol.md). */
    head = json_dumps(m->head, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (head == NULL) rc = hct__error(HCT_ENOMEM, "out of memory");
  }
  size_t hlen = head != NULL ? strlen(head) : 0;
  char *body = rc == 0 && hlen > 1 ? malloc(hlen + b64len + 16) : NULL;
  if (rc == 0 && body == NULL) rc = hct__error(HCT_ENOMEM, "out of memory");
  if (rc < 0) {
    m->rc = hct__error_prefixed(rc, m->what);
    hct__strlcpy(m->err, hct_last_error(), sizeof m->err);
  } else {
    size_t n = hlen - 1; /* without the closing brace */
    memcpy(body, head, n);
    memcpy(body + n, ",\"image\":\"", 10);
    memcpy(body + n + 10, b64, b64len);
    memcpy(body + n + 10 + b64len, "\"}", 3);
    m->reply = body;
    m->reply_len = n + 10 + b64len + 2;
  }
  free(head);
  free(b64);
}

static void module_done(uv_work_t *w, int status) {
  module_job_t *m = w->data;
  hct_conn_t *c = hct__conn_by_serial(m->d, m->conn_serial);
  if (c != NULL) {
    if (m->reply != NULL) hct__reply_answer(c, m->id, m->reply, m->reply_len);
    else hct__reply_error(c, m->id, m->rc < 0 ? m->rc : HCT_EIO, m->err[0] ? m->err : "module failed");
    hct__conn_resume(c);
  }
  json_decref(m->head);
  free(m->op);
  free(m->reply);
  free(m);
}

/* The module of the answer for the request: resolved and planned here, on
 * the loop thread (the snapshot and the manifests live here); the binary
 * read or compiled and the reply rendered on the pool. */
int hct__req_module(hct_conn_t *c, hct_req_t *r) {
  hct_daemon_t *d = c->d;
  choice_t ch;
  int rc = resolve(d, r, &ch);
  if (rc < 0) return rc;
  const char *variant = ch.dec != NULL ? ch.dec->variant : ch.pin != NULL ? ch.pin->variant : ch.base;
  const char *params = ch.dec != NULL ? ch.dec->params : ch.pin != NULL ? ch.pin->params : ch.base_params;
  const char *source = hct_source_name(ch.dec != NULL ? (ch.fleet ? HCT_SOURCE_FLEET : HCT_SOURCE_PROBE)
                                       : ch.pin != NULL ? HCT_SOURCE_PIN : HCT_SOURCE_DEFAULT);
  module_job_t *m = calloc(1, sizeof *m);
  if (m == NULL) return hct__error(HCT_ENOMEM, "module of '%s': out of memory", r->op);
  snprintf(m->what, sizeof m->what, "module of '%s' for T=%d on '%s': %s %s", r->op, r->tokens,
           ch.device != NULL ? ch.device : "(no card)", source, variant);
  const hct_op_t *op = hct__op_get(d, r->op);
  const hct_variant_t *v = op != NULL ? hct__variant_find(op, variant) : NULL;
  if (v == NULL) {
    rc = hct__error(HCT_ENOENT, "%s: no manifest here has that variant", m->what);
    free(m);
    return rc;
  }
  hct__error_clear();
  if (hct__point_parse(v, params, &m->point) < 0) {
    rc = hct__error_prefixed(HCT_EINVAL, m->what);
    free(m);
    return rc;
  }
  const hct_db_device_t *dev = ch.device != NULL ? hct__index_device(d->ix, ch.device) : NULL;
  json_t *plan = plan_json(op, v, &m->point, dev, r->tokens);
  const char *cls = ch.dec != NULL ? ch.dec->variant_class : hct__parity_name(hct__variant_competes(op, v));
  if (plan != NULL) {
    /* "entries": what a client loads with: the answer and its plan. */
    json_object_set_new(plan, "variant", json_string(variant));
    json_object_set_new(plan, "params", hct__params_json(params));
    json_object_set_new(plan, "tokens", json_integer(r->tokens));
    json_object_set_new(plan, "class", json_string(cls));
    json_object_set_new(plan, "source", json_string(source));
  }
  m->head = json_pack("{s:b, s:s, s:o, s:s, s:s, s:o, s:o}", "ok", 1, "variant", variant,
                      "params", hct__params_json(params), "class", cls, "source", source,
                      "device", ch.device != NULL ? json_string(ch.device) : json_null(),
                      "entries", plan != NULL ? plan : json_null());
  if (m->head != NULL && ch.dec != NULL)
    json_object_set_new(m->head, "model", json_string(ch.dec->keys.model_key));
  if (ch.dec != NULL && ch.dec->binary_key[0] != '\0') {
    hct__strlcpy(m->binary_key, ch.dec->binary_key, sizeof m->binary_key);
  } else if (dev != NULL && dev->arch[0] != '\0') {
    m->op = malloc(sizeof *m->op);
    if (m->op != NULL) *m->op = *op;
    m->variant = *v;
    hct__strlcpy(m->arch, dev->arch, sizeof m->arch);
  }
  if (m->head == NULL || (m->arch[0] != '\0' && m->op == NULL)) {
    json_decref(m->head);
    free(m->op);
    free(m);
    return hct__error(HCT_ENOMEM, "module of '%s': out of memory", r->op);
  }
  m->d = d;
  m->conn_serial = c->serial;
  memcpy(m->id, r->id, sizeof m->id);
  m->work.data = m;
  if ((rc = uv_queue_work(&d->loop, &m->work, module_work, module_done)) < 0) {
    json_decref(m->head);
    free(m->op);
    free(m);
    return hct__error(HCT_EIO, "module of '%s': cannot queue the read: %s", r->op, uv_strerror(rc));
  }
  /* Its later requests wait, so that replies keep their order. */
  c->busy = 1;
  return 0;
}
