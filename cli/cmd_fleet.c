/*
 * cmd_fleet.c: `hctune fleet init|push|status`: the live fleet on a
 * PostgreSQL server (db/fleet_pg.c).  Subcommands are a table, like the
 * commands themselves.  The URL is never printed as given: messages show it
 * without its password (hct__fleet_url_shown).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "fleet_pg.h"

static const char usage[] =
    "usage: hctune fleet init   --url URL [--json]\n"
    "       hctune fleet push   --url URL [--db PATH] [--json]\n"
    "       hctune fleet status --url URL [--json]\n"
    "\n"
    "The live fleet: hosts push their trials to a PostgreSQL server, which\n"
    "keeps the fleet's decisions per (card model, software) key, recomputed\n"
    "from every host's trials with the rule of 'hctune db merge'; daemons\n"
    "started with --fleet-url pull them (docs/fleet-live.md).\n"
    "\n"
    "  init     create the server's schema, or migrate it to this hctune's;\n"
    "           safe to run again and from several hosts at once\n"
    "  push     upload this host's trials, faults and devices in one\n"
    "           transaction (rows the server has are skipped) and recompute\n"
    "           the decisions of the keys that gained trials\n"
    "  status   keys, hosts, trials, decisions, outliers and conflicts\n"
    "\n"
    "  --url URL   the server, as libpq takes it: postgresql://user@host/db,\n"
    "              'host=... dbname=...', or 'service=NAME' (PGSERVICEFILE);\n"
    "              passwords belong in ~/.pgpass (PGPASSFILE), not in the URL,\n"
    "              which other users can read in the process list; TLS with\n"
    "              sslmode=verify-full.  Default: $HCTUNE_FLEET_URL\n"
    "  --db PATH   the local database to push (default as for 'hctune list')\n"
    "  --json      print the result as JSON\n"
    "  --help      print this and exit\n";

typedef struct fleet_args_s {
  const char *url;
  const char *db;
  int json;
  hct_db_t *local;        /* push: the local DB, opened before the server */
  char db_path[PATH_MAX];
} fleet_args_t;

static void print_json(json_t *j) {
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (s != NULL) printf("%s\n", s);
  free(s);
}

static int sub_init(const fleet_args_t *a, hct_pg_t *f) {
  int from;
  int rc = hct__pg_init(f, 0, &from);
  if (rc < 0) return hct__cli_fail(rc);
  if (a->json) {
    json_t *j = json_pack("{s:s, s:i, s:i}", "server", hct__pg_shown(f), "from_version", from,
                          "schema_version", HCT_PG_SCHEMA_VERSION);
    print_json(j);
    json_decref(j);
  } else if (from == HCT_PG_SCHEMA_VERSION) {
    printf("fleet '%s': schema version %d, up to date\n", hct__pg_shown(f), from);
  } else {
    printf("fleet '%s': schema version %d (was %d)\n", hct__pg_shown(f),
           HCT_PG_SCHEMA_VERSION, from);
  }
  return HCT_EXIT_OK;
}

static int sub_push(const fleet_args_t *a, hct_pg_t *f) {
  const char *path = a->db_path;
  hct_pg_push_t st;
  char kernels[PATH_MAX];
  hct__kernels_dir(kernels, sizeof kernels);
  int rc = hct__pg_push(f, a->local, kernels, &st);
  if (rc < 0) return hct__cli_fail(rc);
  if (a->json) {
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f}", "server",
                          hct__pg_shown(f), "db", path, "devices", st.devices, "trials",
                          st.trials, "trials_new", st.trials_new, "faults", st.faults,
                          "faults_new", st.faults_new, "keys_recomputed", st.keys, "upload_ms",
                          st.upload_ms, "recompute_ms", st.recompute_ms, "total_ms", st.total_ms);
    print_json(j);
    json_decref(j);
  } else {
    printf("pushed '%s' to '%s': %d of %d trials new, %d of %d faults new, %d devices; "
           "%d key(s) recomputed (%.0f ms)\n",
           path, hct__pg_shown(f), st.trials_new, st.trials, st.faults_new, st.faults,
           st.devices, st.keys, st.total_ms);
  }
  return HCT_EXIT_OK;
}

