/*
 * hctune.h: the one header an inference engine includes.
 *
 * An engine asks the hctune daemon which variant of a kernel to run for T
 * tokens on its card.  When the daemon is absent or slow, the library answers
 * with the op's safe baseline within the timeout, so an engine always starts.
 *
 * Every function returns 0 (or a non-negative count) on success and a
 * negative HCT_E* code on failure; hct_strerror() and hct_err_name() turn a
 * code into text.
 */
#ifndef HCTUNE_H
#define HCTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCT_VERSION_MAJOR 0
#define HCT_VERSION_MINOR 1
#define HCT_VERSION_PATCH 0
#define HCT_VERSION_STRING "0.1.0"

/*
 * The error list.  XX(name, message): the enum gets HCT_E<name> with a
 * negative value, hct_err_name() returns "E<name>", hct_strerror() the
 * message.  Append only: the numbers travel over the socket and into logs.
 */
#define HCT_ERRNO_MAP(XX)                                                     \
  XX(INVAL, "invalid argument")                                               \
  XX(NOMEM, "out of memory")                                                  \
  XX(IO, "input/output error")                                                \
  XX(NOENT, "not found")                                                      \
  XX(EXIST, "already exists")                                                 \
  XX(PERM, "permission denied")                                               \
  XX(RANGE, "value out of range")                                             \
  XX(NODRIVER, "gpu driver not found")                                        \
  XX(NODEV, "no gpu device found")                                            \
  XX(NOCOMPILER, "runtime compiler not found")                                \
  XX(NOSYM, "symbol missing from vendor library")                             \
  XX(UNSUPPORTED, "not supported on this device")                             \
  XX(COMPILE, "kernel compile failed")                                        \
  XX(LAUNCH, "kernel launch failed")                                          \
  XX(FAULT, "device fault")                                                   \
  XX(HANG, "kernel did not finish in time")                                   \
  XX(PARITY, "output differs from the reference")                             \
  XX(UNWRITTEN, "output element left unwritten")                              \
  XX(GPU, "gpu runtime error")                                                \
  XX(DB, "database error")                                                    \
  XX(DBCORRUPT, "database file is corrupt")                                   \
  XX(DBREADONLY, "database is read-only")                                     \
  XX(DBVERSION, "database schema is newer than this hctune")                  \
  XX(MANIFEST, "bad op manifest")                                             \
  XX(TEMPLATE, "bad kernel template")                                         \
  XX(TIMEDOUT, "timed out")                                                   \
  XX(NODAEMON, "daemon not reachable")                                        \
  XX(PROTO, "protocol error")                                                 \
  XX(TOOLONG, "request line too long")                                        \
  XX(BUSY, "resource busy")                                                   \
  XX(WORKER, "worker process failed")                                         \
  XX(INTERRUPTED, "interrupted")

typedef enum {
  HCT_OK = 0,
#define HCT__ERR_ENUM(name, msg) HCT_E##name,
  HCT__ERR_FIRST = -1000,
  HCT_ERRNO_MAP(HCT__ERR_ENUM)
#undef HCT__ERR_ENUM
  HCT__ERR_LAST
} hct_errno_t;

/* Message for a code ("invalid argument"); "unknown error" for others. */
const char *hct_strerror(int err);
/* Symbolic name for a code ("EINVAL"); "EUNKNOWN" for others. */
const char *hct_err_name(int err);
/* Code for a symbolic name, or HCT_EINVAL when the name is not known. */
int hct_err_from_name(const char *name);

/*
 * The detail of the last error set on this thread: the one-line message
 * naming the thing and the cause ("database '/x.db': file is not a
 * database").  Empty when no error was recorded.
 */
const char *hct_last_error(void);

/* ---- client library ---------------------------------------------------- */

/* hct_choose() returned the baseline because the daemon could not answer;
 * this is not negative: the answer is usable. */
#define HCT_FALLBACK 1

#define HCT_DEFAULT_TIMEOUT_MS 50

typedef struct hct_client_s hct_client_t;

typedef enum {
  HCT_SOURCE_PROBE,   /* measured on this card */
  HCT_SOURCE_FLEET,   /* measured on a card of the same model elsewhere */
  HCT_SOURCE_PIN,     /* forced by an administrator */
  HCT_SOURCE_ENV,     /* forced by HCTUNE_FORCE in this process */
  HCT_SOURCE_DEFAULT  /* the op's baseline: no decision or no daemon */
} hct_source_t;

