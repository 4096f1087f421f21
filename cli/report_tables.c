/*
 * report_tables.c: the tables of a section of `hctune report`'s page and
 * the plots that sit with them: decisions, where the newest probe's time
 * went (its breakdown), parity figures against the limits of each class
 * (table and plot), the floor (the least bytes the op must move) against
 * the winners' times, and faults.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report.h"

/* ---- tables -------------------------------------------------------------- */

void hct__rp_decisions_table(FILE *f, const hct_rp_section_t *s) {
  fputs("<table class=\"decisions\"><thead><tr><th>class asked</th><th>T</th><th>variant</th>"
        "<th>parameters</th><th>its class</th><th class=\"n\">median &micro;s<sup>*</sup></th>"
        "<th class=\"n\">95% CI</th><th class=\"n\">baseline &micro;s<sup>*</sup></th>"
        "<th class=\"n\">speedup<sup>*</sup></th><th class=\"n\">samples</th><th>decided</th>"
        "<th>source</th></tr></thead><tbody>\n",
        f);
  for (int i = 0; i < s->ndec; i++) {
    const hct_db_decision_t *d = &s->dec[i];
    char a[32], b[32], c[32], e[32], sp[32], when[32];
    hct__rp_num(d->median_us, a, sizeof a);
    hct__rp_num(d->ci_lo_us, b, sizeof b);
    hct__rp_num(d->ci_hi_us, c, sizeof c);
    hct__rp_num(d->baseline_us, e, sizeof e);
    hct__rp_num(d->median_us > 0 ? d->baseline_us / d->median_us : NAN, sp, sizeof sp);
    hct__rp_iso(d->decided_at, when, sizeof when);
    /* A bit family's rows (parity "bits:<head>", issue 29) share one
     * style: the family's name is no CSS class. */
    fputs("<tr><td><span class=\"cls ", f);
    hct__rp_esc(f, hct__parity_family(d->parity) != NULL ? "family" : d->parity);
    fputs("\">", f);
    hct__rp_esc(f, d->parity);
    if (d->tmin == d->tmax) fprintf(f, "</span></td><td class=\"nw\">%d</td><td>", d->tmin);
    else fprintf(f, "</span></td><td class=\"nw\">%d&ndash;%d</td><td>", d->tmin, d->tmax);
    hct__rp_esc(f, d->variant);
    fputs("</td><td class=\"p\">", f);
    hct__rp_params_text(f, d->params);
    fputs("</td><td>", f);
    hct__rp_esc(f, d->variant_class);
    fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n\">%s&ndash;%s</td><td class=\"n\">%s</td>"
               "<td class=\"n\">%s&times;</td><td class=\"n\">%d</td><td class=\"nw\">%s</td><td>",
            a, b, c, e, sp, d->samples, when);
    hct__rp_esc(f, d->source);
    fputs("</td></tr>\n", f);
  }
  fputs("</tbody></table>\n<p class=\"note\"><sup>*</sup> at the first T of the range, as "
        "recorded (hctune list shows the same); each T's figures are in the lines above.</p>\n",
        f);
}

/* Where the newest probe of this card and op spent its time (its run's
 * breakdown, tuner/probe_clock.c): a row per stage that took any, its
 * share of the whole.  The JSON comes from the file: a field that is not
 * what it should be is left out, a label escaped. */
