/*
 * fake_worker.c: a stand-in for `hctune worker` in the CPU tests of
 * tests/test_worker.c.  It speaks the worker protocol (tuner/worker.h) and
 * misbehaves on request, so the parent's watchdog, fault and protocol
 * handling can be tested without a GPU.
 *
 * The behaviour is the request's "behave" field, else its "cmd":
 *   hello, open, load, unload, quit   answer like a worker, keeping state
 *   state      answers {"opened": n, "loaded": [cand, ...]}
 *   echo       answers {"value": <the request's value>}
 *   fail       answers ok:false, EPARITY
 *   fatal      answers ok:false, EFAULT, fatal, then exits 1
 *   crash      writes a line on stderr, then abort()
 *   hang       sleeps forever
 *   sleep      sleeps "ms" milliseconds, then answers
 *   garbage    writes a line that is not JSON
 *   wrongid    answers with another id
 *   partial    writes half a reply, then exits 3
 *   twice      answers twice
 *   check      answers figures for buffer "y" with mismatches = cand
 *              (and ref_buffers when ref >= 0); cand 5 at T = 3 answers
 *              ETIMEDOUT, as a grid barrier that timed out.  With
 *              "repeat": runs 1 and 2 under "more" (cand 6: run 2 has 3
 *              unwritten); "twin": "deterministic", false for cand 7 (buffer
 *              y, 2 elements, first 9); "producer": run 3 for cand 8, else
 *              "producer_skipped"
 *   verify     answers for each cand sets 4, mismatches 5 for cand 3 (else
 *              0), max_dist 0.25 for cand 3, and figures of "y"
 *   time       answers median_us = 10 + cand for each cand (rel_ci "inf"
 *              for cand 2); a cand 99 among them answers a fatal EFAULT
 *              naming it, then exits 1
 * A request with "poison_file" crashes when that file exists: a test makes
 * a setup request that succeeds once and crashes when replayed.
 *
 * With $FAKE_WORKER_PROBE naming a file, it stands in for a GPU under a
 * whole probe (tests/test_probe_fake.c) instead, and logs every reference,
 * load, check, time and verify there, one line each.  Like the real worker
 * (tuner/worker_serve.c) it reads every binary it is asked to load from
 * the DB's compile cache (db/binaries.c, the worker's own call), so a probe
 * that asks before storing one fails here as on a GPU:
 *   reference  the op's float64 reference: answered once per op (EEXIST
 *              again), and needed before any check or verify (ENOENT)
 *   load       remembers the candidate's variant and params
 *   check      passes, bit-equal to its reference, unless the variant's
 *              name starts with "wrong" (3 mismatches, and a kl error),
 *              or starts with "late" and the point is its best one (cost
 *              40: every p_i = i + 2) and T >= 256 (a finalist that fails
 *              where the probe checks only finalists), or starts with
 *              "tiled" and T is not a multiple of 16 (right on whole
 *              tiles only: every probed count of a sparse op, none of the
 *              partial tiles a decision serves between them); a variant
 *              whose name starts with "firstruns" (but not "firstruns16")
 *              is right on its first runs and wrong on run 2 of the
 *              repeat check (the first inputs again, as selftest's
 *              firstruns: only "repeat" catches it)
 *   time       times of a cost function: the variant named "base" 100 us,
 *              every other 40 + sum over its parameters p_i of
 *              3 * |p_i - (i + 2)| us (its best point has p_i = i + 2),
 *              plus 1 us for a variant whose name starts with "slow"; a
 *              variant whose name starts with "big" 60 us below T = 256
 *              and 30 us from there up (a winner that changes with T); one
 *              named "wrongfast..." or "firstruns..." 20 us (were it ever
 *              timed), "tiled..." 35 us (the fastest honest-looking one)
 *   verify     passes, but for a variant whose name starts with
 *              "firstruns16": right in every check, wrong in the launches
 *              it is timed on (5 mismatches), as selftest's firstruns16
 *   time       with $FAKE_WORKER_TIME_FITS = N, a request of more than N
 *              candidates is refused as the real worker refuses one that
 *              does not fit the card's memory: ENOMEM, "fits": N (a
 *              small card), logged "time refused T <T> cands <n>"
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "db.h"

static int opened;
static json_t *loaded;

static void put(json_t *reply) {
  char *s = json_dumps(reply, JSON_COMPACT);
  printf("%s\n", s);
  fflush(stdout);
  free(s);
  json_decref(reply);
}

static json_t *ok(json_t *id) { return json_pack("{s:O, s:b}", "id", id, "ok", 1); }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* ---- the probe mode ------------------------------------------------------ */

