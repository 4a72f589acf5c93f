/*
 * strata mf-predict: scores (user, item) pairs with an exported MF model, or
 * lists each user's top-N items, leaving out the items a ratings file shows
 * the user has rated. Ids are the original ids of the training data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/mf.h"
#include "strata/options.h"
#include "strata/apps/ratings.h"

typedef struct predict_opts {
  const char *model, *pairs, *users, *exclude, *out, *format;
  int top;
} predict_opts;

#define POPT(f) offsetof(predict_opts, f)
static const strata_option predict_options[] = {
    {.name = "model",
     .type = STRATA_OPT_STRING,
     .offset = POPT(model),
     .metavar = "DIR",
     .help = "model directory written by --model-out (required)"},
    {.name = "pairs",
     .type = STRATA_OPT_STRING,
     .offset = POPT(pairs),
     .metavar = "FILE",
     .help = "ratings-format file (user item rating, rating ignored) of pairs to score; prints "
             "user item score"},
    {.name = "top",
     .short_name = 'n',
     .type = STRATA_OPT_INT,
     .offset = POPT(top),
     .def = "10",
     .metavar = "N",
     .min = 1,
     .max = 100000,
     .help = "with --users: how many items to list per user"},
    {.name = "users",
     .type = STRATA_OPT_STRING,
     .offset = POPT(users),
     .metavar = "ID,ID|all",
     .help = "recommend for these users (original ids)"},
    {.name = "exclude",
     .type = STRATA_OPT_STRING,
     .offset = POPT(exclude),
     .metavar = "FILE",
     .help = "ratings file whose (user, item) pairs are left out of recommendations"},
    {.name = "format",
     .type = STRATA_OPT_CHOICE,
     .offset = POPT(format),
     .def = "auto",
     .metavar = "FMT",
     .choices = "auto|tsv|dat|csv|libmf|mm",
     .help = "format of --pairs and --exclude"},
    {.name = "out",
     .short_name = 'o',
     .type = STRATA_OPT_STRING,
     .offset = POPT(out),
     .metavar = "FILE",
     .help = "write results here (atomically) instead of stdout"},
    {.name = NULL},
};

typedef struct job {
  const predict_opts *o;
  strata_mf_model *m;
  strata_idmap *umap, *imap;
  strata_ratings pairs;
  uint32_t *users;
  int n_users;
  uint8_t **excl; /* per listed user, or NULL */
} job;

static int emit(FILE *f, void *ud) {
  job *j = ud;
  const strata_mf_model *m = j->m;
  if (j->o->pairs) {
    for (size_t x = 0; x < j->pairs.n; x++) {
      const strata_rating *r = &j->pairs.r[x];
      int64_t uid = strata_idmap_id(j->pairs.users, r->user);
      int64_t iid = strata_idmap_id(j->pairs.items, r->item);
      uint32_t u = strata_idmap_find(j->umap, uid), i = strata_idmap_find(j->imap, iid);
      float s = m->mu;
      if (u != STRATA_ID_UNSEEN && i != STRATA_ID_UNSEEN)
        s = strata_mf_model_score(m, u, i);
      else if (u != STRATA_ID_UNSEEN)
        s += m->bu[u];
      else if (i != STRATA_ID_UNSEEN)
        s += m->bi[i];
      fprintf(f, "%lld\t%lld\t%.4f\n", (long long)uid, (long long)iid, s);
    }
    return 0;
  }
  int n = j->o->top;
  uint32_t *items = strata_malloc((size_t)n * sizeof *items);
  float *scores = strata_malloc((size_t)n * sizeof *scores);
  int rc = 0;
  if (!items || !scores) rc = strata_err_set(STRATA_ENOMEM, "out of memory");
  for (int x = 0; x < j->n_users && !rc; x++) {
    uint32_t u = j->users[x];
    int got = strata_mf_model_top(m, u, j->excl ? j->excl[x] : NULL, n, items, scores);
    if (got < 0) {
      rc = got;
      break;
    }
    for (int y = 0; y < got; y++)
      fprintf(f, "%lld\t%d\t%lld\t%.4f\n", (long long)m->user_ids[u], y + 1,
              (long long)m->item_ids[items[y]], scores[y]);
  }
  strata_free(items);
  strata_free(scores);
  return rc;
}

