/*
 * kernel.c: libhctune loads and launches what hctune chose.
 *
 * hct_kernel_load() asks the daemon, for every T of the range, which
 * variant to run (hct_choose) and, once per distinct variant and point, for
 * its binary and launch plan (hct_module); it loads each binary into the
 * caller's CUDA context, allocates the scratch the plan names and zeroes
 * what must start zeroed.  An answer holds for a range of T (the
 * decision's), so a prefill kernel over T = 16..32768 asks once per
 * decision, not once per T; the kernel keeps the answers as spans of T.
 * Over a range of at most HCT_MAX_TOKENS_PER_KERNEL counts it evaluates
 * each T's launches once, so that hct_kernel_launch() only enqueues; over a
 * larger one a launch evaluates its T's plan on the stack (expressions, no
 * allocation), which costs microseconds against kernels of tens of them.  Whatever the daemon cannot give (no
 * daemon, a timeout, an answer without a binary, HCTUNE_FORCE) is compiled
 * here from the templates with NVRTC: the baseline by default, or the
 * forced or pinned variant.
 *
 * The plan is the manifest's own representation (hct_launch_t,
 * hct_scratch_t and hct_tmap_spec_t of jit/jit.h): from the daemon's
 * module reply when it carries one, else from the op's manifest read here;
 * jit/plan.c evaluates it for each T, as it does for the tuner, and this
 * file binds the result to the card (functions, scratch, tensor maps).  Tensor maps over scratch are encoded
 * once at load, those over the engine's buffers at each launch (from the
 * addresses it passes; a capture records their bytes).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client.h"

/* Distinct answers (variant and point) one kernel holds. */
#define MAX_IMPLS 16

/* One variant at one point, loaded: serves the T values whose answer it
 * is. */
typedef struct impl_s {
  hct_choice_t asked;               /* the answer as given, for dedupe */
  hct_choice_t choice;              /* what runs (the point resolved) */
  int local;                        /* compiled by this library */
  char why[256];                    /* why it was compiled here */
  hct_launch_t launches[HCT_MAX_LAUNCHES];
  int n_launches;
  hct_scratch_t scratch[HCT_MAX_SCRATCH];
  int n_scratch;
  hct_tmap_spec_t tmaps[HCT_MAX_TMAPS];
  int n_tmaps;
  hct_symtab_t syms;                /* constants, point, card; T per use */
  char sym_names[64][32];           /* syms' names: the manifest or reply they
                                       came from is freed after the load */
  void *module;
  void *fn[HCT_MAX_LAUNCHES];
  uint64_t scratch_ptr[HCT_MAX_SCRATCH];
  size_t scratch_bytes[HCT_MAX_SCRATCH];
} impl_t;

/* Distinct runs of T with one answer each that one kernel holds. */
#define MAX_SPANS 256

/* T in [tlo, thi] runs impl. */
typedef struct span_s {
  int tlo, thi, impl;
} span_t;

/* What one T runs: its impl, and the impl's plan evaluated for T
 * (jit/plan.c) and bound to its functions and scratch. */
typedef struct at_s {
  int impl;
  hct_plan_t plan;
  hct_ebound_t bound;
} at_t;

struct hct_kernel_s {
  char op[32];
  int tmin, tmax;
  hct_ecard_t card;
  hct_buffer_t buffers[HCT_MAX_BUFFERS];
  int n_buffers;
  impl_t impls[MAX_IMPLS];
  int n_impls;
  span_t spans[MAX_SPANS];          /* ascending, covering tmin..tmax */
  int n_spans;
  at_t *at;                         /* per T when the range is at most
                                       HCT_MAX_TOKENS_PER_KERNEL counts; else
                                       NULL: evaluated at each launch */
};

/* The impl that runs T (tmin <= T <= tmax). */
static int impl_of(const hct_kernel_t *k, int T) {
  int lo = 0, hi = k->n_spans - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (k->spans[mid].thi < T) lo = mid + 1;
    else hi = mid;
  }
  return k->spans[lo].impl;
}

/* Records that T runs impl, extending the last span when it is the same
 * impl and T follows it. */
static int span_add(hct_kernel_t *k, int tlo, int thi, int impl) {
  span_t *last = k->n_spans > 0 ? &k->spans[k->n_spans - 1] : NULL;
  if (last != NULL && last->impl == impl && last->thi + 1 == tlo) {
    last->thi = thi;
    return 0;
  }
  if (k->n_spans == MAX_SPANS)
    return hct__error(HCT_ERANGE, "%s: answers change more than %d times over T=%d-%d: load smaller ranges",
                      k->op, MAX_SPANS, k->tmin, k->tmax);
  k->spans[k->n_spans++] = (span_t){tlo, thi, impl};
  return 0;
}

/* ---- arguments and buffers ----------------------------------------------- */

static int check_load_args(const char *op, int tmin, int tmax, const char *parity) {
  if (op == NULL || op[0] == '\0' || strlen(op) > 31)
    return hct__error(HCT_EINVAL, "op '%s': want a name of 1 to 31 characters", op ? op : "(null)");
  if (tmin < 1 || tmax < tmin)
    return hct__error(HCT_EINVAL, "tokens %d-%d: want 1 <= tmin <= tmax", tmin, tmax);
  if (tmax > HCT_MAX_TOKENS)
    return hct__error(HCT_ERANGE, "tokens %d-%d: at most %d", tmin, tmax, HCT_MAX_TOKENS);
  if (parity != NULL && hct__parity_asked_ok(parity) < 0) return HCT_EINVAL;
  return 0;
}

/* The op's manifest from the library's kernels folder, loaded on first
 * need. */
