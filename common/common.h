/*
 * common.h: what every part of hctune shares: error values with detail,
 * logging, paths, and small helpers.  Private to hctune; engines see only
 * include/hctune.h.
 */
#ifndef HCT_COMMON_H
#define HCT_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hctune.h"

#define HCT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define HCT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HCT_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define HCT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define HCT_PRINTF(f, a)
#endif

/* ---- errors (common/error.c) -------------------------------------------- */

/*
 * Records a one-line message for this thread and returns `code`, so that
 * callers write `return hct__error(HCT_EIO, "cannot read '%s': %s", p, e);`.
 * The message is lowercase, names the thing in quotes, then the cause.
 */
int hct__error(int code, const char *fmt, ...) HCT_PRINTF(2, 3);
int hct__verror(int code, const char *fmt, va_list ap);
/* Clears this thread's message. */
void hct__error_clear(void);
/* Prints "hctune: <last error, or the code's message>" to stderr. */
void hct__error_print(const char *prog, int code);
/* Puts `prefix: ` before this thread's error message and returns `code`
 * (the daemon's handlers name the request a message was raised under). */
int hct__error_prefixed(int code, const char *prefix);

/* ---- logging (common/log.c) ----------------------------------------------*/

typedef enum { HCT_LOG_ERROR, HCT_LOG_WARN, HCT_LOG_INFO, HCT_LOG_DEBUG } hct_log_level_t;
extern int hct__log_level; /* messages above this level are dropped */
void hct__log(hct_log_level_t lvl, const char *fmt, ...) HCT_PRINTF(2, 3);

/* ---- paths and files (common/util.c) ------------------------------------ */

/* Default DB path: $HCTUNE_DB, $XDG_STATE_HOME/hctune/hctune.db, or
 * ~/.local/state/hctune/hctune.db.  Writes into buf; creates folders when
 * `create_dirs`.  Returns 0 or a negative code. */
int hct__default_db_path(char *buf, size_t len, int create_dirs);
/* mkdir -p of the folder holding `path`. */
int hct__mkdir_parents(const char *path);
/* A vendor library's result code and the HCT_E* code it means: a
 * backend's table of them, looked up by hct__code_map (`otherwise` for a
 * code the table does not list). */
typedef struct hct_code_map_s {
  int native;
  int code;
} hct_code_map_t;
int hct__code_map(const hct_code_map_t *map, size_t n, int native, int otherwise);

/* Reads a whole file into a malloc'd NUL-terminated buffer. */
int hct__read_file(const char *path, char **out, size_t *len);
/* Reads a file that must be a regular file of at most `max` bytes, never
 * blocking on what is not one: it is opened with O_NONBLOCK and looked at
 * with fstat before a byte is read, so a FIFO, a device or a symlink loop
 * is refused at once and a huge file is refused by its size.  The cause
 * is in the error ("a FIFO, not a regular file", "67108864 bytes, over the
 * limit of 4194304").  out: NULL checks the file without reading it. */
int hct__read_regular(const char *path, size_t max, char **out, size_t *len);
/* The path of the running executable (/proc/self/exe). */
int hct__exe_path(char *buf, size_t len);
/* Folders of the kernel templates: $HCTUNE_KERNELS (one folder, or a
 * colon-separated list of them, searched in order: the tests put their own
 * ops after the product's), or kernels-src beside the bin/ (lib/) folder
 * of the executable (of libhctune.so when the code runs from there), or
 * the installed share folder.  Every folder of a list must exist. */
int hct__kernels_dir(char *buf, size_t len);
/* Host name, never fails (falls back to "unknown"). */
void hct__hostname(char *buf, size_t len);
/* Monotonic time in nanoseconds / microseconds. */
uint64_t hct__now_ns(void);
/* Wall-clock time, seconds since the epoch, and as ISO-8601 UTC text. */
int64_t hct__unix_time(void);
void hct__iso_time(int64_t t, char *buf, size_t len);
/* strdup that returns NULL only on out-of-memory, and a printf to malloc. */
char *hct__strdup(const char *s);
char *hct__asprintf(const char *fmt, ...) HCT_PRINTF(1, 2);
/* Copies src into dst of size len, always NUL-terminated. */
void hct__strlcpy(char *dst, const char *src, size_t len);
/* Room for element n of a growable array *arrp of `elem`-byte elements with
 * *cap allocated (doubling, from `first`): 0, or HCT_ENOMEM with *arrp and
 * *cap unchanged.  The one way the collectors of rows grow. */
