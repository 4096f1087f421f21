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
  char parity_class[16];  /* "baseline", "bitwise", "kl" */
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
 * Which variant of `op` to run for `tokens` tokens on `device` (a card UUID
 * such as "GPU-8d1c...", a card model key "nvidia|NVIDIA H200|sm_90|132|143",
 * or NULL for the first card the daemon knows).  `parity` is "bitwise"
 * (NULL means that) or "kl".
 * Returns 0 with the daemon's answer; HCT_FALLBACK with the op's baseline
 * (source HCT_SOURCE_DEFAULT, params "{}", tokens [T, T]) when the daemon
 * is absent, dead or slower than the timeout, or when what came back is
 * not a valid answer to this request (another id, a missing or empty
 * field, an unknown class, source or error code, a token range without T):
 * hct_last_error() says which.  It never blocks longer than the timeout,
 * whatever the peer sends, and after such a failure it falls back at once
 * for a second before it tries the daemon again.  HCTUNE_FORCE="op=variant[,op=variant]" wins over
 * the daemon (0, source HCT_SOURCE_ENV, tokens [1, 1048576]).  Negative:
 * HCT_EINVAL for bad arguments or a malformed HCTUNE_FORCE; the daemon's
 * own error (a known code: HCT_ENOENT for an op it does not know, ...),
 * with the op's built-in baseline in *out when it has one; HCT_ENOENT when
 * falling back for an op without a built-in baseline.
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
 * without a daemon, HCT_ENOENT when the answer has no recorded binary (a
 * pin or the baseline: the card was not probed).
 */
int hct_module(hct_client_t *c, const char *op, int tokens, const char *device,
               const char *parity, void **image, size_t *image_size,
               char **entries);

void hct_close(hct_client_t *c);

const char *hct_source_name(hct_source_t s);

#ifdef __cplusplus
}
#endif
#endif /* HCTUNE_H */
