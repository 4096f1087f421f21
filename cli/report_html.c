/*
 * report_html.c: the page of `hctune report`: one self-contained HTML file
 * (inline CSS and SVG, no script, nothing fetched) with, per card and op, a
 * line per T saying who wins and by how much, the plot of every variant's
 * time against T with the winners marked, their speedups, the winners'
 * medians across probes, and the tables behind them (decisions, parity
 * figures against the limits, faults).
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

static void esc(FILE *f, const char *s) { hct__html_escape(f, s, 0); }

static const char *const class_names[] = {"baseline", "bitwise", "kl"};
static const char *const parity_names[HCT_RP_NPAR] = {"bitwise", "kl"};

static const char *class_name(int k) {
  return k >= HCT_RP_BASELINE && k <= HCT_RP_KL ? class_names[k] : "unknown class";
}

/* Colours of the variants: Okabe and Ito's seven, told apart in the
 * common colour blindnesses (their yellow darkened to read on white).
 * Colour is never the only cue: each variant also has its dash pattern
 * and its marker (style_of), and every line is labelled by name.  The
 * baseline is always dark grey with long dashes. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#8F7F00"};
/* Dash patterns (never the baseline's "7 4") and markers, cycled at other
 * periods than the colours: 28 lines before a colour and dash repeat. */
static const char *const dashes[] = {"", "5 2", "1.5 2.5", "9 3 2 3"};
enum { MK_CIRCLE, MK_SQUARE, MK_TRIANGLE, MK_TRIANGLE_DOWN, MK_N };
#define BASELINE_COLOUR "#3a3a3a"
#define BASELINE_DASH "7 4"
#define FLOOR_COLOUR "#000000"
#define BITWISE_COLOUR "#1d4ed8"
#define KL_COLOUR "#c2410c"

/* The style of the k-th line of a plot that is not the baseline. */
typedef struct style_s {
  const char *colour, *dash;
  int marker;
} style_t;

static style_t style_of(int k) {
  /* Lines k and k + 7m share a colour; their dashes differ by 9m mod 4
   * (m mod 4), their markers by 7m mod 4: distinct for m = 1..3. */
  const int nc = (int)HCT_ARRAY_SIZE(palette);
  style_t st = {palette[k % nc], dashes[(k + 2 * (k / nc)) % (int)HCT_ARRAY_SIZE(dashes)],
                k % MK_N};
  return st;
}

static style_t family_style(const hct_rp_section_t *s, int fam) {
  if (fam < 0) return (style_t){"#888888", "", MK_CIRCLE};
  if (fam == s->baseline) return (style_t){BASELINE_COLOUR, BASELINE_DASH, MK_CIRCLE};
  return style_of(fam - (s->baseline >= 0 && s->baseline < fam));
}

static const char *family_colour(const hct_rp_section_t *s, int fam) {
  return family_style(s, fam).colour;
}

/* A marker of size r at (x, y): filled with `fill` ("white": hollow). */
static void marker(FILE *f, int mk, double x, double y, double r, const char *fill,
                   const char *stroke) {
  switch (mk) {
  case MK_SQUARE:
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" ", x - r * 0.9,
            y - r * 0.9, r * 1.8, r * 1.8);
    break;
  case MK_TRIANGLE:
    fprintf(f, "<path d=\"M%.1f %.1fl%.1f %.1fh%.1fz\" ", x, y - r * 1.15, r * 1.1, r * 1.9,
            -r * 2.2);
    break;
  case MK_TRIANGLE_DOWN:
    fprintf(f, "<path d=\"M%.1f %.1fl%.1f %.1fh%.1fz\" ", x, y + r * 1.15, r * 1.1, -r * 1.9,
            -r * 2.2);
    break;
  default:
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" ", x, y, r);
  }
  fprintf(f, "fill=\"%s\" stroke=\"%s\"/>", fill, stroke);
}

/* stroke-dasharray="..." for a pattern, "" for a solid line. */
static void dash_attr(FILE *f, const char *dash) {
  if (dash[0]) fprintf(f, " stroke-dasharray=\"%s\"", dash);
}

static void num(double v, char *buf, size_t len) { hct__svg_num(v, buf, len); }

static void iso(int64_t t, char *buf, size_t len) {
  if (t <= 0) hct__strlcpy(buf, "-", len);
  else hct__iso_time(t, buf, len);
}

/* "relay NG=4 PDL=1": a variant and the parameters that tell its points
 * apart. */
static void series_name(FILE *f, const hct_rp_section_t *s, int series) {
  if (series < 0) return;
  const hct_rp_series_t *x = &s->ser[series];
  esc(f, s->fam[x->family].variant);
  if (x->label[0]) {
    fputs(" <span class=\"params\">", f);
    esc(f, x->label);
    fputs("</span>", f);
  }
}

static void win_name(FILE *f, const hct_rp_section_t *s, const hct_rp_win_t *w) {
  if (w->series >= 0) {
    series_name(f, s, w->series);
    return;
  }
  esc(f, w->variant);
  fputs(" <span class=\"params\">", f);
  esc(f, w->params);
  fputs("</span>", f);
}

