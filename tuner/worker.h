/*
 * worker.h: a private sub-header of tuner/ (included from tuner.h): fault
 * isolation.  Candidates run on the GPU in a worker process, so that a
 * kernel that faults, hangs or corrupts its context costs one process, not
 * the probe (or the daemon), and what failed is remembered.
 *
 * Files:
 *   tuner/worker.c    the parent side: spawn (libuv), JSON-lines calls with
 *                     a watchdog, restart and replay of the setup requests
 *   tuner/worker_serve.c the worker side: the request loop `hctune worker`
 *                     runs (cli/cmd_worker.c is the command around it),
 *                     with a file per kind of request beside it
 *                     (tuner/worker_serve.h lists them)
 *   tuner/quarantine.c the quarantine policy: fault reasons, what a fault
 *                     covers, whether the probe skips a candidate
 *
 * Design.  The probe (the parent) compiles candidates and records results;
 * all GPU work for candidates happens in `hctune worker`, spawned with
 * uv_spawn on a private uv loop, its stdin, stdout and stderr on pipes.
 * The protocol is one JSON object per line each way.  A request carries
 * "id" (an integer the parent assigns) and "cmd"; the reply echoes the id:
 *
 *   {"id":7,"ok":true, ...results}
 *   {"id":7,"ok":false,"error":"EFAULT","message":"...","fatal":true}
 *
 * "error" is a name from HCT_ERRNO_MAP; "fatal" means the worker exits
 * after this reply (a sticky GPU error: the context is poisoned until the
 * process ends), and the parent waits for that exit.
 *
 * Commands (the worker answers them in order, one at a time):
 *   hello                         -> pid, version
 *   open   {device}               -> uuid, name, arch; opens the GPU
 *   load   {cand, kernels_dir, op, variant, params, binary_key, db}
 *                                 -> {}; the worker reads the manifest and
 *                                    the binary (read-only, by key) from
 *                                    the DB and loads it as candidate
 *                                    number `cand`
 *   unload {cand}                 -> {}
 *   reference {kernels_dir, op, binary_key, db}
 *                                 -> {}; loads the op's float64 reference
 *                                    (tuner/reference.c), compiled by the
 *                                    parent, by key as load does; every
 *                                    check and verify of the op runs it
 *                                    on the device copy of its inputs
 *   check  {cand, ref, tokens, pending, seed}
 *                                 -> buffers: {name: parity figures},
 *                                    timed_out (grid barriers), and
 *                                    ref_buffers: the figures of candidate
 *                                    `ref` (-1: none) on the same inputs;
 *                                    bitwise figures are against `ref`
 *   time   {cands:[...], tokens, seed, ...}
 *                                 -> results: [{cand, median_us, ...}]
 *   copy_bw                       -> bytes_per_s: the card's copy rate
 *   quit                          -> {}; then the worker exits 0
 *
 * Watchdog.  Every call has a deadline (hct__worker_deadline_ms: 2 s, or
 * 20x the time the caller expects, whichever is longer).  When it passes,
 * the worker is killed with SIGKILL and the call returns HCT_EHANG.  A
 * worker that dies during a call (signal, or exit without a reply) gives
 * HCT_EFAULT, its exit status or signal and its last stderr lines in the
 * message.  A line that is not a JSON object, or carries the wrong id,
 * gives HCT_EPROTO and the worker is killed: it cannot be trusted further.
 *
 * Restart is cheap: hct__worker_restart() kills what is left of the
 * process, starts a fresh one and replays the setup requests recorded with
 * hct__worker_setup() (open, then the loads of the still-active
 * candidates), in the order they were first recorded.
 *
 * How the probe uses it (one worker per probe):
 *   hct__worker_start(exe) ; hct__worker_open(w, device)
 *   the op:        hct__worker_reference(w, ...) (its reference, by key)
 *   per candidate: hct__worker_load(w, id, ...) (the binary by DB key)
 *   per T, set:    hct__worker_check(w, id, baseline_id, T, pending, seed)
 *                  -> figures; judge them as before
 *   per T:         hct__worker_time(w, ids, n, T, seed, opts)
 *   on a failure:  reason = hct__fault_reason(rc); record the trial and
 *                  hct__quarantine_add(); hct__worker_unload(w, id) or,
 *                  when !hct__worker_alive(w), hct__worker_forget(w,
 *                  "cand<id>") then hct__worker_recover(w, ...)
 *   at the end:    hct__worker_stop(w)
 *
 * Quarantine.  A failure is recorded with hct__quarantine_add() against
 * (card UUID, driver version, template hash, variant, params, tokens) with
 * its reason and log; hct__quarantine_skip() tells a later probe to leave
 * the candidate alone unless --retry-quarantined.  Every reason holds for
 * every token count except "timeout" (a grid barrier that gave up at T),
 * which holds for T and larger counts: the work grows with T.
 *
 * Thread rules: a hct_worker_t belongs to the thread that started it; its
 * uv loop is its own, so the caller's loop and thread pool are untouched.
 * Starting a worker sets SIGPIPE to ignored for the process (a write to a
 * dead worker must be an error, not the parent's death).  The worker asks
 * the kernel to kill it when its parent goes (PR_SET_PDEATHSIG), which
 * Linux ties to the parent *thread*: start workers from a thread that
 * outlives them (the main thread).
 */