static FILE *plog;
static json_t *labels;     /* cand id (as text) -> {"variant", "params"} */
static json_t *references; /* op -> the binary key of its loaded reference */
static hct_db_t *db;       /* the DB of the last binary read, and its path */
static char *db_path;

/* The binary "binary_key" of the request's "db" in its compile cache, as
 * the real worker's read_binary reads it (read-only: the probe holds the
 * DB open to write); the image is not kept. */
static int binary_stored(json_t *req) {
  const char *path = json_string_value(json_object_get(req, "db"));
  const char *key = json_string_value(json_object_get(req, "binary_key"));
  if (path == NULL || key == NULL) return hct__error(HCT_EINVAL, "no 'db' or 'binary_key' in the request");
  if (db == NULL || strcmp(db_path, path) != 0) {
    hct__db_close(db);
    db = NULL;
    free(db_path);
    db_path = NULL;
    int rc = hct__db_open(path, HCT_DB_READONLY | HCT_DB_NOCREATE, &db);
    if (rc != 0) return rc;
    db_path = strdup(path);
  }
  void *image = NULL;
  size_t size = 0;
  int rc = hct__db_binary_get(db, key, &image, &size, NULL, NULL);
  free(image);
  return rc;
}

static json_t *failed(json_t *id, int rc) {
  return json_pack("{s:O, s:b, s:s, s:s}", "id", id, "ok", 0, "error", hct_err_name(rc), "message",
                   hct_last_error());
}

static json_t *cand_info(json_int_t c);

/* A check or verify runs the reference of its candidates' op (the one
 * named when each was loaded): none loaded is an error. */
static int reference_loaded(json_t *req) {
  json_t *cands = json_object_get(req, "cands");
  json_t *c = json_is_array(cands) ? json_array_get(cands, 0) : json_object_get(req, "cand");
  const char *op = json_string_value(json_object_get(cand_info(json_integer_value(c)), "op"));
  if (op == NULL) return hct__error(HCT_ENOENT, "candidate %lld is not loaded", (long long)json_integer_value(c));
  if (json_object_get(references, op) == NULL)
    return hct__error(HCT_ENOENT, "op '%s': its reference is not loaded in this worker ('reference' first)", op);
  return 0;
}

static json_t *cand_info(json_int_t c) {
  char key[32];
  snprintf(key, sizeof key, "%lld", (long long)c);
  return json_object_get(labels, key);
}

static const char *cand_variant(json_int_t c) {
  const char *v = json_string_value(json_object_get(cand_info(c), "variant"));
  return v ? v : "?";
}

static double cost_of(json_int_t c, json_int_t T) {
  const char *v = cand_variant(c);
  if (strcmp(v, "base") == 0) return 100.0;
  if (strncmp(v, "big", 3) == 0) return T < 256 ? 60.0 : 30.0;
  if (strncmp(v, "wrongfast", 9) == 0 || strncmp(v, "firstruns", 9) == 0) return 20.0;
  if (strncmp(v, "tiled", 5) == 0) return 35.0;
  json_t *p = json_loads(json_string_value(json_object_get(cand_info(c), "params")), 0, NULL);
  double us = 40.0 + (strncmp(v, "slow", 4) == 0);
  const char *key;
  json_t *x;
  int i = 0;
  json_object_foreach(p, key, x) {
    double d = (double)json_integer_value(x) - (i + 2);
    us += 3.0 * (d < 0 ? -d : d);
    i++;
  }
  json_decref(p);
  return us;
}

static json_t *figs(json_int_t elems, int wrong) {
  return json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f}", "elems", elems,
                   "mismatches", (json_int_t)(wrong ? 3 : 0), "first_mismatch", (json_int_t)0,
                   "unwritten", (json_int_t)0, "nonfinite", (json_int_t)0, "rel_err", 1e-7,
                   "max_err_ratio", wrong ? 0.5 : 2e-7, "kl_mean", wrong ? 1.0 : 0.0, "kl_max",
                   wrong ? 1.0 : 0.0, "argmax_agree", 1.0);
}