/* Parameters as "G=1 GB=0 NG=4" for tables: shorter than JSON and
 * breaking only between parameters.  Text that is not an object shows as
 * it is. */
static void params_text(FILE *f, const char *params) {
  json_t *p = json_loads(params, 0, NULL);
  if (!json_is_object(p)) {
    esc(f, params);
    json_decref(p);
    return;
  }
  const char *key;
  json_t *v;
  int first = 1;
  json_object_foreach(p, key, v) {
    char *val = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    fputs(first ? "<span>" : " <span>", f);
    esc(f, key);
    fputs("=", f);
    esc(f, val ? val : "?");
    fputs("</span>", f);
    free(val);
    first = 0;
  }
  if (first) fputs("-", f);
  json_decref(p);
}

static double speedup(const hct_rp_win_t *w) {
  return w->median > 0 && w->baseline > 0 ? w->baseline / w->median : NAN;
}

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
  fprintf(f, "<span class=\"cls %s\">%s</span> ", parity_names[par], parity_names[par]);
  if (!w->set) {
    fputs("<span class=\"none\">no decision</span>", f);
    return;
  }
  num(w->median, a, sizeof a);
  num(w->lo, b, sizeof b);
  num(w->hi, c, sizeof c);
  num(w->baseline, d, sizeof d);
  int is_base = w->family >= 0 && w->family == s->baseline;
  fprintf(f, "<b style=\"color:%s\">", family_colour(s, w->family));
  win_name(f, s, w);
  fprintf(f, "</b> %s&#8201;&micro;s", a);
  if (w->lo > 0 && w->hi >= w->lo)
    fprintf(f, " <span class=\"ci\">(95%% CI %s&ndash;%s)</span>", b, c);
  if (is_base) {
    fputs(", the baseline: no variant is significantly faster", f);
  } else {
    double sp = speedup(w);
    char x[32];
    num(sp, x, sizeof x);
    fprintf(f, ", <b class=\"speed\">%s&times;</b> the baseline", x);
    if (s->baseline >= 0) {
      fputs(" ", f);
      esc(f, s->fam[s->baseline].variant);
    }
    fprintf(f, " (%s&#8201;&micro;s)", d);
  }
  double frac = hct__report_floor_fraction(s, k, w);
  if (isfinite(frac))
    fprintf(f, ", <span class=\"floorfrac\">%.0f%% of the floor's speed</span>", 100 * frac);
  int ru = runner_up(s, par, s->Ts[k], w->family);
  if (ru >= 0 && w->median > 0) {
    char y[32], z[32];
    num(s->tm[ru].median, y, sizeof y);
    num(100.0 * (s->tm[ru].median / w->median - 1.0), z, sizeof z);
    fputs("; next: ", f);
    series_name(f, s, s->tm[ru].series);
    fprintf(f, " %s&#8201;&micro;s (%s%s%%)", y, s->tm[ru].median >= w->median ? "+" : "", z);
  }
}

