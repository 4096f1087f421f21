/*
 * expr.c: the integer expressions of the manifests ("cdiv(K, ROWS)",
 * "TPL * 1280 * 4 <= SMEM_OPTIN").
 *
 * A recursive-descent parser that evaluates as it parses; precedence from
 * loosest: || && (== !=) (< <= > >=) (+ -) (* / %) unary (! -) primary.
 * Everything is int64; overflow is not checked (the values are sizes in
 * bytes and counts of threads), division by zero is an error.
 */
#include <ctype.h>
#include <string.h>

#include "jit.h"

typedef struct {
  const char *src; /* the whole expression, for messages */
  const char *p;
  const hct_symtab_t *syms;
  int err;
} parser_t;

static int64_t parse_or(parser_t *ps);

static int fail_code(parser_t *ps, int code, const char *fmt, const char *what) {
  if (!ps->err) {
    char cause[128];
    snprintf(cause, sizeof cause, fmt, what);
    ps->err = hct__error(code, "expression '%s': %s", ps->src, cause);
  }
  return 0;
}

static int fail(parser_t *ps, const char *fmt, const char *what) {
  return fail_code(ps, HCT_EINVAL, fmt, what);
}

static void skip_space(parser_t *ps) {
  while (isspace((unsigned char)*ps->p)) ps->p++;
}

static int accept(parser_t *ps, const char *tok) {
  skip_space(ps);
  size_t n = strlen(tok);
  if (strncmp(ps->p, tok, n) != 0) return 0;
  /* "<" must not match the start of "<=", nor "=" of "==" etc. */
  if (n == 1 && (tok[0] == '<' || tok[0] == '>' || tok[0] == '!') && ps->p[1] == '=') return 0;
  if (n == 1 && (tok[0] == '&' || tok[0] == '|')) return 0;
  ps->p += n;
  return 1;
}

void hct__symtab_set(hct_symtab_t *t, const char *name, int64_t value) {
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->syms[i].name, name) == 0) {
      t->syms[i].value = value;
      return;
    }
  if (t->n < (int)HCT_ARRAY_SIZE(t->syms)) {
    t->syms[t->n].name = name;
    t->syms[t->n].value = value;
    t->n++;
  }
}

int hct__symtab_get(const hct_symtab_t *t, const char *name, int64_t *value) {
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->syms[i].name, name) == 0) {
      *value = t->syms[i].value;
      return 0;
    }
  return HCT_ENOENT;
}

typedef enum { FN_MIN, FN_MAX, FN_CDIV } fn_t;
static const struct {
  const char *name;
  fn_t fn;
} functions[] = {{"min", FN_MIN}, {"max", FN_MAX}, {"cdiv", FN_CDIV}};

static int64_t parse_primary(parser_t *ps) {
  skip_space(ps);
  if (accept(ps, "(")) {
    int64_t v = parse_or(ps);
    if (!accept(ps, ")")) return fail(ps, "missing '%s'", ")");
    return v;
  }
  if (isdigit((unsigned char)*ps->p)) {
    int64_t v = 0;
    while (isdigit((unsigned char)*ps->p)) v = v * 10 + (*ps->p++ - '0');
    return v;
  }
  if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
    char name[64];
    size_t n = 0;
    while ((isalnum((unsigned char)*ps->p) || *ps->p == '_') && n + 1 < sizeof name)
      name[n++] = *ps->p++;
    name[n] = '\0';
    skip_space(ps);
    if (*ps->p == '(') {
      for (size_t i = 0; i < HCT_ARRAY_SIZE(functions); i++) {
        if (strcmp(name, functions[i].name) != 0) continue;
        ps->p++;
        int64_t a = parse_or(ps);
        if (!accept(ps, ",")) return fail(ps, "%s() takes two arguments", name);
        int64_t b = parse_or(ps);
        if (!accept(ps, ")")) return fail(ps, "missing ')' after %s(", name);
        switch (functions[i].fn) {
          case FN_MIN: return a < b ? a : b;
          case FN_MAX: return a > b ? a : b;
          case FN_CDIV:
            if (b == 0) return fail(ps, "%s", "division by zero in cdiv");
            return (a + b - 1) / b;
        }
      }
      return fail(ps, "unknown function '%s'", name);
    }
    int64_t v;
    /* Its own code: a caller that knows only some values (no card) can
     * tell "not decidable here" from an error. */
    if (hct__symtab_get(ps->syms, name, &v) != 0) return fail_code(ps, HCT_ENOENT, "unknown name '%s'", name);
    return v;
  }
  if (*ps->p == '\0') return fail(ps, "%s", "unexpected end");
  char c[2] = {*ps->p, '\0'};
  return fail(ps, "unexpected '%s'", c);
}

static int64_t parse_unary(parser_t *ps) {
  if (accept(ps, "-")) return -parse_unary(ps);
  if (accept(ps, "!")) return !parse_unary(ps);
  return parse_primary(ps);
}

static int64_t parse_mul(parser_t *ps) {
  int64_t v = parse_unary(ps);
  for (;;) {
    if (accept(ps, "*")) v *= parse_unary(ps);
    else if (accept(ps, "/") || accept(ps, "%")) {
      char op = ps->p[-1];
      int64_t r = parse_unary(ps);
      if (r == 0) return fail(ps, "%s", "division by zero");
      v = op == '/' ? v / r : v % r;
    } else return v;
  }
}

static int64_t parse_add(parser_t *ps) {
  int64_t v = parse_mul(ps);
  for (;;) {
    if (accept(ps, "+")) v += parse_mul(ps);
    else if (accept(ps, "-")) v -= parse_mul(ps);
    else return v;
  }
}

static int64_t parse_rel(parser_t *ps) {
  int64_t v = parse_add(ps);
  for (;;) {
    if (accept(ps, "<=")) v = v <= parse_add(ps);
    else if (accept(ps, ">=")) v = v >= parse_add(ps);
    else if (accept(ps, "<")) v = v < parse_add(ps);
    else if (accept(ps, ">")) v = v > parse_add(ps);
    else return v;
  }
}

static int64_t parse_eq(parser_t *ps) {
  int64_t v = parse_rel(ps);
  for (;;) {
    if (accept(ps, "==")) v = v == parse_rel(ps);
    else if (accept(ps, "!=")) v = v != parse_rel(ps);
    else return v;
  }
}

static int64_t parse_and(parser_t *ps) {
  int64_t v = parse_eq(ps);
  while (accept(ps, "&&")) {
    int64_t r = parse_eq(ps);
    v = v && r;
  }
  return v;
}

static int64_t parse_or(parser_t *ps) {
  int64_t v = parse_and(ps);
  while (accept(ps, "||")) {
    int64_t r = parse_and(ps);
    v = v || r;
  }
  return v;
}

int hct__expr_eval(const char *expr, const hct_symtab_t *syms, int64_t *out) {
  parser_t ps = {expr, expr, syms, 0};
  if (expr == NULL) return hct__error(HCT_EINVAL, "expression is missing");
  int64_t v = parse_or(&ps);
  if (ps.err) return ps.err;
  skip_space(&ps);
  if (*ps.p != '\0') {
    char rest[2] = {*ps.p, '\0'};
    fail(&ps, "unexpected '%s'", rest);
    return ps.err;
  }
  *out = v;
  return 0;
}
