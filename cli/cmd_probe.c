/*
 * cmd_probe.c: `hctune probe`: compile, check and time an op's variants on
 * one card and record the winners (tuner/probe.c does the work).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tuner.h"

static const char usage[] =
    "usage: hctune probe [--device N|UUID|all|LIST] [--op NAME] [--tokens LIST] [--db PATH] [--json]\n"
    "                    [--variants A,B,...] [--retry-quarantined] [--check-sets N]\n"
    "                    [--margin PCT] [--no-decide] [--quiet] [--verify-fleet [--fleet-db PATH]]\n"
    "                    [--outlier-pct PCT]\n"
    "\n"
    "Compiles every variant of the op (default hc_read) for the card, checks each\n"
    "one's outputs against the baseline at every token count with and without the\n"
    "optional inputs, times those that pass, and records every trial and the\n"
    "winner per token count in the database.\n"
    "\n"
    "  --device N|UUID      card index or UUID (prefix) (default 0; see 'hctune devices')\n"
    "  --device all|LIST    every card, or a list (0,2,5 or UUIDs), probed at once, one\n"
    "                       process per card after one compile per arch; then the\n"
    "                       cards of one model compared: pooled decisions, slow cards\n"
    "                       flagged, variants failing on one card quarantined for all\n"
    "  --outlier-pct PCT    with several cards: a card this much slower than its peers\n"
    "                       is an outlier (default 10)\n"
    "  --op NAME            op to probe (default hc_read)\n"
    "  --tokens LIST        token counts, e.g. 1-4,8 (default: the op's range)\n"
    "  --db PATH            database (default $HCTUNE_DB, else\n"
    "                       $XDG_STATE_HOME/hctune/hctune.db, else ~/.local/state/hctune/hctune.db)\n"
    "  --json               one JSON object per line on stdout: progress, then the result\n"
    "  --variants A,B       only these variants (the baseline is always included)\n"
    "  --retry-quarantined  try candidates that failed on this card before\n"
    "  --check-sets N       random input sets per token count and pending state (default 1)\n"
    "  --margin PCT         how much faster than the baseline a winner must be (default 2)\n"
    "  --no-decide          record trials but change no decision\n"
    "  --quiet              no progress on stderr\n"
    "  --verify-fleet       adopt the fleet's winners for this card's model after\n"
    "                       checking their parity here, without timing; a failure\n"
    "                       falls back to a full probe of the op (docs/fleet.md)\n"
    "  --fleet-db PATH      --verify-fleet: the fleet file to take them from (default:\n"
    "                       the fleet decisions imported into the database)\n";

int cmd_probe(int argc, char **argv) {
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'd'},  {"op", required_argument, NULL, 'o'},
      {"tokens", required_argument, NULL, 't'},  {"db", required_argument, NULL, 'b'},
      {"json", no_argument, NULL, 'j'},          {"variants", required_argument, NULL, 'v'},
      {"retry-quarantined", no_argument, NULL, 'r'}, {"check-sets", required_argument, NULL, 's'},
      {"margin", required_argument, NULL, 'm'},  {"no-decide", no_argument, NULL, 'n'},
      {"quiet", no_argument, NULL, 'q'},         {"help", no_argument, NULL, 'h'},
      {"verify-fleet", no_argument, NULL, 'F'},  {"fleet-db", required_argument, NULL, 'f'},
      {"outlier-pct", required_argument, NULL, 'O'}, {"parent-run", required_argument, NULL, 'P'},
      {NULL, 0, NULL, 0}};
  hct_probe_opts_t o;
  memset(&o, 0, sizeof o);
  int verify_fleet = 0;
  double outlier_pct = 0;
  const char *fleet_db = NULL;
  int c;
  char *end;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
      case 'd': o.device = optarg; break;
      case 'o': o.op = optarg; break;
      case 't':
        if (hct__parse_token_list(optarg, 64, o.tokens) < 0)
          return hct__usage_error("probe", "%s", hct_last_error());
        break;
      case 'b': o.db_path = optarg; break;
      case 'j': o.json = 1; break;
      case 'v': o.only_variants = optarg; break;
      case 'r': o.retry_quarantined = 1; break;
      case 's':
        o.check_sets = (int)strtol(optarg, &end, 10);
        if (*end || o.check_sets < 1 || o.check_sets > 100)
          return hct__usage_error("probe", "--check-sets '%s': need an integer in 1..100", optarg);
        break;
      case 'm':
        o.min_margin = strtod(optarg, &end) / 100.0;
        if (*end || o.min_margin < 0 || o.min_margin > 0.5)
          return hct__usage_error("probe", "--margin '%s': need a percentage in 0..50", optarg);
        break;
      case 'n': o.no_decide = 1; break;
      case 'q': o.quiet = 1; break;
      case 'F': verify_fleet = 1; break;
      case 'f': fleet_db = optarg; break;
      case 'P': o.parent_run = optarg; break; /* set by --device all for each card */
      case 'O':
        outlier_pct = strtod(optarg, &end);
        if (*end || end == optarg || !(outlier_pct > 0 && outlier_pct <= 1000))
          return hct__usage_error("probe", "--outlier-pct '%s': need a percentage in (0, 1000]", optarg);
        break;
      case 'h': fputs(usage, stdout); return HCT_EXIT_OK;
      case ':': return hct__usage_error("probe", "option '%s' needs a value", argv[optind - 1]);
      default: return hct__usage_error("probe", "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) return hct__usage_error("probe", "unexpected argument '%s'", argv[optind]);
  if (fleet_db && !verify_fleet) return hct__usage_error("probe", "--fleet-db needs --verify-fleet");
  int rc;
  int multi = hct__multi_spec(o.device);
  if (multi && (verify_fleet || o.parent_run))
    return hct__usage_error("probe", "--device '%s' names several cards: not with %s", o.device,
                            verify_fleet ? "--verify-fleet" : "--parent-run");
  if (outlier_pct > 0 && !multi) return hct__usage_error("probe", "--outlier-pct needs --device all or a list");
  if (multi) {
    rc = hct__multiprobe_cli(&o, outlier_pct);
  } else if (verify_fleet) {
    hct_fleet_verify_opts_t vo;
    memset(&vo, 0, sizeof vo);
    vo.probe = o;
    vo.fleet_db = fleet_db;
    rc = hct__fleet_verify(&vo);
  } else {
    rc = hct__probe(&o);
  }
  if (rc != 0) {
    if (o.json) {
      /* The daemon reads stdout: give it the error as the last line too. */
      printf("{\"event\":\"error\",\"code\":\"%s\",\"message\":\"", hct_err_name(rc));
      for (const char *p = hct_last_error(); *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        if ((unsigned char)*p >= 0x20) putchar(*p);
      }
      printf("\"}\n");
    }
    return hct__cli_fail(rc);
  }
  return HCT_EXIT_OK;
}
