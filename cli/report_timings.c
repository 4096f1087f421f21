/*
 * report_timings.c: the timing part of a section of `hctune report`'s
 * page: a line per T saying who wins and by how much (hct__rp_summary),
 * every variant's time against T with the winners marked
 * (hct__rp_time_plot), the winners' speedups (hct__rp_speedup_plot), and
 * the winners' medians across probes (hct__rp_history_plot).
 *
 * Marks carry their data as attributes for tests and for anyone reading
 * the page's source: every plotted timing trial is one element of class
 * "trial" with data-trial (its id in the DB), every winner one of class
 * "winner" with data-parity, data-t, data-variant and data-params.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report.h"

/* The plotted figures of a family at one T: its fastest point. */
static int family_best(const hct_rp_section_t *s, int fam, int T) {
  int best = -1;
  for (int i = 0; i < s->ntm; i++) {
    const hct_rp_timing_t *m = &s->tm[i];
    if (!m->plotted || !m->deciding || m->T != T || s->ser[m->series].family != fam) continue;
    if (best < 0 || m->median < s->tm[best].median) best = i;
  }
  return best;
}

/* The fastest plotted trial at T of a family other than `not_fam` whose
 * class the parity class allows: the runner-up a summary names. */
static int runner_up(const hct_rp_section_t *s, int par, int T, int not_fam) {
  int best = -1;
  for (int i = 0; i < s->ntm; i++) {
    const hct_rp_timing_t *m = &s->tm[i];
    int fam = s->ser[m->series].family;
    if (!m->plotted || !m->deciding || m->T != T || fam == not_fam || m->pruned) continue;
    if (par == HCT_RP_PAR_BITWISE && s->fam[fam].klass == HCT_RP_KL) continue;
    if (best < 0 || m->median < s->tm[best].median) best = i;
  }
  return best;
}

/* ---- the summary: one line per T ------------------------------------------ */

static void summary_class(FILE *f, const hct_rp_section_t *s, int par, int k) {
  const hct_rp_win_t *w = &s->win[par][k];
  char a[32], b[32], c[32], d[32];
  fprintf(f, "<span class=\"cls %s\">%s</span> ", hct__rp_parity_names[par], hct__rp_parity_names[par]);
  if (!w->set) {
    fputs("<span class=\"none\">no decision</span>", f);
    return;
  }
  hct__rp_num(w->median, a, sizeof a);
  hct__rp_num(w->lo, b, sizeof b);
  hct__rp_num(w->hi, c, sizeof c);
  hct__rp_num(w->baseline, d, sizeof d);
  int is_base = w->family >= 0 && w->family == s->baseline;
  fprintf(f, "<b style=\"color:%s\">", hct__rp_family_colour(s, w->family));
  hct__rp_win_name(f, s, w);
  fprintf(f, "</b> %s&#8201;&micro;s", a);
  if (w->lo > 0 && w->hi >= w->lo)
    fprintf(f, " <span class=\"ci\">(95%% CI %s&ndash;%s)</span>", b, c);
  if (is_base) {
    fputs(", the baseline: no variant is significantly faster", f);
  } else {
    double sp = hct__rp_speedup(w);
    char x[32];
    hct__rp_num(sp, x, sizeof x);
    fprintf(f, ", <b class=\"speed\">%s&times;</b> the baseline", x);
    if (s->baseline >= 0) {
      fputs(" ", f);
      hct__rp_esc(f, s->fam[s->baseline].variant);
    }
    fprintf(f, " (%s&#8201;&micro;s)", d);
  }
  double frac = hct__report_floor_fraction(s, k, w);
  if (isfinite(frac))
    fprintf(f, ", <span class=\"floorfrac\">%.0f%% of the floor's speed</span>", 100 * frac);
  int ru = runner_up(s, par, s->Ts[k], w->family);
  if (ru >= 0 && w->median > 0) {
    char y[32], z[32];
    hct__rp_num(s->tm[ru].median, y, sizeof y);
    hct__rp_num(100.0 * (s->tm[ru].median / w->median - 1.0), z, sizeof z);
    fputs("; next: ", f);
    hct__rp_series_name(f, s, s->tm[ru].series);
    fprintf(f, " %s&#8201;&micro;s (%s%s%%)", y, s->tm[ru].median >= w->median ? "+" : "", z);
  }
}

