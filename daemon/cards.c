/*
 * cards.c: the cards the daemon answers for, and what a request's
 * `device` names.  A card is known from this host's driver (listed once at
 * start), from the DB's snapshot (its devices, the cards of its decisions
 * and pins) or from the fleet file (--fleet-db).  A request may name a card
 * by its whole UUID or by a unique prefix of it (the short form `hctune
 * list` prints, the one prefix rule hct__uuid_matches); anything else is an
 * error the engine sees, never a silent baseline for a card that does not
 * exist (issue 30).  The list is rebuilt when a snapshot is put in place,
 * not per request: a choose costs a scan of a few cards.  Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon.h"

/* Cards named in an error message or a log line, at most. */
#define NAMED_MAX 8

/* Adds `uuid` (from `where`) to the list, or marks it known from there
 * too.  Consecutive rows of one card (decisions are sorted by card) cost
 * one comparison. */
static void card_add(hct_daemon_t *d, int *cap, const char *uuid, const char *model, int where) {
  if (uuid[0] == '\0' || strcmp(uuid, "*") == 0 || strncmp(uuid, "pooled-", 7) == 0) return;
  for (int i = d->n_cards - 1; i >= 0; i--)
    if (strcmp(d->cards[i].uuid, uuid) == 0) {
      d->cards[i].where |= where;
      if (d->cards[i].model[0] == '\0' && model != NULL)
        hct__strlcpy(d->cards[i].model, model, sizeof d->cards[i].model);
      return;
    }
  if (d->n_cards == *cap) {
    int ncap = *cap ? *cap * 2 : 16;
    hct_card_t *nc = realloc(d->cards, (size_t)ncap * sizeof *nc);
    if (nc == NULL) return; /* KNOWN-GAP: out of memory, the card goes unlisted */
    d->cards = nc;
    *cap = ncap;
  }
  hct_card_t *c = &d->cards[d->n_cards++];
  memset(c, 0, sizeof *c);
  hct__strlcpy(c->uuid, uuid, sizeof c->uuid);
  if (model != NULL) hct__strlcpy(c->model, model, sizeof c->model);
  c->where = where;
}

/* "GPU-aaa (this host), GPU-bbb (not on this host)", at most NAMED_MAX. */
static void cards_line(const hct_daemon_t *d, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < d->n_cards && i < NAMED_MAX && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%s (%s)", i ? ", " : "", d->cards[i].uuid,
                          d->cards[i].where & HCT_CARD_HOST ? "this host" : "not on this host");
  if (d->n_cards > NAMED_MAX && o < len)
    snprintf(buf + o, len - o, " and %d more", d->n_cards - NAMED_MAX);
}

void hct__cards_refresh(hct_daemon_t *d) {
  d->n_cards = 0;
  int cap = 0, n;
  free(d->cards);
  d->cards = NULL;
  for (int i = 0; i < d->n_host_cards; i++)
    card_add(d, &cap, d->host_cards[i].uuid, d->host_cards[i].model, HCT_CARD_HOST);
  if (d->ix != NULL) {
    const hct_db_device_t *dev = hct__index_devices(d->ix, &n);
    for (int i = 0; i < n; i++) card_add(d, &cap, dev[i].uuid, dev[i].model_key, HCT_CARD_DB);
    const hct_db_decision_t *dec = hct__index_decisions(d->ix, &n);
    for (int i = 0; i < n; i++) card_add(d, &cap, dec[i].keys.uuid, dec[i].keys.model_key, HCT_CARD_DB);
    const hct_db_pin_t *pins = hct__index_pins(d->ix, &n);
    for (int i = 0; i < n; i++) card_add(d, &cap, pins[i].uuid, NULL, HCT_CARD_DB);
  }
  if (d->fleet_ix != NULL) {
    const hct_db_decision_t *dec = hct__index_decisions(d->fleet_ix, &n);
    for (int i = 0; i < n; i++)
      card_add(d, &cap, dec[i].keys.uuid, dec[i].keys.model_key, HCT_CARD_FLEET);
  }
  char line[NAMED_MAX * 96];
  cards_line(d, line, sizeof line);
  uint64_t h = XXH3_64bits(line, strlen(line)) ^ (uint64_t)d->n_cards;
  if (h == d->cards_logged) return;
  d->cards_logged = h;
  /* Said when the set changes: a card served that this host does not have
   * is visible in the log, not only in the answers. */
  hct__log(HCT_LOG_INFO, "serving %d card%s%s%s", d->n_cards, d->n_cards == 1 ? "" : "s",
           d->n_cards ? ": " : "", line);
}

