/*
 * proto.c: the request parser of the daemon's protocol (docs/protocol.md).
 *
 * A request is one JSON object on one line.  What each verb accepts is the
 * table below, not code: a field's name, its type and whether it is
 * required.  Anything else is an error with a code, never a crash: this
 * file is what the fuzz target (daemon/fuzz_request.c) exercises, and it
 * depends on libc, jansson and common/error.c only.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon.h"

typedef enum {
  F_STR,    /* a string */
  F_INT,    /* an integer */
  F_RANGE,  /* tokens: an integer, or a string "lo-hi" */
  F_OBJ     /* a JSON object */
} field_type_t;

typedef struct field_s {
  const char *name;
  field_type_t type;
  int required;
  size_t max_len;           /* F_STR: longest accepted, in bytes */
} field_t;

typedef struct verb_spec_s {
  const char *name;
  hct_verb_t verb;
  int flags;
  field_t fields[8];
} verb_spec_t;

/* Lengths come from the DB's fixed-size fields (db/db.h): a longer value
 * could never match, so it is refused rather than cut. */
#define OP_LEN 31
#define DEV_LEN 255
#define VAR_LEN 31
#define HCT_MAX_ID 128
#define OP_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

/* To add a verb: a row here, a value in hct_verb_t, a handler in the
 * table of server.c, and an example in docs/protocol.md. */
static const verb_spec_t verbs[] = {
  {"choose", HCT_REQ_CHOOSE, HCT_REQ_READ,
   {{"op", F_STR, 1, OP_LEN}, {"tokens", F_INT, 1, 0}, {"device", F_STR, 0, DEV_LEN},
    {"model", F_STR, 0, DEV_LEN}, {"parity", F_STR, 0, 16}}},
  {"list", HCT_REQ_LIST, HCT_REQ_READ,
   {{"device", F_STR, 0, DEV_LEN}, {"op", F_STR, 0, OP_LEN}}},
  {"devices", HCT_REQ_DEVICES, HCT_REQ_READ, {{0}}},
  {"status", HCT_REQ_STATUS, HCT_REQ_READ, {{0}}},
  {"probe", HCT_REQ_PROBE, HCT_REQ_ADMIN,
   {{"device", F_STR, 1, 63}, {"op", F_STR, 0, OP_LEN}, {"tokens", F_RANGE, 0, 0}}},
  {"pin", HCT_REQ_PIN, HCT_REQ_ADMIN,
   {{"device", F_STR, 1, 63}, {"op", F_STR, 1, OP_LEN}, {"tokens", F_RANGE, 0, 0},
    {"variant", F_STR, 1, VAR_LEN}, {"params", F_OBJ, 0, 0}, {"until", F_INT, 0, 0}}},
  {"unpin", HCT_REQ_UNPIN, HCT_REQ_ADMIN,
   {{"device", F_STR, 1, 63}, {"op", F_STR, 1, OP_LEN}, {"tokens", F_RANGE, 0, 0}}},
  {"module", HCT_REQ_MODULE, HCT_REQ_READ,
   {{"op", F_STR, 1, OP_LEN}, {"tokens", F_INT, 1, 0}, {"device", F_STR, 0, DEV_LEN},
    {"model", F_STR, 0, DEV_LEN}, {"parity", F_STR, 0, 16}}},
};

const char *hct__verb_name(hct_verb_t v) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(verbs); i++)
    if (verbs[i].verb == v) return verbs[i].name;
  return "unknown";
}

static const char *type_name(field_type_t t) {
  static const char *const names[] = {"a string", "an integer",
                                      "an integer or a range text such as \"1-8\"",
                                      "an object"};
  return names[t];
}

int hct__token_range(const char *s, int *lo, int *hi) {
  char *end;
  errno = 0;
  long a = strtol(s, &end, 10);
  long b = a;
  if (end == s || errno != 0) goto bad;
  if (*end == '-') {
    const char *p = end + 1;
    b = strtol(p, &end, 10);
    if (end == p || errno != 0) goto bad;
  }
  if (*end != '\0') goto bad;
  if (a < 1 || b < a || b > HCT_MAX_TOKENS)
    return hct__error(HCT_ERANGE, "token range '%s': want 1 <= lo <= hi <= %d", s,
                      HCT_MAX_TOKENS);
  *lo = (int)a;
  *hi = (int)b;
  return 0;
bad:
  return hct__error(HCT_EINVAL, "token range '%s': want a count such as 8 or a range such as 1-8",
                    s);
}

static const field_t *field_find(const verb_spec_t *v, const char *name) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(v->fields) && v->fields[i].name != NULL; i++)
    if (strcmp(v->fields[i].name, name) == 0) return &v->fields[i];
  return NULL;
}