static void summary(FILE *f, const hct_rp_section_t *s) {
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

/* ---- the T axis shared by the plots ------------------------------------- */

static void fit_T(hct_svg_axis_t *a, const hct_rp_section_t *s, double px0, double px1) {
  int lo = s->Ts[0], hi = s->Ts[s->nT - 1];
  a->px0 = px0;
  a->px1 = px1;
  /* Token counts that span more than 16x are spread on a log scale. */
  a->log = hi > 16 * lo;
  if (a->log) {
    a->lo = lo / 1.3;
    a->hi = hi * 1.3;
  } else {
    a->lo = lo - 0.5;
    a->hi = hi + 0.5;
  }
}

/* ---- plot 1: every variant's time against T -------------------------- */

static void mark_title(FILE *f, const hct_rp_section_t *s, const hct_rp_timing_t *m) {
  char a[32], b[32], c[32];
  num(m->median, a, sizeof a);
  num(m->lo, b, sizeof b);
  num(m->hi, c, sizeof c);
  fputs("<title>", f);
  esc(f, s->fam[s->ser[m->series].family].variant);
  fputs(" ", f);
  esc(f, s->ser[m->series].params);
  fprintf(f, " at T=%d: %s us (95%% CI %s-%s), %d samples, %s%s%s</title>", m->T, a, b, c,
          m->samples, m->cold ? "cold" : "hot", m->deciding ? "" : ", not deciding",
          m->pruned ? ", pruned" : "");
}

/* The frame of a plot against T (the time and speedup plots): the page's
 * width, room on the right for the lines' labels, T fitted to the inside. */
static hct_svg_plot_t t_frame(const hct_rp_section_t *s, double h, double top, double bottom_gap) {
  hct_svg_plot_t p = {0};
  p.w = 1040;
  p.h = h;
  p.left = 78;
  p.right = p.w - 190;
  p.top = top;
  p.bottom = h - bottom_gap;
  fit_T(&p.x, s, p.left + 10, p.right - 10);
  return p;
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
      num(speedup(w), sp, sizeof sp);
      fprintf(f, "<text class=\"stripname\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                 "fill=\"%s\">",
              x, y, family_colour(s, w->family));
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
                       const hct_rp_timing_t *m, style_t st) {
  double x = hct__svg_map(&p->x, m->T), y = hct__svg_map(&p->y, m->median);
  if (!m->deciding) x += 7;
  fprintf(f, "<g class=\"trial%s%s\" data-trial=\"%lld\" data-t=\"%d\" data-median=\"%.4g\" "
             "data-variant=\"",
          m->deciding ? "" : " other-mode", m->pruned ? " pruned" : "", (long long)m->id, m->T,
          m->median);
  esc(f, s->fam[s->ser[m->series].family].variant);
  fputs("\" data-params=\"", f);
  esc(f, s->ser[m->series].params);
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
    marker(f, st.marker, x, y, m->pruned ? 2.5 : 3.4, m->pruned ? "white" : st.colour, st.colour);
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
    style_t st = family_style(s, fam);
    int strong = s->fam[fam].wins > 0 || fam == s->baseline;
    fprintf(f, "<g class=\"variant%s\" data-variant=\"", strong ? " strong" : " faded");
    esc(f, s->fam[fam].variant);
    fprintf(f, "\" data-colour=\"%s\" data-dash=\"%s\">", st.colour, st.dash);
    for (int k = 0; k < s->nT; k++) {
      int b = family_best(s, fam, s->Ts[k]);
      if (b < 0) continue;
      double x = hct__svg_map(&p->x, s->Ts[k]), y = hct__svg_map(&p->y, s->tm[b].median);
      if (pts == 0) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\"", st.colour);
        dash_attr(f, st.dash);
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
              parity_names[par], s->Ts[k]);
      esc(f, w->variant);
      fputs("\" data-params=\"", f);
      esc(f, w->params);
      if (isfinite(frac)) fprintf(f, "\" data-floor-fraction=\"%.3f", frac);
      fprintf(f, "\"><title>%s winner at T=%d: ", parity_names[par], s->Ts[k]);
      esc(f, w->variant);
      fputs(" ", f);
      esc(f, w->params);
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
    style_t st = family_style(s, fam);
    int strong = s->fam[fam].wins > 0 || fam == s->baseline;
    fprintf(f, "<line class=\"leader\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\"/>",
            p->right - 4, p->right + 8, orig[i], lab_y[i], st.colour);
    marker(f, st.marker, p->right + 14, lab_y[i], 3.2, st.colour, st.colour);
    fprintf(f, "<text class=\"linelabel%s\" x=\"%.1f\" y=\"%.1f\" dy=\"0.32em\" fill=\"%s\">",
            strong ? " strong" : "", p->right + 21, lab_y[i], st.colour);
    hct__html_escape(f, s->fam[fam].variant, 20);
    fprintf(f, " <tspan class=\"cl\">%s</tspan></text>",
            s->fam[fam].klass == HCT_RP_UNKNOWN ? "" : class_name(s->fam[fam].klass));
  }
  fputs("</g>\n", f);
}