static json_int_t num(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static int sub_status(const fleet_args_t *a, hct_pg_t *f) {
  json_t *j;
  int rc = hct__pg_status(f, &j);
  if (rc < 0) return hct__cli_fail(rc);
  if (a->json) {
    print_json(j);
    json_decref(j);
    return HCT_EXIT_OK;
  }
  printf("fleet '%s': schema %lld, %lld hosts, %lld cards, %lld trials, %lld faults, "
         "%lld decisions, %lld keys, %lld outliers, %lld conflicts\n",
         hct__pg_shown(f), (long long)num(j, "schema_version"), (long long)num(j, "hosts"),
         (long long)num(j, "cards"), (long long)num(j, "trials"), (long long)num(j, "faults"),
         (long long)num(j, "decisions"), (long long)num(j, "key_count"),
         (long long)num(j, "outliers"), (long long)num(j, "conflicts"));
  static const char *const head[] = {"MODEL",     "SOFTWARE", "HOSTS",    "CARDS",    "TRIALS",
                                     "DECISIONS", "OUTLIERS", "CONFLICTS", "REVISION"};
  static const char *const counts[] = {"hosts",    "cards",     "trials",  "decisions",
                                       "outliers", "conflicts", "revision"};
  hct_table_t t;
  hct__table_init(&t, 9, head, "llrrrrrrr");
  size_t i;
  json_t *k;
  json_array_foreach(json_object_get(j, "keys"), i, k) {
    char sw[128], n[7][24];
    snprintf(sw, sizeof sw, "%s|%s|%s", json_string_value(json_object_get(k, "driver_version")),
             json_string_value(json_object_get(k, "compiler_version")),
             json_string_value(json_object_get(k, "hctune_version")));
    for (int c = 0; c < 7; c++) snprintf(n[c], sizeof n[c], "%lld", (long long)num(k, counts[c]));
    const char *cells[] = {json_string_value(json_object_get(k, "model_key")), sw, n[0], n[1],
                           n[2], n[3], n[4], n[5], n[6]};
    hct__table_add(&t, cells);
  }
  if (t.nrows > 0) hct__table_print(&t, stdout);
  hct__table_free(&t);
  json_decref(j);
  return HCT_EXIT_OK;
}

/* To add a subcommand: a function and a row. */
static const struct {
  const char *name;
  int (*fn)(const fleet_args_t *a, hct_pg_t *f);
  int connect_flags;
  int local_db;           /* opens the local DB (--db) first */
} subs[] = {
  {"init", sub_init, HCT_PG_NO_SCHEMA_CHECK, 0},
  {"push", sub_push, 0, 1},
  {"status", sub_status, 0, 0},
};

int cmd_fleet(int argc, char **argv) {
  fleet_args_t a = {getenv("HCTUNE_FLEET_URL"), NULL, 0, NULL, ""};
  const hct_option_t opts[] = {
      HCT_OPT_STRING("url", &a.url),
      HCT_OPT_STRING("db", &a.db),
      HCT_OPT_FLAG("json", &a.json),
      HCT_OPT_END,
  };
  /* The subcommand comes first (hctune fleet push --url ...); its options
   * are parsed as a command's, named "fleet" in messages. */
  const char *name = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
  int shift = name != NULL;
  int parsed = hct__parse_options(argc - shift, argv + shift, "fleet", opts, usage);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  if (name == NULL) return hct__usage_error("fleet", "no subcommand (init, push or status)");
  for (size_t i = 0; i < HCT_ARRAY_SIZE(subs); i++) {
    if (strcmp(name, subs[i].name) != 0) continue;
    if (a.url == NULL || a.url[0] == '\0')
      return hct__usage_error("fleet", "no server: give --url URL or set HCTUNE_FLEET_URL");
    if (a.db != NULL && !subs[i].local_db)
      return hct__usage_error("fleet", "--db is for 'fleet push' only");
    int rc;
    if (subs[i].local_db &&
        (rc = hct__cli_open_db(a.db, a.db_path, sizeof a.db_path, &a.local)) < 0)
      return hct__cli_fail(rc);
    hct_pg_t *f;
    rc = hct__pg_connect(a.url, subs[i].connect_flags, &f);
    if (rc < 0) {
      hct__db_close(a.local);
      return hct__cli_fail(rc);
    }
    rc = subs[i].fn(&a, f);
    hct__pg_close(f);
    hct__db_close(a.local);
    return rc;
  }
  return hct__usage_error("fleet", "unexpected argument '%s'", name);
}
