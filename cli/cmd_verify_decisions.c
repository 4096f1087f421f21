/*
 * cmd_verify_decisions.c: `hctune verify-decisions`: checks again, with
 * every check of a probe (parity on several runs in one allocation, fresh
 * inputs, determinism, after a producer, and the outputs of its timed
 * launches), every candidate behind each recorded decision on this host's
 * cards, re-times them with twice the samples, and prints the ratio of the
 * chosen variant's time to the best one's.  A chosen variant that fails a
 * check, or a ratio above 1.03, means the decision no longer holds.
 * Records the new trials; changes no decision.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "db.h"
#include "tuner.h"

static const char usage[] =
    "usage: hctune verify-decisions [--db PATH] [--device N|UUID] [--op NAME] [--limit RATIO]\n"
    "                               [--exhaustive]\n"
    "\n"
    "Checks again every candidate of each recorded decision for the cards of\n"
    "this host with all of a probe's checks (parity over several runs in one\n"
    "allocation, determinism, after a producer kernel, and the outputs of the\n"
    "launches it is timed on), re-times them with twice the samples, and prints\n"
    "per decision and token count the ratio of the chosen variant's median to\n"
    "the best median of its class.  Exits 1 when a chosen variant fails a check\n"
    "or a ratio exceeds --limit (default 1.03).\n"
    "\n"
    "--exhaustive times every point of every family at the decided counts, to the\n"
    "end (no search, no pruning), and adds per row the best point of the chosen\n"
    "variant's own family and the gap of the decision to it: what a search (the\n"
    "manifest's \"search\") cost, against timing everything.  A gap above\n"
    "--limit fails too.\n";

/* The candidates a check put out, with the check and why (on_rejected). */
typedef struct rejection_s {
  int T;
  char variant[32];
  char params[256];
  char check[16];
  char why[320];
} rejection_t;

typedef struct rejections_s {
  rejection_t *r;
  int n, cap, oom;
} rejections_t;

static void on_rejected(void *arg, int T, const char *variant, const char *params,
                        const char *check, const char *why) {
  rejections_t *x = arg;
  if (hct__grow(&x->r, &x->cap, x->n, sizeof *x->r, 16) != 0) {
    x->oom = 1;
    return;
  }
  rejection_t *r = &x->r[x->n++];
  r->T = T;
  hct__strlcpy(r->variant, variant, sizeof r->variant);
  hct__strlcpy(r->params, params, sizeof r->params);
  hct__strlcpy(r->check, check, sizeof r->check);
  hct__strlcpy(r->why, why, sizeof r->why);
}

/* The check that put the decision's variant out (at any T: a wrong answer
 * anywhere puts a candidate out everywhere), or NULL. */
static const rejection_t *rejection_of(const rejections_t *x, const char *variant,
                                       const char *params) {
  for (int k = 0; k < x->n; k++)
    if (strcmp(x->r[k].variant, variant) == 0 && strcmp(x->r[k].params, params) == 0)
      return &x->r[k];
  return NULL;
}

/* Why the chosen variant has no usable timing at T, as one line: pruned
 * (its median against the fastest one it was timed with, and whether a
 * check has put that one out since), or not timed at all. */
static void not_timed_why(const hct_timed_rows_t *rows, const rejections_t *rej, int T,
                          const char *variant, const char *params, char *why, size_t len) {
  const hct_timed_row_t *mine = NULL, *fastest = NULL;
  for (int k = 0; k < rows->n; k++) {
    const hct_timed_row_t *r = &rows->r[k];
    if (r->T != T) continue;
    if (strcmp(r->variant, variant) == 0 && strcmp(r->params, params) == 0) mine = r;
    if (fastest == NULL || r->s.median < fastest->s.median) fastest = r;
  }
  if (mine == NULL) {
    snprintf(why, len, "not timed at T=%d (it passed no check there, or its timing failed: "
             "hctune show has its trials)", T);
    return;
  }
  const rejection_t *out = fastest ? rejection_of(rej, fastest->variant, fastest->params) : NULL;
  snprintf(why, len, "pruned while timed at T=%d: %.2f us against the fastest timed with it, %s %s "
           "at %.2f us%s%s%s", T, mine->s.median, fastest->variant, fastest->params,
           fastest->s.median, out ? " (since put out by the " : "", out ? out->check : "",
           out ? " check)" : "");
}

