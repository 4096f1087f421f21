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

int cmd_verify_decisions(int argc, char **argv) {
  const char *device = NULL, *only_op = NULL;
  double limit = 1.03;
  int exhaustive = 0;
  const hct_option_t opts[] = {
      HCT_OPT_FLAG("exhaustive", &exhaustive),
      HCT_OPT_STRING("device", &device),
      HCT_OPT_STRING("op", &only_op),
      HCT_OPT_NUMBER("limit", &limit, 1.0, 1e9),
      HCT_OPT_END,
  };
  hct_cli_env_t env;
  int rc = hct__cli_options(argc, argv, opts, usage, &env);
  if (rc != 0) return rc == HCT_OPTS_HELP ? HCT_EXIT_OK : rc;
  const char *path = env.db_path, *kdir = env.kernels;
  hct_db_t *db = env.db;
  hct_db_decision_t *d = NULL;
  int nd = 0;
  rc = hct__db_decisions_list(db, &d, &nd);
  hct__db_close(db);
  if (rc != 0) return hct__cli_fail(rc);
  if (nd == 0) {
    printf("no decisions recorded in '%s'\n", path);
    free(d);
    return HCT_EXIT_OK;
  }
  hct_device_t want;
  if (device && (rc = hct__device_find(device, &want)) != 0) {
    free(d);
    return hct__cli_fail(rc);
  }

  int worst_fail = 0, checked = 0;
  uint8_t *done = calloc((size_t)nd, 1);
  hct_timed_rows_t rows = {0};
  rejections_t rej = {0};
  if (done == NULL) {
    free(d);
    return hct__cli_fail(hct__error(HCT_ENOMEM, "out of memory"));
  }
  printf("%-14s %-10s %-8s %5s  %-28s %10s  %-28s %10s %7s%s\n", "card", "op", "class", "T",
         "chosen", "us", "best", "us", "ratio", exhaustive ? "  family best (exhaustive)        us     gap" : "");
  /* One re-timing per (card, op): every decision of both classes shares it. */
  for (int i = 0; i < nd; i++) {
    if (done[i] || (only_op && strcmp(d[i].op, only_op) != 0)) continue;
    if (device && strcmp(d[i].keys.uuid, want.uuid) != 0) continue;
    hct_device_t dev;
    if (hct__device_find(d[i].keys.uuid, &dev) != 0) {
      printf("%-14.14s %-10s skipped: card not on this host\n", d[i].keys.uuid, d[i].op);
      continue;
    }
    hct_op_t *op;
    if ((rc = hct__manifest_load(kdir, d[i].op, &op)) != 0) break;
    hct_probe_opts_t o;
    memset(&o, 0, sizeof o);
    o.device = dev.uuid;
    o.op = d[i].op;
    o.db_path = path;
    o.no_decide = 1;
    o.no_table = 1;
    o.quiet = 1;
    o.sample_factor = 2;
    o.one_mode = 1;
    o.on_timed = hct__timed_rows_add;
    o.on_timed_arg = &rows;
    /* Every timed candidate's timed launches verified, so the chosen one's
     * are whether or not it would win now. */
    o.verify_all = 1;
    /* A chosen variant quarantined since is checked again, not skipped:
     * what fails now must say which check it fails. */
    o.retry_quarantined = 1;
    o.on_rejected = on_rejected;
    o.on_rejected_arg = &rej;
    /* Every point timed to the end: the exhaustive best of each family. */
    o.exhaustive = exhaustive;
    o.no_prune = exhaustive;
    rows.n = 0;
    rej.n = 0;
    for (int j = i; j < nd; j++)
      if (strcmp(d[j].keys.uuid, d[i].keys.uuid) == 0 && strcmp(d[j].op, d[i].op) == 0) {
        hct_tokens_t tj;
        decision_tokens(&d[j], &tj);
        for (int q = 0; q < tj.n && o.tokens.n < HCT_MAX_TOKEN_LIST; q++) hct__tokens_add(&o.tokens, tj.t[q]);
      }
    if ((rc = hct__probe(&o)) == 0 && (rows.oom || rej.oom))
      rc = hct__error(HCT_ENOMEM, "out of memory for the timed rows");
    if (rc != 0) {
      hct__manifest_free(op);
      break;
    }
    for (int j = i; j < nd; j++) {
      if (strcmp(d[j].keys.uuid, d[i].keys.uuid) != 0 || strcmp(d[j].op, d[i].op) != 0) continue;
      done[j] = 1;
      hct_parity_t cls = HCT_PARITY_BITWISE;
      hct__parity_from_name(d[j].parity, &cls);
      const rejection_t *out = rejection_of(&rej, d[j].variant, d[j].params);
      if (out != NULL) {
        printf("%-14.14s %-10s %-8s %2d-%-2d  %-28.28s REJECTED by the %s check at T=%d: %s\n",
               d[j].keys.uuid, d[j].op, d[j].parity, d[j].tmin, d[j].tmax, d[j].variant,
               out->check, out->T, out->why);
        hct_tokens_t tj;
        decision_tokens(&d[j], &tj);
        checked += tj.n;
        worst_fail = 1;
        continue;
      }
      hct_tokens_t tj;
      decision_tokens(&d[j], &tj);
      for (int q = 0; q < tj.n; q++) {
        const int T = tj.t[q];
        const hct_timed_row_t *chosen = NULL, *best = NULL, *family = NULL;
        for (int k = 0; k < rows.n; k++) {
          const hct_timed_row_t *r = &rows.r[k];
          if (r->T != T || r->pruned) continue;
          const hct_variant_t *v = hct__variant_find(op, r->variant);
          if (v == NULL || !hct__variant_in_decision(op, v, cls)) continue;
          /* A candidate a check put out is no one's best. */
          if (rejection_of(&rej, r->variant, r->params) != NULL) continue;
          if (strcmp(r->variant, d[j].variant) == 0 && strcmp(r->params, d[j].params) == 0) chosen = r;
          if (best == NULL || r->s.median < best->s.median) best = r;
          if (strcmp(r->variant, d[j].variant) == 0 && (family == NULL || r->s.median < family->s.median))
            family = r;
        }
        checked++;
        if (chosen == NULL || best == NULL) {
          char why[1024];
          not_timed_why(&rows, &rej, T, d[j].variant, d[j].params, why, sizeof why);
          printf("%-14.14s %-10s %-8s %5d  %-28.28s %10s  FAILED: %s\n", d[j].keys.uuid, d[j].op,
                 d[j].parity, T, d[j].variant, "-", why);
          worst_fail = 1;
          continue;
        }
        double ratio = chosen->s.median / best->s.median;
        char cl[300], bl[300];
        snprintf(cl, sizeof cl, "%s %s", chosen->variant, chosen->params);
        snprintf(bl, sizeof bl, "%s %s", best->variant, best->params);
        printf("%-14.14s %-10s %-8s %5d  %-28.28s %10.2f  %-28.28s %10.2f %7.3f", d[j].keys.uuid,
               d[j].op, d[j].parity, T, cl, chosen->s.median, bl, best->s.median, ratio);
        /* The decision against the best point of its own family, every
         * point timed: the gap a search left. */
        double gap = exhaustive && family ? chosen->s.median / family->s.median - 1 : 0;
        if (exhaustive && family) printf("  %-28.28s %8.2f %6.2f%%", family->params, family->s.median, 100 * gap);
        printf("%s\n", ratio > limit || 1 + gap > limit ? "  OVER LIMIT" : "");
        if (ratio > limit || 1 + gap > limit) worst_fail = 1;
      }
    }
    hct__manifest_free(op);
  }
  hct__timed_rows_free(&rows);
  free(rej.r);
  free(done);
  free(d);
  if (rc != 0) return hct__cli_fail(rc);
  printf("%d decisions x token counts checked; limit %.3f: %s\n", checked, limit,
         worst_fail ? "some fail a check or exceed it" : "every chosen variant passes every check, all within");
  return worst_fail ? HCT_EXIT_FAIL : HCT_EXIT_OK;
}
