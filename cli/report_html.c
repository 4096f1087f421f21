/*
 * report_html.c: the page of `hctune report`: one self-contained HTML file
 * (inline CSS and SVG, no script, nothing fetched) with, per card and op, a
 * section: its heading, the timings (cli/report_timings.c: a line per T
 * saying who wins and by how much, the plot of every variant's time
 * against T with the winners marked, their speedups, the winners' medians
 * across probes), and the tables behind them (cli/report_tables.c:
 * decisions, parity figures against the limits, faults).  What they share
 * is cli/report_look.c's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report.h"

/* ---- a section and the page --------------------------------------------- */

/* The section's heading, the card's line, and its faults up front. */
static void section_head(FILE *f, const hct_rp_section_t *s, int idx) {
  fprintf(f, "<section class=\"card-op\" id=\"s%d\" data-op=\"", idx);
  hct__rp_esc(f, s->op);
  fputs("\" data-uuid=\"", f);
  hct__rp_esc(f, s->uuid);
  fputs("\"><h2>", f);
  hct__rp_esc(f, s->op);
  fputs(" on ", f);
  hct__rp_esc(f, s->name[0] ? s->name : "a card");
  fputs(" <span class=\"uuid\">", f);
  hct__rp_esc(f, s->uuid);
  fputs("</span></h2>\n<p class=\"meta\">", f);
  if (s->arch[0]) {
    hct__rp_esc(f, s->arch);
    fputs(" &middot; ", f);
  }
  static const char *const keys[] = {"host", "driver", "compiler", "hctune"};
  const char *vals[] = {s->host, s->driver, s->compiler, s->hctune};
  for (size_t i = 0; i < HCT_ARRAY_SIZE(keys); i++) {
    fprintf(f, "%s%s ", i ? " &middot; " : "", keys[i]);
    hct__rp_esc(f, vals[i][0] ? vals[i] : "-");
  }
  char when[32];
  hct__rp_iso(s->nruns ? s->runs[s->nruns - 1].started : 0, when, sizeof when);
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
    hct__rp_esc(f, s->faults[i].reason);
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
  hct__rp_summary(f, s);
  fputs("<h3>Time per call against T</h3>\n<p class=\"note\">Each line is a variant "
        "through its fastest parameter point, in its own colour, dash pattern and marker; "
        "every mark is a timing trial with its 95% interval (hollow: pruned early as clearly "
        "slower; diamonds: the other cache mode, recorded beside and not deciding). Rings: "
        "<span class=\"cls bitwise\">bitwise</span> winner (solid), "
        "<span class=\"cls kl\">kl</span> winner (dashed). The baseline is the long-dashed "
        "grey line, the card's floor the black dash-dot one; faded lines win nowhere.</p>\n",
        f);
  hct__rp_time_plot(f, s);
  fputs("<h3>Speedup over the baseline</h3>\n", f);
  hct__rp_speedup_plot(f, s);
  hct__rp_floor_part(f, s);
  if (s->nruns >= 2) {
    fputs("<h3>Over time</h3>\n<p class=\"note\">The medians that today's winner at "
          "each T measured in every probe of this card that timed it: a line that climbs is a "
          "kernel that got slower (a driver or compiler update, a throttled card).</p>\n",
          f);
    hct__rp_history_plot(f, s);
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
  hct__rp_parity_plot(f, s);
  fputs("<h4>Every checked point</h4>\n", f);
  hct__rp_parity_table(f, s);
}

static void section(FILE *f, const hct_rp_section_t *s, int idx) {
  section_head(f, s, idx);
  section_timings(f, s);
  fprintf(f, "<h3>Decisions</h3>\n");
  if (s->ndec) hct__rp_decisions_table(f, s);
  else fputs("<p class=\"empty\">No decisions recorded.</p>\n", f);
  hct__rp_breakdown_table(f, s);
  section_parity(f, s);
  fprintf(f, "<h3 id=\"faults%d\">Faults</h3>\n", idx);
  if (s->failed_timings)
    fprintf(f, "<p class=\"note\">%d timing trial%s ended in a fault.</p>\n", s->failed_timings,
            s->failed_timings == 1 ? "" : "s");
  if (s->nfaults) hct__rp_faults_table(f, s);
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
  hct__rp_iso(r->generated, when, sizeof when);
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
        "<title>hctune report: ",
        f);
  hct__rp_esc(f, r->db_path);
  fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>hctune report</h1>\n"
             "<p class=\"meta\">database <code>",
          css);
  hct__rp_esc(f, r->db_path);
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
      hct__rp_esc(f, r->sec[i].op);
      fputs(" on ", f);
      hct__rp_esc(f, r->sec[i].name[0] ? r->sec[i].name : r->sec[i].uuid);
      fputs("</a>", f);
    }
    fputs("</nav>\n", f);
  }
  for (int i = 0; i < r->nsec; i++) section(f, &r->sec[i], i);
  fputs("</body></html>\n", f);
}