static int local_manifest(const char *op, hct_op_t **m) {
  if (*m != NULL) return 0;
  char dir[4096];
  int rc = hct__kernels_dir(dir, sizeof dir);
  if (rc == 0) rc = hct__manifest_load(dir, op, m);
  return rc;
}

static void buffers_from_manifest(hct_kernel_t *k, const hct_op_t *m) {
  if (k->n_buffers > 0) return;
  for (int i = 0; i < m->n_buffers; i++) k->buffers[i] = m->buffers[i];
  k->n_buffers = m->n_buffers;
}

/* ---- the plan ------------------------------------------------------------- */

/* Makes the impl own its symbols' names (a symtab holds pointers). */
static void own_symbols(impl_t *im) {
  for (int i = 0; i < im->syms.n && i < 64; i++) {
    hct__strlcpy(im->sym_names[i], im->syms.syms[i].name, sizeof im->sym_names[i]);
    im->syms.syms[i].name = im->sym_names[i];
  }
}

/* The plan of variant v at pt from the manifest. */
static void plan_from_manifest(impl_t *im, const hct_op_t *m, const hct_variant_t *v,
                               const hct_point_t *pt, const hct_ecard_t *card) {
  memcpy(im->launches, v->launches, sizeof(hct_launch_t) * (size_t)v->n_launches);
  im->n_launches = v->n_launches;
  im->n_scratch = HCT_MIN(v->n_scratch, HCT_MAX_SCRATCH);
  memcpy(im->scratch, v->scratch, sizeof(hct_scratch_t) * (size_t)im->n_scratch);
  im->n_tmaps = v->n_tmaps;
  memcpy(im->tmaps, v->tmaps, sizeof(hct_tmap_spec_t) * (size_t)v->n_tmaps);
  hct__point_symtab(m, v, pt, &im->syms);
  hct__card_symbols(&im->syms, card->arch_num, card->sm_count, card->smem_optin, 32, 0);
  own_symbols(im);
}

static int copy_text(char *dst, size_t len, json_t *j, const char *what) {
  char num[32];
  const char *s = json_string_value(j);
  if (s == NULL && json_is_integer(j)) {
    snprintf(num, sizeof num, "%lld", (long long)json_integer_value(j));
    s = num;
  }
  if (s == NULL || strlen(s) >= len)
    return hct__error(HCT_EPROTO, "module plan: %s missing or longer than %zu", what, len - 1);
  hct__strlcpy(dst, s, len);
  return 0;
}

static const struct {
  const char *name;
  hct_zero_t zero;
} zero_names[] = {{"never", HCT_ZERO_NEVER}, {"each_run", HCT_ZERO_EACH_RUN}, {"once", HCT_ZERO_ONCE}};

static const struct {
  const char *name;
  hct_buf_role_t role;
} role_names[] = {{"input", HCT_BUF_INPUT},   {"weight", HCT_BUF_WEIGHT},
                  {"output", HCT_BUF_OUTPUT}, {"inout", HCT_BUF_INOUT},
                  {"optional", HCT_BUF_OPTIONAL}};

static const struct {
  const char *name;
  hct_dtype_t dtype;
} dtype_names[] = {{"f32", HCT_DT_F32}, {"bf16", HCT_DT_BF16}, {"f16", HCT_DT_F16},
                   {"u32", HCT_DT_U32}, {"i32", HCT_DT_I32}};

const char *hct__dtype_name(hct_dtype_t t);
const char *hct__dtype_name(hct_dtype_t t) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(dtype_names); i++)
    if (dtype_names[i].dtype == t) return dtype_names[i].name;
  return "?";
}

/* The reply's buffers, once per kernel (every impl of an op has the same). */
static int reply_buffers(hct_kernel_t *k, json_t *bufs) {
  int rc = 0;
  if (k->n_buffers != 0) return 0;
  for (size_t i = 0; rc == 0 && i < json_array_size(bufs); i++) {
    json_t *b = json_array_get(bufs, i);
    hct_buffer_t *kb = &k->buffers[i];
    char role[16] = "", dtype[8] = "";
    rc = copy_text(kb->name, sizeof kb->name, json_object_get(b, "name"), "buffer name");
    if (rc == 0) rc = copy_text(kb->elems, sizeof kb->elems, json_object_get(b, "elems"), "buffer elems");
    if (rc == 0) rc = copy_text(role, sizeof role, json_object_get(b, "role"), "buffer role");
    if (rc == 0) rc = copy_text(dtype, sizeof dtype, json_object_get(b, "dtype"), "buffer dtype");
    int found = 0;
    for (size_t r = 0; rc == 0 && r < HCT_ARRAY_SIZE(role_names); r++)
      if (strcmp(role, role_names[r].name) == 0) kb->role = role_names[r].role, found |= 1;
    for (size_t d = 0; rc == 0 && d < HCT_ARRAY_SIZE(dtype_names); d++)
      if (strcmp(dtype, dtype_names[d].name) == 0) kb->dtype = dtype_names[d].dtype, found |= 2;
    if (rc == 0 && found != 3)
      rc = hct__error(HCT_EPROTO, "module plan: buffer '%s' has role '%s', dtype '%s'", kb->name,
                      role, dtype);
  }
  if (rc < 0) return rc;
  k->n_buffers = (int)json_array_size(bufs);
  return 0;
}

