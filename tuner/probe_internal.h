/*
 * probe_internal.h: the private declarations of the probe's stages.  One
 * probe of one op on one card (hct__probe, tuner/probe.c) goes through
 * them in order; each file is one stage:
 *
 *   tuner/probe.c          the probe: open the op, the card and the DB,
 *                          run the stages per token count, finish the run
 *   tuner/probe_cands.c    candidates: which variants and points, what
 *                          each is checked against, compiling them
 *   tuner/probe_check.c    checks: every candidate's outputs at a count,
 *                          with and without pending (check_T)
 *   tuner/probe_late.c     the large counts where only the search's
 *                          finalists are checked, then timed
 *   tuner/probe_judge.c    verdicts: figures of a check or of timed
 *                          launches against the op's rules (no GPU call)
 *   tuner/probe_search.c   the search of a family's points (halving)
 *   tuner/probe_time.c     timing: the deciding pass, the other mode, the
 *                          verification of the timed launches' outputs
 *   tuner/probe_time_groups.c  the worker's timing in groups that fit the
 *                          card's memory, for the timing and the search
 *   tuner/probe_serve.c    checks cover what is served: a count's winners
 *                          checked where its decision reaches, before
 *                          they are decided for
 *   tuner/probe_decide.c   deciding and recording: winners per count ->
 *                          ranges (hct__cover_ranges) -> decisions
 *   tuner/probe_record.c   trials and faults into the DB, a candidate that
 *                          failed (quarantine, a fresh worker)
 *   tuner/probe_output.c   progress lines, the decision table
 *   tuner/probe_clock.c    where the time goes: every moment of the probe
 *                          in one stage, the breakdown at its end
 *   tuner/probe_interrupt.c  Ctrl-C: the flag every stage asks about
 *
 * Loop thread only: a probe is one thread, its GPU calls go to a worker
 * process (tuner/worker.c).
 */
#ifndef HCT_PROBE_INTERNAL_H
#define HCT_PROBE_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "db.h"
#include "tuner.h"

#define MAX_CANDS 256

/* The stages of a probe's breakdown (tuner/probe_clock.c), in the order
 * its table lists them. */
typedef enum {
  HCT_PS_COMPILE,        /* compiling, the cache's lookups */
  HCT_PS_WORKER,         /* starting the worker (and restarting it after a
                            fault): the card opened, binaries loaded */
  HCT_PS_INPUTS,         /* the worker drawing an input set and running
                            the float64 reference on it */
  HCT_PS_CHECK_ALL,      /* checks of every point at a count */
  HCT_PS_CHECK_LATE,     /* checks of the search's finalists (above
                            checks.all_points_up_to) */
  HCT_PS_CHECK_SERVE,    /* checks at the counts a decision serves */
  HCT_PS_SEARCH,         /* a family's search rounds */
  HCT_PS_TIMING,         /* the deciding timing and the other mode */
  HCT_PS_VERIFY,         /* the timed launches' outputs checked */
  HCT_PS_DECIDE,         /* winners, ranges, decisions */
  HCT_PS_COPYBW,         /* the card's copy bandwidth (the report's floor) */
  HCT_PS_RECORD,         /* writing trials, faults, decisions */
  HCT_PS_OTHER,          /* the rest: opening, candidates, output */
  HCT_PS_N
} hct_pstage_t;

typedef struct probe_clock_s {
  int cur;               /* the stage now */
  uint64_t since;        /* when it was entered (or last settled) */
  uint64_t ns[HCT_PS_N];
  int n[HCT_PS_N];       /* what each stage counts (its unit) */
  double worker_ms[HCT_WP_N]; /* inside the worker, every call summed */
} probe_clock_t;

/* Per token count arrays are indexed like the probe's token set (k, where
 * T = P->tokens.t[k]), not by T: the set is short, its counts may be large. */
