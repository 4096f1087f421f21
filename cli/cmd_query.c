/*
 * cmd_query.c: `hctune query`: asks the daemon through libhctune, exactly
 * as an engine would, and prints the answer for each token count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "daemon.h"

static const char usage[] =
    "usage: hctune query --op OP --tokens T [--device D] [--parity P] [options]\n"
    "       hctune query --raw JSON\n"
    "\n"
    "Asks the daemon which variant of OP to run for T tokens (a count, or a\n"
    "list such as 1-8 or 1,2,4), through libhctune as an engine does: an\n"
    "absent or slow daemon gives the op's baseline, marked 'fallback'.  The\n"
    "figures shown are T's own; when the decision has none for T, the line\n"
    "says at which T they were measured.\n"
    "\n"
    "options:\n"
    "  --device D      card UUID, the start of one (as 'hctune list' prints it:\n"
    "                  the daemon resolves it against the cards it knows; none\n"
    "                  or several is an error), or a model key (default: the\n"
    "                  daemon's default card)\n"
    "  --parity P      bitwise (default), kl, or bits:VARIANT: the exact bits of\n"
    "                  one variant, a family the op's manifest declares\n"
    "  --socket PATH   daemon socket (default: $HCTUNE_SOCKET, else\n"
    "                  $XDG_RUNTIME_DIR/hctune.sock, then /run/hctune/hctune.sock)\n"
    "  --timeout MS    per answer (default 50; --raw: at least 1000)\n"
    "  --json          one JSON object per token count (device: the card the\n"
    "                  daemon answered for; measured_tokens: the T whose figures\n"
    "                  median_us and baseline_us are, null unknown)\n"
    "  --raw JSON      send one request line as is and print the replies (a probe's\n"
    "                  progress lines, then its final reply: give it --timeout 3600000);\n"
    "                  exits 1 when the reply says \"ok\": false\n";

static void print_progress(const char *line, void *ctx) {
  printf("%s\n", line);
  fflush(stdout);
}

static int raw_request(hct_client_t *c, const char *raw, int timeout_ms) {
  char *text = NULL;
  json_t *r = NULL;
  int rc = hct__client_ask(c, raw, timeout_ms < 1000 ? 1000 : timeout_ms, &text, &r,
                           print_progress, NULL);
  if (text != NULL) printf("%s\n", text);
  free(text);
  json_decref(r);
  if (rc < 0) return hct__cli_fail(rc);
  return HCT_EXIT_OK;
}

/*
 * The figures a choice carries for T.  A decision holds a range of T
 * (3-6) but its median_us and baseline_us are those of one T of it, which
 * the daemon names (measured_tokens); the per-T figures ride in its
 * evidence (parity.per_T).  hct_choose gives an engine only the first, so
 * the command asks the daemon for the whole answer once more: when it
 * lists T itself, those figures replace the choice's.
 */
typedef struct figures_s {
  int measured_T; /* 0: unknown (no evidence of it) */
  double us, baseline_us;
} figures_t;

static void per_T_figures(json_t *reply, int t, figures_t *fg) {
  json_t *per = json_object_get(json_object_get(json_object_get(reply, "evidence"), "parity"),
                                "per_T");
  size_t i;
  json_t *e;
  json_array_foreach(per, i, e) {
    if ((int)json_integer_value(json_object_get(e, "T")) != t) continue;
    fg->measured_T = t;
    fg->us = json_number_value(json_object_get(e, "us"));
    fg->baseline_us = json_number_value(json_object_get(e, "baseline_us"));
    return;
  }
}

static void figures_of(hct_client_t *c, const char *op, int t, const char *device,
                       const char *parity, int timeout_ms, const hct_choice_t *ch,
                       figures_t *fg) {
  fg->us = ch->median_us;
  fg->baseline_us = ch->baseline_us;
  fg->measured_T = ch->measured_tokens;
  if (ch->median_us <= 0 || ch->tmin == ch->tmax || ch->measured_tokens == t) return;
  json_t *q = json_pack("{s:s, s:s, s:i}", "cmd", "choose", "op", op, "tokens", t);
  if (q != NULL && device != NULL) json_object_set_new(q, "device", json_string(device));
  if (q != NULL && parity != NULL) json_object_set_new(q, "parity", json_string(parity));
  char *line = q != NULL ? json_dumps(q, JSON_COMPACT) : NULL;
  json_decref(q);
  json_t *r = NULL;
  if (line != NULL && hct__client_ask(c, line, timeout_ms, NULL, &r, NULL, NULL) == 0)
    per_T_figures(r, t, fg);
  hct__error_clear();
  json_decref(r);
  free(line);
}