#ifndef HCT_WORKER_H
#define HCT_WORKER_H

#include <jansson.h>
#include <stdint.h>

#include "db.h"

typedef struct hct_worker_s hct_worker_t;

/* Deadlines, milliseconds. */
#define HCT_WORKER_DEADLINE_MS 2000       /* a call's default */
#define HCT_WORKER_OPEN_DEADLINE_MS 30000 /* hello, open: driver start-up */
#define HCT_WORKER_KILL_WAIT_MS 10000     /* for a killed worker to exit */

/* The deadline of a call expected to take `expected_ms` (<= 0: unknown):
 * 20x that, at least HCT_WORKER_DEADLINE_MS, at most one hour. */
int hct__worker_deadline_ms(double expected_ms);

/*
 * Starts `exe worker` (exe: the hctune executable, or a test's fake).
 * exe NULL: $HCTUNE_WORKER when set, else this process's own executable
 * (right in `hctune probe`; other programs must name hctune).
 * Returns 0 with the handle in *out, or HCT_EWORKER naming exe and the
 * cause; nothing is returned to free then.
 */
int hct__worker_start(const char *exe, hct_worker_t **out);

/*
 * Sends `req` (an object with "cmd"; its "id" is set here) and waits for
 * the reply, the worker's death or the deadline, running the worker's loop
 * only.  `reply` (may be NULL) receives a new reference to the reply object
 * whenever one arrived, NULL otherwise.  Returns:
 *   0            the reply has "ok": true
 *   its error    "ok": false: the code named by "error", with the message
 *   HCT_EHANG    the deadline passed; the worker was killed
 *   HCT_EFAULT   the worker died during the call (signal or exit status,
 *                and its last stderr lines, in the message)
 *   HCT_EPROTO   the worker wrote something that is not a reply to this
 *                request; it was killed
 *   HCT_EWORKER  the worker was not running, or could not be written to
 */
int hct__worker_call(hct_worker_t *w, json_t *req, int timeout_ms, json_t **reply);

/* A call that, when it succeeds, is also recorded as a setup request under
 * `key` (replacing one of the same key): restart replays it. */
int hct__worker_setup(hct_worker_t *w, const char *key, json_t *req, int timeout_ms,
                      json_t **reply);
/* Drops the setup request recorded under `key` (unload a candidate). */
void hct__worker_forget(hct_worker_t *w, const char *key);

/*
 * Replaces the process: kills the old one if it still runs, starts a fresh
 * one, and replays every setup request in order.  Returns 0, or the first
 * error; *failed_key (may be NULL) then names the setup request that
 * failed ("" when the start itself failed), so the caller can record that
 * candidate and restart again without it.
 */
int hct__worker_restart(hct_worker_t *w, char *failed_key, size_t len);