int hct__grow(void *arrp, int *cap, int n, size_t elem, int first);

/* ---- the daemon's socket (common/socket_path.c) ------------------------- */

/* The socket search, the daemon's and the client's alike: `explicit_path`
 * when not NULL/empty, else $HCTUNE_SOCKET when set, else
 * $XDG_RUNTIME_DIR/hctune.sock (when set) then /run/hctune/hctune.sock.
 * Returns the count, or HCT_ERANGE when one does not fit a sockaddr_un. */
#define HCT_MAX_SOCKETS 2
int hct__socket_paths(const char *explicit_path, char paths[][108], int max);
/* The first of the search: where the daemon binds by default. */
int hct__socket_path(const char *explicit_path, char *buf, size_t len);

/* ---- base64 (common/base64.c) ------------------------------------------- */

/* Base64 (RFC 4648, with padding): malloc'd NUL-terminated text, NULL when
 * out of memory. */
char *hct__base64_encode(const void *data, size_t len, size_t *out_len);
/* Its inverse: a malloc'd image; HCT_EPROTO naming the bad byte. */
int hct__base64_decode(const char *s, size_t n, unsigned char **out, size_t *out_len);

/* ---- token counts (common/tokens.c) -------------------------------------*/

/* The one ceiling on a token count T anywhere in hctune: requests, decisions,
 * pins, token lists. */
#define HCT_MAX_TOKENS 1048576
/* Parses "8" or "1-8" into [lo, hi] within 1..HCT_MAX_TOKENS. */
int hct__token_range(const char *s, int *lo, int *hi);
/*
 * A token set: the token counts a probe, a bench or a query covers, as a
 * sorted list.  Each count in it is checked and timed one by one, so a list
 * is short however large its counts are (the prefill op's T reaches 32,768):
 * HCT_MAX_TOKEN_LIST is the one ceiling on how many counts a list holds,
 * HCT_MAX_TOKENS the one on each count.
 */
#define HCT_MAX_TOKEN_LIST 64
typedef struct hct_tokens_s {
  int n;
  int t[HCT_MAX_TOKEN_LIST]; /* ascending, distinct, each in 1..HCT_MAX_TOKENS */
} hct_tokens_t;
/* Parses a token list "1-4,8" into *out; returns the count or a negative
 * code (the message names the bad part, and the ceiling it passed). */
int hct__parse_token_list(const char *s, hct_tokens_t *out);
/* Adds T to the set (kept sorted); HCT_ERANGE when T is out of 1..
 * HCT_MAX_TOKENS or the set is full.  Adding a present T is a no-op. */
int hct__tokens_add(hct_tokens_t *set, int T);
/* The index of T in the set, or -1. */
int hct__tokens_index(const hct_tokens_t *set, int T);

/* ---- names on the wire (common/names.c) ---------------------------------*/

/* A variant's parity class: what its output must match (jit/manifest.c reads
 * it from manifests, the DB and the daemon's replies carry its name). */
typedef enum { HCT_PARITY_BASELINE, HCT_PARITY_BITWISE, HCT_PARITY_KL } hct_parity_t;
/* "baseline", "bitwise", "kl"; "unknown" for anything else. */
const char *hct__parity_name(hct_parity_t p);
/* The class named s: 0, or HCT_EINVAL with a message naming s. */
int hct__parity_from_name(const char *s, hct_parity_t *out);
/*
 * Bit families (issue 29): an engine that needs the exact bits of one
 * variant, the family's head (a manifest's "families"), asks for parity
 * "bits:<head>", e.g. "bits:pair_mma".  Decisions of the family carry the
 * same string.  HCT_PARITY_LEN holds it with a head of up to 31
 * characters (a variant's name) and the NUL.
 */
#define HCT_PARITY_LEN 40
#define HCT_FAMILY_PREFIX "bits:"
/* The head's name in family parity s ("bits:<head>"), or NULL when s does
 * not start with the prefix; says nothing of whether the name is
 * well-formed (hct__parity_asked_ok does). */
