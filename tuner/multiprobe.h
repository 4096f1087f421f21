/*
 * multiprobe.h: a private sub-header of tuner/ (included from tuner.h):
 * every card of a host probed at once, and the cards compared.
 *
 * Files:
 *   tuner/multiprobe.c `hctune probe --device all|LIST`: the cards chosen,
 *                     the binaries compiled once per arch, one probe
 *                     process per card run at the same time, their
 *                     progress shown per card, one run tying them together
 *   tuner/agree.c     the cards of one model compared by the fleet merge's
 *                     rule (db/merge.c): pooled decisions, outlier cards,
 *                     variants quarantined for the model
 *
 * Design.  Each card is probed by a child `hctune probe --device UUID
 * --json --parent-run ID`: its own process, so its own worker and CUDA
 * context, its faults its own, and the probe (tuner/probe.c) unchanged.
 * Before the fan-out one `hctune compile --arch A` per arch fills the
 * compile cache of the DB with every binary, so the probes of cards of one
 * arch find every binary there and compile nothing; the compile is the
 * only step that uses every core.  The probes then share the cores
 * equally: each gets UV_THREADPOOL_SIZE and HCTUNE_THREADS (the threads of
 * its float64 references) of cores / cards, and the same niceness (its
 * parent's).  The parent reads each child's JSON lines and prints one line
 * per card per step, prefixed by the card's index.
 *
 * Loop thread only: everything runs on a private uv loop on the calling
 * thread, which must outlive the children (the main thread).
 */
#ifndef HCT_MULTIPROBE_H
#define HCT_MULTIPROBE_H

#include <stdint.h>
#include <stdio.h>

#include "db.h"

#define HCT_MULTI_MAX_CARDS 64

/* One card of a probe of several. */
typedef struct hct_multi_card_s {
  int index;                 /* the card's index on the host (its prefix) */
  char uuid[64];
  char name[128];
  char arch[64];
  int backend;               /* hct_backend_kind_t */
  char model_key[256];
  /* out */
  uint64_t start_ns, end_ns; /* the child's life, CLOCK_MONOTONIC */
  int exit_status;           /* 0: decided; else the child's status */
  int term_signal;
  int decisions;             /* rows of its result event */
  double wall_s;             /* as the child reported it */
  char run_id[33];           /* of its result event */
  char breakdown[4096];      /* its result's breakdown (JSON), "" none */
  char error[512];           /* its error event's message, else "" */
} hct_multi_card_t;

/* What the cards agreed on (tuner/agree.c). */
typedef struct hct_agree_s {
  int models;                /* model groups compared */
  int pooled;                /* pooled decision rows written */
  int outliers;              /* cards flagged slow */
  int conflicts;             /* variants quarantined for a model */
  int faults_added;          /* quarantine rows written */
  int replaced;              /* card decisions replaced by pooled ones */
  char *report_json;         /* malloc'd: {"models":[...],"flags":[...]} */
} hct_agree_t;

typedef struct hct_multi_opts_s {
  const hct_probe_opts_t *probe; /* per-card options (device ignored) */
  hct_multi_card_t *cards;   /* the cards, resolved (hct__multi_cards) */
  int n_cards;
  const char *exe;           /* NULL: $HCTUNE_PROBE_EXE, else this executable */
  double outlier_pct;        /* <= 0: HCT_FLEET_OUTLIER_PCT (10) */
  int no_compile;            /* leave compiling to each card's probe */
} hct_multi_opts_t;

/*
 * Resolves `spec` ("all", or a comma list of indices, UUIDs or unique UUID
 * prefixes, as --device takes one) into cards[0..*n) (at most max).  A card
 * named twice, an empty item or one that matches nothing is an error
 * naming it.
 */
int hct__multi_cards(const char *spec, hct_multi_card_t *cards, int max, int *n);

/* 1 when `spec` names several cards ("all" or a list), not one. */
int hct__multi_spec(const char *spec);

/*
 * Probes every card of o at once and compares them; *agree (may be NULL)
 * receives what agree.c found (hct__agree_free).  Returns 0 when every
 * card decided; HCT_EWORKER naming the cards that did not (the others'
 * results and the agreement of those that decided are kept); or an error
 * of its own (DB, spawn, bad options).
 */
int hct__multiprobe(const hct_multi_opts_t *o, hct_agree_t *agree);

/* `hctune probe --device all|LIST`: the cards of o->device resolved, then
 * hct__multiprobe with them. */
int hct__multiprobe_cli(const hct_probe_opts_t *o, double outlier_pct);

/*
 * Compares cards uuids[0..n) of the local DB by the fleet merge's rule: their exports merged (hct__fleet_merge), the pooled
 * decisions written under the model's pool card "pooled-<hash>"
 * (source "fleet"), every
 * conflicting variant quarantined on every card of its model (and a card
 * decision that uses one replaced by the pooled one), and outliers
 * reported with their figures.  parent_run is the run the pooled rows
 * name.  Without `write` nothing is written (--no-decide): the report
 * alone.
 */
int hct__agree(hct_db_t *db, const char *kernels_dir, const char *const *uuids, int n,
               double outlier_pct, const char *parent_run, int write, hct_agree_t *out);
void hct__agree_free(hct_agree_t *a);
/* The report as text: a line per model, per pooled range, per flag. */
void hct__agree_print(const hct_agree_t *a, FILE *f);

#endif /* HCT_MULTIPROBE_H */