/*
 * After a call that ended the worker (hct__worker_alive() is 0): restarts
 * it, replaying the setup requests; one whose replay fails is dropped
 * (reported through `dropped`, may be NULL, with its key, code and message)
 * and the restart tried again, at most 8 times.  Returns 0, or the error
 * of the start or of replaying "open" (nothing to drop then).
 */
int hct__worker_recover(hct_worker_t *w,
                        void (*dropped)(void *arg, const char *key, int code, const char *msg),
                        void *arg);

/* Asks the worker to quit, kills it if it does not within a second, and
 * frees everything.  NULL is allowed. */
void hct__worker_stop(hct_worker_t *w);

/* 1 while the process runs. */
int hct__worker_alive(const hct_worker_t *w);
/* Process id of the current process (0 when none). */
int hct__worker_pid(const hct_worker_t *w);
/* How the last process ended: "exit status 3", "signal 6 (SIGABRT)", or
 * "running". */
const char *hct__worker_exit_text(const hct_worker_t *w);
/* The last lines the worker wrote on stderr (at most ~1 KB). */
const char *hct__worker_stderr_tail(const hct_worker_t *w);

/* "SIGSEGV" for 11; "SIG?" when not known. */
const char *hct__signal_name(int sig);

/* A double in JSON, which has no NaN or infinity: a real when finite, else
 * the string "nan", "inf" or "-inf".  value returns HCT_EPROTO (no message)
 * for anything else. */
json_t *hct__json_double(double x);
int hct__json_double_value(json_t *j, double *out);

/* Parity figures (tuner.h) as the JSON object of a check reply, and back:
 * {"elems", "mismatches", "first_mismatch", "unwritten", "nonfinite",
 * "rel_err", "max_err_ratio", "kl_mean", "kl_max", "argmax_agree"}
 * (reals as hct__json_double), and "first": [[index, got bits, want bits]]
 * for the first HCT_PC_FIRST mismatches when there are any.  from_json returns HCT_EPROTO naming a
 * missing field. */
json_t *hct__figs_to_json(const hct_parity_figs_t *f);
int hct__figs_from_json(json_t *j, hct_parity_figs_t *f);

/*
 * Where a call's time went inside the worker (issue 34): a reply may carry
 * "phase_ms": {"inputs": ms, "runs": ms, "figures": ms, "memory": ms}:
 * drawing inputs, running the float64 reference and uploading a new input
 * set (inputs); the candidates' runs, their uploads, launches and syncs
 * (runs); the comparisons after each run (figures); device allocations and
 * frees of sessions and kept copies (memory).  What is not in them is the
 * protocol and the request's own bookkeeping.  The probe's breakdown
 * (tuner/probe_clock.c) adds them up.
 */
enum { HCT_WP_INPUTS, HCT_WP_RUNS, HCT_WP_FIGURES, HCT_WP_MEMORY, HCT_WP_N };
extern const char *const hct__worker_phase_names[HCT_WP_N];
typedef struct hct_worker_phases_s {
  double ms[HCT_WP_N];
} hct_worker_phases_t;
/* The phases of the last call's reply (zeros when it carried none). */
void hct__worker_phases(const hct_worker_t *w, hct_worker_phases_t *out);
/* A reply's "phase_ms" read into out (missing or malformed entries: 0). */
void hct__worker_phases_of(json_t *reply, hct_worker_phases_t *out);

/* ---- typed requests (tuner/worker.c) --------------------------------------- */

/*
 * The commands above as C calls, for the probe.  Each returns what
 * hct__worker_call returns.  open, reference and load are recorded as
 * setup requests ("open", "reference:<op>" and "cand<N>"), so
 * hct__worker_restart replays them; unload forgets the load.
 */
int hct__worker_open(hct_worker_t *w, const char *device);
int hct__worker_load(hct_worker_t *w, int cand, const char *kernels_dir, const char *op,
                     const char *variant, const char *params_json, const char *binary_key,
                     const char *db_path);
int hct__worker_unload(hct_worker_t *w, int cand);
/* Loads the op's reference (the binary of hct__reference_job, by key),
 * recorded as the setup request "reference:<op>". */
int hct__worker_reference(hct_worker_t *w, const char *kernels_dir, const char *op,
                          const char *binary_key, const char *db_path);
