/*
 * worker_serve.h: what the files of the worker's serving side share, and
 * nothing else includes: the worker's state (its card, ops, candidates,
 * the check's kept input sets, the last time request's allocation), the
 * shared helpers and the request handlers the loop's table names.
 *
 * Files:
 *   tuner/worker_serve.c   the loop: the request table, one line served;
 *                          hello, copy_bw, quit
 *   tuner/worker_load.c    open, reference, load, unload
 *   tuner/worker_check.c   check
 *   tuner/worker_time.c    time
 *   tuner/worker_verify.c  verify
 *   tuner/worker_state.c   what they share
 *
 * Loop thread only: one request at a time, in order.
 */
#ifndef HCT_WORKER_SERVE_H
#define HCT_WORKER_SERVE_H

#include <jansson.h>

#include "db.h"
#include "tuner.h"

#define MAX_CANDS 512

#define MAX_OPS 8

typedef struct wcand_s {
  int id;
  int used;
  hct_cand_t c;
} wcand_t;

/* One input set of a check: host data with its float64 reference, and the
 * reference candidate's outputs on it. */
typedef struct runset_s {
  int valid;
  hct_hostset_t hs;
  void *ref_out[HCT_MAX_BUFFERS];
  json_t *ref_figs;         /* the reference's figures against float64 */
  hct_parity_figs_t ref_f[HCT_MAX_BUFFERS]; /* the same, as figures */
  /* Checks on the card (tuner/parity_card.c): the float64 reference and
   * the reference candidate's outputs there, instead of ref_out. */
  hct_pcref_t dref[HCT_MAX_BUFFERS];
  int dref_ok;
  hct_dptr_t ref_dev[HCT_MAX_BUFFERS];
  /* The set's inputs as drawn, on the card: every run copies them into the
   * device set there (a run writes resid; issue 34: at T = 32768 resid and
   * pending are 2.7 GB, uploaded from the host five times a check). */
  hct_devset_t pristine;
} runset_t;

/* The inputs of the last check, kept for the next: the probe checks every
 * candidate on the same inputs in turn, so the reference and the outputs
 * of the reference candidate are computed once per input set.  set[0] is
 * drawn from the seed; set[1] holds fresh inputs for the same weights (the
 * repeat check), drawn when first asked for. */
typedef struct inset_s {
  int valid;
  const hct_op_t *op;
  int T, pending;
  uint64_t seed;
  runset_t set[2];
  int ref_id;               /* candidate whose outputs set[].ref_out hold, or -1 */
  int ref_repeat;           /* they include set[1]'s */
  int ref_card;             /* they are on the card (ref_dev), not ref_out */
  hct_gpu_t *gpu;           /* where `dev` lives */
  hct_devset_t dev;         /* the device copy every candidate runs on */
  int dev_ok;
  int staged;               /* the producer holds set[0]'s inputs */
} inset_t;

typedef struct worker_s {
  hct_gpu_t *gpu;
  hct_device_t dev;
  struct {
    char dir[1024];
    hct_op_t *op;
    hct_cand_t ref;         /* its float64 reference, once 'reference' loaded it */
    int ref_loaded;
  } ops[MAX_OPS];
  int n_ops;
  wcand_t *cands;
  inset_t in;
  hct_producer_t producer;  /* the producer check's kernel, loaded once */
  int producer_loaded;
  char producer_broken[256]; /* why it cannot run here, once known */
  hct_pcheck_t pcheck;      /* the comparison kernels, once loaded */
  int pcheck_state;         /* 0: not tried, 1: loaded, -1: host figures */
  char pcheck_off[256];     /* why checks compare on the host, once known */
  struct timed_s *timed;    /* the last 'time' request's allocation, for 'verify' */
  double phase[HCT_WP_N];   /* where the request being answered spent its
                               time (worker.h's "phase_ms") */
  hct_devpool_t pool;       /* device buffers the checks reuse (devpool.c) */
  hct_db_t *db;             /* read-only, kept open: opening checks it */
  char dbpath[1024];
  int quit;
} worker_t;