/*
 * The token counts a decision was made from: its evidence's per-T counts
 * (a range of the prefill op covers counts up to the midpoints to the
 * probed ones, which were not measured and are not re-timed), else every
 * count of its range when that fits in a token list, else its two ends.
 */
static void decision_tokens(const hct_db_decision_t *d, hct_tokens_t *out) {
  memset(out, 0, sizeof *out);
  json_t *ev = json_loads(d->evidence_json, 0, NULL);
  json_t *per = json_object_get(ev, "per_T"), *x;
  size_t i;
  json_array_foreach(per, i, x) {
    json_int_t T = json_integer_value(json_object_get(x, "T"));
    if (T >= d->tmin && T <= d->tmax) hct__tokens_add(out, (int)T);
  }
  json_decref(ev);
  if (out->n > 0) return;
  if (d->tmax - d->tmin < HCT_MAX_TOKEN_LIST) {
    for (int T = d->tmin; T <= d->tmax; T++) hct__tokens_add(out, T);
    return;
  }
  hct__tokens_add(out, d->tmin);
  hct__tokens_add(out, d->tmax);
}

/* One run of verify-decisions: what was asked, the decisions, and what
 * came of them so far. */
typedef struct verify_s {
  const char *path, *kdir, *device, *only_op;
  double limit;
  int exhaustive;
  hct_device_t want;     /* --device's card, when given */
  hct_db_decision_t *d;
  int nd;
  uint8_t *done;         /* decisions reported (their card and op re-probed) */
  hct_timed_rows_t rows;
  rejections_t rej;
  int checked;           /* decisions x token counts checked */
  int matched;           /* decisions that --op and --device leave in */
  int skipped;           /* of those, on cards not on this host */
  int worst_fail;
} verify_t;

static int same_group(const hct_db_decision_t *a, const hct_db_decision_t *b) {
  return strcmp(a->keys.uuid, b->keys.uuid) == 0 && strcmp(a->op, b->op) == 0;
}

/* Every decision of decision i's card and op into one probe: options of a
 * probe that records trials, decides nothing, times every candidate with
 * twice the samples and verifies every timed one, then runs it. */
static int reprobe(verify_t *V, int i, const hct_device_t *dev) {
  hct_probe_opts_t o;
  memset(&o, 0, sizeof o);
  o.device = dev->uuid;
  o.op = V->d[i].op;
  o.db_path = V->path;
  o.no_decide = 1;
  o.no_table = 1;
  o.quiet = 1;
  o.sample_factor = 2;
  o.one_mode = 1;
  o.on_timed = hct__timed_rows_add;
  o.on_timed_arg = &V->rows;
  /* Every timed candidate's timed launches verified, so the chosen one's
   * are whether or not it would win now. */
  o.verify_all = 1;
  /* A chosen variant quarantined since is checked again, not skipped:
   * what fails now must say which check it fails. */
  o.retry_quarantined = 1;
  o.on_rejected = on_rejected;
  o.on_rejected_arg = &V->rej;
  /* Every point timed to the end: the exhaustive best of each family. */
  o.exhaustive = V->exhaustive;
  o.no_prune = V->exhaustive;
  V->rows.n = 0;
  V->rej.n = 0;
  for (int j = i; j < V->nd; j++)
    if (same_group(&V->d[j], &V->d[i])) {
      hct_tokens_t tj;
      decision_tokens(&V->d[j], &tj);
      for (int q = 0; q < tj.n && o.tokens.n < HCT_MAX_TOKEN_LIST; q++) hct__tokens_add(&o.tokens, tj.t[q]);
    }
  int rc = hct__probe(&o);
  if (rc == 0 && (V->rows.oom || V->rej.oom))
    rc = hct__error(HCT_ENOMEM, "out of memory for the timed rows");
  return rc;
}

/* One row of decision d at T: the chosen variant's new median against the
 * best of its class or bit family (and, with --exhaustive, of its own
 * variant's points). */
