/*
 * cmd_pin.c: `hctune pin` and `hctune unpin`: the daemon's admin verbs as
 * commands (docs/protocol.md, verbs pin and unpin).  The daemon checks the
 * peer's rights (its own uid, root, or --admin-group) and writes the DB;
 * these commands only ask, and exit 1 when it says no.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "daemon.h"

static const char pin_usage[] =
    "usage: hctune pin --device D --op OP --variant V [--tokens T] [--params JSON]\n"
    "                  [--until UNIX_TIME | --for SECONDS] [options]\n"
    "\n"
    "Tells the daemon to answer V for OP on card D (a UUID, the start of one, or\n"
    "'*' for every card) over token counts T (a count or a range lo-hi; default\n"
    "every count), ahead of any decision, until the given time (default: until\n"
    "unpinned).  PARAMS must be a point of V's parameters (default: V's first).\n"
    "\n"
    "options:\n"
    "  --socket PATH   daemon socket (default: the search 'hctune query' uses)\n"
    "  --timeout MS    wait at most this long (default 10000: a pin waits for the\n"
    "                  DB's write lock)\n"
    "  --json          print the daemon's reply as it came\n";

static const char unpin_usage[] =
    "usage: hctune unpin --device D --op OP [--tokens T] [options]\n"
    "\n"
    "Removes the pins of OP on card D (a UUID, the start of one, or '*')\n"
    "overlapping token counts T (default: every count).\n"
    "\n"
    "options:\n"
    "  --socket PATH   daemon socket (default: the search 'hctune query' uses)\n"
    "  --timeout MS    wait at most this long (default 10000)\n"
    "  --json          print the daemon's reply as it came\n";

typedef struct pin_args_s {
  const char *device, *op, *variant, *tokens, *params, *until, *for_s, *sock, *timeout;
  int json;
} pin_args_t;

/* Reads argv into a; `unpin` takes only the options both verbs share. */
static int parse(int argc, char **argv, int unpin, pin_args_t *a) {
  memset(a, 0, sizeof *a);
  const hct_option_t pin_opts[] = {
      HCT_OPT_STRING("device", &a->device), HCT_OPT_STRING("op", &a->op),
      HCT_OPT_STRING("tokens", &a->tokens), HCT_OPT_STRING("socket", &a->sock),
      HCT_OPT_STRING("timeout", &a->timeout), HCT_OPT_FLAG("json", &a->json),
      HCT_OPT_STRING("variant", &a->variant), HCT_OPT_STRING("params", &a->params),
      HCT_OPT_STRING("until", &a->until), HCT_OPT_STRING("for", &a->for_s),
      HCT_OPT_END,
  };
  /* unpin's table is pin's first six rows. */
  hct_option_t unpin_opts[7];
  memcpy(unpin_opts, pin_opts, 6 * sizeof pin_opts[0]);
  unpin_opts[6] = (hct_option_t)HCT_OPT_END;
  int st = hct__parse_options(argc, argv, argv[0], unpin ? unpin_opts : pin_opts,
                              unpin ? unpin_usage : pin_usage);
  if (st != 0) return st;
  if (a->device == NULL || a->op == NULL || (!unpin && a->variant == NULL))
    return hct__usage_error(argv[0], unpin ? "--device and --op are required"
                                           : "--device, --op and --variant are required");
  if (a->until != NULL && a->for_s != NULL)
    return hct__usage_error(argv[0], "--until and --for: give one");
  return 0;
}

static int number(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
                  long long *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (*end != '\0' || end == s || v < lo || v > hi)
    return hct__usage_error(cmd, "%s '%s': want %lld to %lld", opt, s, lo, hi);
  *out = v;
  return 0;
}

/* Builds the request, sends it, prints the reply: the exit status. */
static int run(int argc, char **argv, int unpin) {
  pin_args_t a;
  int st = parse(argc, argv, unpin, &a);
  if (st != 0) return st == HCT_OPTS_HELP ? HCT_EXIT_OK : st;
  long long timeout = 10000, until = 0, lo = 0, hi = 0;
  if (a.timeout != NULL && (st = number(argv[0], "--timeout", a.timeout, 1, 3600000, &timeout)))
    return st;
  if (a.until != NULL && (st = number(argv[0], "--until", a.until, 1, 253402300799ll, &until)))
    return st;
  if (a.for_s != NULL) {
    long long secs;
    if ((st = number(argv[0], "--for", a.for_s, 1, 100ll * 365 * 86400, &secs))) return st;
    until = hct__unix_time() + secs;
  }
  if (a.tokens != NULL) {
    int tl, th;
    if (hct__token_range(a.tokens, &tl, &th) < 0)
      return hct__usage_error(argv[0], "--tokens: %s", hct_last_error());
    lo = tl;
    hi = th;
  }
  json_t *params = NULL;
  if (a.params != NULL) {
    json_error_t jerr;
    params = json_loads(a.params, 0, &jerr);
    if (!json_is_object(params)) {
      json_decref(params);
      return hct__usage_error(argv[0], "--params '%s': not a JSON object", a.params);
    }
  }
  hct_client_t *c;
  int rc = hct_connect(a.sock, (int)timeout, &c);
  if (c == NULL) {
    json_decref(params);
    return hct__cli_fail(rc);
  }
  char device[256];
  rc = hct__client_device(c, a.device, (int)timeout, device, sizeof device);
  if (rc < 0) {
    json_decref(params);
    hct_close(c);
    return hct__cli_fail(rc);
  }
  json_t *req = json_pack("{s:s, s:s, s:s}", "cmd", unpin ? "unpin" : "pin", "device", device,
                          "op", a.op);
  if (a.tokens != NULL) {
    char range[32];
    snprintf(range, sizeof range, "%lld-%lld", lo, hi);
    json_object_set_new(req, "tokens", json_string(range));
  }
  if (!unpin) json_object_set_new(req, "variant", json_string(a.variant));
  if (params != NULL) json_object_set_new(req, "params", params);
  if (until != 0) json_object_set_new(req, "until", json_integer(until));
  char *line = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  char *text = NULL;
  json_t *reply = NULL;
  rc = line != NULL ? hct__client_ask(c, line, (int)timeout, &text, &reply, NULL, NULL)
                    : hct__error(HCT_ENOMEM, "%s: out of memory", argv[0]);
  free(line);
  hct_close(c);
  if (rc == 0 && a.json) {
    printf("%s\n", text);
  } else if (rc == 0 && unpin) {
    printf("%lld pin(s) of %s on %s removed\n",
           (long long)json_integer_value(json_object_get(reply, "removed")), a.op, device);
  } else if (rc == 0) {
    json_t *p = json_object_get(reply, "pinned");
    json_t *t = json_object_get(p, "tokens");
    char *ps = json_dumps(json_object_get(p, "params"), JSON_COMPACT);
    printf("%s on %s: %s %s for T=%lld-%lld pinned%s\n", a.op, device, a.variant, ps ? ps : "{}",
           (long long)json_integer_value(json_array_get(t, 0)),
           (long long)json_integer_value(json_array_get(t, 1)), until ? " until then" : "");
    free(ps);
  }
  free(text);
  json_decref(reply);
  if (rc < 0) return hct__cli_fail(rc);
  return HCT_EXIT_OK;
}

int cmd_pin(int argc, char **argv) { return run(argc, argv, 0); }

int cmd_unpin(int argc, char **argv) { return run(argc, argv, 1); }