void hct__rp_summary(FILE *f, const hct_rp_section_t *s) {
  fputs("<ol class=\"summary\">\n", f);
  for (int k = 0; k < s->nT; k++) {
    fprintf(f, "<li data-t=\"%d\"><span class=\"t\">T&#8201;=&#8201;%d</span> ", s->Ts[k],
            s->Ts[k]);
    fputs("<div><div>", f);
    summary_class(f, s, HCT_RP_PAR_BITWISE, k);
    fputs("</div><div>", f);
    summary_class(f, s, HCT_RP_PAR_KL, k);
    fputs("</div></div></li>\n", f);
  }
  fputs("</ol>\n", f);
}

/* ---- plot 1: every variant's time against T -------------------------- */

static void mark_title(FILE *f, const hct_rp_section_t *s, const hct_rp_timing_t *m) {
  char a[32], b[32], c[32];
  hct__rp_num(m->median, a, sizeof a);
  hct__rp_num(m->lo, b, sizeof b);
  hct__rp_num(m->hi, c, sizeof c);
  fputs("<title>", f);
  hct__rp_esc(f, s->fam[s->ser[m->series].family].variant);
  fputs(" ", f);
  hct__rp_esc(f, s->ser[m->series].params);
  fprintf(f, " at T=%d: %s us (95%% CI %s-%s), %d samples, %s%s%s</title>", m->T, a, b, c,
          m->samples, m->cold ? "cold" : "hot", m->deciding ? "" : ", not deciding",
          m->pruned ? ", pruned" : "");
}

/* The range of times the plot shows: every plotted trial's interval, the
 * winners, the floors. */
static int time_range(const hct_rp_section_t *s, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = 0;
  for (int i = 0; i < s->ntm; i++)
    if (s->tm[i].plotted) {
      *lo = fmin(*lo, s->tm[i].lo);
      *hi = fmax(*hi, s->tm[i].hi);
    }
  for (int par = 0; par < HCT_RP_NPAR; par++)
    for (int k = 0; k < s->nT; k++)
      if (s->win[par][k].set && s->win[par][k].median > 0) {
        *lo = fmin(*lo, s->win[par][k].median);
        *hi = fmax(*hi, s->win[par][k].median);
      }
  if (!(*hi > 0)) return 0;
  for (int k = 0; s->floor_us != NULL && k < s->nT; k++)
    if (s->floor_us[k] > 0) *lo = fmin(*lo, s->floor_us[k]);
  return 1;
}

/* The winners' strip above the plot: who wins at each T, by how much. */
static void winners_strip(FILE *f, const hct_rp_section_t *s, const hct_svg_plot_t *p) {
  double col = s->nT > 1 ? (p->x.px1 - p->x.px0) / (s->nT - 1) : 200;
  if (col < 64 && s->nT > 1) return;
  fprintf(f, "<g class=\"strip\"><text class=\"rowlabel\" x=\"%.1f\" y=\"%.1f\" "
             "text-anchor=\"end\">bitwise</text><text class=\"rowlabel\" x=\"%.1f\" y=\"%.1f\" "
             "text-anchor=\"end\">kl</text>",
          p->left - 6, p->top - 46.0, p->left - 6, p->top - 18.0);
  for (int k = 0; k < s->nT; k++) {
    double x = hct__svg_map(&p->x, s->Ts[k]);
    for (int par = 0; par < HCT_RP_NPAR; par++) {
      const hct_rp_win_t *w = &s->win[par][k];
      double y = p->top - (par == 0 ? 52.0 : 24.0);
      if (!w->set) continue;
      char sp[32];
      hct__rp_num(hct__rp_speedup(w), sp, sizeof sp);
      fprintf(f, "<text class=\"stripname\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                 "fill=\"%s\">",
              x, y, hct__rp_family_colour(s, w->family));
      hct__html_escape(f, w->variant, 14);
      fprintf(f, "</text><text class=\"stripspeed\" x=\"%.1f\" y=\"%.1f\" "
                 "text-anchor=\"middle\">%s&#215;</text>",
              x, y + 12, sp);
    }
  }
  fputs("</g>\n", f);
}