typedef struct cand_s {
  hct_compile_job_t job;
  hct_cand_t c;
  int loaded;            /* loaded in the worker */
  int dead;              /* out for every T: compile, load or fault */
  uint8_t passed[HCT_MAX_TOKEN_LIST];
  uint8_t failed[HCT_MAX_TOKEN_LIST];
  hct_summary_t timing[HCT_MAX_TOKEN_LIST];
  uint8_t timed[HCT_MAX_TOKEN_LIST];
  uint8_t verified[HCT_MAX_TOKEN_LIST]; /* its timed launches' outputs checked */
  uint8_t in_timing[HCT_MAX_TOKEN_LIST]; /* in the deciding timing just made */
  uint8_t searched_out[HCT_MAX_TOKEN_LIST]; /* its family's search left it
                                              out of the deciding timing */
  uint8_t checked[HCT_MAX_TOKEN_LIST]; /* its checks ran at this count (above
                                          checks.all_points_up_to only the
                                          search's finalists are checked) */
  int rank_k;            /* its place in its family's search ranking at the
                            count being probed (hct__probe_search_T), -1: none */
  hct_softkey_t sk;      /* what shaped its binary and figures */
  int ref;               /* the candidate whose outputs it is checked
                            against: the reference variant's default point
                            for a bitwise one, the baseline for kl (whose
                            error is the yardstick); -1 for the baseline */
  int depth;             /* steps from the baseline along ref: checked in
                            this order, so a reference is judged first */
  int is_ref;            /* another candidate's bits must equal its own */
  int ref_only;          /* here only as that reference (--variants or
                            --points left it out): checked and timed, never
                            decided for */
  hct_parity_t competes; /* hct__variant_competes: the decisions it is in */
  int served_ok[32];     /* counts no probe timed where it passed every
                            check as a count's winner (probe_serve.c) */
  int n_served_ok;
} cand_t;

typedef struct probe_s {
  const hct_probe_opts_t *o;
  hct_op_t *op;
  hct_compile_job_t ref_job; /* the op's float64 reference, compiled with
                                the candidates, run in the worker */
  hct_compile_job_t pcheck_job; /* the comparison kernels (parity_check.cu),
                                   compiled with them too (status 0: the
                                   worker loads them, else compiles them) */
  hct_op_t *pcheck_holder;   /* the op struct pcheck_job points into */
  hct_device_t dev;
  hct_db_t *db;
  hct_db_keys_t keys;
  char run_id[33];
  hct_worker_t *w;       /* every GPU call goes through it: fault isolation */
  int fresh_worker;      /* restarted: its next check draws the inputs again */
  int producer_warned;   /* the worker said the producer check cannot run */
  char kdir[1024];
  char dbpath[1024];
  cand_t *cands;
  int n;
  int baseline;          /* index of the baseline candidate */
  hct_tokens_t tokens;   /* the token counts probed */
  hct_timing_res_t *pick; /* MAX_CANDS: the timings hct__pick_winner sees */
  int *pick_of;          /* MAX_CANDS: the candidate of each */
  int tty;
  uint64_t t0;
  hct_rng_t rng;
  int time_T;            /* the count the timing seed is for (0: none) */
  uint64_t time_seed;    /* one seed a count for every timing there: the
                            worker draws its inputs once (issue 34) */
  probe_clock_t clock;   /* where the time goes (probe_clock.c) */
  double copy_bw;        /* measured at the end (o->copy_bw), bytes/s */
  json_t *breakdown;     /* the clock's JSON, once the probe ended */
} probe_t;

/* The worst figures of a candidate over the outputs of one run. */
typedef struct verdict_s {
  const char *status;    /* "pass", or the reason: "parity", "unwritten",
                            "repeat", "producer", "nondeterminism", "timed" */
  const char *check;     /* the check that caught it (the trial's kind):
                            "parity", "repeat", "producer", "determinism",
                            "timed" */
  hct_parity_figs_t worst;
  char worst_buf[32];
  char figures[2048];
} verdict_t;

/* ---- tuner/probe_interrupt.c --------------------------------------------- */

/* HCT_EINTERRUPTED with its message after Ctrl-C (or SIGTERM), else 0:
 * every stage asks between candidates. */
int hct__probe_check_interrupt(const probe_t *P);
/* The handler hct__probe installs for SIGINT and SIGTERM: the first sets
 * the flag, a second ends the process. */
