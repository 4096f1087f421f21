/*
 * cmd_status.c: `hctune status`: what the daemon serves and how it fares
 * (docs/protocol.md, verb status).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "daemon.h"

static const char usage[] =
    "usage: hctune status [--socket PATH] [--timeout MS] [--json]\n"
    "\n"
    "Asks the daemon for its status: version, database, decisions, clients,\n"
    "limits and probes running.  Exits 1 when no daemon answers.\n";

static long long num(json_t *o, const char *key) {
  return (long long)json_integer_value(json_object_get(o, key));
}

int cmd_status(int argc, char **argv) {
  const char *sock = NULL;
  long timeout = 2000;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return HCT_EXIT_OK;
    }
    if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (strcmp(a, "--socket") == 0 || strncmp(a, "--socket=", 9) == 0) {
      if (a[8] == '=') sock = a + 9;
      else if (i + 1 < argc) sock = argv[++i];
      else return hct__usage_error(argv[0], "option '%s' needs a value", a);
    } else if (strcmp(a, "--timeout") == 0 || strncmp(a, "--timeout=", 10) == 0) {
      const char *v = a[9] == '=' ? a + 10 : i + 1 < argc ? argv[++i] : NULL;
      char *end;
      if (v == NULL) return hct__usage_error(argv[0], "option '%s' needs a value", a);
      timeout = strtol(v, &end, 10);
      if (*end != '\0' || timeout < 1 || timeout > 600000)
        return hct__usage_error(argv[0], "--timeout '%s': want 1 to 600000 ms", v);
    } else {
      return hct__usage_error(argv[0], "unknown option '%s'", a);
    }
  }
  hct_client_t *c;
  int rc = hct_connect(sock, (int)timeout, &c);
  if (c == NULL) return hct__cli_fail(rc);
  char *text = NULL;
  json_t *r = NULL;
  rc = hct__client_ask(c, "{\"cmd\":\"status\"}", (int)timeout, &text, &r, NULL, NULL);
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
  }
  free(text);
  json_decref(r);
  if (rc < 0) return hct__cli_fail(rc);
  return HCT_EXIT_OK;
}
