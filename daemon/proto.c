/*
 * proto.c: the request parser of the daemon's protocol (docs/protocol.md).
 *
 * A request is one JSON object on one line.  What each verb accepts is its
 * row of the verb table (daemon/verbs.c), not code: a field's name, its type
 * and whether it is required.  Anything else is an error with a code, never a crash: this
 * file is what the fuzz target (daemon/fuzz_request.c) exercises, and it
 * depends on libc, jansson and common/error.c only.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon.h"

#define OP_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

/* The latest `until` a pin may carry: the end of year 9999, the last time
 * every gmtime and ISO-8601 text can show. */
#define MAX_UNTIL 253402300799ll

typedef hct_verb_spec_t verb_spec_t;
typedef hct_field_t field_t;
typedef hct_field_type_t field_type_t;

static const char *type_name(field_type_t t) {
  static const char *const names[] = {"a string", "an integer",
                                      "an integer or a range text such as \"1-8\"",
                                      "an object"};
  return names[t];
}

static const field_t *field_find(const verb_spec_t *v, const char *name) {
  for (size_t i = 0; i < HCT_ARRAY_SIZE(v->fields) && v->fields[i].name != NULL; i++)
    if (strcmp(v->fields[i].name, name) == 0) return &v->fields[i];
  return NULL;
}

/*
 * One member of the request object, from either parser: a string (NUL
 * terminated, in req->strbuf or jansson's storage), an integer, or
 * something else (kept as a json_t by the jansson path only).
 */
typedef enum { V_STR, V_INT, V_OTHER } vkind_t;

typedef struct kv_s {
  const char *key;
  vkind_t kind;
  const char *s;
  size_t slen;
  long long i;
  json_t *j;       /* jansson path: the value */
  const char *raw; /* fast path: the value's text, for the id */
  size_t rawlen;
} kv_t;

#define MAX_KV 16

static int is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

/*
 * The fast path: a flat object of plain strings (printable ASCII, no
 * escapes) and integers.  Returns the member count, or -1 for anything
 * else, which then goes to jansson (for its own answer or its error).
 * Keys land in strbuf too.
 */
static int scan_flat(const char *p, const char *end, hct_req_t *req, kv_t *kv) {
  char *out = req->strbuf, *out_end = req->strbuf + sizeof req->strbuf;
  int n = 0;
  while (p < end && is_ws(*p)) p++;
  if (p == end || *p++ != '{') return -1;
  while (p < end && is_ws(*p)) p++;
  if (p < end && *p == '}') {
    p++;
    goto tail;
  }
  for (;;) {
    if (n == MAX_KV) return -1;
    kv_t *m = &kv[n];
    memset(m, 0, sizeof *m);
    /* key */
    if (p == end || *p++ != '"') return -1;
    const char *k = p;
    while (p < end && *p != '"') {
      if (*p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x80) return -1;
      p++;
    }
    if (p == end || (size_t)(p - k) + 1 > (size_t)(out_end - out)) return -1;
    memcpy(out, k, (size_t)(p - k));
    out[p - k] = '\0';
    m->key = out;
    out += p - k + 1;
    p++;
    for (int i = 0; i < n; i++)
      if (strcmp(kv[i].key, m->key) == 0) return -1; /* jansson names the duplicate */
    while (p < end && is_ws(*p)) p++;
    if (p == end || *p++ != ':') return -1;
    while (p < end && is_ws(*p)) p++;
    if (p == end) return -1;
    m->raw = p;
    if (*p == '"') {
      const char *v = ++p;
      while (p < end && *p != '"') {
        if (*p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x80) return -1;
        p++;
      }
      if (p == end || (size_t)(p - v) + 1 > (size_t)(out_end - out)) return -1;
      memcpy(out, v, (size_t)(p - v));
      out[p - v] = '\0';
      m->kind = V_STR;
      m->s = out;
      m->slen = (size_t)(p - v);
      out += p - v + 1;
      p++;
    } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
      const char *v = p;
      if (*p == '-') p++;
      if (p == end || *p < '0' || *p > '9') return -1;
      if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9') return -1;
      while (p < end && *p >= '0' && *p <= '9') p++;
      if (p - v > 18) return -1; /* may not fit: jansson decides */
      if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return -1;
      /* By hand: the line is not NUL-terminated, strtoll could read on. */
      long long x = 0;
      for (const char *q = *v == '-' ? v + 1 : v; q < p; q++) x = x * 10 + (*q - '0');
      m->kind = V_INT;
      m->i = *v == '-' ? -x : x;
    } else {
      return -1;
    }
    m->rawlen = (size_t)(p - m->raw);
    n++;
    while (p < end && is_ws(*p)) p++;
    if (p == end) return -1;
    if (*p == ',') {
      p++;
      while (p < end && is_ws(*p)) p++;
      continue;
    }
    if (*p++ != '}') return -1;
    break;
  }