static void print_choice(const char *op, int t, int rc, const hct_choice_t *ch,
                         const figures_t *fg, int json) {
  if (json) {
    printf("{\"op\":\"%s\",\"tokens\":%d,\"variant\":\"%s\",\"params\":%s,\"class\":\"%s\","
           "\"source\":\"%s\",\"fallback\":%s,\"device\":\"%s\",\"model\":\"%s\","
           "\"valid_tokens\":[%d,%d],\"stale\":%s,\"median_us\":%.3f,\"baseline_us\":%.3f,"
           "\"measured_tokens\":",
           op, t, ch->variant, ch->params, ch->parity_class, hct_source_name(ch->source),
           rc == HCT_FALLBACK ? "true" : "false", ch->device, ch->model, ch->tmin, ch->tmax,
           ch->stale ? "true" : "false", fg->us, fg->baseline_us);
    if (fg->measured_T > 0) printf("%d}\n", fg->measured_T);
    else printf("null}\n");
    return;
  }
  printf("%s T=%d: %s %s (%s, source %s", op, t, ch->variant, ch->params,
         ch->parity_class[0] ? ch->parity_class : "class unknown", hct_source_name(ch->source));
  if (fg->us > 0) {
    printf(", %.2f us against the baseline's %.2f us", fg->us, fg->baseline_us);
    if (fg->measured_T == 0) printf(" measured at another T of the range");
    else if (fg->measured_T != t) printf(" measured at T=%d", fg->measured_T);
  }
  if (ch->tmin != ch->tmax) printf(", for T=%d-%d", ch->tmin, ch->tmax);
  if (ch->source == HCT_SOURCE_FLEET && ch->model[0]) printf(", measured on %s", ch->model);
  printf(")%s%s\n", ch->stale ? " stale: the daemon could not re-read its database" : "",
         rc == HCT_FALLBACK ? " fallback: daemon not reachable" : "");
}

int cmd_query(int argc, char **argv) {
  const char *op = NULL, *tokens = NULL, *device = NULL, *parity = NULL, *sock = NULL;
  const char *raw = NULL;
  int json = 0, timeout_ms = HCT_DEFAULT_TIMEOUT_MS;
  const hct_option_t opts[] = {
      HCT_OPT_STRING("op", &op),
      HCT_OPT_STRING("tokens", &tokens),
      HCT_OPT_STRING("device", &device),
      HCT_OPT_STRING("parity", &parity),
      HCT_OPT_STRING("socket", &sock),
      HCT_OPT_STRING("raw", &raw),
      HCT_OPT_INT("timeout", &timeout_ms, 1, 600000),
      HCT_OPT_FLAG("json", &json),
      HCT_OPT_END,
  };
  int parsed = hct__cli_options(argc, argv, opts, usage, NULL);
  if (parsed != 0) return parsed == HCT_OPTS_HELP ? HCT_EXIT_OK : parsed;
  if (raw == NULL && (op == NULL || tokens == NULL))
    return hct__usage_error(argv[0], "--op and --tokens are required");
  hct_tokens_t set = {0};
  if (raw == NULL) {
    int rc = hct__parse_token_list(tokens, &set);
    if (rc < 0) return hct__usage_error(argv[0], "--tokens: %s", hct_last_error());
  }
  hct_client_t *c;
  int rc = hct_connect(sock, timeout_ms, &c);
  if (c == NULL) return hct__cli_fail(rc);
  if (raw != NULL) {
    int st = raw_request(c, raw, timeout_ms);
    hct_close(c);
    return st;
  }
  /* --device goes to the daemon as given, as an engine's would: the
   * daemon resolves a prefix (the short UUID `list` prints) against the
   * cards it knows, and a card it does not know is its error, printed
   * below, never a silent baseline (issue 30). */
  int status = HCT_EXIT_OK, warned = 0;
  char said[256] = "";
  for (int k = 0; k < set.n; k++) {
    const int t = set.t[k];
    hct_choice_t ch;
    rc = hct_choose(c, op, t, device, parity, &ch);
    if (rc < 0) {
      hct__error_print("hctune query", rc);
      status = HCT_EXIT_FAIL;
      break;
    }
    figures_t fg = {ch.measured_tokens, ch.median_us, ch.baseline_us};
    if (rc == 0) /* a fallback's message is still to be printed */
      figures_of(c, op, t, ch.device[0] ? ch.device : device, parity,
                 timeout_ms < 1000 ? 1000 : timeout_ms, &ch, &fg);
    if (!json && ch.device[0] != '\0' && strcmp(said, ch.device) != 0) {
      printf("answers for %s%s%s\n", ch.device, ch.model[0] ? ", measured on " : "", ch.model);
      hct__strlcpy(said, ch.device, sizeof said);
    }
    print_choice(op, t, rc, &ch, &fg, json);
    if (rc == HCT_FALLBACK && !warned) fprintf(stderr, "hctune query: %s\n", hct_last_error());
    if (rc == HCT_FALLBACK) warned = 1;
  }
  hct_close(c);
  return status;
}