/* One timing trial as a mark with its interval: the variant's marker,
 * hollow when pruned; the other cache mode's (not deciding) as small
 * diamonds beside. */
static void trial_mark(FILE *f, const hct_rp_section_t *s, const hct_svg_plot_t *p,
                       const hct_rp_timing_t *m, hct_rp_style_t st) {
  double x = hct__svg_map(&p->x, m->T), y = hct__svg_map(&p->y, m->median);
  if (!m->deciding) x += 7;
  fprintf(f, "<g class=\"trial%s%s\" data-trial=\"%lld\" data-t=\"%d\" data-median=\"%.4g\" "
             "data-variant=\"",
          m->deciding ? "" : " other-mode", m->pruned ? " pruned" : "", (long long)m->id, m->T,
          m->median);
  hct__rp_esc(f, s->fam[s->ser[m->series].family].variant);
  fputs("\" data-params=\"", f);
  hct__rp_esc(f, s->ser[m->series].params);
  fputs("\">", f);
  mark_title(f, s, m);
  double y0 = hct__svg_map(&p->y, m->lo), y1 = hct__svg_map(&p->y, m->hi);
  if (y0 - y1 > 1.5)
    fprintf(f, "<line class=\"ci\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\"/>",
            x, x, y0, y1, st.colour);
  if (!m->deciding)
    fprintf(f, "<path d=\"M%.1f %.1fl3.5 3.5l-3.5 3.5l-3.5 -3.5z\" fill=\"white\" "
               "stroke=\"%s\"/>",
            x, y - 3.5, st.colour);
  else
    hct__rp_marker(f, st.marker, x, y, m->pruned ? 2.5 : 3.4, m->pruned ? "white" : st.colour, st.colour);
  fputs("</g>", f);
}

/* One line per variant through its fastest point at each T, in its
 * colour, dash and marker; the variants that win somewhere in full
 * colour, the rest faded.  Each line's right end goes to lab_y/lab_fam. */
static void variant_lines(FILE *f, const hct_rp_section_t *s, const hct_svg_plot_t *p,
                          double *lab_y, int *lab_fam, int *nlab) {
  for (int fam = 0; fam < s->nfam; fam++) {
    int pts = 0;
    double ly = 0;
    hct_rp_style_t st = hct__rp_family_style(s, fam);
    int strong = s->fam[fam].wins > 0 || fam == s->baseline;
    fprintf(f, "<g class=\"variant%s\" data-variant=\"", strong ? " strong" : " faded");
    hct__rp_esc(f, s->fam[fam].variant);
    fprintf(f, "\" data-colour=\"%s\" data-dash=\"%s\">", st.colour, st.dash);
    for (int k = 0; k < s->nT; k++) {
      int b = family_best(s, fam, s->Ts[k]);
      if (b < 0) continue;
      double x = hct__svg_map(&p->x, s->Ts[k]), y = hct__svg_map(&p->y, s->tm[b].median);
      if (pts == 0) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\"", st.colour);
        hct__rp_dash_attr(f, st.dash);
        fputs(" points=\"", f);
      }
      fprintf(f, "%s%.1f,%.1f", pts ? " " : "", x, y);
      pts++;
      ly = y;
    }
    if (pts) fputs("\"/>", f);
    for (int i = 0; i < s->ntm; i++)
      if (s->tm[i].plotted && s->ser[s->tm[i].series].family == fam)
        trial_mark(f, s, p, &s->tm[i], st);
    fputs("</g>\n", f);
    if (pts && *nlab < 64) {
      lab_y[*nlab] = ly;
      lab_fam[(*nlab)++] = fam;
    }
  }
}

/* The card's floor at each T (report_data.c's compute_floors): a black
 * line the variants cannot go under (a hot timing may: its weights sit in
 * L2). */