tail:
  while (p < end && is_ws(*p)) p++;
  return p == end ? n : -1;
}

/* The slow path: jansson reads anything JSON; its members become kv's. */
static int load_json(const char *line, size_t len, hct_req_t *req, kv_t *kv, int *n) {
  json_error_t jerr;
  json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return hct__error(HCT_EPROTO, "request is not JSON: %s at column %d", jerr.text, jerr.column);
  req->root = root;
  if (!json_is_object(root)) return hct__error(HCT_EPROTO, "request is not a JSON object");
  if (json_object_size(root) > MAX_KV)
    return hct__error(HCT_EPROTO, "request has %zu fields: no verb takes more than %d",
                      json_object_size(root), MAX_KV);
  const char *key;
  json_t *val;
  *n = 0;
  json_object_foreach(root, key, val) {
    kv_t *m = &kv[(*n)++];
    memset(m, 0, sizeof *m);
    m->key = key;
    m->j = val;
    if (json_is_string(val)) {
      m->kind = V_STR;
      m->s = json_string_value(val);
      m->slen = json_string_length(val);
    } else if (json_is_integer(val)) {
      m->kind = V_INT;
      m->i = (long long)json_integer_value(val);
    } else {
      m->kind = V_OTHER;
    }
  }
  return 0;
}

static int kind_ok(field_type_t t, const kv_t *m) {
  switch (t) {
    case HCT_F_STR: return m->kind == V_STR;
    case HCT_F_INT: return m->kind == V_INT;
    case HCT_F_RANGE: return m->kind == V_INT || m->kind == V_STR;
    case HCT_F_OBJ: return m->kind == V_OTHER && json_is_object(m->j);
  }
  return 0;
}

/* Checks one field's value and stores it into req. */
static int field_take(const verb_spec_t *v, const field_t *f, const kv_t *m, hct_req_t *req) {
  if (!kind_ok(f->type, m))
    return hct__error(HCT_EPROTO, "field '%s' of '%s' must be %s", f->name, v->name,
                      type_name(f->type));
  if (f->type == HCT_F_STR) {
    const char *s = m->s;
    size_t n = m->slen;
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
  if (f->type == HCT_F_OBJ) {
    req->params = m->j;
    return 0;
  }
  if (strcmp(f->name, "until") == 0) {
    if (m->i < 0 || m->i > MAX_UNTIL)
      return hct__error(HCT_ERANGE, "field 'until' of '%s': %lld is not unix seconds in 0..%lld",
                        v->name, m->i, MAX_UNTIL);
    req->until = (int64_t)m->i;
    return 0;
  }
  /* tokens */
  if (m->kind == V_INT) {
    if (m->i < 1 || m->i > HCT_MAX_TOKENS)
      return hct__error(HCT_ERANGE, "field 'tokens' of '%s': %lld is not in 1..%d", v->name,
                        m->i, HCT_MAX_TOKENS);
    req->tokens = (int)m->i;
    req->tmin = req->tmax = (int)m->i;
    return 0;
  }
  req->tokens_text = m->s;
  int rc = hct__token_range(req->tokens_text, &req->tmin, &req->tmax);
  if (rc < 0)
    return hct__error(rc, "field 'tokens' of '%s': '%.40s' is not a count or a range lo-hi",
                      v->name, req->tokens_text);
  return 0;
}

static const kv_t *kv_get(const kv_t *kv, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(kv[i].key, key) == 0) return &kv[i];
  return NULL;
}

