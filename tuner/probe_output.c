/*
 * probe_output.c: what a probe shows while it runs and at its end: progress
 * events (JSON lines, a terminal's status line, log lines) and the
 * decision table.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe_internal.h"

/* One progress event: a JSON line in --json mode, a rewritten status line
 * on a terminal, a plain log line otherwise. */
void hct__probe_progress(probe_t *P, const char *stage, int done, int total, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (P->o->json) {
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:s, s:f}", "event", "progress", "stage", stage,
                          "done", done, "total", total, "what", what, "elapsed_s",
                          (double)(hct__now_ns() - P->t0) / 1e9);
    char *s = json_dumps(j, JSON_COMPACT);
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(j);
    return;
  }
  if (P->o->quiet) return;
  if (P->tty)
    fprintf(stderr, "\r\033[K%s [%d/%d] %s", stage, done, total, what);
  else
    fprintf(stderr, "hctune: %s [%d/%d] %s\n", stage, done, total, what);
  fflush(stderr);
}

void hct__probe_progress_end(probe_t *P) {
  if (P->tty && !P->o->json && !P->o->quiet) fprintf(stderr, "\r\033[K");
}

void hct__probe_table(probe_t *P) {
  const cand_t *b = &P->cands[P->baseline];
  printf("%s on %s (%s, %s), %s, %s launches per graph\n", P->op->name, P->dev.name,
         P->dev.uuid, P->dev.arch, P->op->timing_cold ? "cold" : "hot", P->op->batch_expr);
  printf("%6s  %-34s %10s %10s %8s  %-34s %10s %8s\n", "T", "bitwise winner", "us", "baseline",
         "speedup", "kl winner", "us", "speedup");
  for (int k = 0; k < P->tokens.n; k++) {
    const int T = P->tokens.t[k];
    int wb = hct__probe_winner_at(P, k, 0, 1), wk = hct__probe_winner_at(P, k, 1, 1);
    if (wb < 0) {
      printf("%6d  %-34s\n", T, "(baseline not timed)");
      continue;
    }
    const cand_t *cb = &P->cands[wb], *ck = &P->cands[wk];
    double base = b->timing[k].median;
    printf("%6d  %-34.34s %10.2f %10.2f %7.2fx  %-34.34s %10.2f %7.2fx\n", T, cb->c.label,
           cb->timing[k].median, base, base / cb->timing[k].median, ck->c.label,
           ck->timing[k].median, base / ck->timing[k].median);
  }
}

void hct__probe_compiled(probe_t *P, int binaries, int hits, int failed, double wall_ms,
                         double cpu_ms) {
  if (P->o->json) {
    printf("{\"event\":\"compiled\",\"binaries\":%d,\"cache_hits\":%d,\"failed\":%d,"
           "\"wall_ms\":%.1f,\"compile_ms\":%.1f}\n", binaries, hits, failed, wall_ms, cpu_ms);
    fflush(stdout);
  } else if (!P->o->quiet) {
    fprintf(stderr, "hctune: compiled %d binaries in %.2f s (%d from the cache, %d failed; the op's reference and the comparison kernels among them)\n",
            binaries, wall_ms / 1e3, hits, failed);
  }
}

void hct__probe_result_json(const json_t *result) {
  char *s = json_dumps(result, JSON_COMPACT);
  if (s) printf("%s\n", s);
  free(s);
}
