/*
 * strata_options_parse over two groups whose tables hold every option type
 * (INT, U64, DOUBLE, STRING, FLAG, CHOICE, ENUM, the optional INT and
 * DOUBLE, two SPECs with keys of each kind a key may have, OPEN_MIN bounds,
 * short names, defaults and none), then, on success, the echo of the
 * effective values (and --help when asked) into a memory stream. The input
 * is the command line: arguments end at a NUL byte or a newline.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "strata/core.h"
#include "strata/options.h"

typedef struct {
  int count;
  uint64_t total, big;
  double rate, any;
  const char *name, *dir;
  int quiet;
  const char *mode;
  int level;
  strata_opt_int wpc;
  strata_opt_double thr;
  const char *straggler; /* spec: delay (required), spin, prob, bytes */
  int delay, spin;
  double prob;
  uint64_t bytes;
} engine_cfg;

typedef struct {
  int shift;
  double lr;
  int verbose;
  const char *disrupt; /* spec: slot, frac (required) */
  int slot;
  double frac;
} app_cfg;

#define E(f) offsetof(engine_cfg, f)
#define A(f) offsetof(app_cfg, f)
static const strata_option straggler_keys[] = {
    {"delay", 0, STRATA_OPT_INT, E(delay), NULL, "MS", 0, 1000, NULL, "delay", NULL},
    {"spin", 0, STRATA_OPT_ENUM, E(spin), "off", "S", 0, 0, "off|on", "spin", NULL},
    {"prob", 0, STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN, E(prob), "1", "P", 0, 1, NULL, "p", NULL},
    {"bytes", 0, STRATA_OPT_U64, E(bytes), "0", "B", 0, 0, NULL, "bytes", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL},
};
static const strata_option engine_opts[] = {
    {"count", 'n', STRATA_OPT_INT, E(count), "10", "N", 1, 1000, NULL, "count", NULL},
    {"total", 0, STRATA_OPT_U64, E(total), "5", "N", 0, 0, NULL, "total", NULL},
    {"big", 0, STRATA_OPT_U64 | STRATA_OPT_OPEN_MIN, E(big), NULL, "N", 0, 1e12, NULL, "b", NULL},
    {"rate", 'r', STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN, E(rate), "0.5", "R", 0, 1, NULL, "r", NULL},
    {"any", 0, STRATA_OPT_DOUBLE, E(any), NULL, "X", 0, 0, NULL, "any", NULL},
    {"name", 0, STRATA_OPT_STRING, E(name), NULL, "S", 0, 0, NULL, "name", NULL},
    {"dir", 'd', STRATA_OPT_STRING | STRATA_OPT_RESUMABLE, E(dir), "out", "DIR", 0, 0, NULL, "dir", NULL},
    {"quiet", 'q', STRATA_OPT_FLAG, E(quiet), NULL, NULL, 0, 0, NULL, "quiet", NULL},
    {"mode", 'm', STRATA_OPT_CHOICE, E(mode), "auto", "M", 0, 0, "fast|slow|auto", "m", NULL},
    {"level", 0, STRATA_OPT_ENUM, E(level), "mid", "L", 0, 0, "low|mid|high", "level", NULL},
    {"wpc", 0, STRATA_OPT_INT_OPTIONAL, E(wpc), "1", "W", 0, 64, NULL, "wpc", NULL},
    {"thr", 0, STRATA_OPT_DOUBLE_OPTIONAL | STRATA_OPT_OPEN_MIN, E(thr), NULL, "T", 0, 100, NULL,
     "thr", NULL},
    {"straggler", 's', STRATA_OPT_SPEC, E(straggler), NULL, "delay=MS[,...]", 0, 0, NULL, "s",
     straggler_keys},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL},
};
static const strata_option disrupt_keys[] = {
    {"slot", 0, STRATA_OPT_INT, A(slot), "0", "K", 0, 0, NULL, "slot", NULL},
    {"frac", 0, STRATA_OPT_DOUBLE, A(frac), NULL, "F", 0, 1, NULL, "frac", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL},
};
static const strata_option app_opts[] = {
    {"shift", 0, STRATA_OPT_INT, A(shift), "-3", "K", -5, 5, NULL, "shift", NULL},
    {"lr", 0, STRATA_OPT_DOUBLE, A(lr), "0.05", "LR", 1e-9, 1e3, NULL, "lr", NULL},
    {"verbose", 'v', STRATA_OPT_FLAG | STRATA_OPT_RESUMABLE, A(verbose), NULL, NULL, 0, 0, NULL, "verbose", NULL},
    {"disrupt", 0, STRATA_OPT_SPEC, A(disrupt), NULL, "frac=F[,slot=K]", 0, 0, NULL, "disrupt",
     disrupt_keys},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL},
};