static void time_plot(FILE *f, const hct_rp_section_t *s) {
  hct_svg_plot_t p = t_frame(s, 548, 78, 80);
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

/* The frame of a bar chart over T, two bars (bitwise, kl) a count: axes
 * from 0 to ymax, the T ticks (at most 24 labelled), a line at 1 with its
 * label.  Returns each bar's width. */
static double bars_begin(FILE *f, const hct_rp_section_t *s, int height, double ymax,
                         const char *cls, const char *title, const char *ylabel,
                         const char *onelabel, hct_svg_plot_t *p) {
  *p = t_frame(s, height, 24, 52);
  hct__svg_axis_fit(&p->y, 0, ymax, 0, p->bottom, p->top);
  hct__svg_begin(f, p, cls, title);
  double xt[64];
  int xn = 0;
  for (int k = 0; k < s->nT && xn < 64; k++)
    if (s->nT <= 24 || k % ((s->nT + 23) / 24) == 0) xt[xn++] = s->Ts[k];
  hct__svg_axes(f, p, xt, xn, "T (tokens per call)", ylabel);
  double y1 = hct__svg_map(&p->y, 1);
  fprintf(f, "<line class=\"one\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
             "<text class=\"onelabel\" x=\"%.1f\" y=\"%.1f\" dy=\"0.32em\">%s</text>",
          p->left, p->right, y1, y1, p->right + 6, y1, onelabel);
  double span = s->nT > 1 ? (p->x.px1 - p->x.px0) / (s->nT - 1) : 120;
  return fmin(34, span * 0.36);
}

/* The key of a bar chart (the bitwise bars filled, the kl bars as
 * `kl_style` draws them) and its end. */
static void bars_end(FILE *f, const hct_svg_plot_t *p, const char *kl_style) {
  fprintf(f, "<g class=\"legend\"><rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
             "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">bitwise winner</text>"
             "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" %s/>"
             "<text x=\"%.1f\" y=\"%.1f\">kl winner</text></g>",
          p->right + 6, p->top + 4, BITWISE_COLOUR, p->right + 24, p->top + 14, p->right + 6,
          p->top + 24, kl_style, p->right + 24, p->top + 34);
  hct__svg_end(f);
}

/* ---- plot 2: speedup of each class's winner against the baseline ------ */

static void speedup_plot(FILE *f, const hct_rp_section_t *s) {
  double hi = 1;
  int any = 0;
  for (int par = 0; par < HCT_RP_NPAR; par++)
    for (int k = 0; k < s->nT; k++) {
      double sp = speedup(&s->win[par][k]);
      if (isfinite(sp)) {
        hi = fmax(hi, sp);
        any = 1;
      }
    }
  if (!any) return;
  char title[160];
  snprintf(title, sizeof title, "%s: speedup of each class's winner over the baseline", s->op);
  hct_svg_plot_t p;
  double bw = bars_begin(f, s, 300, hi * 1.12, "plot speedup", title, "speedup over the baseline (x)",
                         "1&#215; = baseline", &p);
  for (int k = 0; k < s->nT; k++) {
    double x = hct__svg_map(&p.x, s->Ts[k]);
    for (int par = 0; par < HCT_RP_NPAR; par++) {
      const hct_rp_win_t *w = &s->win[par][k];
      double sp = speedup(w);
      if (!isfinite(sp)) continue;
      double bx = x + (par == 0 ? -bw - 1 : 1), top = hct__svg_map(&p.y, sp);
      char v[32];
      num(sp, v, sizeof v);
      fprintf(f, "<g class=\"bar\" data-parity=\"%s\" data-t=\"%d\" data-speedup=\"%.4g\">"
                 "<title>%s winner at T=%d: ",
              parity_names[par], s->Ts[k], sp, parity_names[par], s->Ts[k]);
      esc(f, w->variant);
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
  bars_end(f, &p, "fill=\"" KL_COLOUR "\"");
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
          p.left, parity_names[par], parity_names[par]);
  /* The x ticks are probes, labelled by their start. */
  int step = (int)fmax(1, ceil(s->nruns / 4.0));
  for (int r = 0; r < s->nruns; r += step) {
    char when[32];
    iso(s->runs[r].started, when, sizeof when);
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
    style_t st = style_of(k);
    const char *c = st.colour;
    fprintf(f, "<g class=\"history\" data-parity=\"%s\" data-t=\"%d\" data-colour=\"%s\" "
               "data-dash=\"%s\"><polyline fill=\"none\" stroke=\"%s\"",
            parity_names[par], s->Ts[k], c, st.dash, c);
    dash_attr(f, st.dash);
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
      num(s->tm[i].median, a, sizeof a);
      fprintf(f, "<g><title>T=%d ", s->Ts[k]);
      esc(f, w->variant);
      fprintf(f, ": %s us</title>", a);
      marker(f, st.marker, hct__svg_map(&p.x, r), hct__svg_map(&p.y, s->tm[i].median), 3.2, c, c);
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
    style_t st = style_of(lab_k[i]);
    const char *c = st.colour;
    fprintf(f, "<line class=\"leader\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\"/>",
            p.right - 6, p.right + 6, orig[i], lab_y[i], c);
    marker(f, st.marker, p.right + 11, lab_y[i], 3, c, c);
    fprintf(f, "<text class=\"linelabel\" x=\"%.1f\" y=\"%.1f\" dy=\"0.32em\" "
               "fill=\"%s\">T=%d ",
            p.right + 17, lab_y[i], c, s->Ts[lab_k[i]]);
    hct__html_escape(f, w->variant, 16);
    fputs("</text>", f);
  }
}

static void history_plot(FILE *f, const hct_rp_section_t *s) {
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

/* ---- tables -------------------------------------------------------------- */

static void decisions_table(FILE *f, const hct_rp_section_t *s) {
  fputs("<table class=\"decisions\"><thead><tr><th>class asked</th><th>T</th><th>variant</th>"
        "<th>parameters</th><th>its class</th><th class=\"n\">median &micro;s<sup>*</sup></th>"
        "<th class=\"n\">95% CI</th><th class=\"n\">baseline &micro;s<sup>*</sup></th>"
        "<th class=\"n\">speedup<sup>*</sup></th><th class=\"n\">samples</th><th>decided</th>"
        "<th>source</th></tr></thead><tbody>\n",
        f);
  for (int i = 0; i < s->ndec; i++) {
    const hct_db_decision_t *d = &s->dec[i];
    char a[32], b[32], c[32], e[32], sp[32], when[32];
    num(d->median_us, a, sizeof a);
    num(d->ci_lo_us, b, sizeof b);
    num(d->ci_hi_us, c, sizeof c);
    num(d->baseline_us, e, sizeof e);
    num(d->median_us > 0 ? d->baseline_us / d->median_us : NAN, sp, sizeof sp);
    iso(d->decided_at, when, sizeof when);
    /* A bit family's rows (parity "bits:<head>", issue 29) share one
     * style: the family's name is no CSS class. */
    fputs("<tr><td><span class=\"cls ", f);
    esc(f, hct__parity_family(d->parity) != NULL ? "family" : d->parity);
    fputs("\">", f);
    esc(f, d->parity);
    if (d->tmin == d->tmax) fprintf(f, "</span></td><td class=\"nw\">%d</td><td>", d->tmin);
    else fprintf(f, "</span></td><td class=\"nw\">%d&ndash;%d</td><td>", d->tmin, d->tmax);
    esc(f, d->variant);
    fputs("</td><td class=\"p\">", f);
    params_text(f, d->params);
    fputs("</td><td>", f);
    esc(f, d->variant_class);
    fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n\">%s&ndash;%s</td><td class=\"n\">%s</td>"
               "<td class=\"n\">%s&times;</td><td class=\"n\">%d</td><td class=\"nw\">%s</td><td>",
            a, b, c, e, sp, d->samples, when);
    esc(f, d->source);
    fputs("</td></tr>\n", f);
  }
  fputs("</tbody></table>\n<p class=\"note\"><sup>*</sup> at the first T of the range, as "
        "recorded (hctune list shows the same); each T's figures are in the lines above.</p>\n",
        f);
}

static void parity_table(FILE *f, const hct_rp_section_t *s) {
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
              family_colour(s, fam));
      esc(f, s->fam[fam].variant);
      fputs("</td><td class=\"p\">", f);
      params_text(f, x->params);
      fprintf(f, "</td><td>%s</td><td class=\"n\">%d / %d</td><td>", class_name(klass),
              x->passed, x->checks);
      if (x->worst_what[0]) {
        /* A figure that is 0 everywhere has no worst buffer or T. */
        const char *of = strstr(x->worst_what, " of ");
        if (x->worst_value != 0 || of == NULL) {
          esc(f, x->worst_what);
          fprintf(f, " at T=%d", x->parity_T);
        } else {
          char fig[96];
          hct__strlcpy(fig, x->worst_what, HCT_MIN(sizeof fig, (size_t)(of - x->worst_what) + 1));
          esc(f, fig);
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
        esc(f, x->worst_status);
      }
      fputs("</td></tr>\n", f);
    }
  fputs("</tbody></table>\n", f);
}

/* The kl points' worst figure as a share of its limit, one bar each, and
 * a line for the bitwise class: how close each came to failing. */
static void parity_plot(FILE *f, const hct_rp_section_t *s) {
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
    esc(f, s->fam[x->family].variant);
    fputs("\" data-params=\"", f);
    esc(f, x->params);
    fprintf(f, "\" data-ratio=\"%.4g\"><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
               "dy=\"0.32em\" fill=\"%s\">",
            ratio, p.left - 8, y, family_colour(s, x->family));
    hct__html_escape(f, s->fam[x->family].variant, 20);
    fputs(" <tspan class=\"cl\">", f);
    hct__html_escape(f, x->label, 40);
    fprintf(f, "</tspan></text><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" "
               "fill=\"%s\"/><text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\" dy=\"0.32em\">"
               "%.0f%% of the ",
            p.left, y - 6, fmax(1, bx - p.left), family_colour(s, x->family), bx + 5, y,
            100 * ratio);
    /* "max_err_ratio of mixed" -> "max_err_ratio limit (mixed, T=4)" */
    char what[96];
    hct__strlcpy(what, x->worst_what, sizeof what);
    char *of = strstr(what, " of ");
    if (of) *of = '\0';
    esc(f, what);
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
    num(s->floor_us[k], fl, sizeof fl);
    fprintf(f, "<tr data-t=\"%d\"><td class=\"n\">%d</td><td class=\"n\">%s</td><td>%s</td>",
            s->Ts[k], s->Ts[k], s->floor_us[k] > 0 ? fl : "-",
            !(s->floor_us[k] > 0) ? "-" : s->floor_compute[k] ? "flops" : "bytes");
    for (int par = 0; par < HCT_RP_NPAR; par++) {
      const hct_rp_win_t *w = &s->win[par][k];
      double frac = hct__report_floor_fraction(s, k, w);
      double med = !w->set ? NAN : w->trial >= 0 ? s->tm[w->trial].median : w->median;
      char m[32];
      num(med, m, sizeof m);
      fputs("<td>", f);
      if (w->set) esc(f, w->variant);
      else fputs("-", f);
      fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n frac\" data-parity=\"%s\"",
              w->set ? m : "-", parity_names[par]);
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
  double bw = bars_begin(f, s, 260, hi * 1.08, "plot floor", title,
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
              parity_names[par], s->Ts[k], fr, parity_names[par], s->Ts[k], 100 * fr, bx, top, bw,
              p.bottom - top, par == 0 ? BITWISE_COLOUR : "white",
              par == 0 ? "" : " stroke=\"" KL_COLOUR "\" stroke-width=\"2\"");
      if (bw >= 18)
        fprintf(f, "<text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                   "%.0f%%</text>",
                bx + bw / 2, top - 4, 100 * fr);
      fputs("</g>", f);
    }
  bars_end(f, &p, "fill=\"white\" stroke=\"" KL_COLOUR "\" stroke-width=\"2\"");
}

