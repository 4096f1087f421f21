/*
 * cmd_probe.c: `hctune probe`: compile, check and time an op's variants on
 * one card and record the winners (tuner/probe.c does the work).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tuner.h"

static const char usage[] =
    "usage: hctune probe [--device N|UUID|all|LIST] [--op NAME] [--tokens LIST] [--db PATH] [--json]\n"
    "                    [--variants A,B,...] [--retry-quarantined] [--check-sets N]\n"
    "                    [--margin PCT] [--no-decide] [--stale] [--verify-all] [--quiet]\n"
    "                    [--verify-fleet [--fleet-db PATH]] [--outlier-pct PCT]\n"
    "\n"
    "Compiles every variant of the op (default hc_read) for the card, checks each\n"
    "one's outputs against the baseline at every token count with and without the\n"
    "optional inputs, times those that pass, and records every trial and the\n"
    "winner per token count in the database.  Each winner is checked too where its\n"
    "decision serves counts no probe timed: its range's ends and a partial tile\n"
    "with the smallest and the largest tail.  The probe ends with where its time\n"
    "went (compile, worker, inputs and references, checks, search, timing, verify,\n"
    "decide, record), also in --json's result (\"breakdown\") and in hctune report.\n"
    "\n"
    "  --device N|UUID      card index or UUID (prefix) (default 0; see 'hctune devices')\n"
    "  --device all|LIST    every card, or a list (0,2,5 or UUIDs), probed at once, one\n"
    "                       process per card after one compile per arch; then the\n"
    "                       cards of one model compared: pooled decisions, slow cards\n"
    "                       flagged, variants failing on one card quarantined for all\n"
    "  --outlier-pct PCT    with several cards: a card this much slower than its peers\n"
    "                       is an outlier (default 10)\n"
    "  --op NAME            op to probe (default hc_read)\n"
    "  --tokens LIST        token counts, e.g. 1-4,8 (default: the op's probe_tokens, else\n"
    "                       its range)\n"
    "  --db PATH            database (default $HCTUNE_DB, else\n"
    "                       $XDG_STATE_HOME/hctune/hctune.db, else ~/.local/state/hctune/hctune.db)\n"
    "  --json               one JSON object per line on stdout: progress, then the result\n"
    "  --variants A,B       only these variants (the baseline is always included)\n"
    "  --retry-quarantined  try candidates that failed on this card before\n"
    "  --check-sets N       random input sets per token count and pending state (default 1)\n"
    "  --margin PCT         how much faster than the baseline a winner must be (default 2)\n"
    "  --no-decide          record trials but change no decision\n"
    "  --stale              only the token counts whose decision is missing or stale\n"
    "                       (its software key is not what this host would compile now)\n"
    "  --verify-all         verify the timed launches' outputs of every candidate, not\n"
    "                       only the winners' (slower; the selftest uses it)\n"
    "  --quiet              no progress on stderr\n"
    "  --verify-fleet       adopt the fleet's winners for this card's model after\n"
    "                       checking their parity here, without timing; a failure\n"
    "                       falls back to a full probe of the op (docs/fleet.md)\n"
    "  --fleet-db PATH      --verify-fleet: the fleet file to take them from (default:\n"
    "                       the fleet decisions imported into the database)\n";

/*
 * What to do next when the probe could not start for want of a GPU: the
 * first thing a person sees after `make probe` on a machine without one
 * (a laptop, a CI runner), printed after the error line that says what is
 * missing.  One row per error that means "no GPU here".
 */
static const struct {
  int code;
  const char *advice;
} next_steps[] = {
    {HCT_ENODRIVER, "no NVIDIA or AMD GPU driver on this machine"},
    {HCT_ENODEV, "the GPU driver loads but lists no card"},
};

static void advise(int code) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(next_steps); i++) {
    if (next_steps[i].code != code) continue;
    fprintf(stderr,
            "hctune probe: %s: probing times kernels on a card, so it needs one.\n"
            "  Without a GPU, hctune still compiles every variant "
            "(bin/hctune compile --arch sm_90),\n"
            "  serves decisions made elsewhere (bin/hctune db import, hctuned --fleet-url),\n"
            "  and `make check` runs the tests that need no GPU.\n"
            "  Run `make probe` on the GPU machine (bin/hctune devices lists what this one "
            "has).\n",
            next_steps[i].advice);
  }
}

int cmd_probe(int argc, char **argv) {
  hct_probe_opts_t o;
  memset(&o, 0, sizeof o);
  const char *tokens = NULL;
  double margin_pct = -1;
  int verify_fleet = 0;
  double outlier_pct = 0;
  const char *fleet_db = NULL;
  const hct_option_t opts[] = {
      HCT_OPT_STRING("device", &o.device),
      HCT_OPT_STRING("op", &o.op),
      HCT_OPT_STRING("tokens", &tokens),
      HCT_OPT_STRING("db", &o.db_path),
      HCT_OPT_FLAG("json", &o.json),
      HCT_OPT_STRING("variants", &o.only_variants),
      HCT_OPT_FLAG("retry-quarantined", &o.retry_quarantined),
      HCT_OPT_INT("check-sets", &o.check_sets, 1, 100),
      HCT_OPT_NUMBER("margin", &margin_pct, 0, 50),
      HCT_OPT_FLAG("no-decide", &o.no_decide),
      HCT_OPT_FLAG("stale", &o.stale),
      HCT_OPT_FLAG("verify-all", &o.verify_all),
      HCT_OPT_FLAG("quiet", &o.quiet),
      HCT_OPT_FLAG("verify-fleet", &verify_fleet),
      HCT_OPT_STRING("fleet-db", &fleet_db),
      HCT_OPT_NUMBER("outlier-pct", &outlier_pct, 0.01, 1000),
      /* Set by --device all on each card's probe (tuner/multiprobe.c). */
      HCT_OPT_STRING("parent-run", &o.parent_run),
      HCT_OPT_END,
  };
  int parsed = hct__cli_options(argc, argv, opts, usage, NULL);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  if (tokens && hct__parse_token_list(tokens, &o.tokens) < 0)
    return hct__usage_error("probe", "--tokens '%s': %s", tokens, hct_last_error());
  if (margin_pct >= 0) o.min_margin = margin_pct / 100.0;
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
    /* The card's copy rate too, measured by the probe in its worker. */
    o.copy_bw = !o.no_decide;
    rc = hct__probe(&o);
  }
  if (rc != 0) {
    const int code = rc;
    if (o.json) {
      /* The daemon reads stdout: give it the error as the last line too. */
      printf("{\"event\":\"error\",\"code\":\"%s\",\"message\":\"", hct_err_name(rc));
      for (const char *p = hct_last_error(); *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        if ((unsigned char)*p >= 0x20) putchar(*p);
      }
      printf("\"}\n");
    }
    rc = hct__cli_fail(rc);
    advise(code);
    return rc;
  }
  return HCT_EXIT_OK;
}