static void floor_line(FILE *f, const hct_rp_section_t *s, const hct_svg_plot_t *p) {
  int pts = 0;
  double ly = 0;
  for (int k = 0; s->floor_us != NULL && k < s->nT; k++) {
    if (!(s->floor_us[k] > 0)) continue;
    double x = hct__svg_map(&p->x, s->Ts[k]);
    ly = hct__svg_map(&p->y, s->floor_us[k]);
    if (pts == 0)
      fprintf(f, "<g class=\"floor\"><title>the floor: %s</title><polyline fill=\"none\" "
                 "stroke=\"%s\" stroke-width=\"1.6\" stroke-dasharray=\"2 3 8 3\" points=\"",
              s->limits_note, FLOOR_COLOUR);
    fprintf(f, "%s%.1f,%.1f", pts++ ? " " : "", x, ly);
  }
  if (pts)
    fprintf(f, "\"/><text class=\"floorlabel\" x=\"%.1f\" y=\"%.1f\" dy=\"1.1em\">floor%s"
               "</text></g>\n",
            p->right - 70, ly, s->bw_measured ? "" : " (nominal)");
}

/* The winners, ringed in the colour of their class. */
static void winner_rings(FILE *f, const hct_rp_section_t *s, const hct_svg_plot_t *p) {
  for (int par = 0; par < HCT_RP_NPAR; par++)
    for (int k = 0; k < s->nT; k++) {
      const hct_rp_win_t *w = &s->win[par][k];
      if (!w->set) continue;
      double med = w->trial >= 0 ? s->tm[w->trial].median : w->median;
      double x = hct__svg_map(&p->x, s->Ts[k]), y = hct__svg_map(&p->y, med);
      double frac = hct__report_floor_fraction(s, k, w);
      fprintf(f, "<g class=\"winner\" data-parity=\"%s\" data-t=\"%d\" data-variant=\"",
              hct__rp_parity_names[par], s->Ts[k]);
      hct__rp_esc(f, w->variant);
      fputs("\" data-params=\"", f);
      hct__rp_esc(f, w->params);
      if (isfinite(frac)) fprintf(f, "\" data-floor-fraction=\"%.3f", frac);
      fprintf(f, "\"><title>%s winner at T=%d: ", hct__rp_parity_names[par], s->Ts[k]);
      hct__rp_esc(f, w->variant);
      fputs(" ", f);
      hct__rp_esc(f, w->params);
      if (isfinite(frac)) fprintf(f, ", %.0f%% of the floor's speed", 100 * frac);
      fprintf(f, "</title><circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"none\" stroke=\"%s\" "
                 "stroke-width=\"2.2\"%s/></g>",
              x, y, par == 0 ? 7 : 11, par == 0 ? BITWISE_COLOUR : KL_COLOUR,
              par == 0 ? "" : " stroke-dasharray=\"3 2\"");
    }
}

/* The key to the marks, under the axis title, so the picture reads
 * without the text around it. */
static void time_key(FILE *f, const hct_rp_section_t *s, const hct_svg_plot_t *p) {
  fprintf(f, "<g class=\"key\" transform=\"translate(%.1f %.1f)\">"
             "<circle cx=\"4\" cy=\"0\" r=\"3.2\" fill=\"#555\"/>"
             "<text x=\"12\" dy=\"0.32em\">trial, %s (decides), bar: 95%% CI</text>"
             "<circle cx=\"234\" cy=\"0\" r=\"2.5\" fill=\"white\" stroke=\"#555\"/>"
             "<text x=\"242\" dy=\"0.32em\">pruned</text>"
             "<path d=\"M306 -3.5l3.5 3.5l-3.5 3.5l-3.5 -3.5z\" fill=\"white\" stroke=\"#555\"/>"
             "<text x=\"314\" dy=\"0.32em\">%s (not deciding)</text>"
             "<circle cx=\"436\" cy=\"0\" r=\"7\" fill=\"none\" stroke=\"%s\" "
             "stroke-width=\"2.2\"/><text x=\"448\" dy=\"0.32em\">bitwise winner</text>"
             "<circle cx=\"556\" cy=\"0\" r=\"7\" fill=\"none\" stroke=\"%s\" "
             "stroke-width=\"2.2\" stroke-dasharray=\"3 2\"/><text x=\"568\" "
             "dy=\"0.32em\">kl winner</text>"
             "<line x1=\"640\" x2=\"668\" y1=\"0\" y2=\"0\" stroke=\"%s\" stroke-width=\"2\" "
             "stroke-dasharray=\"" BASELINE_DASH "\"/><text x=\"674\" dy=\"0.32em\">baseline"
             "</text>",
          p->left, p->h - 14, s->timing_cold ? "cold" : "hot", s->timing_cold ? "hot" : "cold",
          BITWISE_COLOUR, KL_COLOUR, BASELINE_COLOUR);
  if (s->floor_us != NULL && s->copy_bw > 0)
    fprintf(f, "<line x1=\"736\" x2=\"764\" y1=\"0\" y2=\"0\" stroke=\"%s\" stroke-width=\"1.6\" "
               "stroke-dasharray=\"2 3 8 3\"/><text x=\"770\" dy=\"0.32em\">floor</text>",
            FLOOR_COLOUR);
  fputs("</g>\n", f);
}