/* The id as JSON text for the replies to splice in. */
static int take_id(const kv_t *m, hct_req_t *req) {
  if (m->kind != V_STR && m->kind != V_INT)
    return hct__error(HCT_EPROTO, "field 'id' must be a string or an integer");
  /* Replies splice the id in from a fixed buffer (server.c). */
  if (m->kind == V_STR && m->slen > HCT_MAX_ID)
    return hct__error(HCT_EPROTO, "field 'id' is longer than %d characters", HCT_MAX_ID);
  if (m->raw != NULL) {
    memcpy(req->id, m->raw, m->rawlen);
    req->id[m->rawlen] = '\0';
  } else {
    size_t k = json_dumpb(m->j, req->id, sizeof req->id - 1, JSON_ENCODE_ANY | JSON_COMPACT);
    req->id[k < sizeof req->id ? k : 0] = '\0';
  }
  return 0;
}

int hct__req_fast = 1;

int hct__req_parse(const char *line, size_t len, hct_req_t *req) {
  memset(req, 0, offsetof(hct_req_t, strbuf));
  kv_t kv[MAX_KV];
  int n = hct__req_fast ? scan_flat(line, line + len, req, kv) : -1;
  if (n < 0) {
    int rc = load_json(line, len, req, kv, &n);
    if (rc < 0) return rc;
  }
  const kv_t *id = kv_get(kv, n, "id");
  if (id != NULL) {
    int rc = take_id(id, req);
    if (rc < 0) return rc;
  }
  const kv_t *cmd = kv_get(kv, n, "cmd");
  if (cmd == NULL) return hct__error(HCT_EPROTO, "missing field 'cmd'");
  if (cmd->kind != V_STR) return hct__error(HCT_EPROTO, "field 'cmd' must be a string");
  const verb_spec_t *v = hct__verb_find(cmd->s);
  if (v == NULL) return hct__error(HCT_EPROTO, "unknown verb '%.64s'", cmd->s);
  req->verb = v->verb;
  req->cmd = v->name;
  req->flags = v->flags;
  req->spec = v;

  for (int i = 0; i < n; i++) {
    if (&kv[i] == id || &kv[i] == cmd) continue;
    const field_t *f = field_find(v, kv[i].key);
    if (f == NULL)
      return hct__error(HCT_EPROTO, "unknown field '%.64s' for '%s'", kv[i].key, v->name);
    int rc = field_take(v, f, &kv[i], req);
    if (rc < 0) return rc;
  }
  for (size_t i = 0; i < HCT_ARRAY_SIZE(v->fields) && v->fields[i].name != NULL; i++)
    if (v->fields[i].required && kv_get(kv, n, v->fields[i].name) == NULL)
      return hct__error(HCT_EPROTO, "missing field '%s' for '%s'", v->fields[i].name, v->name);

  /* Engines ask for "bitwise", "kl" or a bit family "bits:<head>" (issue
   * 29); "baseline" is a class a variant has, never one asked for.  Whether
   * the op has the family is the answer's to say (daemon/answer.c). */
  if (req->parity == NULL) {
    req->parity = hct__parity_name(HCT_PARITY_BITWISE);
  } else if (hct__parity_asked_ok(req->parity) < 0) {
    hct__error_clear();
    return hct__error(HCT_EINVAL,
                      "field 'parity' of '%s': '%.48s' is not 'bitwise', 'kl' or 'bits:<variant>'",
                      v->name, req->parity);
  }
  return 0;
}

void hct__req_free(hct_req_t *req) {
  if (req->root != NULL) json_decref((json_t *)req->root);
  req->root = NULL;
}

