/*
 * report_svg.c: a small plotting helper for hctune report: axes on linear or
 * log scales with round ticks, grid lines, label spreading, and the HTML
 * escaping every piece of text goes through.  No plotting library: the
 * plots are a few lines, points and labels, and a dependency would have to
 * be in Debian with a static .a for `make STATIC=1`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

void hct__html_escape(FILE *f, const char *s, size_t max) {
  if (s == NULL) return;
  size_t n = strlen(s);
  int cut = 0;
  if (max > 0 && n > max) {
    n = max;
    /* Back off continuation bytes so no UTF-8 sequence is split. */
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) n--;
    cut = 1;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      case '\'': fputs("&#39;", f); break;
      default:
        /* Control bytes have no business in a name or a reason; a newline
         * in a log stays (the page shows logs in <pre>). */
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) fputs("&#xFFFD;", f);
        else fputc(c, f);
    }
  }
  if (cut) fputs("\xe2\x80\xa6", f);
}

/* ---- scales ---------------------------------------------------------------- */

/* The round number at or below (down) or above v: 1, 2 or 5 times a power
 * of ten. */
static double nice(double v, int down) {
  if (!(v > 0) || !isfinite(v)) return v;
  double p = pow(10, floor(log10(v)));
  static const double steps[] = {1, 2, 5, 10};
  if (down) {
    for (int i = 3; i >= 0; i--)
      if (steps[i] * p <= v * (1 + 1e-9)) return steps[i] * p;
    return p;
  }
  for (int i = 0; i < 4; i++)
    if (steps[i] * p >= v * (1 - 1e-9)) return steps[i] * p;
  return 10 * p;
}

void hct__svg_axis_fit(hct_svg_axis_t *a, double lo, double hi, int use_log, double px0,
                       double px1) {
  if (!isfinite(lo) || !isfinite(hi) || hi < lo) lo = 0, hi = 1;
  a->px0 = px0;
  a->px1 = px1;
  a->log = use_log && lo > 0;
  if (a->log) {
    /* Bounds just past the data, not rounded out to 1-2-5: on a log scale
     * rounding can waste half the height; the ticks inside stay round. */
    a->lo = lo / 1.1;
    a->hi = hi * 1.1;
    return;
  }
  if (hi == lo) {
    lo = lo > 0 ? 0 : lo - 1;
    hi = hi + 1;
  }
  double step = nice((hi - lo) / 5, 0);
  a->lo = lo >= 0 && lo < (hi - lo) * 0.5 ? 0 : floor(lo / step) * step;
  a->hi = ceil(hi / step) * step;
  if (a->hi <= a->lo) a->hi = a->lo + step;
}