/* What the floor is made of, then the plot and the table; or why there is
 * none. */
static void floor_part(FILE *f, const hct_rp_section_t *s) {
  fputs("<h3 class=\"floorhead\">Distance to the card's limit</h3>\n", f);
  if (!s->have_manifest || !(s->copy_bw > 0) || s->nT == 0) {
    fputs("<p class=\"empty nofloor\">No floor: ", f);
    if (!s->have_manifest) fputs("the op's manifest was not found.", f);
    else if (s->nT == 0) fputs("nothing was timed.", f);
    else {
      fputs("this card's probe measured no copy bandwidth and ", f);
      esc(f, s->name[0] ? s->name : "its model");
      fputs(" has no nominal entry (docs/report.md).", f);
    }
    fputs("</p>\n", f);
    return;
  }
  char bw[32], pk[32];
  num(s->copy_bw / 1e12, bw, sizeof bw);
  num(s->peak_flops / 1e12, pk, sizeof pk);
  fprintf(f, "<p class=\"note limits\" data-measured=\"%d\">The floor of a call is the bytes "
             "it must move (every input, weight and output buffer of the manifest once) over "
             "the card's copy bandwidth, %s&#8201;TB/s",
          s->bw_measured, bw);
  if (s->has_flops && s->peak_flops > 0)
    fprintf(f, ", or its flops (the manifest's <code>flops</code>) over the card's peak, "
               "%s&#8201;TFLOP/s, where that takes longer", pk);
  fputs(" (", f);
  esc(f, s->limits_note);
  fputs("). The fraction of floor is the floor over the winner's median: 100% is the card's "
        "limit. A hot timing may pass it (its weights stay in L2).</p>\n",
        f);
  floor_plot(f, s);
  floor_table(f, s);
}