/* Sorts label positions (and their payload) by y, for hct__svg_spread. */
static void sort_labels(double *y, int *what, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && y[j] < y[j - 1]; j--) {
      double t = y[j];
      y[j] = y[j - 1];
      y[j - 1] = t;
      int u = what[j];
      what[j] = what[j - 1];
      what[j - 1] = u;
    }
}

/* Each line named at its right end, with its marker, names pushed apart to
 * stay legible. */
static void line_labels(FILE *f, const hct_rp_section_t *s, const hct_svg_plot_t *p,
                        double *lab_y, int *lab_fam, int nlab) {
  sort_labels(lab_y, lab_fam, nlab);
  double orig[64];
  memcpy(orig, lab_y, sizeof(double) * (size_t)nlab);
  hct__svg_spread(lab_y, nlab, 13, p->top, p->bottom);
  fputs("<g class=\"labels\">", f);
  for (int i = 0; i < nlab; i++) {
    int fam = lab_fam[i];
    hct_rp_style_t st = hct__rp_family_style(s, fam);
    int strong = s->fam[fam].wins > 0 || fam == s->baseline;
    fprintf(f, "<line class=\"leader\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\"/>",
            p->right - 4, p->right + 8, orig[i], lab_y[i], st.colour);
    hct__rp_marker(f, st.marker, p->right + 14, lab_y[i], 3.2, st.colour, st.colour);
    fprintf(f, "<text class=\"linelabel%s\" x=\"%.1f\" y=\"%.1f\" dy=\"0.32em\" fill=\"%s\">",
            strong ? " strong" : "", p->right + 21, lab_y[i], st.colour);
    hct__html_escape(f, s->fam[fam].variant, 20);
    fprintf(f, " <tspan class=\"cl\">%s</tspan></text>",
            s->fam[fam].klass == HCT_RP_UNKNOWN ? "" : hct__rp_class_name(s->fam[fam].klass));
  }
  fputs("</g>\n", f);
}

void hct__rp_time_plot(FILE *f, const hct_rp_section_t *s) {
  hct_svg_plot_t p = hct__rp_t_frame(s, 548, 78, 80);
  double lo, hi;
  if (!time_range(s, &lo, &hi)) return;
  /* Times that span more than 3x read better on a log scale: a 10% gap is
   * the same height at 3 us and at 30 us. */
  int use_log = hi > 3 * lo;
  hct__svg_axis_fit(&p.y, lo, hi, use_log, p.bottom, p.top);
  char title[160];
  snprintf(title, sizeof title, "%s: median time per call against T", s->op);
  hct__svg_begin(f, &p, "plot time", title);
  double xt[64];
  int xn = 0;
  for (int k = 0; k < s->nT && xn < 64; k++)
    if (s->nT <= 24 || k % ((s->nT + 23) / 24) == 0) xt[xn++] = s->Ts[k];
  hct__svg_axes(f, &p, xt, xn, "T (tokens per call)",
                use_log ? "median time per call, us (log scale)" : "median time per call, us");
  winners_strip(f, s, &p);
  double lab_y[64];
  int lab_fam[64], nlab = 0;
  variant_lines(f, s, &p, lab_y, lab_fam, &nlab);
  floor_line(f, s, &p);
  winner_rings(f, s, &p);
  time_key(f, s, &p);
  line_labels(f, s, &p, lab_y, lab_fam, nlab);
  hct__svg_end(f);
}

/* ---- plot 2: speedup of each class's winner against the baseline ------ */