/* "GPU-a, GPU-b and 3 more" of the cards that `match` (NULL: every card). */
static void names_of(const hct_daemon_t *d, const char *match, char *buf, size_t len) {
  size_t o = 0;
  int named = 0, more = 0;
  buf[0] = '\0';
  for (int i = 0; i < d->n_cards; i++) {
    if (match != NULL && !hct__uuid_matches(d->cards[i].uuid, match)) continue;
    if (named == NAMED_MAX / 2 || o >= len) {
      more++;
      continue;
    }
    o += (size_t)snprintf(buf + o, len - o, "%s%s", named ? ", " : "", d->cards[i].uuid);
    named++;
  }
  if (more > 0 && o < len) snprintf(buf + o, len - o, " and %d more", more);
}

int hct__cards_resolve(const hct_daemon_t *d, const char *device, const hct_card_t **out) {
  *out = NULL;
  for (int i = 0; i < d->n_cards; i++)
    if (strcmp(d->cards[i].uuid, device) == 0) {
      *out = &d->cards[i];
      return 0;
    }
  int matches = 0;
  for (int i = 0; device[0] != '\0' && i < d->n_cards; i++)
    if (hct__uuid_matches(d->cards[i].uuid, device)) {
      *out = &d->cards[i];
      matches++;
    }
  if (matches == 1) return 0;
  *out = NULL;
  char names[NAMED_MAX * 80];
  if (matches > 1) {
    names_of(d, device, names, sizeof names);
    return hct__error(HCT_EINVAL, "device '%s': %d cards start with it (%s): give more of the UUID",
                      device, matches, names);
  }
  if (d->n_cards == 0)
    return hct__error(HCT_ENODEV, "device '%s': no such card (this daemon knows none: its DB has "
                      "no cards and this host lists none)", device);
  names_of(d, NULL, names, sizeof names);
  return hct__error(HCT_ENODEV, "device '%s': no such card (this daemon knows %s; 'hctune status' "
                    "lists them)", device, names);
}

json_t *hct__cards_json(const hct_daemon_t *d) {
  json_t *arr = json_array();
  for (int i = 0; arr != NULL && i < d->n_cards; i++) {
    const hct_card_t *c = &d->cards[i];
    json_t *from = json_array();
    if (c->where & HCT_CARD_HOST) json_array_append_new(from, json_string("host"));
    if (c->where & HCT_CARD_DB) json_array_append_new(from, json_string("db"));
    if (c->where & HCT_CARD_FLEET) json_array_append_new(from, json_string("fleet"));
    json_array_append_new(arr, json_pack("{s:s, s:o, s:b, s:o}", "uuid", c->uuid, "model",
                                         c->model[0] ? json_string(c->model) : json_null(),
                                         "this_host", (c->where & HCT_CARD_HOST) != 0, "from",
                                         from));
  }
  return arr;
}

/*
 * The child's side of hct__snapshot_host_cards: this host's cards as
 * fields (UUID, model key) pairs.  Without a driver, none, and the reason
 * on stdout for the daemon's log.  $HCT_TEST_HOST_CARDS
 * ("uuid=model;uuid=model") stands in for the driver in tests, which have
 * no GPU.
 */
static int host_cards_in_child(const hct_child_msg_t *req) {
  (void)req;
  hct_child_field_t f[32];
  hct_child_msg_t ans = {f, 0};
  static hct_device_t cards[16];
  static char models[16][256];
  const char *fake = getenv("HCT_TEST_HOST_CARDS");
  if (fake != NULL) {
    static char buf[4096];
    hct__strlcpy(buf, fake, sizeof buf);
    for (char *save = NULL, *e = strtok_r(buf, ";", &save); e != NULL && ans.n < 32;
         e = strtok_r(NULL, ";", &save)) {
      char *eq = strchr(e, '=');
      if (eq == NULL) continue;
      *eq = '\0';
      f[ans.n++] = (hct_child_field_t){e, strlen(e)};
      f[ans.n++] = (hct_child_field_t){eq + 1, strlen(eq + 1)};
    }
    return hct__child_answer(&ans) == 0 ? 0 : 1;
  }
  int n = hct__devices(cards, 16);
  if (n < 0) printf("%s\n", hct_last_error());
  fflush(stdout); /* the child ends with _exit */
  for (int i = 0; i < n; i++) {
    hct__device_model_key(&cards[i], models[i], sizeof models[i]);
    f[ans.n++] = (hct_child_field_t){cards[i].uuid, strlen(cards[i].uuid)};
    f[ans.n++] = (hct_child_field_t){models[i], strlen(models[i])};
  }
  return hct__child_answer(&ans) == 0 ? 0 : 1;
}
HCT_CHILD_HANDLER("host-cards", host_cards_in_child)

void hct__cards_free(hct_daemon_t *d) {
  free(d->cards);
  d->cards = NULL;
  d->n_cards = 0;
}