static void faults_table(FILE *f, const hct_rp_section_t *s) {
  fputs("<table class=\"faults\"><thead><tr><th>variant</th><th>parameters</th><th>T</th>"
        "<th>reason</th><th>when</th><th>detail</th></tr></thead><tbody>\n",
        f);
  for (int i = 0; i < s->nfaults; i++) {
    const hct_db_fault_t *x = &s->faults[i];
    char when[32];
    iso(x->created_at, when, sizeof when);
    fputs("<tr class=\"fault\"><td>", f);
    esc(f, x->variant);
    fputs("</td><td class=\"p\">", f);
    params_text(f, x->params);
    fputs("</td><td>", f);
    /* The quarantine's reach, as hct__db_fault_check reads it. */
    if (x->tokens == 0) fputs("every T", f);
    else if (strcmp(x->reason, "timeout") == 0) fprintf(f, "%d and up", x->tokens);
    else fprintf(f, "%d", x->tokens);
    fputs("</td><td class=\"reason\">", f);
    esc(f, x->reason);
    fprintf(f, "</td><td class=\"nw\">%s</td><td><pre>", when);
    hct__html_escape(f, x->log ? x->log : "-", 600);
    fputs("</pre></td></tr>\n", f);
  }
  fputs("</tbody></table>\n", f);
}

/* ---- a section and the page --------------------------------------------- */

/* The section's heading, the card's line, and its faults up front. */
static void section_head(FILE *f, const hct_rp_section_t *s, int idx) {
  fprintf(f, "<section class=\"card-op\" id=\"s%d\" data-op=\"", idx);
  esc(f, s->op);
  fputs("\" data-uuid=\"", f);
  esc(f, s->uuid);
  fputs("\"><h2>", f);
  esc(f, s->op);
  fputs(" on ", f);
  esc(f, s->name[0] ? s->name : "a card");
  fputs(" <span class=\"uuid\">", f);
  esc(f, s->uuid);
  fputs("</span></h2>\n<p class=\"meta\">", f);
  if (s->arch[0]) {
    esc(f, s->arch);
    fputs(" &middot; ", f);
  }
  static const char *const keys[] = {"host", "driver", "compiler", "hctune"};
  const char *vals[] = {s->host, s->driver, s->compiler, s->hctune};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(keys); i++) {
    fprintf(f, "%s%s ", i ? " &middot; " : "", keys[i]);
    esc(f, vals[i][0] ? vals[i] : "-");
  }
  char when[32];
  iso(s->nruns ? s->runs[s->nruns - 1].started : 0, when, sizeof when);
  if (s->nruns)
    fprintf(f, " &middot; %d probe%s with timings, newest %s", s->nruns, s->nruns == 1 ? "" : "s",
            when);
  if (s->have_manifest)
    fprintf(f, " &middot; timed %s, %d launches per graph", s->timing_cold ? "cold" : "hot",
            s->batch);
  fputs("</p>\n", f);
  if (s->nfaults == 0) return;
  /* What failed, up front: the count per reason, linked to the table. */
  fprintf(f, "<p class=\"faultline\"><a href=\"#faults%d\">%d candidate%s quarantined</a> (", idx,
          s->nfaults, s->nfaults == 1 ? "" : "s");
  for (int i = 0; i < s->nfaults; i++) {
    int seen = 0, n = 0;
    for (int j = 0; j < s->nfaults; j++)
      if (strcmp(s->faults[j].reason, s->faults[i].reason) == 0) {
        seen |= j < i;
        n++;
      }
    if (seen) continue;
    fprintf(f, "%s%d ", i ? ", " : "", n);
    esc(f, s->faults[i].reason);
  }
  fputs(")</p>\n", f);
}

