/*
 * probe_clock.c: where a probe's time goes (issue 34).  Every moment of a
 * probe, from its start to the breakdown, belongs to exactly one stage, so
 * the stages add up to its wall time and nothing is counted twice: a stage
 * is entered with hct__probe_stage, which returns the stage it left, and
 * left by entering that one again.  Two kinds of time are moved out of the
 * stage that caused them, because they are what a reader asks about
 * whatever caused them: the database's writes (record), and the worker's
 * drawing of inputs with their float64 reference (inputs and references,
 * as the worker's replies report it: worker.h's "phase_ms").  The worker's
 * other phases (runs, figures, device memory) are summed over every call:
 * what the checks and timings spend inside the worker.
 *
 * The breakdown is a JSON object (the --json result's "breakdown", the
 * run's args in the DB, the report's table) and a short table printed at
 * the end of `hctune probe`:
 *   {"total_ms": 56512, "stages": [{"stage": "compile", "label": "compile",
 *    "ms": 21034, "n": 52, "unit": "binaries compiled"}, ...],
 *    "worker_ms": {"runs": .., "figures": .., "memory": ..}}
 * (milliseconds as integers: the text stays exact and short).
 * Loop thread only (a probe is one thread).
 */
#include <stdio.h>
#include <string.h>

#include "probe_internal.h"

/* The stages in the order the table lists them; "stage" is the JSON key,
 * "label" what a person reads, "unit" what n counts. */
static const struct {
  const char *stage, *label, *unit;
} stages[HCT_PS_N] = {
    [HCT_PS_COMPILE] = {"compile", "compile", "binaries compiled"},
    [HCT_PS_WORKER] = {"worker", "worker start", "processes"},
    [HCT_PS_INPUTS] = {"inputs", "inputs and references", "input sets"},
    [HCT_PS_CHECK_ALL] = {"checks_all", "checks, every point", "checks"},
    [HCT_PS_CHECK_LATE] = {"checks_finalists", "checks, finalists", "checks"},
    [HCT_PS_CHECK_SERVE] = {"checks_ranges", "checks, range ends", "checks"},
    [HCT_PS_SEARCH] = {"search", "search", "timing requests"},
    [HCT_PS_TIMING] = {"timing", "timing", "timing requests"},
    [HCT_PS_VERIFY] = {"verify", "verify", "candidates"},
    [HCT_PS_DECIDE] = {"decide", "decide", "decision rows"},
    [HCT_PS_COPYBW] = {"copy_bw", "copy bandwidth", ""},
    [HCT_PS_RECORD] = {"record", "record", "rows"},
    [HCT_PS_OTHER] = {"other", "other", ""},
};

/* The time since the last switch into the current stage. */
static void settle(probe_t *P) {
  const uint64_t now = hct__now_ns();
  P->clock.ns[P->clock.cur] += now - P->clock.since;
  P->clock.since = now;
}

void hct__probe_clock_start(probe_t *P) {
  memset(&P->clock, 0, sizeof P->clock);
  P->clock.cur = HCT_PS_OTHER;
  P->clock.since = P->t0;
}

int hct__probe_stage(probe_t *P, int stage) {
  settle(P);
  const int was = P->clock.cur;
  P->clock.cur = stage >= 0 && stage < HCT_PS_N ? stage : HCT_PS_OTHER;
  return was;
}

void hct__probe_count(probe_t *P, int stage, int n) {
  if (stage >= 0 && stage < HCT_PS_N) P->clock.n[stage] += n;
}

void hct__probe_worker_took(probe_t *P) {
  hct_worker_phases_t ph;
  hct__worker_phases(P->w, &ph);
  settle(P);
  /* The call's input set: out of the stage that asked for it, never more
   * than that stage holds (the call's time is in it, so it holds that). */
  uint64_t in = (uint64_t)(ph.ms[HCT_WP_INPUTS] * 1e6);
  if (in > P->clock.ns[P->clock.cur]) in = P->clock.ns[P->clock.cur];
  if (in > 0 && P->clock.cur != HCT_PS_INPUTS) {
    P->clock.ns[P->clock.cur] -= in;
    P->clock.ns[HCT_PS_INPUTS] += in;
    P->clock.n[HCT_PS_INPUTS]++;
  }
  for (int k = 0; k < HCT_WP_N; k++)
    if (k != HCT_WP_INPUTS) P->clock.worker_ms[k] += ph.ms[k];
}

int hct__probe_trial_add(probe_t *P, const hct_db_trial_t *t) {
  const int was = hct__probe_stage(P, HCT_PS_RECORD);
  int rc = hct__db_trial_add(P->db, t, NULL);
  P->clock.n[HCT_PS_RECORD]++;
  hct__probe_stage(P, was);
  return rc;
}

static json_int_t ms_of(uint64_t ns) { return (json_int_t)((ns + 500000) / 1000000); }

json_t *hct__probe_breakdown_json(probe_t *P) {
  settle(P);
  uint64_t total = 0;
  for (int s = 0; s < HCT_PS_N; s++) total += P->clock.ns[s];
  json_t *list = json_array(), *worker = json_object();
  for (int s = 0; s < HCT_PS_N; s++)
    json_array_append_new(list, json_pack("{s:s, s:s, s:I, s:i, s:s}", "stage", stages[s].stage, "label",
                                          stages[s].label, "ms", ms_of(P->clock.ns[s]), "n",
                                          P->clock.n[s], "unit", stages[s].unit));
  for (int k = 0; k < HCT_WP_N; k++)
    if (k != HCT_WP_INPUTS)
      json_object_set_new(worker, hct__worker_phase_names[k],
                          json_integer((json_int_t)(P->clock.worker_ms[k] + 0.5)));
  return json_pack("{s:I, s:o, s:o}", "total_ms", ms_of(total), "stages", list, "worker_ms", worker);
}

void hct__probe_breakdown_print(const json_t *b, FILE *f, const char *indent) {
  json_t *list = json_object_get(b, "stages");
  if (!json_is_array(list)) return;
  fprintf(f, "%swhere the time went (%.1f s):\n", indent, json_number_value(json_object_get(b, "total_ms")) / 1e3);
  size_t i;
  json_t *s;
  json_array_foreach(list, i, s) {
    const double sec = json_number_value(json_object_get(s, "ms")) / 1e3;
    const int n = (int)json_integer_value(json_object_get(s, "n"));
    const char *unit = json_string_value(json_object_get(s, "unit"));
    /* Only what happened: a stage with no time to show and nothing counted. */
    if (sec < 0.05 && n == 0) continue;
    const char *label = json_string_value(json_object_get(s, "label"));
    fprintf(f, "%s  %-22s %7.1f s", indent, label ? label : "?", sec);
    if (n > 0 && unit && unit[0]) fprintf(f, "  %d %s", n, unit);
    fputc('\n', f);
  }
  json_t *w = json_object_get(b, "worker_ms");
  double any = 0;
  for (int k = 0; k < HCT_WP_N; k++) any += json_number_value(json_object_get(w, hct__worker_phase_names[k]));
  if (any <= 0) return;
  fprintf(f, "%s  inside the worker:", indent);
  for (int k = 0, first = 1; k < HCT_WP_N; k++) {
    json_t *v = json_object_get(w, hct__worker_phase_names[k]);
    if (v == NULL) continue;
    fprintf(f, "%s %s %.1f s", first ? "" : ",", k == HCT_WP_MEMORY ? "device memory" : hct__worker_phase_names[k],
            json_number_value(v) / 1e3);
    first = 0;
  }
  fputc('\n', f);
}