/* The reply's scratch buffers: name, size expression, zero rule. */
static int reply_scratch(impl_t *im, json_t *scr) {
  int rc = 0;
  im->n_scratch = (int)json_array_size(scr);
  for (int i = 0; rc == 0 && i < im->n_scratch; i++) {
    json_t *s = json_array_get(scr, (size_t)i);
    hct_scratch_t *ks = &im->scratch[i];
    char zero[16] = "never";
    rc = copy_text(ks->name, sizeof ks->name, json_object_get(s, "name"), "scratch name");
    if (rc == 0) rc = copy_text(ks->bytes, sizeof ks->bytes, json_object_get(s, "bytes_expr"), "scratch bytes");
    if (rc == 0 && json_object_get(s, "zero") != NULL)
      rc = copy_text(zero, sizeof zero, json_object_get(s, "zero"), "scratch zero");
    int found = 0;
    for (size_t z = 0; rc == 0 && z < HCT_ARRAY_SIZE(zero_names); z++)
      if (strcmp(zero, zero_names[z].name) == 0) ks->zero = zero_names[z].zero, found = 1;
    if (rc == 0 && !found) rc = hct__error(HCT_EPROTO, "module plan: scratch zero '%s'", zero);
  }
  return rc;
}

/* The reply's tensor maps (none from a daemon older than them). */
static int reply_tmaps(impl_t *im, json_t *tms) {
  int rc = 0;
  im->n_tmaps = 0;
  if (tms != NULL && (!json_is_array(tms) || json_array_size(tms) > HCT_MAX_TMAPS))
    rc = hct__error(HCT_EPROTO, "module plan: tensor_maps not an array of at most %d",
                    HCT_MAX_TMAPS);
  for (size_t i = 0; rc == 0 && tms != NULL && i < json_array_size(tms); i++) {
    json_t *t = json_array_get(tms, i);
    hct_tmap_spec_t *kt = &im->tmaps[im->n_tmaps++];
    memset(kt, 0, sizeof *kt);
    char dtype[8] = "";
    json_t *dims = json_object_get(t, "dims"), *box = json_object_get(t, "box"),
           *sw = json_object_get(t, "swizzle");
    rc = copy_text(kt->name, sizeof kt->name, json_object_get(t, "name"), "tensor map name");
    if (rc == 0) rc = copy_text(kt->target, sizeof kt->target, json_object_get(t, "buffer"), "tensor map buffer");
    if (rc == 0) rc = copy_text(dtype, sizeof dtype, json_object_get(t, "dtype"), "tensor map dtype");
    int found = 0;
    for (size_t d = 0; rc == 0 && d < HCT_ARRAY_SIZE(dtype_names); d++)
      if (strcmp(dtype, dtype_names[d].name) == 0) kt->dtype = dtype_names[d].dtype, found = 1;
    if (rc == 0 && (!found || !json_is_array(dims) || !json_is_array(box) ||
                    json_array_size(dims) < 1 || json_array_size(dims) > HCT_TMAP_MAX_RANK ||
                    json_array_size(box) != json_array_size(dims) || !json_is_integer(sw)))
      rc = hct__error(HCT_EPROTO, "module plan: tensor map '%s' has dtype '%s' and bad dims, box or "
                                  "swizzle", kt->name, dtype);
    kt->rank = rc == 0 ? (int)json_array_size(dims) : 0;
    kt->swizzle = rc == 0 ? (int)json_integer_value(sw) : 0;
    for (int d = 0; rc == 0 && d < kt->rank; d++) {
      rc = copy_text(kt->dims[d], sizeof kt->dims[d], json_array_get(dims, (size_t)d), "tensor map dims");
      if (rc == 0) rc = copy_text(kt->box[d], sizeof kt->box[d], json_array_get(box, (size_t)d), "tensor map box");
    }
  }
  return rc;
}

/* The reply's launches, their arguments read as the manifest's are. */
static int reply_launches(impl_t *im, json_t *ls) {
  int rc = 0;
  im->n_launches = (int)json_array_size(ls);
  for (int i = 0; rc == 0 && i < im->n_launches; i++) {
    json_t *l = json_array_get(ls, (size_t)i);
    hct_launch_t *kl = &im->launches[i];
    memset(kl, 0, sizeof *kl);
    json_t *ge = json_object_get(l, "grid_expr"), *be = json_object_get(l, "block_expr"),
           *args = json_object_get(l, "args");
    rc = copy_text(kl->entry, sizeof kl->entry, json_object_get(l, "entry"), "launch entry");
    for (int d = 0; rc == 0 && d < 3; d++) {
      rc = copy_text(kl->grid[d], sizeof kl->grid[d], json_array_get(ge, (size_t)d), "grid_expr");
      if (rc == 0)
        rc = copy_text(kl->block[d], sizeof kl->block[d], json_array_get(be, (size_t)d), "block_expr");
    }
    if (rc == 0) rc = copy_text(kl->smem, sizeof kl->smem, json_object_get(l, "smem_expr"), "smem_expr");
    if (rc == 0) {
      json_t *p = json_object_get(l, "pdl_expr");
      if (p == NULL) hct__strlcpy(kl->pdl, "0", sizeof kl->pdl);
      else rc = copy_text(kl->pdl, sizeof kl->pdl, p, "pdl_expr");
    }
    if (rc == 0 && (!json_is_array(args) || json_array_size(args) > HCT_MAX_ARGS))
      rc = hct__error(HCT_EPROTO, "module plan: launch '%s' has no argument list", kl->entry);
    for (size_t a = 0; rc == 0 && a < json_array_size(args); a++) {
      rc = copy_text(kl->args[a].text, sizeof kl->args[a].text, json_array_get(args, a), "argument");
      int tm = rc == 0 ? hct__tmap_arg(im->tmaps, im->n_tmaps, kl->args[a].text) : 0;
      if (tm < 0)
        rc = hct__error(HCT_EPROTO, "module plan: argument '%s' of '%s' names no tensor map",
                        kl->args[a].text, kl->entry);
      kl->args[a].tmap = tm > 0 ? tm : 0;
      kl->args[a].is_pointer = tm == 0 && kl->args[a].text[0] == '@';
    }
    kl->n_args = (int)json_array_size(args);
  }
  return rc;
}