/* Who wins, the plots against T, the distance to the limit, the history. */
static void section_timings(FILE *f, const hct_rp_section_t *s) {
  if (s->nT == 0) {
    fputs("<p class=\"empty\">No timing trials and no decisions for this card and op.</p>\n", f);
    return;
  }
  fputs("<h3>Who wins at each T</h3>\n<p class=\"note\">The winner of each class is the "
        "probe's decision: the fastest variant whose 95% interval is clear of the "
        "baseline's by the margin. <i>bitwise</i>: the baseline's exact bits; <i>kl</i>: "
        "within the kl limits (a bitwise variant qualifies too).</p>\n",
        f);
  summary(f, s);
  fputs("<h3>Time per call against T</h3>\n<p class=\"note\">Each line is a variant "
        "through its fastest parameter point, in its own colour, dash pattern and marker; "
        "every mark is a timing trial with its 95% interval (hollow: pruned early as clearly "
        "slower; diamonds: the other cache mode, recorded beside and not deciding). Rings: "
        "<span class=\"cls bitwise\">bitwise</span> winner (solid), "
        "<span class=\"cls kl\">kl</span> winner (dashed). The baseline is the long-dashed "
        "grey line, the card's floor the black dash-dot one; faded lines win nowhere.</p>\n",
        f);
  time_plot(f, s);
  fputs("<h3>Speedup over the baseline</h3>\n", f);
  speedup_plot(f, s);
  floor_part(f, s);
  if (s->nruns >= 2) {
    fputs("<h3>Over time</h3>\n<p class=\"note\">The medians that today's winner at "
          "each T measured in every probe of this card that timed it: a line that climbs is a "
          "kernel that got slower (a driver or compiler update, a throttled card).</p>\n",
          f);
    history_plot(f, s);
  }
}

/* Parity: the limits, the kl points' chart under its own heading, the
 * table of every point. */
static void section_parity(FILE *f, const hct_rp_section_t *s) {
  int checked = 0;
  for (int i = 0; i < s->nser; i++) checked += s->ser[i].checks > 0;
  fputs("<h3>Parity against the limits of each class</h3>\n", f);
  if (!checked) {
    fputs("<p class=\"empty\">No parity checks recorded.</p>\n", f);
    return;
  }
  char a[32], b[32], c[32];
  snprintf(a, sizeof a, "%.3g", s->kl_mean_factor);
  snprintf(b, sizeof b, "%.3g", s->kl_abs_floor);
  snprintf(c, sizeof c, "%.3g", s->maxerr_factor);
  if (s->have_manifest)
    fprintf(f, "<p class=\"note\">bitwise: every element's bits equal the baseline's. kl: "
               "kl_mean at most max(%s &times; the baseline's, %s) and max_err_ratio at most "
               "%s &times; the baseline's in the same check; inout buffers exact; 16-bit "
               "images exact. Worst figure per point over the newest probe that checked "
               "it.</p>\n",
            a, b, c);
  else
    fputs("<p class=\"note\">The op's manifest was not found: classes and kl limits are "
          "unknown here.</p>\n",
          f);
  parity_plot(f, s);
  fputs("<h4>Every checked point</h4>\n", f);
  parity_table(f, s);
}

/* Where the newest probe of this card and op spent its time (its run's
 * breakdown, tuner/probe_clock.c): a row per stage that took any, its
 * share of the whole.  The JSON comes from the file: a field that is not
 * what it should be is left out, a label escaped. */
static void breakdown_table(FILE *f, const hct_rp_section_t *s) {
  json_t *b = s->breakdown ? json_loads(s->breakdown, 0, NULL) : NULL;
  json_t *list = json_object_get(b, "stages");
  const double total = json_number_value(json_object_get(b, "total_ms"));
  if (!json_is_array(list) || !(total > 0) || !isfinite(total)) {
    json_decref(b);
    return;
  }
  char when[32];
  iso(s->breakdown_at, when, sizeof when);
  fprintf(f, "<h3>Where the probe's time went</h3>\n<p class=\"note\">The newest probe that "
             "recorded it (%s, run <span class=\"uuid\">", when);
  esc(f, s->breakdown_run);
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
    esc(f, label);
    fprintf(f, "</td><td class=\"n\">%.1f</td><td class=\"n\">%.0f%%</td><td>", ms / 1e3,
            100.0 * ms / total);
    if (n > 0) {
      fprintf(f, "%lld ", (long long)n);
      esc(f, unit ? unit : "");
    }
    fputs("</td></tr>\n", f);
  }
  fputs("</tbody></table>\n", f);
  json_decref(b);
}

static void section(FILE *f, const hct_rp_section_t *s, int idx) {
  section_head(f, s, idx);
  section_timings(f, s);
  fprintf(f, "<h3>Decisions</h3>\n");
  if (s->ndec) decisions_table(f, s);
  else fputs("<p class=\"empty\">No decisions recorded.</p>\n", f);
  breakdown_table(f, s);
  section_parity(f, s);
  fprintf(f, "<h3 id=\"faults%d\">Faults</h3>\n", idx);
  if (s->failed_timings)
    fprintf(f, "<p class=\"note\">%d timing trial%s ended in a fault.</p>\n", s->failed_timings,
            s->failed_timings == 1 ? "" : "s");
  if (s->nfaults) faults_table(f, s);
  else fputs("<p class=\"empty\">No candidate quarantined.</p>\n", f);
  fputs("</section>\n", f);
}

