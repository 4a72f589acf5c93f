/*
 * strata lda-eval: the collapsed log-likelihood log p(w, z) of a file of
 * topic assignments, so that two programs' samples are judged by one
 * evaluator. The file is WarpLDA's -dumpz format, which strata lda
 * --topics-out also writes (z.txt): one line per document, its token count
 * and then word:topic for each of its tokens, ids from 0.
 *
 * log p(w, z) = sum_d [lgamma(K alpha) - lgamma(n_d + K alpha)
 *                      + sum_k (lgamma(n_dk + alpha) - lgamma(alpha))]
 *             + sum_k [lgamma(V beta) - lgamma(n_k + V beta)]
 *             + sum_w sum_k (lgamma(n_wk + beta) - lgamma(beta)),
 * the formula of strata lda's loglik objective (Griffiths & Steyvers 2004),
 * computed from the counts the file implies and nothing else.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/apps/lines.h"
#include "strata/core.h"
#include "strata/json.h"
#include "strata/options.h"

typedef struct eval_opts {
  const char *z;
  int topics;
  double alpha, beta;
  uint64_t vocab;
} eval_opts;

#define EOPT(f) offsetof(eval_opts, f)
static const strata_option options[] = {
    {"z", 0, STRATA_OPT_STRING, EOPT(z), NULL, "FILE", 0, 0, NULL,
     "topic assignments: one document a line, 'N word:topic ...' (WarpLDA's -dumpz, strata "
     "lda's --topics-out z.txt; .gz read too; required)",
     NULL},
    {"topics", 'K', STRATA_OPT_INT, EOPT(topics), NULL, "K", 1, 65535, NULL,
     "number of topics the sample was drawn with (required)", NULL},
    {"alpha", 0, STRATA_OPT_DOUBLE, EOPT(alpha), "0", "A", 0, 1e6, NULL,
     "symmetric document-topic prior, per topic; 0 = 50 / K (strata lda's default; WarpLDA's "
     "-alpha is the sum, K times this)",
     NULL},
    {"beta", 0, STRATA_OPT_DOUBLE, EOPT(beta), "0.01", "B", 1e-9, 1e6, NULL,
     "symmetric topic-word prior", NULL},
    {"vocab-size", 0, STRATA_OPT_U64, EOPT(vocab), "0", "V", 0, 4294967295.0, NULL,
     "V in the prior's V beta; 0 = the largest word id in the file + 1", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

/* A document's topic counts: dense over K, with the list of the topics it
 * holds, so that clearing costs its tokens, not K. */
typedef struct doc_counts {
  uint32_t *n, *used;
  uint32_t n_used;
} doc_counts;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* An unsigned decimal at *p, below `limit` (named `limit_name` in the
 * message); advances *p past it. */
static int scan_uint(const strata_lines *rd, const char *line, const char **p, const char *e,
                     uint64_t limit, const char *what, const char *limit_name, uint64_t *out) {
  const char *s = *p;
  uint64_t v = 0;
  bool big = false;
  while (s < e && *s >= '0' && *s <= '9') {
    big |= v > (UINT64_MAX - 9) / 10;
    v = v * 10 + (uint64_t)(*s - '0');
    s++;
  }
  if (s == *p)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: %s expected at column %zu", rd->path, rd->lineno,
                          what, (size_t)(*p - line) + 1);
  if (big || v >= limit)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: %s %.*s is not below %s", rd->path, rd->lineno,
                          what, (int)(s - *p), *p, limit_name);
  *p = s;
  *out = v;
  return 0;
}

static const char *skip_blanks(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t')) p++;
  return p;
}

typedef struct eval_result {
  uint64_t docs, tokens, vocab;
  double loglik;
} eval_result;

/*
 * Reads the file and sums the document terms as it goes; keeps one key
 * word * K + topic per token for the word terms, counted after a sort.
 */