static int prepare(job *j) {
  const predict_opts *o = j->o;
  strata_mf_model *m = j->m;
  int rc = 0;
  strata_format fmt;
  if ((rc = strata_format_parse(o->format, &fmt))) return rc;
  j->umap = strata_idmap_create();
  j->imap = strata_idmap_create();
  if (!j->umap || !j->imap) return strata_err_set(STRATA_ENOMEM, "out of memory");
  uint32_t ix;
  for (uint32_t u = 0; u < m->n_users && !rc; u++) rc = strata_idmap_insert(j->umap, m->user_ids[u], &ix);
  for (uint32_t i = 0; i < m->n_items && !rc; i++) rc = strata_idmap_insert(j->imap, m->item_ids[i], &ix);
  if (rc) return rc;
  if (o->pairs) return strata_ratings_read(o->pairs, fmt, NULL, NULL, &j->pairs);
  /* Users to recommend for. */
  if (strcmp(o->users, "all") == 0) {
    j->n_users = (int)m->n_users;
    j->users = strata_malloc(((size_t)m->n_users + 1) * sizeof *j->users);
    if (!j->users) return strata_err_set(STRATA_ENOMEM, "out of memory");
    for (uint32_t u = 0; u < m->n_users; u++) j->users[u] = u;
  } else {
    size_t cap = 1;
    for (const char *p = o->users; *p; p++) cap += *p == ',';
    j->users = strata_malloc(cap * sizeof *j->users);
    if (!j->users) return strata_err_set(STRATA_ENOMEM, "out of memory");
    const char *p = o->users;
    while (*p) {
      char *end;
      char q[STRATA_QUOTE_SIZE];
      errno = 0;
      long long id = strtoll(p, &end, 10);
      if (end == p || (*end && *end != ','))
        return strata_err_set(STRATA_EUSAGE, "--users: '%s' is not a list of ids",
                              strata_quote(q, sizeof q, o->users, strlen(o->users)));
      /* strtoll clamps to the int64 range: the clamped id would then be
       * reported as absent from the model, which hides the real reason. */
      if (errno == ERANGE)
        return strata_err_set(STRATA_EUSAGE,
                              "--users: id '%s' is out of range: ids are signed 64-bit, "
                              "-2^63 .. 2^63 - 1",
                              strata_quote(q, sizeof q, p, (size_t)(end - p)));
      uint32_t u = strata_idmap_find(j->umap, id);
      if (u == STRATA_ID_UNSEEN)
        return strata_err_set(STRATA_EUSAGE, "--users: user %lld is not in the model", id);
      j->users[j->n_users++] = u;
      p = *end ? end + 1 : end;
    }
  }
  if (o->exclude) {
    strata_ratings ex = {0};
    if ((rc = strata_ratings_read(o->exclude, fmt, j->umap, j->imap, &ex))) return rc;
    /* Map each model user to its position in the list. */
    int32_t *pos = strata_malloc(((size_t)m->n_users + 1) * sizeof *pos);
    j->excl = strata_calloc((size_t)j->n_users + 1, sizeof *j->excl);
    if (!pos || !j->excl) rc = strata_err_set(STRATA_ENOMEM, "out of memory");
    for (uint32_t u = 0; pos && u < m->n_users; u++) pos[u] = -1;
    for (int x = 0; !rc && x < j->n_users; x++) {
      pos[j->users[x]] = x;
      if (!(j->excl[x] = strata_calloc((size_t)m->n_items + 1, 1)))
        rc = strata_err_set(STRATA_ENOMEM, "out of memory");
    }
    for (size_t x = 0; !rc && x < ex.n; x++) {
      const strata_rating *r = &ex.r[x];
      if (r->user == STRATA_ID_UNSEEN || r->item == STRATA_ID_UNSEEN || pos[r->user] < 0) continue;
      j->excl[pos[r->user]][r->item] = 1;
    }
    strata_free(pos);
    strata_ratings_close(&ex);
  }
  return rc;
}

static int copy_out(FILE *f, void *ud) { return emit(f, ud); }

int strata__predict_main(int argc, char **argv);

int strata__predict_main(int argc, char **argv) {
  predict_opts o;
  memset(&o, 0, sizeof o);
  strata_optgroup g = {"mf-predict options", predict_options, &o};
  int help = 0, rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc, argv, &help);
  if (!rc && help) {
    printf("Usage: strata mf-predict --model DIR (--pairs FILE | --users ID,ID|all [--top N] [--exclude FILE])\n");
    strata_options_help(stdout, &g, 1);
    printf("\nExamples:\n  strata mf-predict --model model/ --pairs ua.test\n"
           "  strata mf-predict --model model/ --users 1,2 --top 5 --exclude ua.base\n");
    return 0;
  }
  if (!rc && !o.model) rc = strata_err_set(STRATA_EUSAGE, "--model is required");
  if (!rc && !o.pairs == !o.users)
    rc = strata_err_set(STRATA_EUSAGE, "give exactly one of --pairs and --users");
  if (rc) {
    fprintf(stderr, "strata mf-predict: %s\n", strata_err_msg());
    return 2;
  }
  strata_mf_model m;
  job j;
  memset(&j, 0, sizeof j);
  j.o = &o;
  j.m = &m;
  rc = strata_mf_model_read(o.model, &m);
  if (!rc) rc = prepare(&j);
  if (!rc) {
    if (o.out)
      rc = strata_write_atomic(o.out, copy_out, &j);
    else
      rc = emit(stdout, &j);
  }
  if (rc) fprintf(stderr, "strata mf-predict: %s\n", strata_err_msg());
  for (int x = 0; j.excl && x < j.n_users; x++) strata_free(j.excl[x]);
  strata_free(j.excl);
  strata_free(j.users);
  strata_idmap_free(j.umap);
  strata_idmap_free(j.imap);
  strata_ratings_close(&j.pairs);
  strata_mf_model_close(&m);
  return rc == 0 ? 0 : rc == STRATA_EUSAGE ? 2 : 1;
}