static void report_T(verify_t *V, const hct_db_decision_t *d, const hct_op_t *op, int T) {
  const hct_timed_row_t *chosen = NULL, *best = NULL, *family = NULL;
  for (int k = 0; k < V->rows.n; k++) {
    const hct_timed_row_t *r = &V->rows.r[k];
    if (r->T != T || r->pruned) continue;
    const hct_variant_t *v = hct__variant_find(op, r->variant);
    if (v == NULL || !hct__variant_in_parity(op, v, d->parity)) continue;
    /* A candidate a check put out is no one's best. */
    if (rejection_of(&V->rej, r->variant, r->params) != NULL) continue;
    if (strcmp(r->variant, d->variant) == 0 && strcmp(r->params, d->params) == 0) chosen = r;
    if (best == NULL || r->s.median < best->s.median) best = r;
    if (strcmp(r->variant, d->variant) == 0 && (family == NULL || r->s.median < family->s.median))
      family = r;
  }
  V->checked++;
  if (chosen == NULL || best == NULL) {
    char why[1024];
    not_timed_why(&V->rows, &V->rej, T, d->variant, d->params, why, sizeof why);
    printf("%-14.14s %-10s %-8s %5d  %-28.28s %10s  FAILED: %s\n", d->keys.uuid, d->op, d->parity,
           T, d->variant, "-", why);
    V->worst_fail = 1;
    return;
  }
  double ratio = chosen->s.median / best->s.median;
  char cl[300], bl[300];
  snprintf(cl, sizeof cl, "%s %s", chosen->variant, chosen->params);
  snprintf(bl, sizeof bl, "%s %s", best->variant, best->params);
  printf("%-14.14s %-10s %-8s %5d  %-28.28s %10.2f  %-28.28s %10.2f %7.3f", d->keys.uuid, d->op,
         d->parity, T, cl, chosen->s.median, bl, best->s.median, ratio);
  /* The decision against the best point of its own family, every point
   * timed: the gap a search left. */
  double gap = V->exhaustive && family ? chosen->s.median / family->s.median - 1 : 0;
  if (V->exhaustive && family)
    printf("  %-28.28s %8.2f %6.2f%%", family->params, family->s.median, 100 * gap);
  printf("%s\n", ratio > V->limit || 1 + gap > V->limit ? "  OVER LIMIT" : "");
  if (ratio > V->limit || 1 + gap > V->limit) V->worst_fail = 1;
}

/* The rows of decision d after its card and op were re-probed: one line
 * when a check put its variant out, else one per token count. */
static void report_decision(verify_t *V, const hct_db_decision_t *d, const hct_op_t *op) {
  hct_tokens_t tj;
  decision_tokens(d, &tj);
  const rejection_t *out = rejection_of(&V->rej, d->variant, d->params);
  if (out != NULL) {
    printf("%-14.14s %-10s %-8s %2d-%-2d  %-28.28s REJECTED by the %s check at T=%d: %s\n",
           d->keys.uuid, d->op, d->parity, d->tmin, d->tmax, d->variant, out->check, out->T,
           out->why);
    V->checked += tj.n;
    V->worst_fail = 1;
    return;
  }
  for (int q = 0; q < tj.n; q++) report_T(V, d, op, tj.t[q]);
}

/* Decision i's card and op: re-probed here and every decision of theirs
 * reported, or skipped when the card is not on this host.  Returns 0 or
 * the error that ends the command. */
static int verify_group(verify_t *V, int i) {
  hct_device_t dev;
  if (hct__device_find(V->d[i].keys.uuid, &dev) != 0) {
    printf("%-14.14s %-10s skipped: card not on this host\n", V->d[i].keys.uuid, V->d[i].op);
    return 0;
  }
  hct_op_t *op = NULL;
  int rc = hct__manifest_load(V->kdir, V->d[i].op, &op);
  if (rc == 0) rc = reprobe(V, i, &dev);
  for (int j = i; rc == 0 && j < V->nd; j++) {
    if (!same_group(&V->d[j], &V->d[i])) continue;
    V->done[j] = 1;
    report_decision(V, &V->d[j], op);
  }
  if (op != NULL) hct__manifest_free(op);
  return rc;
}