void hct__probe_on_interrupt(int sig);
/* Clears the flag, before a probe begins. */
void hct__probe_interrupt_clear(void);

/* ---- tuner/probe_clock.c ------------------------------------------------- */

/* Starts the clock at P->t0 in the stage "other". */
void hct__probe_clock_start(probe_t *P);
/* Enters `stage` (hct_pstage_t) and returns the stage it left, which the
 * caller enters again when done. */
int hct__probe_stage(probe_t *P, int stage);
/* Adds n to what `stage` counts. */
void hct__probe_count(probe_t *P, int stage, int n);
/* After a worker call: its input set's time (the reply's "phase_ms")
 * moved from the current stage to inputs and references, its other
 * phases summed. */
void hct__probe_worker_took(probe_t *P);
/* hct__db_trial_add in the stage "record". */
int hct__probe_trial_add(probe_t *P, const hct_db_trial_t *t);
/* The breakdown up to now (a new reference): total_s, stages, worker_s. */
json_t *hct__probe_breakdown_json(probe_t *P);
/* (hct__probe_breakdown_print, the table, is tuner.h's: multiprobe.c
 * prints each card's.) */

/* ---- tuner/probe_output.c ------------------------------------------------ */

/* One progress event: a JSON line in --json mode, a rewritten status line
 * on a terminal, a plain log line otherwise. */
void hct__probe_progress(probe_t *P, const char *stage, int done, int total, const char *fmt, ...)
    HCT_PRINTF(5, 6);
/* Clears the status line of a terminal. */
void hct__probe_progress_end(probe_t *P);
/* The winners per count of both classes against the baseline, as text. */
void hct__probe_table(probe_t *P);
/* The compile stage's summary: a JSON event or one line on stderr. */
void hct__probe_compiled(probe_t *P, int binaries, int hits, int failed, double wall_ms,
                         double cpu_ms);
/* The result event of --json: op, card, run, the decisions made. */
void hct__probe_result_json(const json_t *result);

/* ---- tuner/probe_record.c ------------------------------------------------ */

/* A trial of candidate c with this probe's keys and run, of `kind` at T. */
void hct__probe_trial_init(probe_t *P, const cand_t *c, hct_db_trial_t *t, const char *kind, int T,
                           int pending);
/* A timing trial's status and figures from the worker's result. */
void hct__probe_trial_timed(hct_db_trial_t *t, const hct_timing_res_t *r, const char *status);
/* Records a failed trial and the fault that quarantines the candidate. */
int hct__probe_record_failure(probe_t *P, cand_t *c, const char *kind, const char *reason, int T,
                              int pending, uint64_t seed, const char *figures, const char *log);
/* Tells the caller (on_rejected) that c is out at T, by which check. */
void hct__probe_rejected(probe_t *P, const cand_t *c, int T, const char *check, const char *why);
/* The quarantine's identity of candidate c. */
hct_qcand_t hct__probe_qcand(probe_t *P, const cand_t *c);
/* Quarantines c at T for `reason` (hct__quarantine_add), in the stage
 * "record". */
int hct__probe_quarantine(probe_t *P, const cand_t *c, int T, const char *reason, const char *log);
/* Candidate i's call failed with rc: recorded, quarantined, a fresh worker
 * when this one died.  0 to go on, or the error that ends the probe. */
int hct__probe_cand_failed(probe_t *P, int i, const char *kind, int rc, int T, int pending,
                           uint64_t seed);

/* ---- tuner/probe_cands.c ------------------------------------------------- */

/* The candidates of the card and counts asked for, and their references. */
int hct__probe_candidates(probe_t *P);
/* Compiles them and the op's reference (cache first); a candidate that
 * fails is recorded and out, the baseline or the reference failing ends
 * the probe. */
int hct__probe_compile(probe_t *P);

/* ---- tuner/probe_judge.c ------------------------------------------------- */

/* The verdict of candidate c on every run of one check call. */
void hct__probe_judge_all(probe_t *P, const cand_t *c, const hct_worker_check_t *ck, int T,
                          int pending, uint64_t seed, verdict_t *vd, char *log, size_t len);