/* Answers one request in the probe mode; 0 when it is not one of its own. */
static int probe_mode(json_t *req, json_t *id, const char *cmd) {
  int rc;
  if (strcmp(cmd, "reference") == 0) {
    const char *op = json_string_value(json_object_get(req, "op"));
    const char *key = json_string_value(json_object_get(req, "binary_key"));
    if (op == NULL) rc = hct__error(HCT_EINVAL, "reference: no 'op'");
    else if (json_object_get(references, op) != NULL)
      rc = hct__error(HCT_EEXIST, "op '%s': its reference is already loaded", op);
    else rc = binary_stored(req);
    fprintf(plog, "reference %s %s %s\n", op ? op : "?", key ? key : "?", rc ? hct_last_error() : "ok");
    if (rc != 0) {
      put(failed(id, rc));
    } else {
      json_object_set_new(references, op, json_string(key));
      put(ok(id));
    }
  } else if ((strcmp(cmd, "check") == 0 || strcmp(cmd, "verify") == 0) && (rc = reference_loaded(req)) != 0) {
    fprintf(plog, "%s refused: %s\n", cmd, hct_last_error());
    put(failed(id, rc));
  } else if (strcmp(cmd, "load") == 0 && (rc = binary_stored(req)) != 0) {
    fprintf(plog, "load %lld refused: %s\n", (long long)json_integer_value(json_object_get(req, "cand")),
            hct_last_error());
    put(failed(id, rc));
  } else if (strcmp(cmd, "load") == 0) {
    json_int_t c = json_integer_value(json_object_get(req, "cand"));
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)c);
    /* params as the request has them: an object, or its text. */
    json_t *pj = json_object_get(req, "params");
    char *ptext = json_is_string(pj) ? strdup(json_string_value(pj))
                                     : json_dumps(pj ? pj : json_object(), JSON_COMPACT | JSON_SORT_KEYS);
    json_object_set_new(labels, key, json_pack("{s:O, s:O, s:s}", "op", json_object_get(req, "op"), "variant",
                                               json_object_get(req, "variant"), "params", ptext ? ptext : "{}"));
    fprintf(plog, "load %lld %s %s\n", (long long)c, cand_variant(c), ptext ? ptext : "{}");
    free(ptext);
    put(ok(id));
  } else if (strcmp(cmd, "check") == 0) {
    json_int_t c = json_integer_value(json_object_get(req, "cand"));
    json_int_t ref = json_integer_value(json_object_get(req, "ref"));
    json_int_t T = json_integer_value(json_object_get(req, "tokens"));
    int wrong = strncmp(cand_variant(c), "wrong", 5) == 0 ||
                (strncmp(cand_variant(c), "late", 4) == 0 && T >= 256 && cost_of(c, T) == 40.0) ||
                (strncmp(cand_variant(c), "tiled", 5) == 0 && T % 16 != 0);
    fprintf(plog, "check %lld ref %lld T %lld pending %lld\n", (long long)c, (long long)ref, (long long)T,
            (long long)json_integer_value(json_object_get(req, "pending")));
    json_t *r = ok(id), *f = figs(1024 * T, wrong);
    json_object_set_new(r, "buffers", json_pack("{s:O}", "y", f));
    if (ref >= 0) json_object_set_new(r, "ref_buffers", json_pack("{s:o}", "y", figs(1024 * T, 0)));
    json_object_set_new(r, "run_ms", json_real(0.5));
    json_t *more = json_array();
    /* Wrong from its third run in an allocation: run 2, the first inputs
     * again (selftest's firstruns). */
    const int later = strncmp(cand_variant(c), "firstruns", 9) == 0 && strncmp(cand_variant(c), "firstruns16", 11) != 0;
    if (json_integer_value(json_object_get(req, "repeat")) != 0)
      for (int run = 1; run <= 2; run++) {
        json_t *g = later && run == 2 ? figs(1024 * T, 1) : json_incref(f);
        json_t *o = json_pack("{s:s, s:i, s:{s:o}}", "check", "repeat", "run", run, "buffers", "y", g);
        if (ref >= 0) json_object_set_new(o, "ref_buffers", json_pack("{s:o}", "y", figs(1024 * T, 0)));
        json_array_append_new(more, o);
      }
    json_object_set_new(r, "more", more);
    if (json_integer_value(json_object_get(req, "producer")) != 0)
      json_object_set_new(r, "producer_skipped", json_string("its first launch waits for the kernel before it"));
    if (json_integer_value(json_object_get(req, "twin")) != 0)
      json_object_set_new(r, "deterministic", json_true());
    json_decref(f);
    put(r);
  } else if (strcmp(cmd, "time") == 0 && getenv("FAKE_WORKER_TIME_FITS") != NULL &&
             json_array_size(json_object_get(req, "cands")) > (size_t)atoi(getenv("FAKE_WORKER_TIME_FITS"))) {
    int fits = atoi(getenv("FAKE_WORKER_TIME_FITS"));
    fprintf(plog, "time refused T %lld cands %zu\n", (long long)json_integer_value(json_object_get(req, "tokens")),
            json_array_size(json_object_get(req, "cands")));
    json_t *r = json_pack("{s:O, s:b, s:s, s:s, s:i}", "id", id, "ok", 0, "error", "ENOMEM", "message",
                          fits ? "request 'time': over 60% of the free memory" : "cand: cannot be timed on this card",
                          "fits", fits);
    put(r);
  } else if (strcmp(cmd, "time") == 0) {
    json_t *cands = json_object_get(req, "cands"), *res = json_array();
    json_int_t samples = json_integer_value(json_object_get(req, "min_samples"));
    if (samples < 1) samples = 10;
    fprintf(plog, "time T %lld samples %lld batch %lld cands", (long long)json_integer_value(json_object_get(req, "tokens")),
            (long long)samples, (long long)json_integer_value(json_object_get(req, "batch")));
    for (size_t i = 0; i < json_array_size(cands); i++) {
      json_int_t c = json_integer_value(json_array_get(cands, i));
      double us = cost_of(c, json_integer_value(json_object_get(req, "tokens")));
      fprintf(plog, " %lld", (long long)c);
      json_array_append_new(res, json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:I}",
                                           "cand", c, "samples", samples, "median_us", us, "min_us",
                                           us * 0.998, "max_us", us * 1.002, "p10_us", us * 0.999,
                                           "p90_us", us * 1.001, "ci_lo_us", us * 0.999, "ci_hi_us",
                                           us * 1.001, "rel_ci", 0.001, "converged", 1, "rounds", samples));
    }
    fprintf(plog, "\n");
    json_t *r = ok(id);
    json_object_set_new(r, "results", res);
    put(r);
  } else if (strcmp(cmd, "verify") == 0) {
    json_t *cands = json_object_get(req, "cands"), *res = json_array();
    fprintf(plog, "verify ref %lld cands", (long long)json_integer_value(json_object_get(req, "ref")));
    for (size_t i = 0; i < json_array_size(cands); i++) {
      json_int_t c = json_integer_value(json_array_get(cands, i));
      fprintf(plog, " %lld", (long long)c);
      json_t *f = figs(1024, 0);
      /* Right in every check, wrong in its timed launches. */
      const int timed_wrong = strncmp(cand_variant(c), "firstruns16", 11) == 0;
      json_array_append_new(res, json_pack("{s:I, s:i, s:I, s:I, s:I, s:I, s:f, s:i, s:s, s:{s:O}, s:{s:O}}",
                                           "cand", c, "sets", 2, "mismatches", (json_int_t)(timed_wrong ? 5 : 0),
                                           "unwritten", (json_int_t)0, "nonfinite", (json_int_t)0,
                                           "image_mismatches", (json_int_t)0, "max_dist", 0.0,
                                           "worst_set", -1, "worst_buffer", "", "first", "y", f,
                                           "ref_first", "y", f));
      json_decref(f);
    }
    fprintf(plog, "\n");
    json_t *r = ok(id);
    json_object_set_new(r, "results", res);
    put(r);
  } else {
    return 0;
  }
  fflush(plog);
  return 1;
}

