/*
 * cmd_report.c: `hctune report`: what the DB holds as one self-contained
 * HTML page with plots (cli/report_data.c reads, cli/report_html.c and
 * cli/report_svg.c draw).  The page is written beside its final name and
 * renamed into place, so a failed write never leaves half a report under
 * the name a person opens.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "report.h"

static const char usage[] =
    "usage: hctune report [--db PATH] [--op OP] [--device UUID] --out FILE.html\n"
    "\n"
    "Writes what the database holds as one HTML page (inline SVG and CSS; no\n"
    "script, nothing fetched), per card and op: who wins at each T and by how\n"
    "much, every variant's median time against T with its 95% interval and the\n"
    "winners of each class (bitwise, kl) marked, their speedups over the\n"
    "baseline, the winners' medians across probes, the decisions, the parity\n"
    "figures against the limits of each class, and the faults with their\n"
    "reasons.  The plot at each T is the newest probe that timed it.\n"
    "\n"
    "  --db PATH       the database (default as for 'hctune list')\n"
    "  --op OP         only this op\n"
    "  --device UUID   only this card (a prefix of the UUID is enough)\n"
    "  --out FILE      the page to write ('-': standard output)\n"
    "  --help          print this and exit\n";

/* Writes the page to `out` through a temporary file renamed over it. */
static int write_page(const hct_report_t *r, const char *out) {
  if (strcmp(out, "-") == 0) {
    hct__report_html(stdout, r);
    if (fflush(stdout) != 0 || ferror(stdout))
      return hct__error(HCT_EIO, "report to standard output: %s", strerror(errno));
    return 0;
  }
  char tmp[PATH_MAX];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid()) >= sizeof tmp)
    return hct__error(HCT_EINVAL, "report '%s': path too long", out);
  FILE *f = fopen(tmp, "w");
  if (f == NULL) return hct__error(HCT_EIO, "report '%s': cannot write: %s", out, strerror(errno));
  hct__report_html(f, r);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    int e = errno;
    unlink(tmp);
    return hct__error(HCT_EIO, "report '%s': cannot write: %s", out, strerror(e ? e : EIO));
  }
  if (rename(tmp, out) != 0) {
    int e = errno;
    unlink(tmp);
    return hct__error(HCT_EIO, "report '%s': cannot write: %s", out, strerror(e));
  }
  return 0;
}

int cmd_report(int argc, char **argv) {
  const char *out = NULL;
  hct_report_filter_t filter = {0};
  const hct_option_t opts[] = {
      HCT_OPT_STRING("op", &filter.op),
      HCT_OPT_STRING("device", &filter.device),
      HCT_OPT_STRING("out", &out),
      HCT_OPT_END,
  };
  hct_cli_env_t env;
  int err = hct__cli_options(argc, argv, opts, usage, &env);
  if (err) return err == HCT_OPTS_HELP ? HCT_EXIT_OK : err;
  hct_db_t *db = env.db;
  const char *path = env.db_path;
  if (out == NULL) {
    hct__db_close(db);
    return hct__usage_error(argv[0], "--out FILE is required");
  }
  hct_report_t r;
  err = hct__report_load(db, &filter, &r);
  hct__db_close(db);
  /* An empty database is a page that says so; a filter that matches
   * nothing is more likely a typo than a wish for an empty page. */
  if (err == 0 && r.nsec == 0 && (filter.op || filter.device)) {
    char what[256];
    snprintf(what, sizeof what, "%s%s%s%s%s%s", filter.op ? "op '" : "",
             filter.op ? filter.op : "", filter.op ? "'" : "",
             filter.op && filter.device ? " on " : "", filter.device ? "card '" : "",
             filter.device ? filter.device : "");
    err = hct__error(HCT_ENOENT, "database '%s': nothing recorded for %s%s", path, what,
                     filter.device ? "'" : "");
  }
  if (err == 0) err = write_page(&r, out);
  hct__report_free(&r);
  return err ? hct__cli_fail(err) : HCT_EXIT_OK;
}
