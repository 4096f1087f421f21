/*
 * client.h: the private header of libhctune, the library engines link:
 * the client (client/client.c), the engine's side of the CUDA driver
 * (client/cuda.c), HCTUNE_FORCE with parameters (client/force.c), and the
 * loaded kernel (client/kernel.c).  It sits on common/ and jit/ only,
 * never on daemon/, and nothing under daemon/ includes it.  Engines see
 * only include/hctune.h.
 */
#ifndef HCT_CLIENT_H
#define HCT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common.h"
#include "jit.h"

/* ---- the client (client/client.c) --------------------------------------- */

/* What the library serves without a daemon's decision (client/baseline.c),
 * from the op's manifest under the library's kernels folder: `variant`
 * when not NULL, else for `parity` the variant of class baseline, or for a
 * bit family "bits:<head>" (issue 29) the head.  Its class (the one it
 * competes in: "baseline" for the baseline) and its first point whose
 * constraints hold at T without card figures (hct__point_default, the
 * daemon's rule; "{}" when none does or T is 0).  HCT_ENOENT with the
 * reason when there is none (no manifest for the op, no kernels folder, no
 * such variant or family). */
typedef struct hct_default_s {
  char variant[64];
  char cls[16];
  char params[256];
} hct_default_t;
int hct__default_answer_here(const char *op, const char *parity, const char *variant, int tokens,
                             hct_default_t *out);

/* Sends one raw request line (no newline) and returns the first reply line
 * that is not a progress line (malloc'd), waiting at most timeout_ms;
 * progress lines before it go to `progress` (may be NULL).  For `hctune
 * query --raw`. */
int hct__client_request(hct_client_t *c, const char *line, int timeout_ms, char **reply,
                        void (*progress)(const char *line, void *ctx), void *ctx);

/* The same, read as JSON: 0 with *reply (a json_t *, the caller's) when it
 * says "ok": true; the daemon's error code when "ok": false (a known code,
 * the message set; *reply still given); HCT_EPROTO when the reply is not
 * an answer to the line (another id, no "ok", an unknown code).  *text (may
 * be NULL) gets the reply line as it came (malloc'd).  For the commands
 * that talk to the daemon (query --raw, pin, unpin, status). */
int hct__client_ask(hct_client_t *c, const char *line, int timeout_ms, char **text,
                    json_t **reply, void (*progress)(const char *line, void *ctx), void *ctx);

/* The card `device` names, for the commands: a model key or "*" as given;
 * else a UUID or the start of one (the short form `hctune list` prints),
 * matched against the daemon's cards: one match gives its whole UUID, none
 * or several an error naming them.  A whole UUID the daemon does not know
 * stays as given. */
int hct__client_device(hct_client_t *c, const char *device, int timeout_ms, char *out, size_t len);

/* ---- the caller's CUDA context (client/cuda.c) -------------------- */

/* The card behind the caller's current context, as the manifests' launch
 * expressions name its figures. */
typedef struct hct_ecard_s {
  void *ctx;            /* CUcontext the kernel lives in */
  int ordinal;          /* CUdevice */
  int arch_num;         /* 90 for sm_90 */
  int sm_count;
  int64_t smem_optin;
  char uuid[64];        /* "GPU-8d1c...", the daemon's name of the card */
  int retained;         /* 1: ctx is a primary context this library retained */
} hct_ecard_t;

/* Loads libcuda.so.1 (once) and finds the caller's current context; when
 * the thread has none, retains card 0's primary context (what the CUDA
 * runtime, PyTorch and CuPy use) without making it current. */
int hct__ecuda_card(hct_ecard_t *card);
void hct__ecuda_card_release(hct_ecard_t *card);

/* Module, function, memory in card->ctx; each pushes the context when it is
 * not the current one and pops it again. */
int hct__ecuda_module_load(const hct_ecard_t *card, const void *image, size_t size, void **module);
void hct__ecuda_module_unload(const hct_ecard_t *card, void *module);
int hct__ecuda_function(void *module, const char *entry, int smem, void **fn);
int hct__ecuda_alloc(const hct_ecard_t *card, size_t bytes, uint64_t *ptr);
void hct__ecuda_free(const hct_ecard_t *card, uint64_t ptr);
/* Synchronous zero fill of `words` 32-bit words (at load time). */
int hct__ecuda_zero(const hct_ecard_t *card, uint64_t ptr, size_t words);
/* Waits for everything in the context (before freeing a kernel). */
int hct__ecuda_ctx_sync(const hct_ecard_t *card);

/* A plan (jit/plan.c) bound to this card for one T: the functions of its
 * launches, its scratch, and the tensor maps over scratch encoded at load
 * (built); a map over a buffer, whose address comes with each launch, is
 * encoded there from its dims. */
typedef struct hct_ebound_s {
  void *fn[HCT_MAX_LAUNCHES];       /* CUfunction */
  uint64_t scratch[HCT_MAX_SCRATCH];
  unsigned char built[HCT_MAX_LAUNCHES][HCT_MAX_TMAPS];
  uint64_t words[HCT_MAX_LAUNCHES][HCT_MAX_TMAPS][16]; /* unaligned: copied out */
} hct_ebound_t;

/* 1 when the driver can encode tensor maps (cuTensorMapEncodeTiled, CUDA
 * 12.0+), else 0 with the reason recorded. */
int hct__ecuda_has_tmaps(void);
/* A tensor map over base (host work: no context, no stream). */
int hct__ecuda_tensor_map(const hct_tmap_dims_t *t, uint64_t base, uint64_t out[16]);

/* Enqueues the plan on `stream` in ctx: memsets of its each-run scratch,
 * then its launches, with the engine's buffers. */
int hct__ecuda_enqueue(const hct_ecard_t *card, void *stream, const hct_plan_t *plan,
                       const hct_ebound_t *bound, const uint64_t *buffers);

/* ---- HCTUNE_FORCE (client/force.c) -------------------------------- */

/*
 * HCTUNE_FORCE="op=variant[{json params}][,op=variant...]", e.g.
 * hc_read=relay{"PDL":1,"GB":0,"G":1,"NG":4,"LT":1}.  Returns 1 with the
 * variant and params text ("" when none were given) for op, 0 when op is not
 * listed, HCT_EINVAL when the variable is malformed.
 */
int hct__force_lookup(const char *op, char *variant, size_t vlen, char *params, size_t plen);
/* Checks a forced variant and point against the op's manifest (kernels
 * folder of the library); prints the one line to stderr when refused and
 * returns HCT_EINVAL; 0 when they are the manifest's; HCT_ENOENT (nothing
 * printed) when no manifest can be read here. */
int hct__force_check(const char *op, const char *variant, const char *params);

/* ---- the library's own compile (client/kernel.c) ------------------ */

/* Compiles ch's variant at ch's point ("{}": its first point that fits the
 * card at T, written back into ch->params) for card's arch, from the
 * library's kernels folder, with NVRTC: what hct_kernel_load does without
 * a daemon.  *image is malloc'd. */
int hct__kernel_compile_here(const char *op, const hct_ecard_t *card, hct_choice_t *ch, int T,
                             void **image, size_t *size);

/* The module verb's reply for T (client/kernel.c): the image
 * (malloc'd) and the reply's "entries" (the answer and its launch plan),
 * the image scanned out of the line rather than parsed by jansson. */
int hct__module_fetch(hct_client_t *c, const char *op, int T, const char *device,
                      const char *parity, void **image, size_t *size, json_t **entries);

#endif /* HCT_CLIENT_H */
