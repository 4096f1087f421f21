/*
 * cmd_bench.c: `hctune bench`: chosen variants side by side, measured with
 * the probe's own method (parity first, then cold interleaved timing), so a
 * figure from bench and one from probe mean the same thing.  Changes no
 * decision; the trials are recorded like any others.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tuner.h"

static const char usage[] =
    "usage: hctune bench --variants A,B,... [--op NAME] [--tokens LIST] [--device N|UUID]\n"
    "                    [--db PATH] [--json]\n"
    "\n"
    "Checks and times the variants named (every parameter point of each) with the\n"
    "probe's method, and prints per token count each variant's best median, its\n"
    "95% confidence interval, and its ratio to the first variant named.\n";

void hct__timed_rows_add(void *arg, int T, const char *variant, const char *params,
                         const hct_summary_t *s, int pruned) {
  hct_timed_rows_t *rows = arg;
  if (rows->oom) return;
  if (hct__grow(&rows->r, &rows->cap, rows->n, sizeof *rows->r, 256) != 0) {
    rows->oom = 1;
    return;
  }
  hct_timed_row_t *r = &rows->r[rows->n++];
  r->T = T;
  hct__strlcpy(r->variant, variant, sizeof r->variant);
  hct__strlcpy(r->params, params, sizeof r->params);
  r->s = *s;
  r->pruned = pruned;
}

void hct__timed_rows_free(hct_timed_rows_t *rows) {
  free(rows->r);
  memset(rows, 0, sizeof *rows);
}

/* The fastest point of `variant` at T, or NULL. */
static const hct_timed_row_t *best_of(const hct_timed_rows_t *rows, int T, const char *variant) {
  const hct_timed_row_t *best = NULL;
  for (int i = 0; i < rows->n; i++) {
    const hct_timed_row_t *r = &rows->r[i];
    if (r->T != T || strcmp(r->variant, variant) != 0 || r->pruned) continue;
    if (best == NULL || r->s.median < best->s.median) best = r;
  }
  return best;
}

int cmd_bench(int argc, char **argv) {
  hct_probe_opts_t o;
  memset(&o, 0, sizeof o);
  const char *tokens = NULL;
  int json = 0;
  const hct_option_t opts[] = {
      HCT_OPT_STRING("variants", &o.only_variants),
      HCT_OPT_STRING("op", &o.op),
      HCT_OPT_STRING("tokens", &tokens),
      HCT_OPT_STRING("device", &o.device),
      HCT_OPT_STRING("db", &o.db_path),
      HCT_OPT_FLAG("json", &json),
      HCT_OPT_END,
  };
  int parsed = hct__cli_options(argc, argv, opts, usage, NULL);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  if (tokens && hct__parse_token_list(tokens, &o.tokens) < 0)
    return hct__usage_error("bench", "--tokens '%s': %s", tokens, hct_last_error());
  if (o.only_variants == NULL) return hct__usage_error("bench", "--variants is required");

  /* The names, in the order given. */
  char names[16][32];
  int nn = 0;
  for (const char *p = o.only_variants; *p && nn < 16;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 0 || len >= 32) return hct__usage_error("bench", "--variants '%s': bad name", o.only_variants);
    memcpy(names[nn], p, len);
    names[nn++][len] = '\0';
    p += len + (e != NULL);
  }

  hct_timed_rows_t rows = {0};
  o.no_decide = 1;
  o.quiet = json;
  o.on_timed = hct__timed_rows_add;
  o.on_timed_arg = &rows;
  o.no_table = 1; /* bench prints its own */
  o.no_prune = 1;  /* side by side: every variant timed to the end */
  o.one_mode = 1;
  int rc = hct__probe(&o);
  if (rc == 0 && rows.oom) rc = hct__error(HCT_ENOMEM, "out of memory for the timed rows");
  if (rc != 0) {
    hct__timed_rows_free(&rows);
    return hct__cli_fail(rc);
  }

  json_t *out = json_array();
  if (!json) {
    printf("%6s", "T");
    for (int k = 0; k < nn; k++) printf("  %-44s", names[k]);
    printf("\n");
  }
  /* The token counts timed, in order: the probe's token set. */
  hct_tokens_t timed = {0};
  for (int i = 0; i < rows.n; i++) hct__tokens_add(&timed, rows.r[i].T);
  for (int k0 = 0; k0 < timed.n; k0++) {
    const int T = timed.t[k0];
    const hct_timed_row_t *first = best_of(&rows, T, names[0]);
    if (!json) printf("%6d", T);
    for (int k = 0; k < nn; k++) {
      const hct_timed_row_t *r = best_of(&rows, T, names[k]);
      char cell[128];
      if (r == NULL) {
        snprintf(cell, sizeof cell, "(not timed: rejected or unsupported)");
      } else {
        double ratio = first ? r->s.median / first->s.median : NAN;
        snprintf(cell, sizeof cell, "%7.2f us [%.2f, %.2f] x%.3f", r->s.median, r->s.ci_lo,
                 r->s.ci_hi, ratio);
        json_array_append_new(out, json_pack("{s:i, s:s, s:s, s:f, s:f, s:f, s:i, s:f}", "T", T,
                                             "variant", r->variant, "params", r->params,
                                             "median_us", r->s.median, "ci_lo_us", r->s.ci_lo,
                                             "ci_hi_us", r->s.ci_hi, "samples", r->s.n,
                                             "ratio_to_first", ratio));
      }
      if (!json) printf("  %-44s", cell);
    }
    if (!json) printf("\n");
  }
  if (json) {
    char *s = json_dumps(out, JSON_INDENT(2));
    if (s) printf("%s\n", s);
    free(s);
  }
  json_decref(out);
  hct__timed_rows_free(&rows);
  return HCT_EXIT_OK;
}