/*
 * What to say when nothing was checked (issue 30: it printed "every
 * chosen variant passes every check" after skipping every card, and
 * exited 0): an error naming why, so a script that runs it on the wrong
 * host, or on an empty database, does not take silence for a pass.
 */
static int nothing_checked(const verify_t *V) {
  if (V->nd == 0)
    return hct__error(HCT_ENOENT, "nothing checked: no decisions recorded in '%s'", V->path);
  if (V->matched == 0)
    return hct__error(HCT_ENOENT, "nothing checked: none of the %d decisions in '%s' is of%s%s%s%s",
                      V->nd, V->path, V->only_op ? " op " : "", V->only_op ? V->only_op : "",
                      V->device ? " card " : "", V->device ? V->want.uuid : "");
  if (V->skipped == V->matched)
    return hct__error(HCT_ENODEV, "nothing checked: the cards of all %d decisions are not on this "
                      "host (probe here, or run it where they are)", V->matched);
  return hct__error(HCT_ENOENT, "nothing checked: the %d decisions re-probed name no token count",
                    V->matched);
}

int cmd_verify_decisions(int argc, char **argv) {
  verify_t V;
  memset(&V, 0, sizeof V);
  V.limit = 1.03;
  const hct_option_t opts[] = {
      HCT_OPT_FLAG("exhaustive", &V.exhaustive),
      HCT_OPT_STRING("device", &V.device),
      HCT_OPT_STRING("op", &V.only_op),
      HCT_OPT_NUMBER("limit", &V.limit, 1.0, 1e9),
      HCT_OPT_END,
  };
  hct_cli_env_t env;
  int rc = hct__cli_options(argc, argv, opts, usage, &env);
  if (rc != 0) return rc == HCT_OPTS_HELP ? HCT_EXIT_OK : rc;
  V.path = env.db_path;
  V.kdir = env.kernels;
  rc = hct__db_decisions_list(env.db, &V.d, &V.nd);
  hct__db_close(env.db);
  if (rc == 0 && V.nd == 0) rc = nothing_checked(&V);
  if (rc == 0 && V.device) rc = hct__device_find(V.device, &V.want);
  if (rc == 0 && (V.done = calloc((size_t)V.nd, 1)) == NULL)
    rc = hct__error(HCT_ENOMEM, "out of memory");
  if (rc != 0) {
    free(V.d);
    return hct__cli_fail(rc);
  }
  printf("%-14s %-10s %-8s %5s  %-28s %10s  %-28s %10s %7s%s\n", "card", "op", "class", "T",
         "chosen", "us", "best", "us", "ratio",
         V.exhaustive ? "  family best (exhaustive)        us     gap" : "");
  /* One re-timing per (card, op): every decision of both classes shares it. */
  for (int i = 0; rc == 0 && i < V.nd; i++) {
    const hct_db_decision_t *d = &V.d[i];
    if ((V.only_op && strcmp(d->op, V.only_op) != 0) || (V.device && strcmp(d->keys.uuid, V.want.uuid) != 0))
      continue;
    V.matched++;
    if (V.done[i]) continue;
    rc = verify_group(&V, i);
    if (rc == 0 && !V.done[i]) {
      /* Skipped: count every decision of its group once. */
      for (int j = i; j < V.nd; j++)
        if (same_group(&V.d[j], d)) V.done[j] = 2;
    }
  }
  for (int i = 0; i < V.nd; i++) V.skipped += V.done[i] == 2;
  hct__timed_rows_free(&V.rows);
  free(V.rej.r);
  free(V.done);
  if (rc == 0 && V.checked == 0) rc = nothing_checked(&V);
  free(V.d);
  if (rc != 0) return hct__cli_fail(rc);
  printf("%d decisions x token counts checked; limit %.3f: %s\n", V.checked, V.limit,
         V.worst_fail ? "some fail a check or exceed it" : "every chosen variant passes every check, all within");
  return V.worst_fail ? HCT_EXIT_FAIL : HCT_EXIT_OK;
}
