/*
 * report.h: what the files of `hctune report` share.
 *
 *   cli/report_data.c  the DB (through db/) shaped into one section per
 *                      card and op: runs, the timing trials plotted, the
 *                      winners per T, parity figures against the limits of
 *                      each class, faults
 *   cli/report_svg.c   a small SVG plotting helper (axes, linear and log
 *                      scales, ticks, number formats) and HTML escaping;
 *                      it knows nothing of hctune
 *   cli/report_html.c  the page: a section per card and op
 *   cli/report_timings.c  a section's summary lines and timing plots
 *   cli/report_tables.c   a section's tables, and the parity and floor plots
 *   cli/report_look.c  what the page's files share: escaping, styles,
 *                      names, numbers, the plots' frames
 *   cli/cmd_report.c   the command: options, the DB, the output file
 *
 * Everything in a section comes from the DB file, which may be hostile:
 * text is escaped where it is written (report_svg.c), numbers that are not
 * finite or not positive are never plotted.
 */
#ifndef HCT_REPORT_H
#define HCT_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "db.h"

/* Classes of a variant, as the manifest names them. */
enum { HCT_RP_UNKNOWN = -1, HCT_RP_BASELINE = 0, HCT_RP_BITWISE = 1, HCT_RP_KL = 2 };
/* The two parity classes a decision is made for (decisions.parity). */
enum { HCT_RP_PAR_BITWISE = 0, HCT_RP_PAR_KL = 1, HCT_RP_NPAR = 2 };

typedef struct hct_rp_run_s {
  char id[33];
  int64_t started;            /* first trial's time */
  int64_t first_id;           /* first trial's id: orders runs of one second */
} hct_rp_run_t;

/* A variant: the line of the plot (its fastest point at each T). */
typedef struct hct_rp_family_s {
  char variant[32];
  int klass;                  /* HCT_RP_BASELINE ... or HCT_RP_UNKNOWN */
  int wins;                   /* T counts where it holds a decision */
} hct_rp_family_t;

/* A variant at one parameter point. */
typedef struct hct_rp_series_s {
  int family;
  char params[256];           /* canonical JSON (sorted keys, compact) */
  char label[256];            /* "NG=4 PDL=1": the parameters that vary */
  /* parity, over the newest run that checked it */
  int checks, passed;
  char worst_status[16];      /* first failure's status, "" when none */
  double worst_ratio;         /* largest figure / limit of its class */
  char worst_what[96];        /* "kl_mean of mixed at T=5" */
  double worst_value, worst_limit;
  int parity_T;               /* T of the worst figure */
} hct_rp_series_t;

typedef struct hct_rp_timing_s {
  int64_t id;
  int series;
  int T;
  int run;
  int deciding;               /* the pass in the mode decisions use */
  int cold;
  int pruned;
  double median, lo, hi;      /* us; lo/hi the 95% interval */
  int samples;
  int plotted;                /* from the newest run that timed this T */
} hct_rp_timing_t;

/* The decision holding one T of one parity class. */
typedef struct hct_rp_win_s {
  int set;
  int series;                 /* -1 when no trial matches it */
  int family;                 /* -1 likewise */
  char variant[32];
  char params[256];           /* canonical */
  char variant_class[16];
  double median, lo, hi, baseline;
  int samples;
  int64_t decided_at;
  int trial;                  /* index in tm of the trial it stands on, -1 */
} hct_rp_win_t;

typedef struct hct_rp_section_s {
  char uuid[64], host[128], name[128], arch[64];
  char driver[32], compiler[32], hctune[16];
  char op[32];
  /* from the manifest (have_manifest), else defaults */
  int have_manifest;
  int timing_cold, batch;
  double kl_mean_factor, kl_abs_floor, maxerr_factor;
  int baseline;               /* family index, -1 unknown */
  hct_rp_run_t *runs;
  int nruns;
  hct_rp_family_t *fam;
  int nfam;
  hct_rp_series_t *ser;
  int nser;
  hct_rp_timing_t *tm;
  int ntm;
  int *Ts;                    /* the token counts shown, ascending */
  int nT;
  hct_rp_win_t *win[HCT_RP_NPAR]; /* [par][index into Ts] */
  hct_db_decision_t *dec;
  int ndec;
  hct_db_fault_t *faults;
  int nfaults;
  int failed_timings;         /* timing trials with a fault status */
  /* The distance to the card's limit (docs/report.md): */
  double copy_bw;             /* bytes/s; 0 unknown (no floors) */
  double peak_flops;          /* flop/s; 0 unknown */
  int bw_measured;            /* 1: this card's probe measured copy_bw */
  char limits_note[160];      /* where they come from ("nominal: ...") */
  int has_flops;              /* the manifest declares "flops" */
  double *floor_us;           /* [index into Ts]: the floor, NAN none */
  int *floor_compute;         /* [index into Ts]: 1 when flops set it */
  /* Where the newest probe with one spent its time (tuner/probe_clock.c's
   * breakdown, JSON text as the DB holds it; NULL none). */
  char *breakdown;
  char breakdown_run[33];
  int64_t breakdown_at;
} hct_rp_section_t;

typedef struct hct_report_s {
  char db_path[4096];
  char kernels_dir[4096];
  int64_t generated;
  hct_rp_section_t *sec;
  int nsec;
  int ntrials;                /* rows read, before filtering by section */
} hct_report_t;

typedef struct hct_report_filter_s {
  const char *op;             /* NULL: every op */
  const char *device;         /* NULL: every card; a UUID prefix */
} hct_report_filter_t;