static const char css[] =
    "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
    "color:#1b1b1b;background:#fff;margin:0 auto;padding:18px 28px;max-width:1120px}"
    "h1{font-size:24px;margin:4px 0}h4{font-size:14px;margin:14px 0 4px}h2{font-size:20px;margin:28px 0 2px;border-top:2px solid "
    "#ddd;padding-top:14px}h3{font-size:16px;margin:20px 0 6px}"
    ".uuid,.meta,.note,.ci,.params{color:#555}.uuid{font-size:13px;font-weight:normal}"
    ".meta,.note{font-size:13px;margin:2px 0 8px}"
    ".summary{list-style:none;padding:0;margin:0}.summary li{padding:5px 8px;border-bottom:1px "
    "solid #eee;display:grid;grid-template-columns:66px 1fr}.summary li:nth-child(odd){"
    "background:#fafafa}.summary .t{font-weight:600;font-size:16px}"
    ".cls{display:inline-block;min-width:52px;font-size:12px;font-weight:600;text-align:center;"
    "border-radius:3px;padding:0 4px;color:#fff}.cls.bitwise{background:" BITWISE_COLOUR "}"
    ".cls.kl{background:" KL_COLOUR "}.speed{font-size:15px}.none{color:#888}"
    "svg{display:block;max-width:100%;height:auto;margin:4px 0 8px;font-size:12px}"
    "svg text{fill:#333}svg .grid{stroke:#e6e6e6}svg .frame{stroke:#999}"
    "svg .title{font-size:13px;fill:#444}svg .strip .stripname{font-weight:600;font-size:13px}"
    "svg .strip .stripspeed{font-size:12px;fill:#222}svg .rowlabel{font-size:12px;"
    "font-weight:600;fill:#666}svg .variant polyline{stroke-width:1.6}"
    "svg .variant.strong polyline{stroke-width:2.6}svg .variant.faded{opacity:.38}"
    "svg .ci{stroke-width:1.2}svg .linelabel{font-size:12.5px}svg .linelabel.strong{"
    "font-weight:700}svg .linelabel .cl{font-size:10.5px;font-weight:normal;fill:#777}"
    "svg .leader{stroke-width:.8;opacity:.6}svg .one{stroke:#444;stroke-dasharray:4 3}"
    "svg .barlabel{font-size:11.5px;font-weight:600}svg .floorlabel{font-size:11.5px;"
    "font-weight:600;fill:#000}.floorfrac{color:#333}svg .limit{stroke:#b91c1c;stroke-width:1.5;"
    "stroke-dasharray:4 3}svg .limitlabel{fill:#b91c1c;font-size:11px}svg .paneltitle{font-size:14px;"
    "font-weight:600}svg .paneltitle .bitwise{fill:" BITWISE_COLOUR "}svg .paneltitle .kl{fill:"
    KL_COLOUR "}"
    "table{border-collapse:collapse;font-size:12.5px;margin:4px 0 10px;width:100%}"
    "th,td{padding:3px 7px;border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:"
    "tabular-nums;white-space:nowrap}td.p{font-size:12px}td.p span,td.nw{white-space:nowrap}code{font-size:11.5px;word-break:break-all}tr.bad td{background:#fff3f0}"
    "pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:11.5px;max-width:460px}"
    "td.reason{font-weight:600;color:#a32}.empty{color:#777;font-style:italic}"
    "nav a{margin-right:14px}.faultline{font-size:13px;margin:2px 0 8px;color:#a32}"
    ".faultline a{color:#a32}";

void hct__report_html(FILE *f, const hct_report_t *r) {
  char when[32];
  iso(r->generated, when, sizeof when);
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
        "<title>hctune report: ",
        f);
  esc(f, r->db_path);
  fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>hctune report</h1>\n"
             "<p class=\"meta\">database <code>",
          css);
  esc(f, r->db_path);
  fprintf(f, "</code> &middot; generated %s by hctune %s &middot; %d trial%s read</p>\n", when,
          HCT_VERSION_STRING, r->ntrials, r->ntrials == 1 ? "" : "s");
  if (r->nsec == 0) {
    fputs("<p class=\"empty\" id=\"nothing\">The database holds no trials, decisions or faults"
          " (that match): run <code>hctune probe</code> first.</p>\n",
          f);
  } else if (r->nsec > 1) {
    fputs("<nav>", f);
    for (int i = 0; i < r->nsec; i++) {
      fprintf(f, "<a href=\"#s%d\">", i);
      esc(f, r->sec[i].op);
      fputs(" on ", f);
      esc(f, r->sec[i].name[0] ? r->sec[i].name : r->sec[i].uuid);
      fputs("</a>", f);
    }
    fputs("</nav>\n", f);
  }
  for (int i = 0; i < r->nsec; i++) section(f, &r->sec[i], i);
  fputs("</body></html>\n", f);
}