void hct__rp_breakdown_table(FILE *f, const hct_rp_section_t *s) {
  json_t *b = s->breakdown ? json_loads(s->breakdown, 0, NULL) : NULL;
  json_t *list = json_object_get(b, "stages");
  const double total = json_number_value(json_object_get(b, "total_ms"));
  if (!json_is_array(list) || !(total > 0) || !isfinite(total)) {
    json_decref(b);
    return;
  }
  char when[32];
  hct__rp_iso(s->breakdown_at, when, sizeof when);
  fprintf(f, "<h3>Where the probe's time went</h3>\n<p class=\"note\">The newest probe that "
             "recorded it (%s, run <span class=\"uuid\">", when);
  hct__rp_esc(f, s->breakdown_run);
  fprintf(f, "</span>): %.1f s in all, every moment in one stage.</p>\n<table class=\"breakdown\">"
             "<thead><tr><th>stage</th><th class=\"n\">seconds</th><th class=\"n\">share</th><th>count</th></tr></thead>"
             "<tbody>\n", total / 1e3);
  size_t i;
  json_t *x;
  json_array_foreach(list, i, x) {
    const char *label = json_string_value(json_object_get(x, "label"));
    const char *unit = json_string_value(json_object_get(x, "unit"));
    const double ms = json_number_value(json_object_get(x, "ms"));
    const json_int_t n = json_integer_value(json_object_get(x, "n"));
    if (label == NULL || !isfinite(ms) || ms < 0 || (ms < 50 && n <= 0)) continue;
    fputs("<tr><td>", f);
    hct__rp_esc(f, label);
    fprintf(f, "</td><td class=\"n\">%.1f</td><td class=\"n\">%.0f%%</td><td>", ms / 1e3,
            100.0 * ms / total);
    if (n > 0) {
      fprintf(f, "%lld ", (long long)n);
      hct__rp_esc(f, unit ? unit : "");
    }
    fputs("</td></tr>\n", f);
  }
  fputs("</tbody></table>\n", f);
  json_decref(b);
}

void hct__rp_parity_table(FILE *f, const hct_rp_section_t *s) {
  fputs("<table class=\"parity\"><thead><tr><th>variant</th><th>parameters</th><th>class</th>"
        "<th class=\"n\">checks passed</th><th>worst figure</th><th class=\"n\">value</th>"
        "<th class=\"n\">limit</th><th class=\"n\">of limit</th><th>verdict</th></tr></thead>"
        "<tbody>\n",
        f);
  for (int fam = 0; fam < s->nfam; fam++)
    for (int i = 0; i < s->nser; i++) {
      const hct_rp_series_t *x = &s->ser[i];
      if (x->family != fam || x->checks == 0) continue;
      int klass = s->fam[fam].klass;
      int ok = x->passed == x->checks;
      char v[32], l[32], share[32];
      if (isfinite(x->worst_value)) snprintf(v, sizeof v, "%.3g", x->worst_value);
      else snprintf(v, sizeof v, "-");
      if (x->worst_limit > 0) snprintf(l, sizeof l, "%.3g", x->worst_limit);
      else if (x->worst_limit == 0) snprintf(l, sizeof l, "0");
      else snprintf(l, sizeof l, "-");
      if (x->worst_limit > 0 && isfinite(x->worst_ratio))
        snprintf(share, sizeof share, "%.0f%%", 100 * x->worst_ratio);
      else snprintf(share, sizeof share, "-");
      fprintf(f, "<tr class=\"%s\"><td style=\"color:%s\">", ok ? "ok" : "bad",
              hct__rp_family_colour(s, fam));
      hct__rp_esc(f, s->fam[fam].variant);
      fputs("</td><td class=\"p\">", f);
      hct__rp_params_text(f, x->params);
      fprintf(f, "</td><td>%s</td><td class=\"n\">%d / %d</td><td>", hct__rp_class_name(klass),
              x->passed, x->checks);
      if (x->worst_what[0]) {
        /* A figure that is 0 everywhere has no worst buffer or T. */
        const char *of = strstr(x->worst_what, " of ");
        if (x->worst_value != 0 || of == NULL) {
          hct__rp_esc(f, x->worst_what);
          fprintf(f, " at T=%d", x->parity_T);
        } else {
          char fig[96];
          hct__strlcpy(fig, x->worst_what, HCT_MIN(sizeof fig, (size_t)(of - x->worst_what) + 1));
          hct__rp_esc(f, fig);
          fputs(": none", f);
        }
      } else {
        fputs("-", f);
      }
      fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"nw\">",
              v, l, share);
      if (ok) fputs(klass == HCT_RP_BITWISE ? "pass: bit-exact" : "pass", f);
      else {
        fputs("<b>failed</b>: ", f);
        hct__rp_esc(f, x->worst_status);
      }
      fputs("</td></tr>\n", f);
    }
  fputs("</tbody></table>\n", f);
}

