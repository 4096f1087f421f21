/*
 * cmd_status.c: `hctune status`: what the daemon serves and how it fares
 * (docs/protocol.md, verb status).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "daemon.h"

static const char usage[] =
    "usage: hctune status [--socket PATH] [--timeout MS] [--json]\n"
    "\n"
    "Asks the daemon for its status: version, database, decisions, clients,\n"
    "limits, probes running, the cards it serves (which this host has, which\n"
    "it does not) and its fleet: the --fleet-db file, or the live\n"
    "fleet of --fleet-url (connected or not, the last pull, the last error).\n"
    "Exits 1 when no daemon answers.\n";

static long long num(json_t *o, const char *key) {
  return (long long)json_integer_value(json_object_get(o, key));
}

/* "serving 2 cards: GPU-aaa (this host), GPU-bbb (not on this host)": the
 * daemon's own line, so that a card served that this host does not have is
 * seen (issue 30). */
static void print_cards(json_t *cards) {
  size_t i, n = json_array_size(cards);
  json_t *c;
  printf("serving %zu card%s%s", n, n == 1 ? "" : "s", n ? ": " : "");
  json_array_foreach(cards, i, c)
    printf("%s%s (%s)", i ? ", " : "", json_string_value(json_object_get(c, "uuid")),
           json_is_true(json_object_get(c, "this_host")) ? "this host" : "not on this host");
  printf("\n");
}

/* The fleet's lines: the file of --fleet-db, the live fleet of
 * --fleet-url (its state, last pull, last error), or that there is none. */
static void print_fleet(json_t *r) {
  const char *file = json_string_value(json_object_get(r, "fleet_db"));
  json_t *f = json_object_get(r, "fleet");
  if (file != NULL) printf("fleet file %s\n", file);
  if (!json_is_object(f)) {
    if (file == NULL) printf("fleet: none (no --fleet-url, no --fleet-db)\n");
    return;
  }
  const char *pull = json_string_value(json_object_get(f, "last_pull"));
  const char *err = json_string_value(json_object_get(f, "last_error"));
  const char *err_at = json_string_value(json_object_get(f, "last_error_at"));
  printf("fleet %s: %s, %lld card model(s), ", json_string_value(json_object_get(f, "url")),
         json_string_value(json_object_get(f, "state")), num(f, "models"));
  if (pull != NULL)
    printf("last pull %s (revision %lld, %lld decisions stored by the last change)\n", pull,
           num(f, "revision"), num(f, "decisions"));
  else
    printf("never pulled\n");
  if (err != NULL && err[0] != '\0') printf("fleet last error%s%s: %s\n", err_at ? " at " : "",
                                           err_at ? err_at : "", err);
}

int cmd_status(int argc, char **argv) {
  const char *sock = NULL;
  int timeout = 2000;
  int json = 0;
  const hct_option_t opts[] = {
      HCT_OPT_FLAG("json", &json),
      HCT_OPT_STRING("socket", &sock),
      HCT_OPT_INT("timeout", &timeout, 1, 600000),
      HCT_OPT_END,
  };
  int st = hct__parse_options(argc, argv, argv[0], opts, usage);
  if (st != 0) return st == HCT_OPTS_HELP ? HCT_EXIT_OK : st;
  hct_client_t *c;
  int rc = hct_connect(sock, timeout, &c);
  if (c == NULL) return hct__cli_fail(rc);
  char *text = NULL;
  json_t *r = NULL;
  rc = hct__client_ask(c, "{\"cmd\":\"status\"}", timeout, &text, &r, NULL, NULL);
  hct_close(c);
  if (rc == 0 && json) {
    printf("%s\n", text);
  } else if (rc == 0) {
    json_t *lim = json_object_get(r, "limits");
    printf("hctuned %s, pid %lld, up %.0f s, socket %s\n",
           json_string_value(json_object_get(r, "version")), num(r, "pid"),
           json_number_value(json_object_get(r, "uptime_s")),
           json_string_value(json_object_get(r, "socket")));
    printf("database %s: %lld decisions, %lld pins, %lld devices, %lld reloads%s\n",
           json_string_value(json_object_get(r, "db")), num(r, "decisions"), num(r, "pins"),
           num(r, "devices"), num(r, "reloads"),
           json_is_true(json_object_get(r, "stale")) ? " (stale: it could not be re-read)" : "");
    printf("clients %lld of %lld, %lld requests, %lld reply bytes queued of %lld; %lld refused, "
           "%lld dropped, %lld timed out\n",
           num(r, "clients"), num(lim, "max_clients"), num(r, "requests"), num(lim, "queued"),
           num(lim, "max_queued"), num(lim, "refused"), num(lim, "dropped"),
           num(lim, "timed_out"));
    printf("probes running: %zu\n", json_array_size(json_object_get(r, "probes")));
    /* An op whose folder does not load: the others are served. */
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(r, "broken_ops"), i, b)
      printf("broken op '%s' (%s): %s\n", json_string_value(json_object_get(b, "op")),
             json_is_true(json_object_get(b, "kept")) ? "serving the manifest read before"
                                                      : "not served",
             json_string_value(json_object_get(b, "why")));
    print_cards(json_object_get(r, "cards"));
    print_fleet(r);
  }
  free(text);
  json_decref(r);
  if (rc < 0) return hct__cli_fail(rc);
  return HCT_EXIT_OK;
}