/*
 * The plan from a module reply's "entries" (docs/protocol.md): symbols,
 * buffers, scratch, tensor maps, launches with their expressions, read
 * into the manifest's own structures (evaluated by jit/plan.c like a
 * manifest's).  HCT_ENOENT when the reply has no plan (a daemon older than
 * plans): the manifest's is used.
 */
static int plan_from_reply(hct_kernel_t *k, impl_t *im, json_t *e) {
  json_t *syms = json_object_get(e, "symbols"), *bufs = json_object_get(e, "buffers"),
         *scr = json_object_get(e, "scratch"), *ls = json_object_get(e, "launches");
  if (!json_is_object(syms) || !json_is_array(bufs) || !json_is_array(scr) || !json_is_array(ls))
    return HCT_ENOENT;
  if (json_array_size(ls) > HCT_MAX_LAUNCHES || json_array_size(scr) > HCT_MAX_SCRATCH ||
      json_array_size(bufs) > HCT_MAX_BUFFERS || json_object_size(syms) > 48)
    return hct__error(HCT_EPROTO, "module plan: more launches, scratch, buffers or symbols than "
                                  "this library holds");
  memset(&im->syms, 0, sizeof im->syms);
  const char *name;
  json_t *val;
  json_object_foreach(syms, name, val) {
    if (!json_is_integer(val) || strlen(name) > 31)
      return hct__error(HCT_EPROTO, "module plan: symbol '%s' is not an integer", name);
    hct__symtab_set(&im->syms, name, json_integer_value(val));
  }
  /* The card's figures are this process's own: the context it loads into. */
  hct__card_symbols(&im->syms, k->card.arch_num, k->card.sm_count, k->card.smem_optin, 32, 0);
  own_symbols(im);
  int rc = reply_buffers(k, bufs);
  if (rc == 0) rc = reply_scratch(im, scr);
  if (rc == 0) rc = reply_tmaps(im, json_object_get(e, "tensor_maps"));
  if (rc == 0) rc = reply_launches(im, ls);
  return rc;
}

/* ---- loading an impl ---------------------------------------------------- */

/*
 * A plan with tensor maps ("@tmap(...)" arguments) needs a driver that
 * encodes them (cuTensorMapEncodeTiled, CUDA 12.0+): without one it is
 * refused here, naming the kernel, and hct_kernel_load falls back (the
 * baseline, compiled here), so an engine still runs.
 */
static int need_tmaps(const hct_launch_t *launches, int n, const char *variant) {
  for (int l = 0; l < n; l++)
    for (int a = 0; a < launches[l].n_args; a++)
      if (launches[l].args[a].tmap > 0 && !hct__ecuda_has_tmaps()) {
        char why[256];
        hct__strlcpy(why, hct_last_error(), sizeof why);
        return hct__error(HCT_EUNSUPPORTED, "variant '%s': kernel '%s' takes a tensor map ('%s'): %s",
                          variant, launches[l].entry, launches[l].args[a].text, why);
      }
  return 0;
}

/* Compiles v at pt here with NVRTC, for the card's arch. */
static int compile_here(const hct_ecard_t *card, const hct_op_t *m, const hct_variant_t *v,
                        const hct_point_t *pt, void **image, size_t *size) {
  hct_compile_job_t *job = calloc(1, sizeof *job);
  if (job == NULL) return hct__error(HCT_ENOMEM, "out of memory compiling '%s'", v->name);
  job->backend = HCT_BACKEND_CUDA;
  snprintf(job->arch, sizeof job->arch, "sm_%d", card->arch_num);
  job->op = m;
  job->variant = v;
  job->point = *pt;
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", m->dir, v->template_file);
  char *source = NULL;
  /* As jit/cache.c reads templates: a regular file under the cap, never a
   * blocking open of a FIFO put in its place after the manifest's load. */
  int rc = hct__read_regular(path, HCT_TEMPLATE_MAX, &source, NULL);
  if (rc < 0)
    rc = hct__error(HCT_ETEMPLATE, "template '%s/%s': %s", m->name, v->template_file, hct_last_error());
  else
    rc = hct__cuda_backend.compile(&hct__cuda_backend, job, source, NULL);
  free(source);
  free(job->log);
  if (rc == 0) {
    *image = job->image;
    *size = job->image_size;
  } else {
    free(job->image);
    char params[256], why[512];
    hct__point_json(v, pt, params, sizeof params);
    hct__strlcpy(why, hct_last_error(), sizeof why);
    rc = hct__error(rc, "compiling %s %s for sm_%d here: %s", v->name, params, card->arch_num, why);
  }
  free(job);
  return rc;
}

/* The variant and point of a choice in the local manifest; "{}" means the
 * variant's default point at T. */
static int local_point(const hct_op_t *m, const hct_ecard_t *card, const hct_choice_t *ch, int T,
                       const hct_variant_t **v, hct_point_t *pt) {
  *v = hct__variant_find(m, ch->variant);
  if (*v == NULL)
    return hct__error(HCT_ENOENT, "op '%s': variant '%s' is not in the manifest here", m->name,
                      ch->variant);
  /* A card below the variant's min_arch cannot run it: an error the engine
   * sees (a bit family's head has no stand-in, issue 29). */
  if (card->arch_num < (*v)->min_arch)
    return hct__error(HCT_EUNSUPPORTED, "op '%s': variant '%s' needs sm_%d, card %s is sm_%d",
                      m->name, (*v)->name, (*v)->min_arch, card->uuid, card->arch_num);
  if (ch->params[0] != '\0' && strcmp(ch->params, "{}") != 0) return hct__point_parse(*v, ch->params, pt);
  hct_symtab_t cs = {0};
  hct__card_symbols(&cs, card->arch_num, card->sm_count, card->smem_optin, 32, 0);
  return hct__point_default(m, *v, &cs, T, pt);
}