void hct__rp_speedup_plot(FILE *f, const hct_rp_section_t *s) {
  double hi = 1;
  int any = 0;
  for (int par = 0; par < HCT_RP_NPAR; par++)
    for (int k = 0; k < s->nT; k++) {
      double sp = hct__rp_speedup(&s->win[par][k]);
      if (isfinite(sp)) {
        hi = fmax(hi, sp);
        any = 1;
      }
    }
  if (!any) return;
  char title[160];
  snprintf(title, sizeof title, "%s: speedup of each class's winner over the baseline", s->op);
  hct_svg_plot_t p;
  double bw = hct__rp_bars_begin(f, s, 300, hi * 1.12, "plot speedup", title, "speedup over the baseline (x)",
                         "1&#215; = baseline", &p);
  for (int k = 0; k < s->nT; k++) {
    double x = hct__svg_map(&p.x, s->Ts[k]);
    for (int par = 0; par < HCT_RP_NPAR; par++) {
      const hct_rp_win_t *w = &s->win[par][k];
      double sp = hct__rp_speedup(w);
      if (!isfinite(sp)) continue;
      double bx = x + (par == 0 ? -bw - 1 : 1), top = hct__svg_map(&p.y, sp);
      char v[32];
      hct__rp_num(sp, v, sizeof v);
      fprintf(f, "<g class=\"bar\" data-parity=\"%s\" data-t=\"%d\" data-speedup=\"%.4g\">"
                 "<title>%s winner at T=%d: ",
              hct__rp_parity_names[par], s->Ts[k], sp, hct__rp_parity_names[par], s->Ts[k]);
      hct__rp_esc(f, w->variant);
      fprintf(f, ", %sx the baseline</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                 "height=\"%.1f\" fill=\"%s\"/>",
              v, bx, top, bw, p.bottom - top, par == 0 ? BITWISE_COLOUR : KL_COLOUR);
      if (bw >= 18)
        fprintf(f, "<text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s"
                   "</text>",
                bx + bw / 2, top - 4, v);
      fputs("</g>", f);
    }
  }
  hct__rp_bars_end(f, &p, "fill=\"" KL_COLOUR "\"");
}

/* ---- plot 3: the winners' medians across probes ----------------------- */

/* The lines of T: each its own colour, dash and marker (style_of).  A
 * light-to-dark ramp made neighbouring counts near-identical pastels; a
 * reader must tell T = 3 from T = 4, so they are as distinct as the
 * variants are. */

/* The trial a winner's line stands on in probe r, -1 when r did not time
 * it at that T. */
static int history_point(const hct_rp_section_t *s, const hct_rp_win_t *w, int T, int r) {
  int best = -1;
  for (int i = 0; i < s->ntm; i++)
    if (s->tm[i].run == r && s->tm[i].T == T && s->tm[i].deciding && s->tm[i].series == w->series &&
        (best < 0 || s->tm[i].id > s->tm[best].id))
      best = i;
  return best;
}

