/*
 * verbs.c: the one table of the daemon's verbs, as Redis keeps its command
 * table: a verb's name, who may run it, its handler, and the fields it
 * takes (name, type, required, longest).  The parser (daemon/proto.c)
 * checks a request against its row; dispatch (daemon/dispatch.c) checks the
 * rights and calls the handler.
 *
 * To add a verb: a value in hct_verb_t (daemon.h), a row here, its handler
 * hct__req_<verb> in the file of its concern, and an example in
 * docs/protocol.md.
 *
 * The fuzz target links the parser without the daemon: it builds this file
 * with HCT_VERBS_NO_HANDLERS, which leaves every handler NULL.
 */
#include <string.h>

#include "daemon.h"

#ifdef HCT_VERBS_NO_HANDLERS
#define H(fn) NULL
#else
#define H(fn) fn
#endif

/* Lengths come from the DB's fixed-size fields (db/db.h): a longer value
 * could never match, so it is refused rather than cut. */
#define OP_LEN 31
#define DEV_LEN 255
#define VAR_LEN 31
#define PARITY_LEN (HCT_PARITY_LEN - 1) /* "bits:" and a variant's name */

static const hct_verb_spec_t verbs[] = {
    {"choose", HCT_REQ_CHOOSE, HCT_REQ_READ, H(hct__req_choose),
     {{"op", HCT_F_STR, 1, OP_LEN},
      {"tokens", HCT_F_INT, 1, 0},
      {"device", HCT_F_STR, 0, DEV_LEN},
      {"model", HCT_F_STR, 0, DEV_LEN},
      {"parity", HCT_F_STR, 0, PARITY_LEN}}},
    {"list", HCT_REQ_LIST, HCT_REQ_READ, H(hct__req_list),
     {{"device", HCT_F_STR, 0, DEV_LEN}, {"op", HCT_F_STR, 0, OP_LEN}}},
    {"devices", HCT_REQ_DEVICES, HCT_REQ_READ, H(hct__req_devices), {{0}}},
    {"status", HCT_REQ_STATUS, HCT_REQ_READ, H(hct__req_status), {{0}}},
    {"probe", HCT_REQ_PROBE, HCT_REQ_ADMIN, H(hct__req_probe),
     {{"device", HCT_F_STR, 1, 63}, {"op", HCT_F_STR, 0, OP_LEN}, {"tokens", HCT_F_RANGE, 0, 0}}},
    {"pin", HCT_REQ_PIN, HCT_REQ_ADMIN, H(hct__req_pin),
     {{"device", HCT_F_STR, 1, 63},
      {"op", HCT_F_STR, 1, OP_LEN},
      {"tokens", HCT_F_RANGE, 0, 0},
      {"variant", HCT_F_STR, 1, VAR_LEN},
      {"params", HCT_F_OBJ, 0, 0},
      {"until", HCT_F_INT, 0, 0}}},
    {"unpin", HCT_REQ_UNPIN, HCT_REQ_ADMIN, H(hct__req_unpin),
     {{"device", HCT_F_STR, 1, 63}, {"op", HCT_F_STR, 1, OP_LEN}, {"tokens", HCT_F_RANGE, 0, 0}}},
    {"module", HCT_REQ_MODULE, HCT_REQ_READ, H(hct__req_module),
     {{"op", HCT_F_STR, 1, OP_LEN},
      {"tokens", HCT_F_INT, 1, 0},
      {"device", HCT_F_STR, 0, DEV_LEN},
      {"model", HCT_F_STR, 0, DEV_LEN},
      {"parity", HCT_F_STR, 0, PARITY_LEN}}},
};

const hct_verb_spec_t *hct__verb_find(const char *name) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(verbs); i++)
    if (strcmp(verbs[i].name, name) == 0) return &verbs[i];
  return NULL;
}

const char *hct__verb_name(hct_verb_t v) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(verbs); i++)
    if (verbs[i].verb == v) return verbs[i].name;
  return "unknown";
}