int hct__kernel_compile_here(const char *op, const hct_ecard_t *card, hct_choice_t *ch, int T,
                             void **image, size_t *size) {
  hct_op_t *m = NULL;
  const hct_variant_t *v;
  hct_point_t pt;
  int rc = local_manifest(op, &m);
  if (rc == 0) rc = local_point(m, card, ch, T, &v, &pt);
  if (rc == 0) {
    hct__point_json(v, &pt, ch->params, sizeof ch->params);
    rc = compile_here(card, m, v, &pt, image, size);
  }
  hct__manifest_free(m);
  return rc;
}

static int impl_load_local(hct_kernel_t *k, impl_t *im, hct_op_t **m, int T) {
  int rc = local_manifest(k->op, m);
  if (rc < 0) return rc;
  const hct_variant_t *v;
  hct_point_t pt;
  if ((rc = local_point(*m, &k->card, &im->choice, T, &v, &pt)) < 0) return rc;
  if ((rc = need_tmaps(v->launches, v->n_launches, v->name)) < 0) return rc;
  hct__point_json(v, &pt, im->choice.params, sizeof im->choice.params);
  if (im->choice.parity_class[0] == '\0')
    hct__strlcpy(im->choice.parity_class, hct__parity_name(v->parity), sizeof im->choice.parity_class);
  void *image = NULL;
  size_t size = 0;
  if ((rc = compile_here(&k->card, *m, v, &pt, &image, &size)) < 0) return rc;
  rc = hct__ecuda_module_load(&k->card, image, size, &im->module);
  free(image);
  if (rc < 0) return rc;
  buffers_from_manifest(k, *m);
  plan_from_manifest(im, *m, v, &pt, &k->card);
  im->local = 1;
  return 0;
}

/* How long a module request may take: a binary is larger than a choice,
 * and a cache miss compiles in the daemon. */
#define MODULE_TIMEOUT_MS 3000

/*
 * The module verb's reply for T: the image and the "entries" object.  The
 * image is scanned out of the line and decoded without jansson, which
 * would take milliseconds for a 150 KB string (docs/protocol.md); the rest
 * of the line is parsed as usual.
 */
