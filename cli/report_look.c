/*
 * report_look.c: what every plot and table of `hctune report`'s page
 * shares: HTML escaping, each variant's colour, dash and marker (never
 * colour alone), numbers and times as the page writes them, a variant's
 * name with the parameters that tell its points apart, a winner's
 * speedup, and the frames of the plots over T (the time plot's, the bar
 * charts').  The page's other files call down to it; it calls none of
 * them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report.h"

void hct__rp_esc(FILE *f, const char *s) { hct__html_escape(f, s, 0); }

static const char *const class_names[] = {"baseline", "bitwise", "kl"};
const char *const hct__rp_parity_names[HCT_RP_NPAR] = {"bitwise", "kl"};

const char *hct__rp_class_name(int k) {
  return k >= HCT_RP_BASELINE && k <= HCT_RP_KL ? class_names[k] : "unknown class";
}

/* Colours of the variants: Okabe and Ito's seven, told apart in the
 * common colour blindnesses (their yellow darkened to read on white).
 * Colour is never the only cue: each variant also has its dash pattern
 * and its marker (hct__rp_style_of), and every line is labelled by name.  The
 * baseline is always dark grey with long dashes. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#8F7F00"};
/* Dash patterns (never the baseline's "7 4") and markers, cycled at other
 * periods than the colours: 28 lines before a colour and dash repeat. */
static const char *const dashes[] = {"", "5 2", "1.5 2.5", "9 3 2 3"};

hct_rp_style_t hct__rp_style_of(int k) {
  /* Lines k and k + 7m share a colour; their dashes differ by 9m mod 4
   * (m mod 4), their markers by 7m mod 4: distinct for m = 1..3. */
  const int nc = (int)HCT_ARRAY_SIZE(palette);
  hct_rp_style_t st = {palette[k % nc], dashes[(k + 2 * (k / nc)) % (int)HCT_ARRAY_SIZE(dashes)],
                k % MK_N};
  return st;
}

hct_rp_style_t hct__rp_family_style(const hct_rp_section_t *s, int fam) {
  if (fam < 0) return (hct_rp_style_t){"#888888", "", MK_CIRCLE};
  if (fam == s->baseline) return (hct_rp_style_t){BASELINE_COLOUR, BASELINE_DASH, MK_CIRCLE};
  return hct__rp_style_of(fam - (s->baseline >= 0 && s->baseline < fam));
}

const char *hct__rp_family_colour(const hct_rp_section_t *s, int fam) {
  return hct__rp_family_style(s, fam).colour;
}

/* A marker of size r at (x, y): filled with `fill` ("white": hollow). */
void hct__rp_marker(FILE *f, int mk, double x, double y, double r, const char *fill,
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
void hct__rp_dash_attr(FILE *f, const char *dash) {
  if (dash[0]) fprintf(f, " stroke-dasharray=\"%s\"", dash);
}

void hct__rp_num(double v, char *buf, size_t len) { hct__svg_num(v, buf, len); }

void hct__rp_iso(int64_t t, char *buf, size_t len) {
  if (t <= 0) hct__strlcpy(buf, "-", len);
  else hct__iso_time(t, buf, len);
}

/* "relay NG=4 PDL=1": a variant and the parameters that tell its points
 * apart. */
void hct__rp_series_name(FILE *f, const hct_rp_section_t *s, int series) {
  if (series < 0) return;
  const hct_rp_series_t *x = &s->ser[series];
  hct__rp_esc(f, s->fam[x->family].variant);
  if (x->label[0]) {
    fputs(" <span class=\"params\">", f);
    hct__rp_esc(f, x->label);
    fputs("</span>", f);
  }
}

void hct__rp_win_name(FILE *f, const hct_rp_section_t *s, const hct_rp_win_t *w) {
  if (w->series >= 0) {
    hct__rp_series_name(f, s, w->series);
    return;
  }
  hct__rp_esc(f, w->variant);
  fputs(" <span class=\"params\">", f);
  hct__rp_esc(f, w->params);
  fputs("</span>", f);
}

/* Parameters as "G=1 GB=0 NG=4" for tables: shorter than JSON and
 * breaking only between parameters.  Text that is not an object shows as
 * it is. */
void hct__rp_params_text(FILE *f, const char *params) {
  json_t *p = json_loads(params, 0, NULL);
  if (!json_is_object(p)) {
    hct__rp_esc(f, params);
    json_decref(p);
    return;
  }
  const char *key;
  json_t *v;
  int first = 1;
  json_object_foreach(p, key, v) {
    char *val = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    fputs(first ? "<span>" : " <span>", f);
    hct__rp_esc(f, key);
    fputs("=", f);
    hct__rp_esc(f, val ? val : "?");
    fputs("</span>", f);
    free(val);
    first = 0;
  }
  if (first) fputs("-", f);
  json_decref(p);
}

double hct__rp_speedup(const hct_rp_win_t *w) {
  return w->median > 0 && w->baseline > 0 ? w->baseline / w->median : NAN;
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

/* The frame of a plot against T (the time and speedup plots): the page's
 * width, room on the right for the lines' labels, T fitted to the inside. */
hct_svg_plot_t hct__rp_t_frame(const hct_rp_section_t *s, double h, double top, double bottom_gap) {
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

/* The frame of a bar chart over T, two bars (bitwise, kl) a count: axes
 * from 0 to ymax, the T ticks (at most 24 labelled), a line at 1 with its
 * label.  Returns each bar's width. */
double hct__rp_bars_begin(FILE *f, const hct_rp_section_t *s, int height, double ymax,
                         const char *cls, const char *title, const char *ylabel,
                         const char *onelabel, hct_svg_plot_t *p) {
  *p = hct__rp_t_frame(s, height, 24, 52);
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
void hct__rp_bars_end(FILE *f, const hct_svg_plot_t *p, const char *kl_style) {
  fprintf(f, "<g class=\"legend\"><rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
             "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">bitwise winner</text>"
             "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" %s/>"
             "<text x=\"%.1f\" y=\"%.1f\">kl winner</text></g>",
          p->right + 6, p->top + 4, BITWISE_COLOUR, p->right + 24, p->top + 14, p->right + 6,
          p->top + 24, kl_style, p->right + 24, p->top + 34);
  hct__svg_end(f);
}