/*
 * An answer.  The fields up to baseline_us are those of 0.1.0; the ones
 * after them were appended, so the struct only grows at its end.  A
 * program built against this header calls hct_choose_sized() (hct_choose
 * is a macro passing sizeof *out), which fills what the caller's struct
 * has room for; a program built against 0.1.0's header calls the function
 * hct_choose(), which fills the 0.1.0 fields only.
 */
typedef struct hct_choice_s {
  char variant[64];
  char params[256];       /* JSON object text, e.g. {"ROWS":4} */
  char parity_class[16];  /* "baseline", "bitwise", "kl": the chosen
                             variant's class (a bit family's head and
                             members report the class the head competes in) */
  char template_hash[40];
  hct_source_t source;
  double median_us;       /* winner's time per call, 0 when unknown */
  double baseline_us;     /* baseline's time per call, 0 when unknown */
  /* -- appended after 0.1.0 -- */
  char model[256];        /* model key of the card the answer was measured on
                             ("nvidia|NVIDIA H200|sm_90|132|143"): for a fleet
                             answer, the other card's; "" when unknown */
  int tmin, tmax;         /* the token counts this answer holds for: the engine
                             may reuse it for any T in [tmin, tmax] */
  int stale;              /* 1: the daemon could not re-read its changed DB and
                             answered from the last copy it read */
  /* -- appended after 0.1.0's second set (issue 30) -- */
  int measured_tokens;    /* the T whose figures median_us and baseline_us are
                             (a decision over T=3-6 carries one T's); 0 when
                             unknown or there are none (baseline, pin, no daemon) */
  char device[256];       /* the card the daemon answered for: the whole UUID
                             of the card `device` named (a prefix resolved),
                             the model key asked for, or the daemon's default
                             card; "" without a daemon's answer */
} hct_choice_t;

/*
 * Connects to the daemon at `path`; NULL or "" searches as the daemon's
 * default does: $HCTUNE_SOCKET when set, else $XDG_RUNTIME_DIR/hctune.sock
 * (when that variable is set) and then /run/hctune/hctune.sock, the first
 * that answers.  Waits at most
 * timeout_ms (<= 0: HCT_DEFAULT_TIMEOUT_MS); the same timeout bounds every
 * later hct_choose().  A client is always returned in *out unless out of
 * memory, even when the daemon is absent: hct_choose() then falls back.
 * Returns 0 when connected, HCT_FALLBACK when the daemon could not be
 * reached (hct_last_error() says why), HCT_ENOMEM.  A client belongs to one
 * thread at a time.
 */
int hct_connect(const char *path, int timeout_ms, hct_client_t **out);

/*
 * Which variant of `op` to run for `tokens` tokens on `device`: a card UUID
 * such as "GPU-8d1c...", or a prefix of one that names one card the daemon
 * knows (its DB's cards, its fleet's, this host's; any case, "GPU-" may be
 * left out: the rule of `hctune query --device`); a card model key
 * "nvidia|NVIDIA H200|sm_90|132|143"; or NULL for the daemon's default card
 * (its DB's first, else this host's first).  out->device names the card
 * answered for.  `parity` is "bitwise" (NULL means that: the baseline's
 * bits), "kl", or a bit family "bits:<variant>" the op's manifest declares
 * ("families"), e.g. "bits:pair_mma": only variants whose bits equal that
 * variant's, and without a decision or a daemon the family's head itself,
 * never the baseline (a card the head cannot run: HCT_EUNSUPPORTED from the
 * daemon, an error from hct_kernel_load; a family the op does not declare:
 * HCT_ENOENT).
 * Returns 0 with the daemon's answer; HCT_FALLBACK with the op's baseline
 * (a bit family's head; source HCT_SOURCE_DEFAULT, its first parameter
 * point whose constraints hold at T without card figures, as the daemon's
 * own default answer has it, tokens [T, T]) when the daemon
 * is absent, dead or slower than the timeout, or when what came back is
 * not a valid answer to this request (another id, a missing or empty
 * field, an unknown class, source or error code, a token range without T):
 * hct_last_error() says which.  It never blocks longer than the timeout,
 * whatever the peer sends, and after such a failure it falls back at once
 * for a second before it tries the daemon again.  HCTUNE_FORCE="op=variant[{params}][,...]" wins over
 * the daemon (0, source HCT_SOURCE_ENV; with params, tokens [1, 1048576];
 * without, the variant's default point at T as above, tokens [T, T]).
 * Negative: HCT_EINVAL for bad arguments or a malformed HCTUNE_FORCE; the
 * daemon's own error (a known code: HCT_ENOENT for an op it does not know,
 * HCT_ENODEV for a device that names no card it knows, HCT_EINVAL for a
 * prefix several of its cards start with; the message names them),
 * with the op's baseline in *out when the library finds the op's manifest
 * (the variant of class baseline in kernels-src/<op>/manifest.json, found
 * beside the library or by $HCTUNE_KERNELS); HCT_ENOENT when falling back
 * for an op without a manifest there.
 */