/* Reads everything a report shows from db.  0, or an error code with the
 * thread's message set; *r is filled either way and must be freed. */
int hct__report_load(hct_db_t *db, const hct_report_filter_t *f, hct_report_t *r);
void hct__report_free(hct_report_t *r);
/* Index of T in s->Ts, -1 when absent. */
int hct__report_T_index(const hct_rp_section_t *s, int T);

/* The floor at Ts[k] over winner w's median: 1 at the card's limit, less
 * the farther from it; NAN when either is unknown. */
double hct__report_floor_fraction(const hct_rp_section_t *s, int k, const hct_rp_win_t *w);

/* Writes the page.  Errors are the stream's (checked by the caller). */
void hct__report_html(FILE *f, const hct_report_t *r);

/* ---- SVG helper (cli/report_svg.c) --------------------------------------- */

/* Writes s with & < > " ' escaped and control bytes replaced, at most max
 * bytes of it (0: all), cut at a UTF-8 boundary with an ellipsis. */
void hct__html_escape(FILE *f, const char *s, size_t max);

typedef struct hct_svg_axis_s {
  double lo, hi;              /* data range shown */
  int log;                    /* log10 scale */
  double px0, px1;            /* pixels of lo and hi */
} hct_svg_axis_t;

/* Fits an axis to data in [lo, hi]: log when use_log and lo > 0 (bounds
 * 10% past the data), else linear with bounds widened to round numbers. */
void hct__svg_axis_fit(hct_svg_axis_t *a, double lo, double hi, int use_log, double px0,
                       double px1);
double hct__svg_map(const hct_svg_axis_t *a, double v);
/* Round tick values inside the axis (1-2-5 steps); returns the count. */
int hct__svg_ticks(const hct_svg_axis_t *a, double *ticks, int max);
/* "0.5", "12", "1.25": few digits, no trailing zeros. */
void hct__svg_num(double v, char *buf, size_t len);

typedef struct hct_svg_plot_s {
  double w, h;                /* whole picture */
  double left, right, top, bottom; /* plot area edges, pixels */
  hct_svg_axis_t x, y;
} hct_svg_plot_t;

/* Opens <svg> with a title and description for screen readers. */
void hct__svg_begin(FILE *f, const hct_svg_plot_t *p, const char *cls, const char *title);
void hct__svg_end(FILE *f);
/* Grid lines, tick labels and axis titles; x ticks given by the caller
 * (xt, xn; NULL: chosen by hct__svg_ticks); ylabel NULL: no y ticks. */
void hct__svg_axes(FILE *f, const hct_svg_plot_t *p, const double *xt, int xn,
                   const char *xlabel, const char *ylabel);
/* Moves label positions y[0..n) apart by at least gap pixels, keeping
 * their order and staying inside [lo, hi] where they can. */
void hct__svg_spread(double *y, int n, double gap, double lo, double hi);

/* ---- the page's files (cli/report_html.c calls down to the others) ------- */

/* Markers of the plots' lines, and the fixed colours of the page. */
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
} hct_rp_style_t;

/* cli/report_look.c: escaping, styles, names, numbers, the plots' frames. */
void hct__rp_esc(FILE *f, const char *s);
const char *hct__rp_class_name(int k);
hct_rp_style_t hct__rp_style_of(int k);
hct_rp_style_t hct__rp_family_style(const hct_rp_section_t *s, int fam);
const char *hct__rp_family_colour(const hct_rp_section_t *s, int fam);
void hct__rp_marker(FILE *f, int mk, double x, double y, double r, const char *fill,
                    const char *stroke);
void hct__rp_dash_attr(FILE *f, const char *dash);
void hct__rp_num(double v, char *buf, size_t len);
void hct__rp_iso(int64_t t, char *buf, size_t len);
void hct__rp_series_name(FILE *f, const hct_rp_section_t *s, int series);
void hct__rp_win_name(FILE *f, const hct_rp_section_t *s, const hct_rp_win_t *w);
void hct__rp_params_text(FILE *f, const char *params);
double hct__rp_speedup(const hct_rp_win_t *w);
hct_svg_plot_t hct__rp_t_frame(const hct_rp_section_t *s, double h, double top, double bottom_gap);
double hct__rp_bars_begin(FILE *f, const hct_rp_section_t *s, int height, double ymax,
                          const char *cls, const char *title, const char *ylabel,
                          const char *onelabel, hct_svg_plot_t *p);
void hct__rp_bars_end(FILE *f, const hct_svg_plot_t *p, const char *kl_style);
/* The parity classes' names, by HCT_RP_PAR_*. */
extern const char *const hct__rp_parity_names[HCT_RP_NPAR];

/* cli/report_timings.c: a section's timing part. */
void hct__rp_summary(FILE *f, const hct_rp_section_t *s);
void hct__rp_time_plot(FILE *f, const hct_rp_section_t *s);
void hct__rp_speedup_plot(FILE *f, const hct_rp_section_t *s);
void hct__rp_history_plot(FILE *f, const hct_rp_section_t *s);

/* cli/report_tables.c: a section's tables (and the plots beside them). */
void hct__rp_decisions_table(FILE *f, const hct_rp_section_t *s);
void hct__rp_breakdown_table(FILE *f, const hct_rp_section_t *s);
void hct__rp_parity_table(FILE *f, const hct_rp_section_t *s);
void hct__rp_parity_plot(FILE *f, const hct_rp_section_t *s);
void hct__rp_floor_part(FILE *f, const hct_rp_section_t *s);
void hct__rp_faults_table(FILE *f, const hct_rp_section_t *s);

#endif /* HCT_REPORT_H */
