/*
 * softkey.c: the software key: what shaped a decision's binary and its
 * figures, and whether this host would compile the same thing now.
 *
 * A key has five parts, kept as JSON beside it (software_json):
 *
 *   {"compiler":"nvrtc 12.8","driver":"12080","hctune":"0.1.0",
 *    "options":"<32 hex>","template":"<32 hex>"}
 *
 * template: XXH3-128 of the variant's template and every header it
 *           includes (hct__compile_key's template hash);
 * options:  XXH3-128 of the compile options, each NUL-terminated, without
 *           the -I folders (what they hold is in template);
 * compiler: the NVRTC or hiprtc version; driver: the card's driver version;
 * hctune:   HCT_VERSION_STRING.
 *
 * The key (software_key) is XXH3-128, as 32 hex digits (hct__hash_hex), of
 * that JSON written compact with sorted keys, exactly as above: any writer
 * that renders the same parts the same way gets the same key, so databases
 * of several hosts can be compared and merged by it.
 *
 * The daemon links this file (jit/ only, nothing of tuner/): it serves a
 * decision only while hct__softkey_compare finds no part changed.
 *
 * Test hooks: HCTUNE_TEST_COMPILER_VERSION and HCTUNE_TEST_DRIVER_VERSION,
 * when set, stand for what this host reports (a host after an upgrade),
 * so tests without a GPU can change either part.  Any thread.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "jit.h"

static const char *test_override(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

static void hash_hex(const void *data, size_t len, char out[33]) {
  XXH128_hash_t h = XXH3_128bits(data, len);
  hct_hash_t hh = {h.low64, h.high64};
  hct__hash_hex(hh, out);
}

int hct__softkey_finish(hct_softkey_t *k) {
  if (k->hctune[0] == '\0') hct__strlcpy(k->hctune, HCT_VERSION_STRING, sizeof k->hctune);
  json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "template", k->template_hash, "options",
                        k->options, "compiler", k->compiler, "driver", k->driver, "hctune",
                        k->hctune);
  char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(j);
  if (text == NULL) return hct__error(HCT_ENOMEM, "out of memory writing a software key");
  size_t n = strlen(text);
  if (n >= sizeof k->json) {
    free(text);
    return hct__error(HCT_ERANGE, "software key: its parts are %zu bytes, over %zu", n,
                      sizeof k->json - 1);
  }
  memcpy(k->json, text, n + 1);
  free(text);
  hash_hex(k->json, n, k->key);
  return 0;
}

int hct__softkey_now(const hct_compile_job_t *job, const char *driver_version, hct_softkey_t *out) {
  memset(out, 0, sizeof *out);
  int rc = 0;
  if (job->template_hash[0] != '\0') {
    hct__strlcpy(out->template_hash, job->template_hash, sizeof out->template_hash);
  } else {
    /* The template hash comes before the compiler's version in
     * hct__compile_key: a host without a compiler still gets it. */
    hct_compile_job_t tmp = *job;
    tmp.image = NULL;
    tmp.log = NULL;
    rc = hct__compile_key(&tmp);
    if (tmp.template_hash[0] == '\0') return rc != 0 ? rc : hct__error(HCT_ETEMPLATE, "no template hash");
    hct__strlcpy(out->template_hash, tmp.template_hash, sizeof out->template_hash);
  }
  hct_compile_opts_t *o = malloc(sizeof *o);
  if (o == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  if ((rc = hct__compile_options(hct__backend(job->backend), job, o)) == 0) {
    XXH3_state_t *st = XXH3_createState();
    if (st == NULL) {
      rc = hct__error(HCT_ENOMEM, "out of memory");
    } else {
      XXH3_128bits_reset(st);
      for (int i = o->n_include; i < o->n; i++)
        XXH3_128bits_update(st, o->argv[i], strlen(o->argv[i]) + 1);
      XXH128_hash_t h = XXH3_128bits_digest(st);
      hct_hash_t hh = {h.low64, h.high64};
      hct__hash_hex(hh, out->options);
      XXH3_freeState(st);
    }
  }
  free(o);
  if (rc != 0) return rc;
  const char *cv = test_override("HCTUNE_TEST_COMPILER_VERSION");
  if (cv != NULL) hct__strlcpy(out->compiler, cv, sizeof out->compiler);
  else if (hct__compiler_version(job->backend, out->compiler, sizeof out->compiler) != 0)
    out->compiler[0] = '\0'; /* no compiler on this host: a part that cannot match */
  hct__error_clear();
  const char *dv = test_override("HCTUNE_TEST_DRIVER_VERSION");
  hct__strlcpy(out->driver, dv ? dv : driver_version ? driver_version : "", sizeof out->driver);
  return hct__softkey_finish(out);
}