static int evaluate(const eval_opts *o, eval_result *res) {
  const uint32_t K = (uint32_t)o->topics;
  const double alpha = o->alpha > 0 ? o->alpha : 50.0 / K, beta = o->beta;
  const uint64_t word_limit = o->vocab ? o->vocab : UINT32_MAX;
  char k_name[32], v_name[40];
  snprintf(k_name, sizeof k_name, "--topics %u", K);
  snprintf(v_name, sizeof v_name, o->vocab ? "--vocab-size %llu" : "2^32 - 1",
           (unsigned long long)o->vocab);
  strata_lines rd;
  doc_counts dc = {0};
  uint64_t *keys = NULL, *nk = NULL;
  size_t n_keys = 0, keys_cap = 0;
  uint64_t top_word = 0;
  double doc_sum = 0;
  int rc = strata_lines_open(&rd, o->z);
  if (rc) return rc;
  dc.n = strata_calloc(K, sizeof *dc.n);
  dc.used = strata_malloc((size_t)K * sizeof *dc.used);
  nk = strata_calloc(K, sizeof *nk);
  if (!dc.n || !dc.used || !nk) {
    rc = strata_err_set(STRATA_ENOMEM, "lda-eval: out of memory");
    goto done;
  }
  const double la = lgamma(alpha), lka = lgamma(K * alpha);
  const char *line;
  size_t len;
  memset(res, 0, sizeof *res);
  while ((rc = strata_lines_next(&rd, &line, &len)) == 1) {
    const char *p = skip_blanks(line, line + len), *e = line + len;
    if (p == e) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: an empty line (a document is 'N word:topic ...')",
                          rd.path, rd.lineno);
      goto done;
    }
    uint64_t n = 0;
    if ((rc = scan_uint(&rd, line, &p, e, UINT32_MAX, "the token count", "2^32 - 1", &n)))
      goto done;
    if ((rc = strata_lines_fits(&rd, (double)(n_keys + n) * 2 * sizeof *keys, NULL,
                                "lda-eval: %llu tokens need", (unsigned long long)(n_keys + n))))
      goto done;
    uint64_t *nkeys =
        strata_grow(keys, n_keys + n, &keys_cap, SIZE_MAX / sizeof *keys, sizeof *keys);
    if (!nkeys && n_keys + n > 0) {
      rc = strata_err_set(STRATA_ENOMEM, "lda-eval: out of memory for %llu tokens",
                          (unsigned long long)(n_keys + n));
      goto done;
    }
    keys = nkeys;
    for (uint64_t i = 0; i < n; i++) {
      p = skip_blanks(p, e);
      uint64_t w = 0, k = 0;
      if ((rc = scan_uint(&rd, line, &p, e, word_limit, "word id", v_name, &w))) goto done;
      if (p == e || *p != ':') {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: token %llu of %llu: 'word:topic' expected",
                            rd.path, rd.lineno, (unsigned long long)i + 1, (unsigned long long)n);
        goto done;
      }
      p++;
      if ((rc = scan_uint(&rd, line, &p, e, K, "topic", k_name, &k))) goto done;
      if (dc.n[k]++ == 0) dc.used[dc.n_used++] = (uint32_t)k;
      nk[k]++;
      keys[n_keys++] = w * K + k;
      if (w > top_word) top_word = w;
    }
    if (skip_blanks(p, e) != e) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: more than the %llu tokens the line declares",
                          rd.path, rd.lineno, (unsigned long long)n);
      goto done;
    }
    for (uint32_t j = 0; j < dc.n_used; j++) {
      doc_sum += lgamma(dc.n[dc.used[j]] + alpha) - la;
      dc.n[dc.used[j]] = 0;
    }
    dc.n_used = 0;
    doc_sum += lka - lgamma((double)n + K * alpha);
    res->docs++;
    res->tokens += n;
  }
  if (rc < 0) goto done;
  rc = 0;
  res->vocab = o->vocab ? o->vocab : (res->tokens ? top_word + 1 : 0);
  qsort(keys, n_keys, sizeof *keys, cmp_u64);
  const double lb = lgamma(beta), V = (double)res->vocab;
  double word_sum = 0, total_sum = 0;
  for (size_t i = 0; i < n_keys;) {
    size_t j = i + 1;
    while (j < n_keys && keys[j] == keys[i]) j++;
    word_sum += lgamma((double)(j - i) + beta) - lb;
    i = j;
  }
  for (uint32_t k = 0; k < K; k++) total_sum += lgamma(V * beta) - lgamma((double)nk[k] + V * beta);
  res->loglik = doc_sum + word_sum + total_sum;
done:
  strata_lines_close(&rd);
  strata_free(dc.n);
  strata_free(dc.used);
  strata_free(nk);
  strata_free(keys);
  return rc;
}

int strata__lda_eval_main(int argc, char **argv);

int strata__lda_eval_main(int argc, char **argv) {
  eval_opts o;
  memset(&o, 0, sizeof o);
  strata_optgroup g = {"lda-eval options", options, &o};
  int help = 0, rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc, argv, &help);
  if (!rc && help) {
    printf(
        "Usage: strata lda-eval --z FILE --topics K [--alpha A] [--beta B] [--vocab-size V]\n\n"
        "The collapsed log-likelihood log p(w, z) of a sample of topic assignments, computed\n"
        "from the file's counts alone, as one JSON line on stdout.\n");
    strata_options_help(stdout, &g, 1);
    printf(
        "\nExamples:\n"
        "  strata lda-eval --z kos-topics/z.txt --topics 100 --alpha 0.5\n"
        "  strata lda-eval --z train.z.estimate --topics 1000 --alpha 0.1 --beta 0.01\n");
    return 0;
  }
  if (!rc && (!o.z || !o.topics))
    rc = strata_err_set(STRATA_EUSAGE, "--%s is required", o.z ? "topics" : "z");
  if (rc) {
    fprintf(stderr, "strata lda-eval: %s\n", strata_err_msg());
    return 2;
  }
  eval_result r;
  rc = evaluate(&o, &r);
  if (rc) {
    fprintf(stderr, "strata lda-eval: %s\n", strata_err_msg());
    return 1;
  }
  const double alpha = o.alpha > 0 ? o.alpha : 50.0 / o.topics;
  strata_json j;
  strata_json_init_line(&j, stdout);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "z", o.z);
  strata_json_int(&j, "docs", (int64_t)r.docs);
  strata_json_int(&j, "tokens", (int64_t)r.tokens);
  strata_json_int(&j, "topics", o.topics);
  strata_json_int(&j, "vocab", (int64_t)r.vocab);
  strata_json_number(&j, "alpha", alpha);
  strata_json_number(&j, "beta", o.beta);
  strata_json_number(&j, "loglik", r.loglik);
  strata_json_number(&j, "loglik_per_token", r.tokens ? r.loglik / (double)r.tokens : 0.0 / 0.0);
  strata_json_object_end(&j);
  return 0;
}
