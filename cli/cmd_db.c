/*
 * cmd_db.c: `hctune db export|merge|import`: moving results between the
 * hosts of a fleet (docs/fleet.md; db/fleet.h does the work).
 *
 * Every file that comes in (merge's inputs, import's file) is read whole
 * and checked (db/untrusted.c) before anything is written: a bad file is
 * refused with one line and status 1, and the local DB and the merge's
 * output are left as they were, byte for byte.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "fleet.h"

static const char usage[] =
    "usage: hctune db export [--db PATH] [--device UUID] [--json] FILE\n"
    "       hctune db merge [--outlier-pct PCT] [--margin PCT] [--json] OUT IN...\n"
    "       hctune db import [--db PATH] [--json] FILE\n"
    "\n"
    "Shares results between the hosts of a fleet (docs/fleet.md).\n"
    "\n"
    "  export  writes the trials, decisions, faults and cards of the local\n"
    "          database (or of one card, --device) to FILE, a self-contained\n"
    "          fleet file; compiled binaries never travel\n"
    "  merge   pools the trials of the fleet files IN... and writes OUT with\n"
    "          decisions recomputed per card model and software by the probe's\n"
    "          rule; cards slower than their identical peers (median more than\n"
    "          --outlier-pct, default 10, percent) and variants that pass on one\n"
    "          card and fail on an identical one are left out and reported\n"
    "  import  adds a fleet file's trials, faults and decisions (as source\n"
    "          \"fleet\") to the local database, in one transaction; decisions of\n"
    "          this database's own cards are kept\n"
    "\n"
    "  --db PATH        local database (default $HCTUNE_DB, else\n"
    "                   $XDG_STATE_HOME/hctune/hctune.db, else ~/.local/state/hctune/hctune.db)\n"
    "  --device UUID    export: only this card (a UUID prefix)\n"
    "  --outlier-pct P  merge: a card whose median is more than P% slower than its\n"
    "                   peers' is left out (default 10)\n"
    "  --margin PCT     merge: how much faster than the baseline a winner must be\n"
    "                   (default: the probe's, 2)\n"
    "  --json           a JSON object on stdout instead of text\n";

typedef struct db_opts_s {
  const char *db_path;
  const char *device;
  double outlier_pct;
  double margin;
  int json;
} db_opts_t;

static void print_json(json_t *j) {
  char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  if (s) printf("%s\n", s);
  free(s);
  json_decref(j);
}

static int db_export(const db_opts_t *o, int argc, char **argv) {
  if (argc != 1) return hct__usage_error("db export", "need exactly one FILE");
  char path[PATH_MAX], kdir[PATH_MAX];
  hct_db_t *db = NULL;
  int rc = hct__kernels_dir(kdir, sizeof kdir);
  if (rc == 0) rc = hct__cli_open_db(o->db_path, path, sizeof path, &db);
  if (rc != 0) return hct__cli_fail(rc);
  hct_fleet_t f;
  rc = hct__fleet_export(db, o->device, kdir, &f);
  hct__db_close(db);
  if (rc == 0 && o->device && o->device[0] && f.n_devices == 0 && f.n_trials == 0)
    rc = hct__error(HCT_ENOENT, "device '%s': no card of database '%s' matches", o->device, path);
  if (rc == 0) rc = hct__fleet_write(&f, argv[0]);
  if (rc == 0) {
    if (o->json)
      print_json(json_pack("{s:s, s:i, s:i, s:i, s:i}", "file", argv[0], "cards", f.n_devices,
                           "trials", f.n_trials, "decisions", f.n_decisions, "faults", f.n_faults));
    else
      printf("exported %d trials, %d decisions and %d faults of %d card%s from '%s' to '%s'\n",
             f.n_trials, f.n_decisions, f.n_faults, f.n_devices, f.n_devices == 1 ? "" : "s",
             path, argv[0]);
  }
  hct__fleet_free(&f);
  return rc == 0 ? HCT_EXIT_OK : hct__cli_fail(rc);
}

static void print_flags(const hct_fleet_t *m, json_t *arr) {
  for (int i = 0; i < m->n_flags; i++) {
    const hct_fleet_flag_t *fl = &m->flags[i];
    json_t *det = json_loads(fl->detail, 0, NULL);
    if (arr != NULL) {
      json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "kind",
                                           fl->kind, "model_key", fl->model_key, "env", fl->env,
                                           "op", fl->op, "uuid", fl->uuid, "host", fl->host,
                                           "variant", fl->variant, "params", fl->params, "detail",
                                           det ? det : json_object()));
      continue;
    }
    if (strcmp(fl->kind, "outlier") == 0)
      printf("outlier: card %s (%s) of '%s', %s: median %.3fx its peers' (threshold +%.4g%%); "
             "left out of the pool\n", fl->uuid, fl->host, fl->model_key, fl->op,
             json_number_value(json_object_get(det, "median_ratio")),
             json_number_value(json_object_get(det, "threshold_pct")));
    else {
      char *p = json_dumps(json_object_get(det, "passed_on"), JSON_COMPACT);
      char *f = json_dumps(json_object_get(det, "failed_on"), JSON_COMPACT);
      printf("conflict: %s %s of %s on '%s': passed parity on %s, failed on %s; quarantined "
             "for this model and software\n", fl->variant, fl->params, fl->op, fl->model_key,
             p ? p : "?", f ? f : "?");
      free(p);
      free(f);
    }
    json_decref(det);
  }
}

static int db_merge(const db_opts_t *o, int argc, char **argv) {
  if (argc < 2) return hct__usage_error("db merge", "need OUT and at least one IN");
  int n = argc - 1;
  hct_fleet_t *in = calloc((size_t)n, sizeof *in);
  if (in == NULL) return hct__cli_fail(hct__error(HCT_ENOMEM, "out of memory"));
  int rc = 0;
  /* Every input is read and checked before OUT is touched. */
  for (int i = 0; rc == 0 && i < n; i++) rc = hct__fleet_read(argv[1 + i], &in[i]);
  hct_fleet_t m;
  memset(&m, 0, sizeof m);
  hct_fleet_merge_opts_t mo = {o->outlier_pct, o->margin};
  if (rc == 0) rc = hct__fleet_merge(in, n, &mo, &m);
  for (int i = 0; i < n; i++) hct__fleet_free(&in[i]);
  free(in);
  if (rc == 0) rc = hct__fleet_write(&m, argv[0]);
  if (rc == 0) {
    int outliers = 0;
    for (int i = 0; i < m.n_flags; i++) outliers += strcmp(m.flags[i].kind, "outlier") == 0;
    if (o->json) {
      json_t *flags = json_array();
      print_flags(&m, flags);
      print_json(json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:o}", "file", argv[0], "inputs", n,
                           "cards", m.n_devices, "trials", m.n_trials, "decisions",
                           m.n_decisions, "faults", m.n_faults, "flags", flags));
    } else {
      printf("merged %d file%s: %d cards, %d trials, %d faults; %d decisions recomputed; %d "
             "outlier card%s, %d conflicting variant%s; written to '%s'\n", n, n == 1 ? "" : "s",
             m.n_devices, m.n_trials, m.n_faults, m.n_decisions, outliers,
             outliers == 1 ? "" : "s", m.n_flags - outliers, m.n_flags - outliers == 1 ? "" : "s",
             argv[0]);
      print_flags(&m, NULL);
    }
  }
  hct__fleet_free(&m);
  return rc == 0 ? HCT_EXIT_OK : hct__cli_fail(rc);
}