/* The same, with the comparison kernels' binary too (pcheck_key, NULL:
 * none; kernels-src/common/parity_check.cu compiled by the parent with
 * the candidates, so the worker need not compile it, issue 34): loaded
 * with the reference, or left for the worker to compile when it cannot
 * be. */
int hct__worker_reference_with(hct_worker_t *w, const char *kernels_dir, const char *op,
                               const char *binary_key, const char *db_path, const char *pcheck_key);

/* One later run of a check's session: "repeat" (run 1 on fresh inputs,
 * run 2 on the first inputs again) or "producer" (run 3, right after the
 * producer kernel); figures in the order of the check's name[]. */
typedef struct hct_worker_run_s {
  char check[16];
  int run;
  hct_parity_figs_t figs[HCT_MAX_BUFFERS];
  hct_parity_figs_t ref_figs[HCT_MAX_BUFFERS]; /* the reference's, same inputs */
} hct_worker_run_t;

/* What a check answers: the figures of each output and inout buffer of
 * the candidate's first run (bitwise figures against `ref` when ref >= 0)
 * and of the reference candidate on the same inputs; then its later runs
 * in the same allocation, whether runs 0 and 2 (identical inputs) gave
 * identical bits, and why the producer run did not happen when asked. */
typedef struct hct_worker_check_s {
  int n;
  char name[HCT_MAX_BUFFERS][32];
  hct_parity_figs_t figs[HCT_MAX_BUFFERS];
  int has_ref;
  hct_parity_figs_t ref_figs[HCT_MAX_BUFFERS]; /* same order as name[] */
  double run_ms;
  int n_more;
  hct_worker_run_t more[3];
  int deterministic;           /* runs 0 and 4: 1, 0, or -1 when not checked */
  char nondet_buf[32];
  size_t nondet_mismatches, nondet_first;
  char producer_skipped[128];  /* "" when the producer run happened or was
                                  not asked for */
  char checked_on_host[256];   /* "": the figures were made on the card
                                  (tuner/parity_card.c); else why not */
} hct_worker_check_t;

/* What a check runs beyond the first run (hct__worker_check's flags). */
enum {
  HCT_CHECK_REPEAT = 1 << 0,   /* runs 1 and 2: fresh inputs, then the
                                  first again, in one allocation */
  HCT_CHECK_PRODUCER = 1 << 1, /* run 3 after the producer kernel, for a
                                  candidate whose first launch is PDL */
  HCT_CHECK_TWIN = 1 << 2      /* run 4, the first run of a second
                                  allocation on the same inputs: its bits
                                  must equal run 0's (deterministic) */
};

/*
 * Checks candidate `cand` at T on the inputs drawn from `seed` (with the
 * optional buffers when `pending`), against candidate `ref` (-1: none),
 * with the later runs `flags` asks for.  A grid-barrier variant whose
 * barrier timed out returns HCT_ETIMEDOUT.
 */
int hct__worker_check(hct_worker_t *w, int cand, int ref, int T, int pending, uint64_t seed,
                      int flags, int timeout_ms, hct_worker_check_t *out);

/* What verify answers for one candidate: its timed launches' outputs on
 * every set they wrote against the reference candidate's (bits, poison,
 * non-finite, images, normwise distance), and on set 0 both against the
 * float64 reference (first, ref_first: figures in the order of name[]). */
typedef struct hct_worker_verify_s {
  int cand;
  int sets;
  size_t mismatches, unwritten, nonfinite, image_mismatches;
  double max_dist;             /* max |out - ref| / max |ref| over sets */
  int worst_set;               /* -1: none differs */
  char worst_buf[32];
  int n;
  char name[HCT_MAX_BUFFERS][32];
  hct_parity_figs_t first[HCT_MAX_BUFFERS];
  hct_parity_figs_t ref_first[HCT_MAX_BUFFERS];
} hct_worker_verify_t;

/*
 * Verifies candidates cands[0..n) of the 'time' request just made (it must
 * be the worker's last request) against candidate `ref`, timed in it too:
 * each one's graph replayed once more with poisoned outputs.  out[k] gets
 * cand k's figures.  When one candidate's replay fails, *failed (may be
 * NULL) gets its id, else -1.
 */