/* Checks one field's value and stores it into req. */
static int field_take(const verb_spec_t *v, const field_t *f, json_t *val, hct_req_t *req) {
  int ok;
  switch (f->type) {
    case F_STR: ok = json_is_string(val); break;
    case F_INT: ok = json_is_integer(val); break;
    case F_RANGE: ok = json_is_integer(val) || json_is_string(val); break;
    case F_OBJ: ok = json_is_object(val); break;
    default: ok = 0;
  }
  if (!ok)
    return hct__error(HCT_EPROTO, "field '%s' of '%s' must be %s", f->name, v->name,
                      type_name(f->type));
  if (f->type == F_STR) {
    const char *s = json_string_value(val);
    size_t n = json_string_length(val);
    if (n == 0 || n > f->max_len || strlen(s) != n)
      return hct__error(HCT_EINVAL, "field '%s' of '%s': want 1 to %zu characters, no NUL",
                        f->name, v->name, f->max_len);
    /* An op names a folder of templates: refuse anything that could walk
     * out of kernels-src. */
    if (strcmp(f->name, "op") == 0 && strspn(s, OP_CHARS) != n)
      return hct__error(HCT_EINVAL, "field 'op' of '%s': '%s' has a character outside [A-Za-z0-9_-]",
                        v->name, s);
    if (strcmp(f->name, "op") == 0) req->op = s;
    else if (strcmp(f->name, "device") == 0) req->device = s;
    else if (strcmp(f->name, "model") == 0) req->model = s;
    else if (strcmp(f->name, "parity") == 0) req->parity = s;
    else if (strcmp(f->name, "variant") == 0) req->variant = s;
    return 0;
  }
  if (f->type == F_OBJ) {
    req->params = val;
    return 0;
  }
  if (strcmp(f->name, "until") == 0) {
    json_int_t t = json_integer_value(val);
    if (t < 0) return hct__error(HCT_ERANGE, "field 'until' of '%s': want unix seconds >= 0", v->name);
    req->until = (int64_t)t;
    return 0;
  }
  /* tokens */
  if (json_is_integer(val)) {
    json_int_t t = json_integer_value(val);
    if (t < 1 || t > HCT_MAX_TOKENS)
      return hct__error(HCT_ERANGE, "field 'tokens' of '%s': %lld is not in 1..%d", v->name,
                        (long long)t, HCT_MAX_TOKENS);
    req->tokens = (int)t;
    req->tmin = req->tmax = (int)t;
    return 0;
  }
  req->tokens_text = json_string_value(val);
  int rc = hct__token_range(req->tokens_text, &req->tmin, &req->tmax);
  if (rc < 0)
    return hct__error(rc, "field 'tokens' of '%s': '%.40s' is not a count or a range lo-hi",
                      v->name, req->tokens_text);
  return 0;
}

int hct__req_parse(const char *line, size_t len, hct_req_t *req) {
  memset(req, 0, sizeof *req);
  json_error_t jerr;
  json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return hct__error(HCT_EPROTO, "request is not JSON: %s at column %d", jerr.text, jerr.column);
  req->root = root;
  if (!json_is_object(root)) return hct__error(HCT_EPROTO, "request is not a JSON object");
  json_t *id = json_object_get(root, "id");
  if (id != NULL) {
    if (!json_is_string(id) && !json_is_integer(id))
      return hct__error(HCT_EPROTO, "field 'id' must be a string or an integer");
    /* Replies splice the id in from a fixed buffer (server.c). */
    if (json_is_string(id) && json_string_length(id) > HCT_MAX_ID)
      return hct__error(HCT_EPROTO, "field 'id' is longer than %d characters", HCT_MAX_ID);
    req->id = id;
  }
  json_t *cmd = json_object_get(root, "cmd");
  if (cmd == NULL) return hct__error(HCT_EPROTO, "missing field 'cmd'");
  if (!json_is_string(cmd)) return hct__error(HCT_EPROTO, "field 'cmd' must be a string");
  const char *name = json_string_value(cmd);
  const verb_spec_t *v = NULL;
  for (size_t i = 0; i < HCT_ARRAY_SIZE(verbs); i++)
    if (strcmp(verbs[i].name, name) == 0) v = &verbs[i];
  if (v == NULL) return hct__error(HCT_EPROTO, "unknown verb '%.64s'", name);
  req->verb = v->verb;
  req->cmd = v->name;
  req->flags = v->flags;

  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "cmd") == 0 || strcmp(key, "id") == 0) continue;
    const field_t *f = field_find(v, key);
    if (f == NULL) return hct__error(HCT_EPROTO, "unknown field '%.64s' for '%s'", key, v->name);
    int rc = field_take(v, f, val, req);
    if (rc < 0) return rc;
  }
  for (size_t i = 0; i < HCT_ARRAY_SIZE(v->fields) && v->fields[i].name != NULL; i++)
    if (v->fields[i].required && json_object_get(root, v->fields[i].name) == NULL)
      return hct__error(HCT_EPROTO, "missing field '%s' for '%s'", v->fields[i].name, v->name);

  if (req->parity == NULL) {
    req->parity = "bitwise";
  } else if (strcmp(req->parity, "bitwise") != 0 && strcmp(req->parity, "kl") != 0) {
    return hct__error(HCT_EINVAL, "field 'parity' of '%s': '%.16s' is not 'bitwise' or 'kl'",
                      v->name, req->parity);
  }
  return 0;
}

void hct__req_free(hct_req_t *req) {
  if (req->root != NULL) json_decref((json_t *)req->root);
  req->root = NULL;
  req->id = NULL;
}

char *hct__base64_encode(const void *data, size_t len, size_t *out_len) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *p = data;
  size_t n = 4 * ((len + 2) / 3);
  char *out = malloc(n + 1);
  if (out == NULL) return NULL;
  size_t o = 0, i = 0;
  for (; i + 2 < len; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    out[o++] = tab[v >> 18];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = tab[(v >> 6) & 63];
    out[o++] = tab[v & 63];
  }
  if (i < len) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
    out[o++] = tab[v >> 18];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
    out[o++] = '=';
  }
  out[o] = '\0';
  if (out_len != NULL) *out_len = o;
  return out;
}