static int db_import(const db_opts_t *o, int argc, char **argv) {
  if (argc != 1) return hct__usage_error("db import", "need exactly one FILE");
  hct_fleet_t f;
  /* The file first: the local DB is not even opened for a bad one. */
  int rc = hct__fleet_read(argv[0], &f);
  char path[PATH_MAX];
  if (rc == 0) {
    if (o->db_path) hct__strlcpy(path, o->db_path, sizeof path);
    else rc = hct__default_db_path(path, sizeof path, 1);
  }
  hct_db_t *db = NULL;
  if (rc == 0) rc = hct__db_open(path, 0, &db);
  hct_fleet_import_stats_t s;
  if (rc == 0) rc = hct__fleet_import(db, &f, &s);
  hct__db_close(db);
  hct__fleet_free(&f);
  if (rc != 0) return hct__cli_fail(rc);
  if (o->json)
    print_json(json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "file",
                         argv[0], "db", path, "trials", s.trials, "trials_known", s.trials_known,
                         "trials_local", s.trials_local, "faults", s.faults, "faults_known",
                         s.faults_known, "faults_local", s.faults_local, "decisions",
                         s.decisions, "decisions_local", s.decisions_local));
  else
    printf("imported into '%s': %d trials (%d already there), %d faults (%d already there), %d "
           "fleet decisions; rows naming this database's own cards left out: %d trials, %d "
           "faults, %d decisions\n", path, s.trials, s.trials_known, s.faults, s.faults_known,
           s.decisions, s.trials_local, s.faults_local, s.decisions_local);
  return HCT_EXIT_OK;
}