const char *hct__parity_family(const char *s);
/* Whether s is a parity an engine may ask for, and a decision be recorded
 * for: "bitwise", "kl", or "bits:" and a variant's name (1 to 31 of
 * [A-Za-z0-9_.-]).  0, or HCT_EINVAL with one line naming s. */
int hct__parity_asked_ok(const char *s);
/* The source named s ("probe" ...; hct_source_name() is the other way):
 * 0, or HCT_EPROTO with a message naming s. */
int hct__source_from_name(const char *s, hct_source_t *out);

/* ---- child processes (common/child.c) ------------------------------------*/

/*
 * Work that may crash or hang the process doing it runs in a fresh copy of
 * this executable: hct__child_run() starts it, sends a request, reads the
 * answer, and kills it at a deadline.  A request and an answer are each a
 * list of byte strings (fields).
 *
 * A handler is registered by name, at file scope of the file that owns the
 * work, and runs in the child before main():
 *
 *   static int compile_in_child(const hct_child_msg_t *req) {
 *     ... hct__child_answer(&answer); return 0;
 *   }
 *   HCT_CHILD_HANDLER("hiprtc", compile_in_child)
 *
 * Its return value is the child's exit status (0 to 119); the child exits
 * right after, so the handler need not free anything.
 */
typedef struct hct_child_field_s {
  const char *p;
  size_t n;
} hct_child_field_t;

typedef struct hct_child_msg_s {
  hct_child_field_t *fields;
  int n;
} hct_child_msg_t;

#define HCT_CHILD_MAX_FIELDS 65536
/* The descriptor the child answers on (stdin is the request, stdout and
 * stderr go back to the parent as text). */
#define HCT_CHILD_ANSWER_FD 3

typedef int (*hct_child_handler_t)(const hct_child_msg_t *request);
void hct__child_register(const char *name, hct_child_handler_t fn);
#define HCT_CHILD_HANDLER(name, fn)                                                  \
  __attribute__((constructor(200))) static void hct__child_register_##fn(void) {     \
    hct__child_register(name, fn);                                                   \
  }

/* In the child, from a handler: writes the answer, once; 0 or -1. */
int hct__child_answer(const hct_child_msg_t *answer);

typedef enum {
  HCT_CHILD_ANSWERED,    /* exit status 0 and a well-formed answer */
  HCT_CHILD_NOT_STARTED, /* no such handler, or the spawn failed */
  HCT_CHILD_TIMED_OUT,   /* killed at the deadline */
  HCT_CHILD_IO_ERROR,    /* reading the pipes failed; killed */
  HCT_CHILD_CRASHED,     /* a signal ended it (`signal`) */
  HCT_CHILD_FAILED,      /* exited non-zero (`exit_status`) */
  HCT_CHILD_GARBLED      /* exited 0 with no answer, or one that does not parse */
} hct_child_outcome_t;

typedef struct hct_child_result_s {
  hct_child_outcome_t outcome;
  int exit_status, signal;
  hct_child_msg_t answer; /* fields point into answer_bytes */
  char *answer_bytes;
  char *output;           /* the child's stdout and stderr, NUL-terminated, the
                             first 64 KiB; NULL when it printed nothing */
  size_t output_len;
  double ms;              /* from the spawn to the child's end */
} hct_child_result_t;

/*
 * Runs `handler` in a fresh copy of this executable (hct__exe_path) with
 * `request`, waiting at most timeout_ms.  0 when it answered; otherwise a
 * negative code and a one-line message naming the handler and the cause:
 * HCT_EINVAL (no such handler here), HCT_EIO (cannot start, cannot read),
 * HCT_ETIMEDOUT, HCT_EWORKER (crashed or exited non-zero), HCT_EPROTO (no
 * answer or a garbled one).  res->outcome says which, for callers that word
 * their own message; res is filled either way and freed with
 * hct__child_result_free.  Any thread.
 */
int hct__child_run(const char *handler, const hct_child_msg_t *request, int timeout_ms,
                   hct_child_result_t *res);
void hct__child_result_free(hct_child_result_t *res);
const char *hct__child_outcome_name(hct_child_outcome_t o);

/* ---- XXH3-128 hashing (common/util.c) ------------------------------------*/

typedef struct { uint64_t lo, hi; } hct_hash_t;
/* 32 lowercase hex digits plus NUL. */
void hct__hash_hex(hct_hash_t h, char out[33]);

#endif /* HCT_COMMON_H */