#define MAX_ARGS 256

static int one_of(const char *v, const char *a, const char *b, const char *c) {
  return v && (!strcmp(v, a) || !strcmp(v, b) || !strcmp(v, c));
}

/* What a successful parse promises: every number within its bounds. */
static void check(const engine_cfg *e, const app_cfg *a) {
  FUZZ_CHECK(e->count >= 1 && e->count <= 1000, "count out of bounds");
  FUZZ_CHECK(e->big <= 1000000000000ull, "big out of bounds");
  FUZZ_CHECK(e->rate > 0 && e->rate <= 1, "rate out of bounds");
  FUZZ_CHECK(isfinite(e->any), "any is not finite");
  FUZZ_CHECK(e->dir != NULL, "dir lost its default");
  FUZZ_CHECK(e->quiet == 0 || e->quiet == 1, "a flag neither on nor off");
  FUZZ_CHECK(one_of(e->mode, "fast", "slow", "auto"), "mode not among its choices");
  FUZZ_CHECK(e->level >= 0 && e->level <= 2, "level not among its choices");
  FUZZ_CHECK(e->wpc.value >= 0 && e->wpc.value <= 64, "wpc out of bounds");
  FUZZ_CHECK(!e->thr.given || (e->thr.value > 0 && e->thr.value <= 100), "thr out of bounds");
  FUZZ_CHECK(e->delay >= 0 && e->delay <= 1000, "delay out of bounds");
  FUZZ_CHECK(e->spin == 0 || e->spin == 1, "spin not among its choices");
  FUZZ_CHECK(e->prob > 0 && e->prob <= 1, "prob out of bounds");
  FUZZ_CHECK(a->shift >= -5 && a->shift <= 5, "shift out of bounds");
  FUZZ_CHECK(a->lr >= 1e-9 && a->lr <= 1e3, "lr out of bounds");
  FUZZ_CHECK(!a->disrupt || (a->frac >= 0 && a->frac <= 1), "frac out of bounds");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  FUZZ_CHECK(buf != NULL, "out of memory copying the input");
  memcpy(buf, data, size);
  buf[size] = '\0';
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  char *s = buf;
  /* A separator at the very end ends the last argument, as a file's
   * last newline ends its last line, and starts no empty one. */
  for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
    if (i == size ? s < buf + size : buf[i] == '\n' || buf[i] == '\0') {
      buf[i] = '\0';
      argv[argc++] = s;
      s = buf + i + 1;
    }
  }
  argv[argc] = NULL;

  engine_cfg e;
  app_cfg a;
  memset(&e, 0, sizeof e);
  memset(&a, 0, sizeof a);
  strata_optgroup groups[2] = {{"engine", engine_opts, &e}, {"app", app_opts, &a}};
  fuzz_start();
  FUZZ_CHECK(strata_options_defaults(groups, 2) == 0, "the defaults do not parse");
  int help = 0;
  int rc = strata_options_parse(groups, 2, argc, argv, &help);
  if (rc == 0) {
    check(&e, &a);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_CHECK(f != NULL, "open_memstream failed");
    if (help) strata_options_help(f, groups, 2);
    strata_options_echo(f, "  ", groups, 2);
    FUZZ_CHECK(fclose(f) == 0, "writing the echo failed");
    FUZZ_CHECK(len > 0 && text[len - 1] == '\n', "an echo not ending its line");
    free(text);
    /* The settings a checkpoint records: one "name=value" per option not
     * marked resumable, each name an option's. */
    char **set = NULL;
    int n = -1, want = 0;
    FUZZ_CHECK(strata_options_settings(groups, 2, &set, &n) == 0, "the settings failed");
    for (int g = 0; g < 2; g++)
      for (const strata_option *o = groups[g].opts; o->name; o++)
        want += !(o->type & STRATA_OPT_RESUMABLE);
    FUZZ_CHECK(n == want, "the settings miss an option or list a resumable one");
    for (int i = 0; i < n; i++) FUZZ_CHECK(strchr(set[i], '=') != NULL, "a setting without '='");
    strata_free(set);
  }
  fuzz_finish(rc, NULL);
  free(buf);
  return 0;
}