/* The baseline against the float64 reference: 0, or the error that ends
 * the probe (nothing can be checked against a wrong baseline). */
int hct__probe_judge_baseline(probe_t *P, const hct_worker_check_t *ck, int T, int pending,
                              uint64_t seed, verdict_t *vd);
/* 1 when candidate c's timed launches' outputs pass, else 0 and why. */
int hct__probe_timed_ok(probe_t *P, const cand_t *c, const hct_worker_verify_t *v, char *log,
                        size_t len);

/* ---- tuner/probe_check.c ------------------------------------------------- */

/* Checks the candidates in play (only[i], or all) at the k-th count on one
 * fresh input set, with or without pending. */
int hct__probe_check_T(probe_t *P, int k, int pending, const uint8_t *only);

/*
 * Issue 29: checks cover what is served.  The candidates who[0..n) (each
 * with the references its bits are checked against, from the top) through
 * every check of check_T at a count T no probe timed, with and without
 * pending, on one fresh input set each shared by all of them (issue 34:
 * one input set and one float64 reference per (T, pending), the baseline
 * and a shared reference checked once), the baseline first.  ok[q] 1 when
 * who[q] passed every one (or the baseline cannot run at T: nothing to
 * check against); a candidate that fails is recorded, quarantined and out
 * everywhere, as at a probed count.  Returns 0 or the error that ends the
 * probe.
 */
int hct__probe_check_group(probe_t *P, int T, const int *who, int n, uint8_t *ok);

/* ---- tuner/probe_serve.c ------------------------------------------------- */

/*
 * After the k-th count's winners are verified, before they are decided
 * for: each (of every decision) checked at the counts its decision would
 * serve that no probe checked it at (hct__probe_check_group).  One that fails
 * is out, flagged in out[] (indexed like P->cands), and *again set: the
 * count is timed again for the next winner.  Returns 0 or the error that
 * ends the probe.
 */
int hct__probe_serve_T(probe_t *P, int k, uint8_t *out, int *again);

/* ---- tuner/probe_search.c ------------------------------------------------ */

/* The search of every family that asks for one at the k-th count. */
int hct__probe_search_T(probe_t *P, int k);

/* ---- tuner/probe_time_groups.c ------------------------------------------- */

/* hct__worker_time over as many requests as the card's memory needs. */
int hct__probe_time_grouped(probe_t *P, const int *ids, int n, int T, json_t *opts, int deadline,
                            hct_timing_res_t *res, int *failed, int *groups);

/* ---- tuner/probe_time.c -------------------------------------------------- */
/* Times (and verifies) the candidates that passed at the k-th count. */
int hct__probe_time_T(probe_t *P, int k, int search);

/* ---- tuner/probe_late.c -------------------------------------------------- */

/* The k-th count above checks.all_points_up_to: search, check the
 * finalists, time. */
int hct__probe_check_late(probe_t *P, int k, int sets);

/* ---- tuner/probe_decide.c ------------------------------------------------ */

/* A range made of probed counts first..last, lo..hi, ended before the
 * first count (outward from them) its winner c does not support. */
void hct__probe_trim(probe_t *P, const cand_t *c, int first, int last, int *lo, int *hi);
/* The decisions a probe makes: dk 0 bitwise, 1 kl, 2 + f the op's bit
 * family f (manifest "families", issue 29, parity "bits:<head>").
 * hct__probe_n_decisions: how many; hct__probe_decision_parity: dk's
 * parity string, written into buf[len] and returned. */
int hct__probe_n_decisions(const probe_t *P);
const char *hct__probe_decision_parity(const probe_t *P, int dk, char *buf, size_t len);
/* The winner at the k-th count of decision dk (hct__pick_winner), or -1. */
int hct__probe_winner_at(probe_t *P, int k, int dk, int verified_only);
/* The decisions of both classes and of every bit family into the DB
 * (unless no_decide) and into result's "decisions". */
int hct__probe_decide(probe_t *P, json_t *result);

#endif /* HCT_PROBE_INTERNAL_H */