/* The options of each subcommand: a row per option, as every command
 * (common/cmdline.h). */
#define OPTS_DB(o) HCT_OPT_STRING("db", &(o)->db_path)
#define OPTS_JSON(o) HCT_OPT_FLAG("json", &(o)->json)

static int parse_export(db_opts_t *o, int argc, char **argv, const char *cmd) {
  const hct_option_t opts[] = {OPTS_DB(o), HCT_OPT_STRING("device", &o->device), OPTS_JSON(o),
                               HCT_OPT_END};
  return hct__parse_options(argc, argv, cmd, opts, usage);
}

static int parse_merge(db_opts_t *o, int argc, char **argv, const char *cmd) {
  const hct_option_t opts[] = {HCT_OPT_NUMBER("outlier-pct", &o->outlier_pct, 0.1, 1000),
                               HCT_OPT_NUMBER("margin", &o->margin, 0, 50), OPTS_JSON(o),
                               HCT_OPT_END};
  return hct__parse_options(argc, argv, cmd, opts, usage);
}

static int parse_import(db_opts_t *o, int argc, char **argv, const char *cmd) {
  const hct_option_t opts[] = {OPTS_DB(o), OPTS_JSON(o), HCT_OPT_END};
  return hct__parse_options(argc, argv, cmd, opts, usage);
}

/* A subcommand: how its options parse and what it does with the files
 * named after them. */
static const struct {
  const char *name;
  int (*parse)(db_opts_t *o, int argc, char **argv, const char *cmd);
  int (*fn)(const db_opts_t *o, int argc, char **argv);
} subcommands[] = {
    {"export", parse_export, db_export},
    {"merge", parse_merge, db_merge},
    {"import", parse_import, db_import},
};

/*
 * The files come after the options (`db merge --json OUT IN...`): the
 * first argument that is neither an option nor an option's value starts
 * them.  Returns its index.  An option's value is the next argument unless
 * the option is one of `flags` or is written --name=value.
 */
static int files_start(int argc, char **argv) {
  static const char *const flags[] = {"--json", "--help", "-h"};
  int i = 1;
  while (i < argc) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) return i + 1;
    if (a[0] != '-' || a[1] == '\0') return i;
    int is_flag = strchr(a, '=') != NULL;
    for (size_t k = 0; k < HCT_ARRAY_SIZE(flags); k++) is_flag |= strcmp(a, flags[k]) == 0;
    i += is_flag ? 1 : 2;
  }
  return argc;
}

int cmd_db(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(usage, stdout);
    return HCT_EXIT_OK;
  }
  if (argc < 2) return hct__usage_error("db", "need a subcommand: export, merge or import");
  if (argv[1][0] == '-') {
    /* An option before any subcommand: `db` itself has none but --help,
     * and the parser words the error as for every command. */
    const hct_option_t none[] = {HCT_OPT_END};
    int rc = hct__parse_options(argc, argv, "db", none, usage);
    return rc == HCT_OPTS_HELP ? HCT_EXIT_OK : rc != 0 ? rc : HCT_EXIT_USAGE;
  }
  size_t s = 0;
  while (s < HCT_ARRAY_SIZE(subcommands) && strcmp(subcommands[s].name, argv[1]) != 0) s++;
  if (s == HCT_ARRAY_SIZE(subcommands))
    return hct__usage_error("db", "unexpected argument '%s'", argv[1]);
  char cmd[32];
  snprintf(cmd, sizeof cmd, "db %s", argv[1]);
  db_opts_t o;
  memset(&o, 0, sizeof o);
  o.margin = -1;
  /* argv[1] (the subcommand) plays argv[0] for the parser. */
  int files = files_start(argc - 1, argv + 1);
  int rc = subcommands[s].parse(&o, files, argv + 1, cmd);
  if (rc != 0) return rc == HCT_OPTS_HELP ? HCT_EXIT_OK : rc;
  /* A margin of 0 asks for the smallest the rule can express; none given,
   * the probe's default. */
  if (o.margin >= 0) o.margin = o.margin > 0 ? o.margin / 100 : 1e-12;
  else o.margin = 0;
  return subcommands[s].fn(&o, argc - 1 - files, argv + 1 + files);
}