int hct__worker_verify(hct_worker_t *w, const int *cands, int n, int ref, int timeout_ms,
                       hct_worker_verify_t *out, int *failed);

/*
 * Times candidates cands[0..n) at T, interleaved, in the worker; res[k]
 * receives cand k's figures (no samples: res[k].samples is NULL) or its
 * error.  `opts` (may be NULL) holds timing options by their names in
 * hct_timing_opts_t (max_seconds, max_rounds, min_samples, target_rel_ci,
 * prune_factor, warmup, timing_seed), batch, cold, and no_prune (an
 * array of candidate ids never pruned: the incumbent).  When a candidate's
 * error ends the worker, *failed (may be NULL) gets its id, else -1.
 */
int hct__worker_time(hct_worker_t *w, const int *cands, int n, int T, uint64_t seed,
                     json_t *opts, int timeout_ms, hct_timing_res_t *res, int *failed);
/* The card's device-to-device copy rate measured in the worker
 * (hct__copy_bw_on), bytes per second. */
int hct__worker_copy_bw(hct_worker_t *w, double *bytes_per_s);

/* After hct__worker_time failed with HCT_ENOMEM: how many of its first
 * candidates the worker's memory holds at once (the reply's "fits"), or
 * -1 when the reply said nothing of it. */
int hct__worker_time_fits(const hct_worker_t *w);

/* ---- the serving side (tuner/worker_serve.c, tuner/worker_time.c) ---------- */

/*
 * The worker process's loop (what `hctune worker` runs): reads one request
 * per line on stdin, answers each on stdout, until EOF or `quit` (0), or a
 * sticky GPU error (HCT_EFAULT: the context is poisoned, nothing was
 * released, and the caller must _exit at once, running no exit handler
 * that could touch it).  HCT_ENOMEM when it cannot start.  Loop thread
 * only, one request at a time.
 */
int hct__worker_serve(void);

/* The share of the free device memory one 'time' request may hold (its
 * input sets and every candidate's scratch at once): the rest is the
 * check's input set, the reference's scratch, the driver's own. */
#define HCT_TIME_MEM_SHARE 0.6

/*
 * How many of the first n candidates a 'time' request can hold within
 * budget bytes: sets_bytes (its rotating input sets) plus scratch[0..k)
 * for the largest such k (0: not even the first).  The worker refuses a
 * request that does not fit whole, saying this count ("fits"); the probe
 * then sends its candidates in groups of what fits.
 */
int hct__time_fits(uint64_t sets_bytes, const size_t *scratch, int n, uint64_t budget);

/* ---- quarantine (tuner/quarantine.c) ------------------------------------------ */

/* What identifies a candidate in the faults table (every pointer must be
 * valid; params "" means {}). */
typedef struct hct_qcand_s {
  const hct_db_keys_t *keys;   /* the card's keys: UUID, driver version */
  const char *op;
  const char *variant;
  const char *params;          /* JSON object text of the point */
  const char *template_hash;
} hct_qcand_t;

/* The fault reason of an error code from a compile, a load or a worker
 * call ("compile", "launch", "fault", "hang", "parity", "unwritten",
 * "timeout"), or NULL when the error is not the candidate's fault (out of
 * memory, database, bad usage): those are never quarantined. */
const char *hct__fault_reason(int code);

/*
 * Records that `c` failed at `tokens` for `reason` with `log` (may be
 * NULL).  "timeout" is stored at its T (it holds for T and up); every
 * other reason at T = 0 (every token count), "at T=<n>: " prefixed to the
 * log so the count is not lost.  Returns 0 or the DB's error.
 */
int hct__quarantine_add(hct_db_t *db, const hct_qcand_t *c, int tokens, const char *reason,
                        const char *log);

/* 1 when the probe must skip `c` at `tokens` (quarantined, and not
 * retry_quarantined), 0 when it may run it, negative on a DB error. */
int hct__quarantine_skip(hct_db_t *db, const hct_qcand_t *c, int tokens, int retry_quarantined);

#endif /* HCT_WORKER_H */