int hct_choose_sized(hct_client_t *c, const char *op, int tokens, const char *device,
                     const char *parity, hct_choice_t *out, size_t out_size);
#define hct_choose(c, op, tokens, device, parity, out) \
  hct_choose_sized((c), (op), (tokens), (device), (parity), (out), sizeof *(out))
/* The 0.1.0 entry point (the name in parentheses is the function, not the
 * macro): fills the fields up to baseline_us. */
int(hct_choose)(hct_client_t *c, const char *op, int tokens, const char *device,
                const char *parity, hct_choice_t *out);

/*
 * The compiled binary of a choice for `device`, so the engine can load it
 * with cuModuleLoadData / hipModuleLoadData.  On success *image is malloc'd
 * (free it with free()), and *entries a malloc'd JSON text describing the
 * entry points and launch geometry (docs/protocol.md, verb `module`).
 * Waits ten times the client's timeout, at least a second.  HCT_ENODAEMON
 * without a daemon; HCT_ENOENT when the daemon has no binary to give (a
 * pin or the baseline of a card it never probed: it compiles those from
 * its compile cache only for a card whose arch it knows).
 * hct_kernel_load() below does all of this and loads the result.
 */
int hct_module(hct_client_t *c, const char *op, int tokens, const char *device,
               const char *parity, void **image, size_t *image_size,
               char **entries);

void hct_close(hct_client_t *c);

const char *hct_source_name(hct_source_t s);

/* ---- loading and launching (client/kernel.c) ---------------------------
 *
 * An engine gets a loaded kernel for (op, token range, card, parity) and
 * enqueues it on its own stream; it ships no kernels of its own.
 *
 *   hct_kernel_t *k;
 *   hct_kernel_load(client, "hc_read", 1, 8, NULL, "bitwise", &k);
 *   uint64_t bufs[8] = {resid, pending, w_norm, w_down, w_up,
 *                       mixed, mixed_bf16, mixed_f16};  // manifest order
 *   hct_kernel_launch(k, stream, T, bufs, 8);
 *   ...
 *   hct_kernel_free(k);
 *
 * Where the binary comes from, for each T of the range, first that works:
 *   1. HCTUNE_FORCE names the op (op=variant or op=variant{"P":v,...}):
 *      that variant at that point (else its first point that fits the
 *      card), compiled here.  A variant or point the op's manifest does not
 *      have is refused: one line on stderr, HCT_EINVAL.
 *   2. The daemon's answer (hct_choose for the card of the caller's
 *      context) and its binary and launch plan (hct_module).
 *   3. The daemon absent, slow, or without a binary for the answer: the
 *      answer's variant compiled here with NVRTC (libnvrtc is loaded with
 *      dlopen) from the templates ($HCTUNE_KERNELS, else kernels-src beside
 *      the library's lib/ folder, else <prefix>/share/hctune/kernels-src).
 *   4. That failing too: the op's baseline compiled here.
 * hct_kernel_choice() says, per T, what runs and why.
 *
 * Context: the kernel is loaded into the CUDA context current on the
 * calling thread (the CUDA runtime's primary context under PyTorch or
 * CuPy); with none current, into card 0's primary context, which is
 * retained and released again by hct_kernel_free(), and never made current
 * behind the caller's back.  Launches push that context when another one is
 * current and pop it after.
 *
 * Ownership: the kernel owns its modules and its scratch memory (allocated
 * at load for the largest T of the range, "zero once" scratch zeroed then,
 * "zero each run" scratch zeroed by a memset enqueued before each launch).
 * The caller owns the buffers and the stream.
 *
 * Threads: load and free on any thread, one call at a time per kernel.
 * hct_kernel_launch() changes nothing in the kernel and may be called from
 * any thread, but a kernel's scratch is one: its launches must be ordered
 * on one stream (or by events), never run concurrently; load one kernel per
 * concurrent stream.  A client (hct_client_t) passed to load is used during
 * the call only.
 *
 * Launches enqueue only (memsets and cuLaunchKernelEx, with programmatic
 * stream serialisation where the plan says PDL): no allocation, no
 * synchronisation, so they can be captured into a CUDA graph.
 */