/* The kl points' worst figure as a share of its limit, one bar each, and
 * a line for the bitwise class: how close each came to failing. */
void hct__rp_parity_plot(FILE *f, const hct_rp_section_t *s) {
  int nbit = 0, nbit_ok = 0, rows[256], n = 0;
  double hi = 1.0;
  for (int fam = 0; fam < s->nfam; fam++)
    for (int i = 0; i < s->nser; i++) {
      const hct_rp_series_t *x = &s->ser[i];
      if (x->family != fam || x->checks == 0) continue;
      if (s->fam[fam].klass == HCT_RP_BITWISE) {
        nbit++;
        nbit_ok += x->passed == x->checks && x->worst_ratio == 0;
      }
      if (s->fam[fam].klass == HCT_RP_KL && x->worst_limit > 0 && n < 256) {
        rows[n++] = i;
        if (isfinite(x->worst_ratio)) hi = fmax(hi, x->worst_ratio);
      }
    }
  if (nbit)
    fprintf(f, "<p class=\"paritybit\"><span class=\"cls bitwise\">bitwise</span> %d of %d "
               "points bit-exact in every check.</p>\n",
            nbit_ok, nbit);
  if (n == 0) return;
  /* The chart's own heading: without it the bars read as part of the
   * table under them. */
  fprintf(f, "<h4 class=\"klhead\"><span class=\"cls kl\">kl</span> points: the worst "
             "figure of each as a share of its limit (%d point%s)</h4>\n",
          n, n == 1 ? "" : "s");
  hct_svg_plot_t p = {0};
  p.w = 1040;
  p.h = 56 + 19.0 * n;
  p.left = 300;
  p.right = p.w - 190;
  p.top = 10;
  p.bottom = p.h - 40;
  hct__svg_axis_fit(&p.x, 0, fmin(hi, 10) * 1.05, 0, p.left, p.right);
  char title[160];
  snprintf(title, sizeof title, "%s: kl points, worst figure as a share of its limit", s->op);
  hct__svg_begin(f, &p, "plot parity", title);
  hct__svg_axes(f, &p, NULL, 0, "worst figure / its limit (1 = the limit)", NULL);
  double x1 = hct__svg_map(&p.x, 1);
  fprintf(f, "<line class=\"limit\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
             "<text class=\"limitlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">limit"
             "</text>",
          x1, x1, p.top, p.bottom, x1, p.top + 8);
  for (int r = 0; r < n; r++) {
    const hct_rp_series_t *x = &s->ser[rows[r]];
    double y = p.top + 14 + 19.0 * r;
    double ratio = isfinite(x->worst_ratio) ? x->worst_ratio : 10;
    double bx = hct__svg_map(&p.x, fmin(ratio, p.x.hi));
    int bad = x->passed != x->checks || ratio > 1;
    fprintf(f, "<g class=\"paritybar\" data-variant=\"");
    hct__rp_esc(f, s->fam[x->family].variant);
    fputs("\" data-params=\"", f);
    hct__rp_esc(f, x->params);
    fprintf(f, "\" data-ratio=\"%.4g\"><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
               "dy=\"0.32em\" fill=\"%s\">",
            ratio, p.left - 8, y, hct__rp_family_colour(s, x->family));
    hct__html_escape(f, s->fam[x->family].variant, 20);
    fputs(" <tspan class=\"cl\">", f);
    hct__html_escape(f, x->label, 40);
    fprintf(f, "</tspan></text><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" "
               "fill=\"%s\"/><text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\" dy=\"0.32em\">"
               "%.0f%% of the ",
            p.left, y - 6, fmax(1, bx - p.left), hct__rp_family_colour(s, x->family), bx + 5, y,
            100 * ratio);
    /* "max_err_ratio of mixed" -> "max_err_ratio limit (mixed, T=4)" */
    char what[96];
    hct__strlcpy(what, x->worst_what, sizeof what);
    char *of = strstr(what, " of ");
    if (of) *of = '\0';
    hct__rp_esc(f, what);
    fprintf(f, " limit, T=%d%s</text></g>\n", x->parity_T, bad ? ": FAILED" : "");
  }
  hct__svg_end(f);
}

