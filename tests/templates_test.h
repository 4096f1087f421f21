/*
 * templates_test.h: empty templates for the manifests tests write.
 *
 * The manifest loader refuses an op whose templates are missing (a probe
 * would fail on them), so a test that writes a manifest to exercise the
 * loader, the daemon or the CLI, and never compiles, gives every template
 * it names an empty file beside it.  A template already there is kept.
 */
#ifndef HCT_TEMPLATES_TEST_H
#define HCT_TEMPLATES_TEST_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static inline void tt_touch(const char *dir, json_t *name) {
  if (!json_is_string(name)) return;
  const char *t = json_string_value(name);
  /* Paths that leave the folder are what a test means to be refused. */
  if (t[0] == '\0' || t[0] == '/' || strstr(t, "..") != NULL) return;
  char p[2200];
  snprintf(p, sizeof p, "%.1000s/%.1000s", dir, t);
  if (access(p, F_OK) == 0) return;
  FILE *f = fopen(p, "w");
  if (f != NULL) fclose(f);
}

/* Touches every template of the manifest at `path` (ignored when it is
 * not JSON: a broken manifest is the point of such a test). */
static inline void tt_touch_templates(const char *path) {
  size_t n = strlen(path);
  if (n < 14 || strcmp(path + n - 14, "/manifest.json") != 0) return;
  json_t *m = json_load_file(path, 0, NULL);
  if (m == NULL) return;
  char dir[1024];
  snprintf(dir, sizeof dir, "%.*s", (int)(n - 14), path);
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(m, "variants"), i, v) tt_touch(dir, json_object_get(v, "template"));
  tt_touch(dir, json_object_get(json_object_get(m, "reference"), "template"));
  json_decref(m);
}

#endif