int hct__softkey_parse(const char *text, hct_softkey_t *out) {
  memset(out, 0, sizeof *out);
  json_error_t jerr;
  json_t *j = text != NULL && text[0] ? json_loads(text, 0, &jerr) : NULL;
  if (!json_is_object(j)) {
    json_decref(j);
    return hct__error(HCT_EINVAL, "software key '%s': not a JSON object", text ? text : "");
  }
  static const struct {
    const char *name;
    size_t off, len;
  } parts[] = {
      {"template", offsetof(hct_softkey_t, template_hash), sizeof out->template_hash},
      {"options", offsetof(hct_softkey_t, options), sizeof out->options},
      {"compiler", offsetof(hct_softkey_t, compiler), sizeof out->compiler},
      {"driver", offsetof(hct_softkey_t, driver), sizeof out->driver},
      {"hctune", offsetof(hct_softkey_t, hctune), sizeof out->hctune},
  };
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < HCT_ARRAY_SIZE(parts); i++) {
    const char *v = json_string_value(json_object_get(j, parts[i].name));
    if (v == NULL) rc = hct__error(HCT_EINVAL, "software key: no '%s'", parts[i].name);
    else hct__strlcpy((char *)out + parts[i].off, v, parts[i].len);
  }
  json_decref(j);
  return rc != 0 ? rc : hct__softkey_finish(out);
}

int hct__softkey_compare(const char *stored_json, const hct_softkey_t *now, char *why, size_t len) {
  hct_softkey_t old;
  if (stored_json == NULL || stored_json[0] == '\0') {
    snprintf(why, len, "no software key recorded");
    return 1;
  }
  if (hct__softkey_parse(stored_json, &old) != 0) {
    snprintf(why, len, "software key unreadable: %s", hct_last_error());
    hct__error_clear();
    return 1;
  }
  /* The parts in the order that explains most: a template edit changes
   * the binary whatever else did. */
  static const struct {
    const char *name;
    size_t off;
    int is_hash;
  } parts[] = {
      {"template", offsetof(hct_softkey_t, template_hash), 1},
      {"options", offsetof(hct_softkey_t, options), 1},
      {"compiler", offsetof(hct_softkey_t, compiler), 0},
      {"driver", offsetof(hct_softkey_t, driver), 0},
      {"hctune", offsetof(hct_softkey_t, hctune), 0},
  };
  size_t off = 0;
  int changed = 0;
  if (len > 0) why[0] = '\0';
  for (size_t i = 0; i < HCT_ARRAY_SIZE(parts); i++) {
    const char *a = (const char *)&old + parts[i].off, *b = (const char *)now + parts[i].off;
    if (strcmp(a, b) == 0) continue;
    changed = 1;
    if (off >= len) continue;
    if (parts[i].is_hash)
      off += (size_t)snprintf(why + off, len - off, "%s%s changed (%.8s, now %.8s)", off ? "; " : "",
                              parts[i].name, a, b);
    else
      off += (size_t)snprintf(why + off, len - off, "%s%s changed ('%s', now '%s')", off ? "; " : "",
                              parts[i].name, a, b[0] ? b : "none");
  }
  return changed;
}

int hct__softkey_card(const char *fingerprint_json, hct_backend_kind_t *backend, char *arch,
                      size_t len) {
  json_t *j = fingerprint_json ? json_loads(fingerprint_json, 0, NULL) : NULL;
  const char *a = json_string_value(json_object_get(j, "arch"));
  const char *b = json_string_value(json_object_get(j, "backend"));
  const char *vendor = json_string_value(json_object_get(j, "vendor"));
  int rc = 0;
  if (a == NULL) {
    rc = hct__error(HCT_EINVAL, "card fingerprint has no arch");
  } else {
    hct__strlcpy(arch, a, len);
    /* Fingerprints written before the backend was in them: by vendor. */
    *backend = vendor && strcmp(vendor, "amd") == 0 ? HCT_BACKEND_HIP : HCT_BACKEND_CUDA;
    for (int k = 0; b != NULL && k < HCT_BACKEND_COUNT; k++) {
      const hct_backend_ops_t *ops = hct__backend((hct_backend_kind_t)k);
      if (ops && strcmp(ops->name, b) == 0) *backend = (hct_backend_kind_t)k;
    }
  }
  json_decref(j);
  return rc;
}

int hct__softkey_check(const hct_op_t *op, const char *variant, const char *params,
                       hct_backend_kind_t backend, const char *arch, const char *driver_now,
                       const char *stored_json, char *why, size_t len) {
  const hct_variant_t *v = op ? hct__variant_find(op, variant) : NULL;
  if (v == NULL) {
    snprintf(why, len, "template changed (variant '%s' is no longer in op '%s')", variant,
             op ? op->name : "?");
    return 1;
  }
  hct_compile_job_t *job = calloc(1, sizeof *job);
  if (job == NULL) return hct__error(HCT_ENOMEM, "out of memory");
  job->backend = backend;
  hct__strlcpy(job->arch, arch, sizeof job->arch);
  job->op = op;
  job->variant = v;
  int rc = hct__point_parse(v, params, &job->point);
  if (rc != 0) {
    snprintf(why, len, "options changed (params %s no longer valid: %s)", params, hct_last_error());
    hct__error_clear();
    free(job);
    return 1;
  }
  /* A card not on this host: its driver cannot be asked, so the driver
   * part is taken as recorded (every other part is still checked). */
  hct_softkey_t old, now;
  const char *driver = driver_now;
  if (driver == NULL && getenv("HCTUNE_TEST_DRIVER_VERSION") == NULL)
    driver = hct__softkey_parse(stored_json, &old) == 0 ? old.driver : "";
  hct__error_clear();
  rc = hct__softkey_now(job, driver, &now);
  free(job);
  if (rc != 0) {
    snprintf(why, len, "template changed (cannot hash it now: %s)", hct_last_error());
    hct__error_clear();
    return 1;
  }
  return hct__softkey_compare(stored_json, &now, why, len);
}