double hct__svg_map(const hct_svg_axis_t *a, double v) {
  double f;
  if (a->log) {
    if (!(v > 0)) v = a->lo;
    f = (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
  } else {
    f = (v - a->lo) / (a->hi - a->lo);
  }
  if (!isfinite(f)) f = 0;
  /* Keep a stray value on the picture's edge rather than far outside it. */
  if (f < -0.05) f = -0.05;
  if (f > 1.05) f = 1.05;
  return a->px0 + f * (a->px1 - a->px0);
}

int hct__svg_ticks(const hct_svg_axis_t *a, double *ticks, int max) {
  int n = 0;
  if (a->log) {
    /* 1-2-5 per decade; finer within about a decade, 1 only when the
     * range spans many. */
    double decades = log10(a->hi / a->lo);
    static const double fine[] = {1, 1.5, 2, 3, 5, 7}, all[] = {1, 2, 5}, ones[] = {1};
    const double *m = decades > 4 ? ones : decades > 1.2 ? all : fine;
    int nm = decades > 4 ? 1 : decades > 1.2 ? 3 : 6;
    /* Over many decades, a tick every few of them. */
    double every = decades > 8 ? pow(10, ceil(decades / 8)) : 10;
    for (double p = pow(10, floor(log10(a->lo))); p <= a->hi * 1.0001 && n < max; p *= every)
      for (int i = 0; i < nm && n < max; i++) {
        double v = m[i] * p;
        if (v >= a->lo * 0.9999 && v <= a->hi * 1.0001) ticks[n++] = v;
      }
    /* A narrow log range (under 2.5x) may hold one tick: add finer ones. */
    if (n < 3) {
      n = 0;
      double step = nice((a->hi - a->lo) / 4, 0);
      for (double v = ceil(a->lo / step) * step; v <= a->hi * 1.0001 && n < max; v += step)
        ticks[n++] = v;
    }
    return n;
  }
  double step = nice((a->hi - a->lo) / 5, 0);
  for (double v = ceil(a->lo / step - 1e-9) * step; v <= a->hi + step * 1e-6 && n < max; v += step)
    ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
  return n;
}

void hct__svg_num(double v, char *buf, size_t len) {
  if (!isfinite(v)) {
    snprintf(buf, len, "-");
    return;
  }
  double a = fabs(v);
  if (a >= 100 || a == 0) snprintf(buf, len, "%.0f", v);
  else if (a >= 10) snprintf(buf, len, "%.1f", v);
  else if (a >= 1) snprintf(buf, len, "%.2f", v);
  else if (a >= 0.01) snprintf(buf, len, "%.3f", v);
  else snprintf(buf, len, "%.2g", v);
  /* "4.50" -> "4.5", "3.00" -> "3" */
  if (strchr(buf, '.') && !strchr(buf, 'e')) {
    char *e = buf + strlen(buf) - 1;
    while (*e == '0') *e-- = '\0';
    if (*e == '.') *e = '\0';
  }
}

/* ---- drawing --------------------------------------------------------------- */

void hct__svg_begin(FILE *f, const hct_svg_plot_t *p, const char *cls, const char *title) {
  fprintf(f,
          "<svg class=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
          "width=\"%.0f\" height=\"%.0f\" role=\"img\"><title>",
          cls, p->w, p->h, p->w, p->h);
  hct__html_escape(f, title, 0);
  fputs("</title>\n", f);
}

void hct__svg_end(FILE *f) { fputs("</svg>\n", f); }

void hct__svg_axes(FILE *f, const hct_svg_plot_t *p, const double *xt, int xn,
                   const char *xlabel, const char *ylabel) {
  double ticks[64];
  char num[32];
  /* No y label: the rows are categories, no y ticks either. */
  int n = ylabel ? hct__svg_ticks(&p->y, ticks, 64) : 0;
  fputs("<g class=\"axis y\">", f);
  for (int i = 0; i < n; i++) {
    double y = hct__svg_map(&p->y, ticks[i]);
    hct__svg_num(ticks[i], num, sizeof num);
    fprintf(f,
            "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dy=\"0.32em\">%s</text>",
            p->left, p->right, y, y, p->left - 6, y, num);
  }
  fputs("</g>\n<g class=\"axis x\">", f);
  if (xt == NULL) {
    n = hct__svg_ticks(&p->x, ticks, 64);
    xt = ticks;
    xn = n;
  }
  for (int i = 0; i < xn; i++) {
    double x = hct__svg_map(&p->x, xt[i]);
    hct__svg_num(xt[i], num, sizeof num);
    fprintf(f,
            "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>",
            x, x, p->top, p->bottom, x, p->bottom + 16, num);
  }
  fprintf(f, "<line class=\"frame\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", p->left,
          p->right, p->bottom, p->bottom);
  fprintf(f, "<line class=\"frame\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", p->left,
          p->left, p->top, p->bottom);
  fprintf(f, "<text class=\"title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
          (p->left + p->right) / 2, p->bottom + 34);
  hct__html_escape(f, xlabel, 0);
  fprintf(f, "</text><text class=\"title\" transform=\"translate(%.1f %.1f) rotate(-90)\" "
             "text-anchor=\"middle\">",
          p->left - 48, (p->top + p->bottom) / 2);
  if (ylabel) hct__html_escape(f, ylabel, 0);
  fputs("</text></g>\n", f);
}

void hct__svg_spread(double *y, int n, double gap, double lo, double hi) {
  if (n <= 0) return;
  /* Push down from the top, then back up from the bottom: labels keep
   * their order and end at least gap apart, inside [lo, hi] when the
   * room allows. */
  for (int i = 0; i < n; i++) {
    if (y[i] < lo) y[i] = lo;
    if (i > 0 && y[i] < y[i - 1] + gap) y[i] = y[i - 1] + gap;
  }
  if (y[n - 1] > hi) y[n - 1] = hi;
  for (int i = n - 2; i >= 0; i--)
    if (y[i] > y[i + 1] - gap) y[i] = y[i + 1] - gap;
}