int main(void) {
  char *line = NULL;
  size_t cap = 0;
  loaded = json_array();
  while (getline(&line, &cap, stdin) > 0) {
    json_t *req = json_loads(line, 0, NULL);
    if (req == NULL) {
      fprintf(stderr, "fake worker: bad request\n");
      return 2;
    }
    json_t *id = json_object_get(req, "id");
    const char *b = json_string_value(json_object_get(req, "behave"));
    if (b == NULL) b = json_string_value(json_object_get(req, "cmd"));
    if (b == NULL) b = "";
    const char *poison = json_string_value(json_object_get(req, "poison_file"));
    struct stat st;
    if (poison && stat(poison, &st) == 0) b = "crash";
    if (getenv("FAKE_WORKER_PROBE") != NULL) {
      if (plog == NULL && (plog = fopen(getenv("FAKE_WORKER_PROBE"), "a")) == NULL) return 2;
      if (labels == NULL) labels = json_object();
      if (references == NULL) references = json_object();
      if (probe_mode(req, id, b)) {
        json_decref(req);
        continue;
      }
    }

    if (strcmp(b, "hello") == 0) {
      json_t *r = ok(id);
      json_object_set_new(r, "pid", json_integer(getpid()));
      json_object_set_new(r, "version", json_string("fake"));
      put(r);
    } else if (strcmp(b, "open") == 0) {
      opened++;
      put(ok(id));
    } else if (strcmp(b, "load") == 0) {
      json_array_append(loaded, json_object_get(req, "cand"));
      put(ok(id));
    } else if (strcmp(b, "unload") == 0) {
      json_int_t c = json_integer_value(json_object_get(req, "cand"));
      for (size_t i = 0; i < json_array_size(loaded); i++)
        if (json_integer_value(json_array_get(loaded, i)) == c) json_array_remove(loaded, i--);
      put(ok(id));
    } else if (strcmp(b, "state") == 0) {
      json_t *r = ok(id);
      json_object_set_new(r, "opened", json_integer(opened));
      json_object_set(r, "loaded", loaded);
      put(r);
    } else if (strcmp(b, "echo") == 0) {
      json_t *r = ok(id);
      json_object_set(r, "value", json_object_get(req, "value"));
      put(r);
    } else if (strcmp(b, "fail") == 0) {
      put(json_pack("{s:O, s:b, s:s, s:s}", "id", id, "ok", 0, "error", "EPARITY", "message",
                    "candidate 4 at T=3: 1 mismatch"));
    } else if (strcmp(b, "fatal") == 0) {
      put(json_pack("{s:O, s:b, s:s, s:s, s:b}", "id", id, "ok", 0, "error", "EFAULT", "message",
                    "illegal address", "fatal", 1));
      _exit(1);
    } else if (strcmp(b, "crash") == 0) {
      fprintf(stderr, "fake worker: crashing on purpose\n");
      fflush(stderr);
      abort();
    } else if (strcmp(b, "hang") == 0) {
      for (;;) pause();
    } else if (strcmp(b, "sleep") == 0) {
      sleep_ms((long)json_integer_value(json_object_get(req, "ms")));
      put(ok(id));
    } else if (strcmp(b, "garbage") == 0) {
      printf("Segmentation fault (this is not json)\n");
      fflush(stdout);
    } else if (strcmp(b, "wrongid") == 0) {
      put(json_pack("{s:I, s:b}", "id", (json_int_t)(json_integer_value(id) + 1000), "ok", 1));
    } else if (strcmp(b, "partial") == 0) {
      char buf[64];
      int n = snprintf(buf, sizeof buf, "{\"id\":%lld,\"ok\":tr", (long long)json_integer_value(id));
      if (write(1, buf, (size_t)n) < 0) _exit(4);
      /* _exit: no leak check of a sanitized build on the way out, which
       * would turn the exit status into an abort. */
      _exit(3);
    } else if (strcmp(b, "twice") == 0) {
      put(ok(id));
      put(ok(id));
    } else if (strcmp(b, "check") == 0) {
      json_int_t cand = json_integer_value(json_object_get(req, "cand"));
      json_int_t ref = json_integer_value(json_object_get(req, "ref"));
      json_int_t T = json_integer_value(json_object_get(req, "tokens"));
      if (cand == 5 && T == 3) {
        put(json_pack("{s:O, s:b, s:s, s:s}", "id", id, "ok", 0, "error", "ETIMEDOUT", "message",
                      "barrier 5 at T=3: a grid barrier timed out"));
      } else {
        json_t *r = ok(id);
        json_t *f = json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:s, s:f}", "elems",
                              (json_int_t)(1024 * T), "mismatches", cand, "first_mismatch",
                              (json_int_t)5, "unwritten", (json_int_t)0, "nonfinite",
                              (json_int_t)0, "rel_err", 1e-7, "max_err_ratio", 2e-7, "kl_mean",
                              0.0, "kl_max", "inf", "argmax_agree", 1.0);
        json_object_set_new(r, "buffers", json_pack("{s:O}", "y", f));
        if (ref >= 0) json_object_set_new(r, "ref_buffers", json_pack("{s:O}", "y", f));
        json_object_set_new(r, "run_ms", json_real(0.5));
        json_t *more = json_array();
        for (int run = 1; run <= 3; run++) {
          int want = run < 3 ? json_is_true(json_object_get(req, "repeat")) ||
                                   json_integer_value(json_object_get(req, "repeat")) != 0
                             : json_integer_value(json_object_get(req, "producer")) != 0 && cand == 8;
          if (!want) continue;
          json_t *g = json_deep_copy(f);
          if (cand == 6 && run == 2) json_object_set_new(g, "unwritten", json_integer(3));
          json_t *o = json_pack("{s:s, s:i, s:{s:o}}", "check", run < 3 ? "repeat" : "producer",
                                "run", run, "buffers", "y", g);
          if (ref >= 0) json_object_set_new(o, "ref_buffers", json_pack("{s:O}", "y", f));
          json_array_append_new(more, o);
        }
        json_object_set_new(r, "more", more);
        if (json_integer_value(json_object_get(req, "producer")) != 0 && cand != 8)
          json_object_set_new(r, "producer_skipped", json_string("its first launch waits for the kernel before it"));
        if (json_integer_value(json_object_get(req, "twin")) != 0) {
          json_object_set_new(r, "deterministic", json_boolean(cand != 7));
          if (cand == 7) {
            json_object_set_new(r, "nondeterministic_buffer", json_string("y"));
            json_object_set_new(r, "nondeterministic_mismatches", json_integer(2));
            json_object_set_new(r, "nondeterministic_first", json_integer(9));
          }
        }
        json_decref(f);
        put(r);
      }
    } else if (strcmp(b, "time") == 0) {
      json_t *cands = json_object_get(req, "cands"), *res = json_array();
      int fatal = 0;
      for (size_t i = 0; i < json_array_size(cands); i++) {
        json_int_t c = json_integer_value(json_array_get(cands, i));
        json_t *x = json_pack("{s:I, s:i, s:f, s:i, s:i}", "cand", c, "samples", 20, "median_us",
                              10.0 + (double)c, "converged", 1, "rounds", 20);
        json_object_set_new(x, "rel_ci", c == 2 ? json_string("inf") : json_real(0.01));
        if (c == 99) {
          fatal = 1;
          json_object_set_new(x, "error", json_string("EFAULT"));
          json_object_set_new(x, "message", json_string("illegal address"));
        }
        json_array_append_new(res, x);
      }
      json_t *r = fatal ? json_pack("{s:O, s:b, s:s, s:s, s:b, s:i}", "id", id, "ok", 0, "error",
                                    "EFAULT", "message", "cand 99: illegal address", "fatal", 1,
                                    "cand", 99)
                        : ok(id);
      json_object_set_new(r, "results", res);
      put(r);
      if (fatal) _exit(1);
    } else if (strcmp(b, "verify") == 0) {
      json_t *cands = json_object_get(req, "cands"), *res = json_array();
      for (size_t i = 0; i < json_array_size(cands); i++) {
        json_int_t c = json_integer_value(json_array_get(cands, i));
        json_t *f = json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f}", "elems",
                              (json_int_t)1024, "first_mismatch", (json_int_t)0, "mismatches", (json_int_t)0, "unwritten",
                              (json_int_t)0, "nonfinite", (json_int_t)0, "rel_err", 1e-7,
                              "max_err_ratio", 2e-7, "kl_mean", 1e-12, "kl_max", 2e-12,
                              "argmax_agree", 1.0);
        json_array_append_new(
            res, json_pack("{s:I, s:i, s:I, s:I, s:I, s:I, s:f, s:i, s:s, s:{s:O}, s:{s:O}}", "cand",
                           c, "sets", 4, "mismatches", (json_int_t)(c == 3 ? 5 : 0), "unwritten",
                           (json_int_t)0, "nonfinite", (json_int_t)0, "image_mismatches",
                           (json_int_t)0, "max_dist", c == 3 ? 0.25 : 0.0, "worst_set",
                           c == 3 ? 2 : -1, "worst_buffer", c == 3 ? "y" : "", "first", "y", f,
                           "ref_first", "y", f));
        json_decref(f);
      }
      json_t *r = ok(id);
      json_object_set_new(r, "results", res);
      put(r);
    } else if (strcmp(b, "quit") == 0) {
      put(ok(id));
      json_decref(req);
      break;
    } else {
      put(json_pack("{s:O, s:b, s:s, s:s}", "id", id, "ok", 0, "error", "EINVAL", "message",
                    "unknown command"));
    }
    json_decref(req);
  }
  free(line);
  json_decref(loaded);
  json_decref(labels);
  json_decref(references);
  hct__db_close(db);
  free(db_path);
  return 0;
}