/* One panel: the winners of class par, a line per T across the probes. */
static void history_panel(FILE *f, const hct_rp_section_t *s, int par, double x0, double h) {
  double lo = INFINITY, hi = 0;
  for (int k = 0; k < s->nT; k++) {
    const hct_rp_win_t *w = &s->win[par][k];
    for (int r = 0; w->set && w->series >= 0 && r < s->nruns; r++) {
      int i = history_point(s, w, s->Ts[k], r);
      if (i < 0) continue;
      lo = fmin(lo, s->tm[i].median);
      hi = fmax(hi, s->tm[i].median);
    }
  }
  if (!(hi > 0)) return;
  hct_svg_plot_t p = {0};
  p.w = 1040;
  p.h = h;
  p.left = x0 + 64;
  p.right = x0 + 390;
  p.top = 30;
  p.bottom = h - 52;
  p.x.lo = -0.5;
  p.x.hi = s->nruns - 0.5;
  p.x.px0 = p.left + 10;
  p.x.px1 = p.right - 10;
  int use_log = hi > 3 * lo;
  hct__svg_axis_fit(&p.y, lo, hi, use_log, p.bottom, p.top);
  double none = 0;
  hct__svg_axes(f, &p, &none, 0, "probe (start, UTC)",
                use_log ? "median, us (log scale)" : "median, us");
  fprintf(f, "<text class=\"paneltitle\" x=\"%.1f\" y=\"16\"><tspan class=\"%s\">%s</tspan> "
             "winners</text>",
          p.left, hct__rp_parity_names[par], hct__rp_parity_names[par]);
  /* The x ticks are probes, labelled by their start. */
  int step = (int)fmax(1, ceil(s->nruns / 4.0));
  for (int r = 0; r < s->nruns; r += step) {
    char when[32];
    hct__rp_iso(s->runs[r].started, when, sizeof when);
    double x = hct__svg_map(&p.x, r);
    /* "2026-12-01T10:32:05Z" shown as "12-01 10:32:05" */
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.5s %.8s</text>", x,
            p.bottom + 16, when + 5, when + 11);
  }
  double lab_y[64], orig[64];
  int lab_k[64], nlab = 0;
  for (int k = 0; k < s->nT; k++) {
    const hct_rp_win_t *w = &s->win[par][k];
    if (!w->set || w->series < 0) continue;
    hct_rp_style_t st = hct__rp_style_of(k);
    const char *c = st.colour;
    fprintf(f, "<g class=\"history\" data-parity=\"%s\" data-t=\"%d\" data-colour=\"%s\" "
               "data-dash=\"%s\"><polyline fill=\"none\" stroke=\"%s\"",
            hct__rp_parity_names[par], s->Ts[k], c, st.dash, c);
    hct__rp_dash_attr(f, st.dash);
    fputs(" points=\"", f);
    double ly = 0;
    int pts = 0;
    for (int r = 0; r < s->nruns; r++) {
      int i = history_point(s, w, s->Ts[k], r);
      if (i < 0) continue;
      ly = hct__svg_map(&p.y, s->tm[i].median);
      fprintf(f, "%s%.1f,%.1f", pts++ ? " " : "", hct__svg_map(&p.x, r), ly);
    }
    fputs("\"/>", f);
    for (int r = 0; r < s->nruns; r++) {
      int i = history_point(s, w, s->Ts[k], r);
      if (i < 0) continue;
      char a[32];
      hct__rp_num(s->tm[i].median, a, sizeof a);
      fprintf(f, "<g><title>T=%d ", s->Ts[k]);
      hct__rp_esc(f, w->variant);
      fprintf(f, ": %s us</title>", a);
      hct__rp_marker(f, st.marker, hct__svg_map(&p.x, r), hct__svg_map(&p.y, s->tm[i].median), 3.2, c, c);
      fputs("</g>", f);
    }
    fputs("</g>\n", f);
    if (pts && nlab < 64) {
      lab_y[nlab] = ly;
      lab_k[nlab++] = k;
    }
  }
  sort_labels(lab_y, lab_k, nlab);
  memcpy(orig, lab_y, sizeof(double) * (size_t)nlab);
  hct__svg_spread(lab_y, nlab, 12.5, p.top, p.bottom + 8);
  for (int i = 0; i < nlab; i++) {
    const hct_rp_win_t *w = &s->win[par][lab_k[i]];
    hct_rp_style_t st = hct__rp_style_of(lab_k[i]);
    const char *c = st.colour;
    fprintf(f, "<line class=\"leader\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\"/>",
            p.right - 6, p.right + 6, orig[i], lab_y[i], c);
    hct__rp_marker(f, st.marker, p.right + 11, lab_y[i], 3, c, c);
    fprintf(f, "<text class=\"linelabel\" x=\"%.1f\" y=\"%.1f\" dy=\"0.32em\" "
               "fill=\"%s\">T=%d ",
            p.right + 17, lab_y[i], c, s->Ts[lab_k[i]]);
    hct__html_escape(f, w->variant, 16);
    fputs("</text>", f);
  }
}

void hct__rp_history_plot(FILE *f, const hct_rp_section_t *s) {
  if (s->nruns < 2) return;
  hct_svg_plot_t p = {0};
  p.w = 1040;
  p.h = 330;
  char title[160];
  snprintf(title, sizeof title, "%s: the winners' medians in each probe", s->op);
  hct__svg_begin(f, &p, "plot history", title);
  history_panel(f, s, HCT_RP_PAR_BITWISE, 0, p.h);
  history_panel(f, s, HCT_RP_PAR_KL, 520, p.h);
  hct__svg_end(f);
}