/* ---- the distance to the card's limit ---------------------------------- */

/* Each T's floor and each class's winner against it. */
static void floor_table(FILE *f, const hct_rp_section_t *s) {
  fputs("<table class=\"floor\"><thead><tr><th class=\"n\">T</th><th class=\"n\">floor "
        "&micro;s</th><th>bound by</th><th>bitwise winner</th><th class=\"n\">&micro;s</th>"
        "<th class=\"n\">fraction of floor</th><th>kl winner</th><th class=\"n\">&micro;s</th>"
        "<th class=\"n\">fraction of floor</th></tr></thead><tbody>\n",
        f);
  for (int k = 0; k < s->nT; k++) {
    char fl[32];
    hct__rp_num(s->floor_us[k], fl, sizeof fl);
    fprintf(f, "<tr data-t=\"%d\"><td class=\"n\">%d</td><td class=\"n\">%s</td><td>%s</td>",
            s->Ts[k], s->Ts[k], s->floor_us[k] > 0 ? fl : "-",
            !(s->floor_us[k] > 0) ? "-" : s->floor_compute[k] ? "flops" : "bytes");
    for (int par = 0; par < HCT_RP_NPAR; par++) {
      const hct_rp_win_t *w = &s->win[par][k];
      double frac = hct__report_floor_fraction(s, k, w);
      double med = !w->set ? NAN : w->trial >= 0 ? s->tm[w->trial].median : w->median;
      char m[32];
      hct__rp_num(med, m, sizeof m);
      fputs("<td>", f);
      if (w->set) hct__rp_esc(f, w->variant);
      else fputs("-", f);
      fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n frac\" data-parity=\"%s\"",
              w->set ? m : "-", hct__rp_parity_names[par]);
      if (isfinite(frac)) fprintf(f, " data-fraction=\"%.4f\">%.0f%%</td>", frac, 100 * frac);
      else fputs(">-</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</tbody></table>\n", f);
}

/* Each class's winner as a fraction of the floor's speed, one bar per T
 * and class: 1 is the card's limit. */
static void floor_plot(FILE *f, const hct_rp_section_t *s) {
  double hi = 1;
  for (int par = 0; par < HCT_RP_NPAR; par++)
    for (int k = 0; k < s->nT; k++) {
      double fr = hct__report_floor_fraction(s, k, &s->win[par][k]);
      if (isfinite(fr)) hi = fmax(hi, fmin(fr, 4));
    }
  char title[160];
  snprintf(title, sizeof title, "%s: each class's winner as a fraction of the floor", s->op);
  hct_svg_plot_t p;
  double bw = hct__rp_bars_begin(f, s, 260, hi * 1.08, "plot floor", title,
                         "floor / winner's time (1 = the limit)", "1 = the floor", &p);
  for (int k = 0; k < s->nT; k++)
    for (int par = 0; par < HCT_RP_NPAR; par++) {
      double fr = hct__report_floor_fraction(s, k, &s->win[par][k]);
      if (!isfinite(fr)) continue;
      double x = hct__svg_map(&p.x, s->Ts[k]), bx = x + (par == 0 ? -bw - 1 : 1);
      double top = hct__svg_map(&p.y, fmin(fr, p.y.hi));
      fprintf(f, "<g class=\"floorbar\" data-parity=\"%s\" data-t=\"%d\" "
                 "data-fraction=\"%.4f\"><title>%s winner at T=%d: %.0f%% of the floor's "
                 "speed</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                 "fill=\"%s\"%s/>",
              hct__rp_parity_names[par], s->Ts[k], fr, hct__rp_parity_names[par], s->Ts[k], 100 * fr, bx, top, bw,
              p.bottom - top, par == 0 ? BITWISE_COLOUR : "white",
              par == 0 ? "" : " stroke=\"" KL_COLOUR "\" stroke-width=\"2\"");
      if (bw >= 18)
        fprintf(f, "<text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                   "%.0f%%</text>",
                bx + bw / 2, top - 4, 100 * fr);
      fputs("</g>", f);
    }
  hct__rp_bars_end(f, &p, "fill=\"white\" stroke=\"" KL_COLOUR "\" stroke-width=\"2\"");
}

/* What the floor is made of, then the plot and the table; or why there is
 * none. */
void hct__rp_floor_part(FILE *f, const hct_rp_section_t *s) {
  fputs("<h3 class=\"floorhead\">Distance to the card's limit</h3>\n", f);
  if (!s->have_manifest || !(s->copy_bw > 0) || s->nT == 0) {
    fputs("<p class=\"empty nofloor\">No floor: ", f);
    if (!s->have_manifest) fputs("the op's manifest was not found.", f);
    else if (s->nT == 0) fputs("nothing was timed.", f);
    else {
      fputs("this card's probe measured no copy bandwidth and ", f);
      hct__rp_esc(f, s->name[0] ? s->name : "its model");
      fputs(" has no nominal entry (docs/report.md).", f);
    }
    fputs("</p>\n", f);
    return;
  }
  char bw[32], pk[32];
  hct__rp_num(s->copy_bw / 1e12, bw, sizeof bw);
  hct__rp_num(s->peak_flops / 1e12, pk, sizeof pk);
  fprintf(f, "<p class=\"note limits\" data-measured=\"%d\">The floor of a call is the bytes "
             "it must move (every input, weight and output buffer of the manifest once) over "
             "the card's copy bandwidth, %s&#8201;TB/s",
          s->bw_measured, bw);
  if (s->has_flops && s->peak_flops > 0)
    fprintf(f, ", or its flops (the manifest's <code>flops</code>) over the card's peak, "
               "%s&#8201;TFLOP/s, where that takes longer", pk);
  fputs(" (", f);
  hct__rp_esc(f, s->limits_note);
  fputs("). The fraction of floor is the floor over the winner's median: 100% is the card's "
        "limit. A hot timing may pass it (its weights stay in L2).</p>\n",
        f);
  floor_plot(f, s);
  floor_table(f, s);
}

void hct__rp_faults_table(FILE *f, const hct_rp_section_t *s) {
  fputs("<table class=\"faults\"><thead><tr><th>variant</th><th>parameters</th><th>T</th>"
        "<th>reason</th><th>when</th><th>detail</th></tr></thead><tbody>\n",
        f);
  for (int i = 0; i < s->nfaults; i++) {
    const hct_db_fault_t *x = &s->faults[i];
    char when[32];
    hct__rp_iso(x->created_at, when, sizeof when);
    fputs("<tr class=\"fault\"><td>", f);
    hct__rp_esc(f, x->variant);
    fputs("</td><td class=\"p\">", f);
    hct__rp_params_text(f, x->params);
    fputs("</td><td>", f);
    /* The quarantine's reach, as hct__db_fault_check reads it. */
    if (x->tokens == 0) fputs("every T", f);
    else if (strcmp(x->reason, "timeout") == 0) fprintf(f, "%d and up", x->tokens);
    else fprintf(f, "%d", x->tokens);
    fputs("</td><td class=\"reason\">", f);
    hct__rp_esc(f, x->reason);
    fprintf(f, "</td><td class=\"nw\">%s</td><td><pre>", when);
    hct__html_escape(f, x->log ? x->log : "-", 600);
    fputs("</pre></td></tr>\n", f);
  }
  fputs("</tbody></table>\n", f);
}