int hct__module_fetch(hct_client_t *c, const char *op, int T, const char *device,
                      const char *parity, void **image, size_t *size, json_t **entries) {
  json_t *req = json_pack("{s:i, s:s, s:s, s:i}", "id", 1, "cmd", "module", "op", op, "tokens", T);
  if (req != NULL && device != NULL) json_object_set_new(req, "device", json_string(device));
  if (req != NULL && parity != NULL) json_object_set_new(req, "parity", json_string(parity));
  char *line = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  if (line == NULL) return hct__error(HCT_ENOMEM, "module request: out of memory");
  char *reply = NULL;
  int rc = hct__client_request(c, line, MODULE_TIMEOUT_MS, &reply, NULL, NULL);
  free(line);
  if (rc < 0) return rc;
  unsigned char *bin = NULL;
  size_t len = 0;
  static const char key[] = "\"image\":\"";
  char *v = strstr(reply, key);
  if (v != NULL) {
    v += sizeof key - 1;
    char *q = strchr(v, '"');
    rc = q != NULL ? hct__base64_decode(v, (size_t)(q - v), &bin, &len)
                   : hct__error(HCT_EPROTO, "module reply: unterminated image");
    if (rc == 0) memmove(v, q, strlen(q) + 1); /* "image":"" */
  }
  json_t *r = rc == 0 ? json_loads(reply, 0, NULL) : NULL;
  free(reply);
  if (rc == 0 && r == NULL) rc = hct__error(HCT_EPROTO, "module reply: not JSON");
  if (rc == 0 && !json_is_true(json_object_get(r, "ok"))) {
    json_t *e = json_object_get(r, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    rc = hct__error(code != NULL ? hct_err_from_name(code) : HCT_EPROTO, "daemon: %s",
                    msg != NULL ? msg : "module failed");
  }
  if (rc == 0 && (bin == NULL || !json_is_object(json_object_get(r, "entries"))))
    rc = hct__error(HCT_EPROTO, "module reply: no image or no entries");
  if (rc < 0) {
    free(bin);
    json_decref(r);
    return rc;
  }
  *entries = json_incref(json_object_get(r, "entries"));
  json_decref(r);
  *image = bin;
  *size = len;
  return 0;
}

/* The daemon's binary and plan for T; negative when it cannot give them. */
static int impl_load_daemon(hct_kernel_t *k, impl_t *im, hct_client_t *c, hct_op_t **m, int T,
                            const char *device, const char *parity) {
  void *image = NULL;
  size_t size = 0;
  json_t *e = NULL;
  int rc = hct__module_fetch(c, k->op, T, device, parity, &image, &size, &e);
  if (rc < 0) return rc;
  /* The module's answer is the one loaded (a decision may have changed
   * since the choose). */
  const char *var = json_string_value(json_object_get(e, "variant"));
  json_t *params = json_object_get(e, "params");
  if (var != NULL) hct__strlcpy(im->choice.variant, var, sizeof im->choice.variant);
  if (params != NULL) {
    char *p = json_dumps(params, JSON_COMPACT | JSON_ENCODE_ANY);
    if (p != NULL) hct__strlcpy(im->choice.params, p, sizeof im->choice.params);
    free(p);
  }
  rc = plan_from_reply(k, im, e);
  json_decref(e);
  if (rc == HCT_ENOENT) {
    /* An older daemon: the plan comes from the manifest here. */
    const hct_variant_t *v;
    hct_point_t pt;
    rc = local_manifest(k->op, m);
    if (rc == 0) rc = local_point(*m, &k->card, &im->choice, T, &v, &pt);
    if (rc == 0) {
      buffers_from_manifest(k, *m);
      plan_from_manifest(im, *m, v, &pt, &k->card);
    }
  }
  if (rc == 0) rc = need_tmaps(im->launches, im->n_launches, im->choice.variant);
  if (rc == 0) rc = hct__ecuda_module_load(&k->card, image, size, &im->module);
  free(image);
  return rc;
}

/* ---- evaluating for T ------------------------------------------------------- */

/* The plan of impl im as jit/plan.c evaluates it: the launches, scratch
 * and tensor maps the impl holds (the manifest's or the daemon's reply's),
 * the engine's buffers, the card's shared memory. */
static void impl_spec(const hct_kernel_t *k, const impl_t *im, hct_plan_spec_t *spec) {
  *spec = (hct_plan_spec_t){.label = im->choice.variant,
                            .buffers = k->buffers,
                            .n_buffers = k->n_buffers,
                            .scratch = im->scratch,
                            .n_scratch = im->n_scratch,
                            .launches = im->launches,
                            .n_launches = im->n_launches,
                            .tmaps = im->tmaps,
                            .n_tmaps = im->n_tmaps,
                            .smem_max = k->card.smem_optin};
}

/* Evaluates T's plan into *at and binds it: pure, no allocation (a launch
 * may call it).  Tensor maps are checked against a buffer's bytes at T and
 * a scratch's allocation; those over scratch are encoded now. */
static int eval_at(const hct_kernel_t *k, int T, at_t *at) {
  at->impl = impl_of(k, T);
  const impl_t *im = &k->impls[at->impl];
  hct_symtab_t s = im->syms;
  hct__symtab_set(&s, "T", T);
  hct_plan_spec_t spec;
  impl_spec(k, im, &spec);
  int rc = hct__plan_eval(&spec, &s, NULL, im->scratch_bytes, &at->plan);
  if (rc < 0) return rc;
  hct_ebound_t *b = &at->bound;
  memcpy(b->fn, im->fn, sizeof b->fn);
  memcpy(b->scratch, im->scratch_ptr, sizeof b->scratch);
  for (int l = 0; l < at->plan.n_launches; l++) {
    const hct_plan_launch_t *P = &at->plan.launches[l];
    for (int t = 0; t < P->n_tmaps; t++) {
      const hct_plan_tmap_t *m = &P->tmaps[t];
      b->built[l][t] = m->over == HCT_PLAN_SCRATCH;
      if (b->built[l][t] &&
          (rc = hct__ecuda_tensor_map(&m->dims, im->scratch_ptr[m->index], b->words[l][t])) < 0)
        return rc;
    }
  }
  return 0;
}

/* Functions (with the largest shared memory any T asks) and scratch (the
 * largest any T needs) of impl i, once its T values are known. */
static int impl_finish(hct_kernel_t *k, int i) {
  impl_t *im = &k->impls[i];
  int smax[HCT_MAX_LAUNCHES] = {0};
  hct_plan_spec_t spec;
  impl_spec(k, im, &spec);
  hct_plan_t *plan = malloc(sizeof *plan);
  int rc = plan != NULL ? 0 : hct__error(HCT_ENOMEM, "%s: out of memory", k->op);
  for (int T = k->tmin; rc == 0 && T <= k->tmax; T++) {
    if (impl_of(k, T) != i) continue;
    hct_symtab_t s = im->syms;
    hct__symtab_set(&s, "T", T);
    /* Scratch not yet allocated: its tensor maps are checked against its
     * size at T, which the allocation (the largest) holds. */
    if ((rc = hct__plan_eval(&spec, &s, NULL, NULL, plan)) < 0) break;
    for (int l = 0; l < plan->n_launches; l++)
      if ((int)plan->launches[l].smem > smax[l]) smax[l] = (int)plan->launches[l].smem;
    for (int sc = 0; sc < plan->n_scratch; sc++)
      if (plan->scratch_bytes[sc] > im->scratch_bytes[sc]) im->scratch_bytes[sc] = plan->scratch_bytes[sc];
  }
  free(plan);
  for (int l = 0; rc == 0 && l < im->n_launches; l++)
    rc = hct__ecuda_function(im->module, im->launches[l].entry, smax[l], &im->fn[l]);
  for (int sc = 0; rc == 0 && sc < im->n_scratch; sc++) {
    rc = hct__ecuda_alloc(&k->card, im->scratch_bytes[sc], &im->scratch_ptr[sc]);
    /* "once": state the kernel puts back itself (a grid barrier's count)
     * starts at zero, here, before any launch or capture. */
    if (rc == 0 && im->scratch[sc].zero == HCT_ZERO_ONCE)
      rc = hct__ecuda_zero(&k->card, im->scratch_ptr[sc], im->scratch_bytes[sc] / 4);
  }
  return rc;
}

/* ---- the public calls ------------------------------------------------------- */

static int same_answer(const hct_choice_t *a, const hct_choice_t *b) {
  return strcmp(a->variant, b->variant) == 0 && strcmp(a->params, b->params) == 0 &&
         (a->source == HCT_SOURCE_ENV) == (b->source == HCT_SOURCE_ENV);
}

/* The answer for T: HCTUNE_FORCE, else the daemon's, else the baseline. */
static int answer_for(hct_kernel_t *k, hct_client_t *c, int T, const char *device,
                      const char *parity, hct_choice_t *ch, char *why, size_t why_len) {
  char variant[64], params[256];
  int rc = hct__force_lookup(k->op, variant, sizeof variant, params, sizeof params);
  if (rc < 0) return rc;
  if (rc == 1) {
    int chk = hct__force_check(k->op, variant, params);
    if (chk == HCT_EINVAL) return chk;
    memset(ch, 0, sizeof *ch);
    hct__strlcpy(ch->variant, variant, sizeof ch->variant);
    hct__strlcpy(ch->params, params[0] ? params : "{}", sizeof ch->params);
    ch->source = HCT_SOURCE_ENV;
    snprintf(why, why_len, "forced by HCTUNE_FORCE");
    return 0;
  }
  if (c != NULL) {
    rc = hct_choose(c, k->op, T, device, parity, ch);
    /* The daemon does not know the card of the caller's context (it runs
     * where the driver does not list it): the engine still starts, on the
     * baseline in *ch, and hct_kernel_choice says why. */
    if (rc == HCT_ENODEV && device == k->card.uuid && ch->variant[0] != '\0') rc = HCT_FALLBACK;
    if (rc < 0) return rc;
    if (rc == HCT_FALLBACK) hct__strlcpy(why, hct_last_error(), why_len);
    return 0;
  }
  memset(ch, 0, sizeof *ch);
  /* T 0: the point is this card's, picked when compiled here ("{}"). */
  hct_default_t dv;
  if ((rc = hct__default_answer_here(k->op, parity, NULL, 0, &dv)) < 0) return rc;
  hct__strlcpy(ch->variant, dv.variant, sizeof ch->variant);
  hct__strlcpy(ch->parity_class, dv.cls, sizeof ch->parity_class);
  hct__strlcpy(ch->params, "{}", sizeof ch->params);
  ch->source = HCT_SOURCE_DEFAULT;
  snprintf(why, why_len, "no daemon client given");
  return 0;
}

int hct_kernel_load(hct_client_t *c, const char *op, int tmin, int tmax, const char *device,
                    const char *parity, hct_kernel_t **out) {
  if (out == NULL) return hct__error(HCT_EINVAL, "hct_kernel_load: no output");
  *out = NULL;
  int rc = check_load_args(op, tmin, tmax, parity);
  if (rc < 0) return rc;
  hct_kernel_t *k = calloc(1, sizeof *k);
  if (k == NULL) return hct__error(HCT_ENOMEM, "hct_kernel_load: out of memory");
  hct__strlcpy(k->op, op, sizeof k->op);
  k->tmin = tmin;
  k->tmax = tmax;
  if ((rc = hct__ecuda_card(&k->card)) < 0) {
    free(k);
    return rc;
  }
  const char *dev = device != NULL ? device : k->card.uuid;
  hct_op_t *m = NULL;
  int fell_back = 0;
  for (int T = tmin, next; rc == 0 && T <= tmax; T = next) {
    hct_choice_t ch;
    char why[256] = "";
    if ((rc = answer_for(k, c, T, dev, parity, &ch, why, sizeof why)) < 0) break;
    /* The answer holds up to ch.tmax (a decision's range, or every T for
     * HCTUNE_FORCE and the baseline without a daemon). */
    const int thi = ch.tmin <= T && ch.tmax >= T ? HCT_MIN(ch.tmax, tmax) : T;
    next = thi + 1;
    int found = -1;
    for (int i = 0; i < k->n_impls && found < 0; i++)
      if (same_answer(&k->impls[i].asked, &ch)) found = i;
    if (found < 0 && k->n_impls == MAX_IMPLS) {
      rc = hct__error(HCT_ERANGE, "%s: more than %d distinct answers over T=%d-%d: load smaller ranges",
                      op, MAX_IMPLS, tmin, tmax);
      break;
    }
    if (found < 0) {
      impl_t *im = &k->impls[k->n_impls];
      memset(im, 0, sizeof *im);
      im->asked = ch;
      im->choice = ch;
      int drc = -1;
      if (c != NULL && ch.source != HCT_SOURCE_ENV && why[0] == '\0') {
        drc = impl_load_daemon(k, im, c, &m, T, dev, parity);
        if (drc < 0) snprintf(why, sizeof why, "%s", hct_last_error());
        if (drc < 0 && im->module != NULL) hct__ecuda_module_unload(&k->card, im->module);
        if (drc < 0) im->module = NULL, im->choice = ch;
      }
      if (drc < 0) {
        if ((rc = impl_load_local(k, im, &m, T)) < 0) {
          /* Never leave an engine with nothing: the baseline, compiled here. */
          char first[512];
          hct__strlcpy(first, hct_last_error(), sizeof first);
          if (ch.source == HCT_SOURCE_ENV || ch.source == HCT_SOURCE_DEFAULT) {
            rc = hct__error(rc, "%s", first);
            break;
          }
          /* A bit family's default is its head (issue 29): the
           * baseline's bits are not what the engine asked for. */
          hct_default_t dv;
          memset(&im->choice, 0, sizeof im->choice);
          if (hct__default_answer_here(op, parity, NULL, 0, &dv) < 0) {
            rc = hct__error(rc, "%s", first);
            break;
          }
          hct__strlcpy(im->choice.variant, dv.variant, sizeof im->choice.variant);
          hct__strlcpy(im->choice.parity_class, dv.cls, sizeof im->choice.parity_class);
          hct__strlcpy(im->choice.params, "{}", sizeof im->choice.params);
          im->choice.source = HCT_SOURCE_DEFAULT;
          size_t wl = strlen(why);
          snprintf(why + wl, sizeof why - wl, "%s%.200s", wl ? "; " : "", first);
          if ((rc = impl_load_local(k, im, &m, T)) < 0) break;
        }
        hct__strlcpy(im->why, why, sizeof im->why);
        fell_back = 1;
      }
      found = k->n_impls++;
    }
    rc = span_add(k, T, thi, found);
  }
  for (int i = 0; rc == 0 && i < k->n_impls; i++) rc = impl_finish(k, i);
  if (rc == 0 && tmax - tmin + 1 <= HCT_MAX_TOKENS_PER_KERNEL) {
    if ((k->at = calloc((size_t)(tmax - tmin + 1), sizeof *k->at)) == NULL)
      rc = hct__error(HCT_ENOMEM, "hct_kernel_load: out of memory");
    for (int T = tmin; rc == 0 && T <= tmax; T++) rc = eval_at(k, T, &k->at[T - tmin]);
  }
  hct__manifest_free(m);
  if (rc < 0) {
    char msg[1024];
    hct__strlcpy(msg, hct_last_error(), sizeof msg);
    hct_kernel_free(k);
    return hct__error(rc, "%s", msg);
  }
  *out = k;
  return fell_back ? HCT_FALLBACK : 0;
}

int hct_kernel_launch(hct_kernel_t *k, void *stream, int tokens, const uint64_t *buffers,
                      int n_buffers) {
  if (k == NULL) return hct__error(HCT_EINVAL, "hct_kernel_launch: no kernel");
  if (tokens < k->tmin || tokens > k->tmax)
    return hct__error(HCT_ERANGE, "%s: tokens %d outside the kernel's %d-%d", k->op, tokens, k->tmin,
                      k->tmax);
  if (buffers == NULL || n_buffers != k->n_buffers)
    return hct__error(HCT_EINVAL, "%s: %d buffers given, the op has %d", k->op,
                      buffers == NULL ? 0 : n_buffers, k->n_buffers);
  for (int i = 0; i < n_buffers; i++)
    if (buffers[i] == 0 && k->buffers[i].role != HCT_BUF_OPTIONAL)
      return hct__error(HCT_EINVAL, "%s: buffer %d '%s' is null and not optional", k->op, i,
                        k->buffers[i].name);
  at_t here;
  const at_t *at = &here;
  if (k->at != NULL) at = &k->at[tokens - k->tmin];
  else {
    int rc = eval_at(k, tokens, &here);
    if (rc < 0) return rc;
  }
  return hct__ecuda_enqueue(&k->card, stream, &at->plan, &at->bound, buffers);
}

/* hct_choice_t as the function hct_kernel_choice() was built against:
 * the fields before measured_tokens (issue 30 appended it and device). */
#define CHOICE_V1_SIZE offsetof(hct_choice_t, measured_tokens)

int hct_kernel_choice_sized(const hct_kernel_t *k, int tokens, hct_choice_t *out, size_t out_size,
                            const char **why) {
  if (k == NULL || out == NULL || out_size < CHOICE_V1_SIZE)
    return hct__error(HCT_EINVAL, "hct_kernel_choice: no kernel, no output, or an output of %zu "
                      "bytes", out_size);
  if (tokens < k->tmin || tokens > k->tmax)
    return hct__error(HCT_ERANGE, "%s: tokens %d outside the kernel's %d-%d", k->op, tokens, k->tmin,
                      k->tmax);
  const impl_t *im = &k->impls[impl_of(k, tokens)];
  memcpy(out, &im->choice, out_size < sizeof im->choice ? out_size : sizeof im->choice);
  if (why != NULL) *why = im->why;
  return im->local ? HCT_FALLBACK : 0;
}

/* The entry point of programs built before hct_kernel_choice_sized, whose
 * hct_choice_t ends at `stale`: never a byte past it. */
int(hct_kernel_choice)(const hct_kernel_t *k, int tokens, hct_choice_t *out, const char **why) {
  return hct_kernel_choice_sized(k, tokens, out, CHOICE_V1_SIZE, why);
}

int hct_kernel_buffer_count(const hct_kernel_t *k) {
  return k != NULL ? k->n_buffers : hct__error(HCT_EINVAL, "hct_kernel_buffer_count: no kernel");
}

int hct_kernel_buffer(const hct_kernel_t *k, int i, int tokens, hct_buffer_info_t *out) {
  if (k == NULL || out == NULL) return hct__error(HCT_EINVAL, "hct_kernel_buffer: no kernel or output");
  if (i < 0 || i >= k->n_buffers)
    return hct__error(HCT_ERANGE, "%s: buffer %d of %d", k->op, i, k->n_buffers);
  if (tokens < k->tmin || tokens > k->tmax)
    return hct__error(HCT_ERANGE, "%s: tokens %d outside the kernel's %d-%d", k->op, tokens, k->tmin,
                      k->tmax);
  const hct_buffer_t *b = &k->buffers[i];
  memset(out, 0, sizeof *out);
  hct__strlcpy(out->name, b->name, sizeof out->name);
  hct__strlcpy(out->dtype, hct__dtype_name(b->dtype), sizeof out->dtype);
  out->optional = b->role == HCT_BUF_OPTIONAL;
  out->written = b->role == HCT_BUF_OUTPUT || b->role == HCT_BUF_INOUT;
  hct_symtab_t s = k->impls[impl_of(k, tokens)].syms;
  hct__symtab_set(&s, "T", tokens);
  int64_t n;
  int rc = hct__expr_eval(b->elems, &s, &n);
  if (rc < 0) return rc;
  out->bytes = (size_t)n * hct__dtype_size(b->dtype);
  return 0;
}

void hct_kernel_free(hct_kernel_t *k) {
  if (k == NULL) return;
  /* Nothing of the kernel may still be running when its scratch goes. */
  if (k->n_impls > 0) hct__ecuda_ctx_sync(&k->card);
  for (int i = 0; i < k->n_impls; i++) {
    impl_t *im = &k->impls[i];
    for (int s = 0; s < im->n_scratch; s++) hct__ecuda_free(&k->card, im->scratch_ptr[s]);
    hct__ecuda_module_unload(&k->card, im->module);
  }
  hct__ecuda_card_release(&k->card);
  free(k->at);
  free(k);
}