/* A kernel over at most this many token counts evaluates every T's launches
 * when it is loaded; over more (a prefill kernel over T = 16..32768, up to
 * HCT_MAX_TOKENS) each launch evaluates its own, on the stack. */
#define HCT_MAX_TOKENS_PER_KERNEL 64

typedef struct hct_kernel_s hct_kernel_t;

/*
 * Loads op for tokens tmin..tmax.  `c` may be NULL (no daemon: steps 1, 3,
 * 4 above); `device` NULL asks the daemon about the card of the caller's
 * context (its UUID), which is what an engine wants; `parity` as for
 * hct_choose (a bit family's fallback, compiled here, is its head, never
 * the baseline: a card the head cannot run fails the load).  Returns 0
 * when every T runs what the daemon served,
 * HCT_FALLBACK when some T runs a binary compiled here (hct_kernel_choice
 * says which and why; also when the daemon does not know the card of the
 * caller's context, HCT_ENODEV from hct_choose: the engine starts on the
 * baseline all the same), negative on failure (HCT_ENODRIVER, HCT_ENODEV
 * without a GPU; HCT_EINVAL for bad arguments or a refused HCTUNE_FORCE;
 * HCT_ERANGE for tmax above 1048576, hctune's ceiling on token counts;
 * HCT_ENOCOMPILER without NVRTC when a compile is needed), *out NULL then.
 */
int hct_kernel_load(hct_client_t *c, const char *op, int tmin, int tmax, const char *device,
                    const char *parity, hct_kernel_t **out);

/*
 * Enqueues the op for `tokens` on `stream` (a CUstream; NULL is the legacy
 * default stream) with the op's buffers as device pointers in the order of
 * the op's manifest (hct_kernel_buffer); 0 for an absent optional buffer
 * (hc_read's pending).  HCT_EINVAL for a wrong count or a null required
 * buffer, HCT_ERANGE for tokens outside the range, a driver error code when
 * the launch fails.
 */
int hct_kernel_launch(hct_kernel_t *k, void *stream, int tokens, const uint64_t *buffers,
                      int n_buffers);

/* What runs at `tokens`: the choice (source HCT_SOURCE_ENV when forced;
 * as much of it as the caller's struct has room for, as hct_choose_sized)
 * and, in *why (may be NULL; owned by the kernel), why it was compiled here
 * ("" when the daemon served it).  Returns 0 (served by the daemon),
 * HCT_FALLBACK (compiled here) or a negative code. */
int hct_kernel_choice_sized(const hct_kernel_t *k, int tokens, hct_choice_t *out, size_t out_size,
                            const char **why);
#define hct_kernel_choice(k, tokens, out, why) \
  hct_kernel_choice_sized((k), (tokens), (out), sizeof *(out), (why))
/* The entry point of programs built before measured_tokens and device were
 * appended (the name in parentheses is the function): fills the fields up
 * to `stale`. */
int(hct_kernel_choice)(const hct_kernel_t *k, int tokens, hct_choice_t *out, const char **why);

typedef struct hct_buffer_info_s {
  char name[32];   /* "resid" */
  char dtype[8];   /* "f32", "bf16", "f16", "u32", "i32" */
  int optional;    /* may be 0 at launch */
  int written;     /* an output (or read and written) */
  size_t bytes;    /* its size at the T asked */
} hct_buffer_info_t;

int hct_kernel_buffer_count(const hct_kernel_t *k);
/* Buffer i of the op (0 <= i < count) at `tokens`. */
int hct_kernel_buffer(const hct_kernel_t *k, int i, int tokens, hct_buffer_info_t *out);

/* Waits for the kernel's context (cuCtxSynchronize), then frees its scratch
 * and unloads its modules.  NULL is fine. */
void hct_kernel_free(hct_kernel_t *k);

#ifdef __cplusplus
}
#endif
#endif /* HCTUNE_H */