/*
 * The allocation of the last 'time' request, kept for 'verify': its sets
 * (set s holding the inputs and weights rotated by rotation(s) elements, so
 * that no two sets hold the same data), each candidate's scratch (its state
 * as the timed launches left it) and graph.  Freed by the next request of
 * any other kind: 'verify' refers to the 'time' just before it.
 */
typedef struct timed_s {
  int T, n, nsets, used_sets;   /* used: the sets a graph's launches touch */
  int ids[MAX_CANDS];
  wcand_t *cs[MAX_CANDS];
  hct_hostset_t hs;             /* set 0's data; reference filled on demand */
  int ref_done;
  hct_devset_t *sets;
  hct_scratchset_t *scr;
  hct_graph_t **graphs;
  void **base_out;              /* [used_sets][HCT_MAX_BUFFERS]: the
                                   reference candidate's timed outputs */
  int base_id;                  /* whose they are, or -1 */
  /* Verified on the card (verify_card): the reference candidate's timed
   * outputs kept there, set 0's float64 reference there, and the
   * reference candidate's figures against it. */
  hct_dptr_t (*base_dev)[HCT_MAX_BUFFERS];
  hct_pcref_t dref[HCT_MAX_BUFFERS];
  int dref_ok;
  hct_parity_figs_t ref_first[HCT_MAX_BUFFERS];
  int card_off;                 /* the card's path failed: the host's */
  hct_devset_t *reuse_sets;     /* the last timing's, while taken over */
  int reuse_n;
  uint64_t seed;                /* what hs was drawn from, and how: the */
  int cold;                     /* next 'time' of the same reuses hs and */
  const hct_op_t *op;           /* the sets' memory (reuse_sets) */
} timed_t;

/* ---- shared (tuner/worker_state.c) ---------------------------------------- */

int hct__ws_is_sticky(int rc);
void hct__ws_phase_add(worker_t *W, int k, uint64_t t0);
int hct__ws_get_int(json_t *req, const char *key, int required, int64_t dflt, int64_t *out);
int hct__ws_get_str(json_t *req, const char *key, int required, const char **out);
wcand_t *hct__ws_find_cand(worker_t *W, int64_t id);
int hct__ws_need_cand(worker_t *W, int64_t id, wcand_t **out);
int hct__ws_op_reference(worker_t *W, const hct_op_t *op, const hct_cand_t **out);
int hct__ws_outs_alloc(const hct_hostset_t *hs, void *outs[]);
void hct__ws_outs_free(void *outs[]);
void hct__ws_runset_clear(runset_t *r);
void hct__ws_kept_give(worker_t *W, hct_dptr_t kept[]);
int hct__ws_kept_take(worker_t *W, const hct_hostset_t *hs, const hct_devset_t *d,
                      hct_dptr_t kept[]);
void hct__ws_runset_card_free(worker_t *W, hct_gpu_t *g, runset_t *r);
void hct__ws_inset_clear(worker_t *W);
void hct__ws_figures_of(const hct_hostset_t *hs, void *outs[], void *ref[],
                        const hct_parity_figs_t *ref_f, hct_parity_figs_t f[]);
json_t *hct__ws_figures_json(const hct_hostset_t *hs, void *outs[], const hct_parity_figs_t f[]);
json_t *hct__ws_figures(const hct_hostset_t *hs, void *outs[], void *ref[],
                        const hct_parity_figs_t *ref_f);
void **hct__ws_card_outs(const hct_hostset_t *hs, const hct_devset_t *d);
void hct__ws_pcheck_ready(worker_t *W, const hct_op_t *op);

/* ---- the requests (a file each; the loop's table names them) --------------- */

int hct__ws_req_open(worker_t *W, json_t *req, json_t *reply);
int hct__ws_req_reference(worker_t *W, json_t *req, json_t *reply);
int hct__ws_req_load(worker_t *W, json_t *req, json_t *reply);
int hct__ws_req_unload(worker_t *W, json_t *req, json_t *reply);
int hct__ws_req_check(worker_t *W, json_t *req, json_t *reply);
void hct__ws_timed_free(worker_t *W, timed_t *t, int sticky);
int hct__ws_req_time(worker_t *W, json_t *req, json_t *reply);
int hct__ws_req_verify(worker_t *W, json_t *req, json_t *reply);

#endif /* HCT_WORKER_SERVE_H */
