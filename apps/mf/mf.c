/*
 * The "mf" app: DSGD matrix factorisation on the strata engine.
 *
 * Coordinator: read or generate ratings, remap ids, deal users and items to
 * B blocks each so that every block carries about the same number of
 * ratings, cut the matrix into B x B blocks, and lay out each data block
 * chunk by chunk (the item rows of one pipeline chunk). Inside a chunk,
 * users ascend, so a user's row stays in cache across its updates, in four
 * interleaved runs (strata_mf_interleave), so that neighbouring updates
 * touch different rows and the kernel overlaps them; the data blocks of odd
 * sub-epochs sweep their users the other way (sweeps_backwards).
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/mf.h"
#include "strata/apps/ratings.h"

#define UNSEEN UINT32_MAX

typedef struct mf_meta {
  int32_t k, kpad, stride, bias, adagrad, has_test;
  float mu;
  float pad;
  double unseen_sq; /* test examples with neither id known: predicted by mu */
  uint64_t unseen_n;
  uint64_t n_test;
  uint32_t n_users, n_items;
} mf_meta;

/* Coordinator-only: what export needs to map blocks back to ids. */
typedef struct mf_priv {
  strata_idmap *users, *items; /* NULL for synthetic data */
  uint32_t n_users, n_items;
  uint32_t *ublock, *ulocal, *iblock, *ilocal;
} mf_priv;

/* Data block layout: header, depth+1 chunk offsets, entries. */
typedef struct mf_data_hdr {
  uint32_t n, depth;
} mf_data_hdr;

static size_t data_entries_offset(int depth) {
  return strata_round_up(sizeof(mf_data_hdr) + (size_t)(depth + 1) * sizeof(uint32_t), 16);
}

static const char *const mf_objective_names[] = {"train_rmse", "test_rmse"};

#define OPT(field) offsetof(strata_mf_config, field)
static const strata_option mf_options[] = {
    {.name = "data",
     .short_name = 'd',
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(data),
     .def = "synth:",
     .metavar = "FILE|synth:...",
     .help = "training ratings, or the generator: "
             "synth:users=U,items=I,ratings=N,rank=R,noise=S,seed=X,skew=A"},
    {.name = "format",
     .type = STRATA_OPT_CHOICE | STRATA_OPT_RESUMABLE,
     .offset = OPT(format),
     .def = "auto",
     .metavar = "FMT",
     .choices = "auto|tsv|dat|csv|libmf|mm",
     .help = "rating file format"},
    {.name = "test",
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(test),
     .metavar = "FILE",
     .help = "held-out ratings scored after every pass (ids mapped like --data)"},
    {.name = "test-fraction",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(test_fraction),
     .def = "0",
     .metavar = "F",
     .max = 0.99,
     .help = "hold out this fraction of --data as the test set (seeded by --seed)"},
    {.name = "rank",
     .short_name = 'k',
     .type = STRATA_OPT_INT,
     .offset = OPT(rank),
     .def = "32",
     .metavar = "K",
     .min = 1,
     .max = 4096,
     .help = "factor rank"},
    {.name = "update",
     .type = STRATA_OPT_CHOICE,
     .offset = OPT(update),
     .def = "adagrad",
     .metavar = "RULE",
     .choices = "adagrad|sgd",
     .help = "step sizes: row-wise AdaGrad (the pass's rate / sqrt(G)), or plain SGD (the pass's "
             "rate)"},
    {.name = "lr",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lr),
     .def = "0.08",
     .metavar = "RATE",
     .min = 1e-9,
     .max = 10,
     .help = "learning rate of the first pass (AdaGrad: the base step)"},
    {.name = "lr-decay",
     .type = STRATA_OPT_DOUBLE_OPTIONAL,
     .offset = OPT(lr_decay),
     .metavar = "D",
     .max = 100,
     .help = "the rate of pass t (from 0) is lr / (1 + D t) (default: 0.4 with AdaGrad, 0.1 with "
             "SGD)"},
    {.name = "lr-schedule",
     .type = STRATA_OPT_CHOICE,
     .offset = OPT(lr_schedule),
     .def = "decay",
     .metavar = "RULE",
     .choices = "decay|bold",
     .help = "with --update sgd: decay (lr / (1 + lr-decay t)), or bold: DSGD's bold driver, the "
             "rate x1.05 after a pass whose training loss fell, x0.5 after one whose loss rose"},
    {.name = "lambda",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lambda),
     .def = "0.05",
     .metavar = "L",
     .max = 100,
     .help = "L2 regularisation of the factors"},
    {.name = "lambda-bias",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lambda_bias),
     .def = "0.05",
     .metavar = "L",
     .max = 100,
     .help = "L2 regularisation of the biases"},
    {.name = "init-scale",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(init_scale),
     .def = "0.1",
     .metavar = "S",
     .max = 100,
     .help = "initial factors ~ N(0, S^2/k)"},
    {.name = "no-bias",
     .type = STRATA_OPT_FLAG,
     .offset = OPT(no_bias),
     .help = "no user and item biases (plain factorisation around the mean)"},
    {.name = "duplicate",
     .type = STRATA_OPT_INT,
     .offset = OPT(duplicate),
     .def = "1",
     .metavar = "N",
     .min = 1,
     .max = 4096,
     .help = "train on N block-diagonal copies of the data (new users and items per copy; test "
             "ratings copied alike): weak scaling as with Netflix x4 ... x256"},
    {.name = NULL},
};

double strata_mf_lr_decay(const strata_mf_config *cfg) {
  if (cfg->lr_decay.given) return cfg->lr_decay.value;
  return strcmp(cfg->update, "sgd") ? STRATA_MF_DECAY_ADAGRAD : STRATA_MF_DECAY_SGD;
}

static int mf_check(const void *vcfg, const strata_setup *setup) {
  const strata_mf_config *cfg = vcfg;
  if (setup->strata < setup->workers)
    return strata_err_set(STRATA_EUSAGE, "--strata %d is fewer than the %d workers", setup->strata,
                          setup->workers);
  if (cfg->test && cfg->test_fraction > 0)
    return strata_err_set(STRATA_EUSAGE, "--test and --test-fraction exclude each other");
  if (!strcmp(cfg->lr_schedule, "bold") && strcmp(cfg->update, "sgd"))
    return strata_err_set(STRATA_EUSAGE,
                          "--lr-schedule bold adapts plain SGD's rate: it needs --update sgd "
                          "(AdaGrad adapts its own)");
  if (cfg->test && strncmp(cfg->data, "synth:", 6) == 0)
    return strata_err_set(STRATA_EUSAGE,
                          "--test needs --data from a file (use --test-fraction with synth:)");
  return 0;
}

static void priv_free(void *p) {
  mf_priv *m = p;
  if (!m) return;
  strata_idmap_free(m->users);
  strata_idmap_free(m->items);
  strata_free(m->ublock);
  strata_free(m->ulocal);
  strata_free(m->iblock);
  strata_free(m->ilocal);
  strata_free(m);
}

static int read_data(const strata_mf_config *cfg, const strata_setup *setup, strata_ratings *train,
                     strata_ratings *test) {
  int rc;
  strata_format fmt;
  if ((rc = strata_format_parse(cfg->format, &fmt))) return rc;
  if (strncmp(cfg->data, "synth:", 6) == 0) {
    strata_synth_spec spec;
    strata_synth_defaults(&spec);
    if ((rc = strata_synth_parse(cfg->data, &spec))) return rc;
    if ((rc = strata_synth_generate(&spec, train))) return rc;
  } else if ((rc = strata_ratings_read(cfg->data, fmt, NULL, NULL, train))) {
    return rc;
  }
  if (cfg->test) {
    if ((rc = strata_ratings_read(cfg->test, fmt, train->users, train->items, test))) return rc;
  } else if (cfg->test_fraction > 0) {
    if ((rc = strata_ratings_split(train, cfg->test_fraction, setup->seed, test))) return rc;
    if (train->n == 0)
      return strata_err_set(STRATA_EEMPTY, "%s: no training ratings left after --test-fraction",
                            cfg->data);
  }
  if (cfg->duplicate > 1) {
    uint32_t U = train->n_users, I = train->n_items;
    if ((cfg->test || cfg->test_fraction > 0) &&
        (rc = strata_ratings_duplicate(test, cfg->duplicate, U, I)))
      return rc;
    if ((rc = strata_ratings_duplicate(train, cfg->duplicate, U, I))) return rc;
  }
  return 0;
}

/* Numbers the ids of each block in a seeded random order. Balancing deals
 * ids to blocks heaviest first, so its local order runs from the most
 * active user to the least; data blocks sort their ratings by local user,
 * and every chunk would then be swept from heavy to light users, the same
 * way every pass. SGD with B x B blocks lost accuracy to that sweep (one
 * block happened to suit it); a random order keeps a user's ratings
 * together and W rows in memory order, so the sweep stays sequential. */
static int shuffle_local(uint32_t n, int B, uint64_t seed, const uint32_t *block, uint32_t *local,
                         const uint32_t *sizes) {
  uint32_t **perm = strata_calloc((size_t)B, sizeof *perm);
  int rc = perm ? 0 : strata_err_set(STRATA_ENOMEM, "mf: out of memory numbering users");
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  for (int b = 0; b < B && !rc; b++) {
    perm[b] = strata_malloc(((size_t)sizes[b] + 1) * sizeof **perm);
    if (!perm[b]) {
      rc = strata_err_set(STRATA_ENOMEM, "mf: out of memory numbering users");
      break;
    }
    for (uint32_t x = 0; x < sizes[b]; x++) perm[b][x] = x;
    for (uint32_t x = sizes[b]; x > 1; x--) {
      uint32_t y = (uint32_t)strata_rng_below(&rng, x), t = perm[b][x - 1];
      perm[b][x - 1] = perm[b][y];
      perm[b][y] = t;
    }
  }
  for (uint32_t u = 0; u < n && !rc; u++) local[u] = perm[block[u]][local[u]];
  for (int b = 0; perm && b < B; b++) strata_free(perm[b]);
  strata_free(perm);
  return rc;
}

/* Sorts in[0..n) by key(e) = chunk[e.i] * nu + e.u into out, stably (equal
 * keys keep their order in in), with tmp as room: a radix sort of
 * ceil(bits / 11) passes of at most 11 bits each. One counting sort over all
 * keys (depth x users of them) would write every entry to a different cache
 * line of the block; a pass here writes to at most 2048 places at once.
 * cnt has room for 2049 counts. */
static void sort_entries(const strata_mf_entry *in, strata_mf_entry *tmp, strata_mf_entry *out,
                         uint32_t n, const uint32_t *chunk, uint32_t nu, uint64_t nkeys,
                         uint32_t *cnt) {
  int bits = 0;
  while (bits < 64 && (nkeys - 1) >> bits) bits++;
  int passes = (bits + 10) / 11;
  if (passes == 0) passes = 1;
  const int w = (bits + passes - 1) / passes;
  const uint64_t mask = ((uint64_t)1 << w) - 1;
  strata_mf_entry *bufs[2] = {out, tmp};
  const strata_mf_entry *src = in;
  for (int p = 0; p < passes; p++) {
    strata_mf_entry *dst = bufs[(passes - 1 - p) % 2];
    const int shift = p * w;
    memset(cnt, 0, (mask + 2) * sizeof *cnt);
    for (uint32_t x = 0; x < n; x++)
      cnt[((((uint64_t)chunk[src[x].i] * nu + src[x].u) >> shift) & mask) + 1]++;
    for (uint64_t q = 0; q <= mask; q++) cnt[q + 1] += cnt[q];
    for (uint32_t x = 0; x < n; x++)
      dst[cnt[(((uint64_t)chunk[src[x].i] * nu + src[x].u) >> shift) & mask]++] = src[x];
    src = dst;
  }
}

/* Whether data block (i, j) sweeps its users backwards. Under the diagonal
 * schedule (mf_schedule) the block runs in sub-epoch t = (j - i) mod B, so
 * a user block meets its item blocks at t = 0, 1, ..., B - 1 and an item
 * block meets its user blocks at the same t. With every block swept
 * forwards, the same users came last in every task of every pass, and
 * plain SGD on B x B blocks trailed one block (B = 1, which keeps the
 * forward sweep) by 0.006 test RMSE at pass 5 of the 10M-rating set;
 * backwards at odd t, every user and item row's consecutive tasks sweep
 * the users in opposite directions (docs/architecture.md, "The order in
 * which a pass visits ratings", has the figures). A function of the block
 * alone, so every pass, a resumed run and serial mode see the same order. */
static int sweeps_backwards(int i, int j, int B) { return ((j - i + B) % B) & 1; }

/* Users per piece of a backward sweep: a 512th of the block's users, at
 * least 16 (back_piece). Smaller pieces reverse the order more exactly but
 * start more prefetch streams; a 512th (70 users at --strata 2 on the
 * 10M-rating set) measured no cost per pass. */
enum { BACK_PIECE_SHARE = 512, BACK_PIECE_MIN = 16 };

static uint32_t back_piece(uint32_t block_users) {
  uint32_t g = block_users / BACK_PIECE_SHARE;
  return g > BACK_PIECE_MIN ? g : BACK_PIECE_MIN;
}

/* Copies a chunk sorted by user, in[0..n), to out with its users in
 * pieces of g users, the pieces in reverse order and the users ascending
 * inside each piece; each user's entries stay together and in order, as
 * strata_mf_interleave needs. Interleaved afterwards, that visits the
 * users in nearly the reverse of the forward order while W is still read
 * upwards in memory inside a piece: the hardware prefetchers follow
 * ascending streams, and an exact reversal (g = 1) cost 18% more CPU time
 * per pass at B = 2 on the 10M-rating set. */
static void reverse_pieces(const strata_mf_entry *in, size_t n, uint32_t g, strata_mf_entry *out) {
  size_t o = n, x = 0;
  while (x < n) {
    size_t y = x;
    for (uint32_t users = 0; y < n && users < g; users++) {
      uint32_t u = in[y].u;
      while (y < n && in[y].u == u) y++;
    }
    o -= y - x;
    memcpy(out + o, in + x, (y - x) * sizeof *out);
    x = y;
  }
}

static int build_data_blocks(const strata_ratings *train, const mf_priv *pv, int B, int depth,
                             const uint32_t *usz, const uint32_t *isz, strata_problem *prob) {
  size_t nd = (size_t)B * (size_t)B;
  uint32_t *count = strata_calloc(nd, sizeof *count);
  uint32_t *start = strata_calloc(nd + 1, sizeof *start);
  uint32_t *order = strata_malloc(train->n * sizeof *order);
  uint32_t *chunk = NULL, *cnt = NULL;
  strata_mf_entry *in = NULL, *tmp = NULL;
  int rc = 0;
  if (!count || !start || !order) goto oom;
  /* Bucket ratings by data block, keeping file order inside a bucket. */
  for (size_t j = 0; j < train->n; j++) {
    const strata_rating *r = &train->r[j];
    count[pv->ublock[r->user] * (uint32_t)B + pv->iblock[r->item]]++;
  }
  for (size_t d = 0; d < nd; d++) start[d + 1] = start[d] + count[d];
  memset(count, 0, nd * sizeof *count);
  for (size_t j = 0; j < train->n; j++) {
    const strata_rating *r = &train->r[j];
    size_t d = pv->ublock[r->user] * (uint32_t)B + pv->iblock[r->item];
    order[start[d] + count[d]++] = (uint32_t)j;
  }
  uint32_t max_i = 0, max_n = 0;
  for (int b = 0; b < B; b++) max_i = isz[b] > max_i ? isz[b] : max_i;
  for (size_t d = 0; d < nd; d++) max_n = count[d] > max_n ? count[d] : max_n;
  chunk = strata_malloc(((size_t)max_i + 1) * sizeof *chunk);
  cnt = strata_malloc(2049 * sizeof *cnt);
  in = strata_malloc(((size_t)max_n + 1) * sizeof *in);
  tmp = strata_malloc(((size_t)max_n + 1) * sizeof *tmp);
  if (!chunk || !cnt || !in || !tmp) goto oom;
  size_t eoff = data_entries_offset(depth);
  for (int bi = 0; bi < B; bi++)
    for (int bj = 0; bj < B; bj++) {
      size_t d = (size_t)bi * (size_t)B + (size_t)bj;
      uint32_t n = count[d], nrows = isz[bj], nu = usz[bi];
      strata_block *blk = &prob->data[d];
      blk->len = eoff + (size_t)n * sizeof(strata_mf_entry);
      blk->buf = strata_alloc_aligned(blk->len);
      if (!blk->buf) goto oom;
      memset(blk->buf, 0, eoff);
      mf_data_hdr *h = blk->buf;
      h->n = n;
      h->depth = (uint32_t)depth;
      uint32_t *off = (uint32_t *)(h + 1);
      strata_mf_entry *ent = (strata_mf_entry *)((char *)blk->buf + eoff);
      /* The pipeline chunk of each item row: chunks are equal slices of the
       * rows. Then the block's entries in file order, counted by chunk. */
      for (uint32_t il = 0; il < nrows; il++)
        chunk[il] = (uint32_t)(((uint64_t)(il + 1) * (uint64_t)depth - 1) / nrows);
      memset(off, 0, ((size_t)depth + 1) * sizeof *off);
      for (uint32_t x = 0; x < n; x++) {
        const strata_rating *r = &train->r[order[start[d] + x]];
        in[x] = (strata_mf_entry){.u = pv->ulocal[r->user], .i = pv->ilocal[r->item],
                                  .r = r->value};
        off[chunk[in[x].i] + 1]++;
      }
      for (int c = 0; c < depth; c++) off[c + 1] += off[c];
      /* Sorted on (chunk, local user). */
      sort_entries(in, tmp, ent, n, chunk, nu, (uint64_t)depth * nu, cnt);
      /* Users ascend inside a chunk; the kernel wants neighbours apart. */
      int back = sweeps_backwards(bi, bj, B);
      for (int c = 0; c < depth; c++) {
        size_t m = off[c + 1] - off[c];
        if (back)
          reverse_pieces(ent + off[c], m, back_piece(nu), in);
        else
          memcpy(in, ent + off[c], m * sizeof *in);
        strata_mf_interleave(in, m, ent + off[c]);
      }
    }
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "mf: out of memory building data blocks");
done:
  strata_free(count);
  strata_free(start);
  strata_free(order);
  strata_free(chunk);
  strata_free(cnt);
  strata_free(in);
  strata_free(tmp);
  return rc;
}

/* Test examples ride with a data block of their user's row and item's
 * column; with one side unseen, with any block of the known side. */
static int build_eval_blocks(const strata_ratings *test, const mf_priv *pv, int B, float mu,
                             strata_problem *prob, mf_meta *meta) {
  size_t nd = (size_t)B * (size_t)B;
  uint32_t *count = strata_calloc(nd, sizeof *count);
  if (!count) return strata_err_set(STRATA_ENOMEM, "mf: out of memory");
  for (int pass = 0; pass < 2; pass++) {
    for (size_t j = 0; j < test->n; j++) {
      const strata_rating *r = &test->r[j];
      int ku = r->user != UNSEEN, ki = r->item != UNSEEN;
      if (!ku && !ki) {
        if (pass == 0) {
          double e = (double)r->value - mu;
          meta->unseen_sq += e * e;
          meta->unseen_n++;
        }
        continue;
      }
      uint32_t bi = ku ? pv->ublock[r->user] : pv->iblock[r->item];
      uint32_t bj = ki ? pv->iblock[r->item] : bi;
      size_t d = (size_t)bi * (size_t)B + bj;
      if (pass == 0) {
        count[d]++;
      } else {
        strata_mf_entry *ent = (strata_mf_entry *)prob->eval[d].buf;
        strata_mf_entry *e = &ent[count[d]++];
        e->u = ku ? pv->ulocal[r->user] : UNSEEN;
        e->i = ki ? pv->ilocal[r->item] : UNSEEN;
        e->r = r->value;
      }
    }
    if (pass == 0) {
      for (size_t d = 0; d < nd; d++) {
        prob->eval[d].len = (size_t)count[d] * sizeof(strata_mf_entry);
        if (count[d] && !(prob->eval[d].buf = strata_alloc_aligned(prob->eval[d].len))) {
          strata_free(count);
          return strata_err_set(STRATA_ENOMEM, "mf: out of memory");
        }
        count[d] = 0;
      }
    }
  }
  strata_free(count);
  return 0;
}

static int build_params(const strata_mf_config *cfg, const strata_setup *setup, const mf_priv *pv,
                        int B, const uint32_t *usz, const uint32_t *isz, int stride,
                        strata_problem *prob) {
  size_t row_bytes = (size_t)stride * sizeof(float);
  for (int b = 0; b < B; b++) {
    strata_block *w = &prob->resident[b], *h = &prob->rotating[b];
    w->nrows = usz[b];
    w->len = usz[b] * row_bytes;
    h->nrows = isz[b];
    h->row_bytes = (uint32_t)row_bytes;
    h->len = isz[b] * row_bytes;
    if ((w->len && !(w->buf = strata_alloc_aligned(w->len))) ||
        (h->len && !(h->buf = strata_alloc_aligned(h->len))))
      return strata_err_set(STRATA_ENOMEM, "mf: out of memory for factors");
  }
  /* Rows are seeded by their global index, so the initial model does not
   * depend on the number of workers or strata. */
  for (uint32_t u = 0; u < pv->n_users; u++)
    strata_mf_init_row((float *)prob->resident[pv->ublock[u]].buf + (size_t)pv->ulocal[u] * stride,
                       cfg->rank, stride, cfg->init_scale, setup->seed, 0, u);
  for (uint32_t i = 0; i < pv->n_items; i++)
    strata_mf_init_row((float *)prob->rotating[pv->iblock[i]].buf + (size_t)pv->ilocal[i] * stride,
                       cfg->rank, stride, cfg->init_scale, setup->seed, 1, i);
  return 0;
}

static int mf_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const strata_mf_config *cfg = vcfg;
  strata_ratings train = {0}, test = {0};
  mf_priv *pv = NULL;
  mf_meta *meta = NULL;
  uint32_t *usz = NULL, *isz = NULL, *ucount = NULL, *icount = NULL;
  int B = setup->strata, rc;
  if ((rc = read_data(cfg, setup, &train, &test))) goto fail;
  if (train.n > UINT32_MAX) {
    rc = strata_err_set(STRATA_ERANGE, "%s: more than 2^32 ratings", cfg->data);
    goto fail;
  }
  int k = cfg->rank, kpad = strata_mf_kpad(k), stride = kpad + STRATA_MF_TAIL;
  char what[160];
  snprintf(what, sizeof what, "mf: the factors of %u users and %u items at rank %d", train.n_users,
           train.n_items, k);
  if ((rc = strata_problem_fits(what, ((double)train.n_users + train.n_items) * stride * sizeof(float),
                                strata_app_mf.memory_hint)))
    goto fail;
  pv = strata_calloc(1, sizeof *pv);
  meta = strata_calloc(1, sizeof *meta);
  usz = strata_malloc((size_t)B * sizeof *usz);
  isz = strata_malloc((size_t)B * sizeof *isz);
  if (!pv || !meta || !usz || !isz) goto oom;
  pv->n_users = train.n_users;
  pv->n_items = train.n_items;
  pv->ublock = strata_malloc(((size_t)pv->n_users + 1) * sizeof(uint32_t));
  pv->ulocal = strata_malloc(((size_t)pv->n_users + 1) * sizeof(uint32_t));
  pv->iblock = strata_malloc(((size_t)pv->n_items + 1) * sizeof(uint32_t));
  pv->ilocal = strata_malloc(((size_t)pv->n_items + 1) * sizeof(uint32_t));
  if (!pv->ublock || !pv->ulocal || !pv->iblock || !pv->ilocal) goto oom;
  ucount = strata_calloc((size_t)pv->n_users + 1, sizeof *ucount);
  icount = strata_calloc((size_t)pv->n_items + 1, sizeof *icount);
  if (!ucount || !icount) goto oom;
  for (size_t j = 0; j < train.n; j++) {
    ucount[train.r[j].user]++;
    icount[train.r[j].item]++;
  }
  if ((rc = strata_schedule_balance(pv->n_users, B, strata_mix64(setup->seed ^ 0x55), ucount, pv->ublock,
                          pv->ulocal, usz)))
    goto fail;
  if ((rc = strata_schedule_balance(pv->n_items, B, strata_mix64(setup->seed ^ 0x1e), icount, pv->iblock,
                          pv->ilocal, isz)))
    goto fail;
  if ((rc = shuffle_local(pv->n_users, B, strata_mix64(setup->seed ^ 0x77), pv->ublock, pv->ulocal,
                          usz)))
    goto fail;

  double sum = 0;
  for (size_t j = 0; j < train.n; j++) sum += train.r[j].value;
  *meta = (mf_meta){.k = k,
                    .kpad = kpad,
                    .stride = stride,
                    .bias = !cfg->no_bias,
                    .adagrad = strcmp(cfg->update, "adagrad") == 0,
                    .has_test = test.n > 0,
                    .mu = (float)(sum / (double)train.n),
                    .n_test = test.n,
                    .n_users = train.n_users,
                    .n_items = train.n_items};
  if ((rc = strata_problem_alloc(prob, B * B, B, B, test.n > 0))) goto fail;
  if ((rc = build_data_blocks(&train, pv, B, setup->depth, usz, isz, prob))) goto fail;
  if (test.n && (rc = build_eval_blocks(&test, pv, B, meta->mu, prob, meta))) goto fail;
  if ((rc = build_params(cfg, setup, pv, B, usz, isz, stride, prob))) goto fail;
  /* The model's values are the factors and the bias; AdaGrad's sums of
   * squared gradients after them are the optimiser's state. */
  prob->value_len = (uint32_t)kpad + 1;
  if (B <= 8)
    for (int bi = 0; bi < B; bi++) {
      char line[256];
      size_t used = 0;
      for (int bj = 0; bj < B && used < sizeof line; bj++)
        used += (size_t)snprintf(line + used, sizeof line - used, " %u",
                                 ((const mf_data_hdr *)prob->data[bi * B + bj].buf)->n);
      strata_log(STRATA_LOG_DEBUG, "mf: row block %d (%u users): ratings per block:%s", bi,
                 usz[bi], line);
    }
  prob->n_examples = train.n;
  prob->meta = meta;
  prob->meta_len = sizeof *meta;
  pv->users = train.users;
  pv->items = train.items;
  train.users = train.items = NULL;
  prob->priv = pv;
  prob->priv_free = priv_free;
  meta = NULL;
  pv = NULL;
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "mf: out of memory");
fail:
  strata_problem_close(prob);
done:
  priv_free(pv);
  strata_free(meta);
  strata_free(usz);
  strata_free(isz);
  strata_free(ucount);
  strata_free(icount);
  strata_ratings_close(&train);
  strata_ratings_close(&test);
  return rc;
}

static int mf_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                       strata_schedule *sched) {
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

typedef struct mf_worker {
  mf_meta meta;
  strata_mf_step step;
  const strata_mf_config *cfg;
} mf_worker;

static int mf_worker_init(const void *vcfg, const strata_setup *setup, const void *meta,
                          size_t meta_len, void **state) {
  if (meta_len != sizeof(mf_meta))
    return strata_err_set(STRATA_ECOMM, "mf: meta of %zu bytes, expected %zu", meta_len,
                          sizeof(mf_meta));
  mf_worker *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "mf: out of memory");
  const strata_mf_config *cfg = vcfg;
  memcpy(&w->meta, meta, sizeof w->meta);
  w->cfg = cfg;
  w->step = (strata_mf_step){.k = w->meta.k,
                             .kpad = w->meta.kpad,
                             .stride = w->meta.stride,
                             .mu = w->meta.mu,
                             .lambda = (float)cfg->lambda,
                             .lambda_bias = (float)cfg->lambda_bias,
                             .bias = w->meta.bias,
                             .adagrad = w->meta.adagrad};
  *state = w;
  return 0;
}

static void mf_worker_free(void *state) { strata_free(state); }

static int mf_compute(void *state, const strata_task_view *tv, double *partials) {
  mf_worker *w = state;
  const mf_data_hdr *h = tv->data->buf;
  if (!h || !h->n) return 0;
  const uint32_t *off = (const uint32_t *)(h + 1);
  const strata_mf_entry *ent =
      (const strata_mf_entry *)((const char *)tv->data->buf + data_entries_offset((int)h->depth));
  strata_mf_step st = w->step;
  st.lr = (float)tv->control[0];
  uint32_t lo = off[tv->chunk], hi = off[tv->chunk + 1];
  partials[0] += strata_mf_sgd(&st, ent + lo, hi - lo, tv->resident->buf, tv->rotating->buf);
  partials[1] += (double)(hi - lo);
  return 0;
}

static int mf_evaluate(void *state, const strata_task_view *tv, double *partials) {
  mf_worker *w = state;
  const strata_mf_entry *ent = tv->data->buf;
  size_t n = tv->data->len / sizeof *ent;
  const float *W = tv->resident->buf, *H = tv->rotating->buf;
  size_t stride = (size_t)w->meta.stride;
  double sq = 0;
  for (size_t j = 0; j < n; j++) {
    const float *wr = ent[j].u == UNSEEN ? NULL : W + ent[j].u * stride;
    const float *hr = ent[j].i == UNSEEN ? NULL : H + ent[j].i * stride;
    double e = (double)ent[j].r - (double)strata_mf_predict(&w->step, wr, hr);
    sq += e * e;
  }
  partials[2] += sq;
  partials[3] += (double)n;
  return 0;
}

/* The rate of every pass (the base rate under AdaGrad). The bold driver
 * compares the training RMSE of the newest pass the engine has summed with
 * the one before; each pass k adds one comparison (known grows by one per
 * pass), so the rule acts once per summed pass, L passes late. */
static const char *const mf_control_names[] = {"lr"};

static void mf_pass_control(const void *vcfg, const strata_problem *prob, int pass,
                            const double *obj, int known,
                            const double *prev, double *ctl) {
  const strata_mf_config *cfg = vcfg;
  if (strcmp(cfg->update, "sgd") || strcmp(cfg->lr_schedule, "bold")) {
    ctl[0] = cfg->lr / (1.0 + strata_mf_lr_decay(cfg) * (double)pass);
  } else if (!prev || known < 2) {
    ctl[0] = cfg->lr;
  } else {
    double now = obj[(size_t)(known - 1) * STRATA_MAX_OBJECTIVES];
    double before = obj[(size_t)(known - 2) * STRATA_MAX_OBJECTIVES];
    ctl[0] = prev[0] * (now < before ? 1.05 : 0.5);
  }
}

static void mf_objectives(const void *cfg, const strata_problem *prob, const double *p,
                          double *values) {
  const mf_meta *m = prob->meta;
  values[0] = p[1] > 0 ? sqrt(p[0] / p[1]) : 0.0 / 0.0;
  double n = p[3] + (double)m->unseen_n;
  values[1] = m->has_test && n > 0 ? sqrt((p[2] + m->unseen_sq) / n) : 0.0 / 0.0;
}

static void mf_describe(const void *vcfg, const strata_problem *prob, strata_json *j) {
  const strata_mf_config *cfg = vcfg;
  const mf_meta *m = prob->meta;
  strata_json_string(j, "data", cfg->data);
  strata_json_int(j, "duplicate", cfg->duplicate);
  strata_json_int(j, "rank", cfg->rank);
  strata_json_int(j, "ratings", (int64_t)prob->n_examples);
  strata_json_int(j, "test_ratings", m ? (int64_t)m->n_test : 0);
  strata_json_int(j, "users", m ? m->n_users : 0);
  strata_json_int(j, "items", m ? m->n_items : 0);
  strata_json_number(j, "lr", cfg->lr);
  strata_json_number(j, "lr_decay", strata_mf_lr_decay(cfg));
  strata_json_number(j, "lambda", cfg->lambda);
  strata_json_number(j, "lambda_bias", cfg->lambda_bias);
  strata_json_bool(j, "bias", !cfg->no_bias);
  strata_json_string(j, "update", cfg->update);
  strata_json_string(j, "lr_schedule", cfg->lr_schedule);
}

/* STRATA_EDIVERGED naming the first non-finite value of n rows of k. */
static int nonfinite(const float *v, uint32_t n, int k, const char *what, const int64_t *ids) {
  for (size_t x = 0; x < (size_t)n * (size_t)k; x++)
    if (!isfinite(v[x]))
      return strata_err_set(STRATA_EDIVERGED,
                            "the run diverged: the model holds a non-finite value in %s %" PRId64
                            "), not written; try a smaller --lr, or --update adagrad",
                            what, ids[x / (size_t)k]);
  return 0;
}

static int mf_export(const void *vcfg, const strata_setup *setup, const strata_problem *prob,
                     const char *dir) {
  const mf_meta *m = prob->meta;
  const mf_priv *pv = prob->priv;
  int k = m->k, rc = 0;
  size_t stride = (size_t)m->stride;
  strata_mf_model model = {.k = k, .mu = m->mu, .bias = m->bias, .n_users = pv->n_users,
                           .n_items = pv->n_items};
  model.W = strata_malloc(((size_t)pv->n_users * k + 1) * sizeof(float));
  model.H = strata_malloc(((size_t)pv->n_items * k + 1) * sizeof(float));
  model.bu = strata_malloc(((size_t)pv->n_users + 1) * sizeof(float));
  model.bi = strata_malloc(((size_t)pv->n_items + 1) * sizeof(float));
  model.user_ids = strata_malloc(((size_t)pv->n_users + 1) * sizeof(int64_t));
  model.item_ids = strata_malloc(((size_t)pv->n_items + 1) * sizeof(int64_t));
  if (!model.W || !model.H || !model.bu || !model.bi || !model.user_ids || !model.item_ids) {
    rc = strata_err_set(STRATA_ENOMEM, "mf: out of memory exporting the model");
    goto done;
  }
  for (uint32_t u = 0; u < pv->n_users; u++) {
    const float *row = (const float *)prob->resident[pv->ublock[u]].buf + pv->ulocal[u] * stride;
    memcpy(model.W + (size_t)u * k, row, (size_t)k * sizeof(float));
    model.bu[u] = m->bias ? row[m->kpad] : 0.0f;
    model.user_ids[u] = pv->users ? strata_idmap_id(pv->users, u) : (int64_t)u;
  }
  for (uint32_t i = 0; i < pv->n_items; i++) {
    const float *row = (const float *)prob->rotating[pv->iblock[i]].buf + pv->ilocal[i] * stride;
    memcpy(model.H + (size_t)i * k, row, (size_t)k * sizeof(float));
    model.bi[i] = m->bias ? row[m->kpad] : 0.0f;
    model.item_ids[i] = pv->items ? strata_idmap_id(pv->items, i) : (int64_t)i;
  }
  /* A factor can overflow to infinity while every rating's error stays
   * finite for a pass or two; such a model is never written. */
  if ((rc = nonfinite(model.W, pv->n_users, k, "W (user", model.user_ids)) ||
      (rc = nonfinite(model.H, pv->n_items, k, "H (item", model.item_ids)) ||
      (rc = nonfinite(model.bu, pv->n_users, 1, "bu (user", model.user_ids)) ||
      (rc = nonfinite(model.bi, pv->n_items, 1, "bi (item", model.item_ids)))
    goto done;
  rc = strata_mf_model_write(dir, &model);
done:
  strata_mf_model_close(&model);
  return rc;
}

const strata_app strata_app_mf = {
    .name = "mf",
    .memory_hint = "lower --rank or --duplicate",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "matrix factorisation by DSGD (squared loss, L2, biases, SGD or AdaGrad)",
    .examples =
        "  mpirun -np 3 strata mf --data ../shared/data/movielens-100k/ua.base \\\n"
        "      --test ../shared/data/movielens-100k/ua.test --rank 100\n"
        "  mpirun -np 3 strata mf --data synth:users=71567,items=10681,ratings=10000054 "
        "--rank 100 --passes 5\n"
        "  strata mf --mode serial --data ratings.csv --test-fraction 0.1 --metrics-out run.json\n",
    .options = mf_options,
    .config_size = sizeof(strata_mf_config),
    .check = mf_check,
    .n_partials = 4,
    .n_objectives = 2,
    .objective_names = mf_objective_names,
    /* The training RMSE must fall; the test RMSE may rise as the model overfits. */
    .falling = 1u << 0,
    .load = mf_load,
    .schedule = mf_schedule,
    .worker_init = mf_worker_init,
    .worker_free = mf_worker_free,
    .compute = mf_compute,
    .evaluate = mf_evaluate,
    .objectives = mf_objectives,
    .tol = {STRATA_TOL_REL_CHANGE, 0, "the relative change of the training RMSE over a pass"},
    .diverged_hint = "try a smaller --lr, or --update adagrad",
    .n_controls = 1,
    .control_names = mf_control_names,
    .pass_control = mf_pass_control,
    .describe = mf_describe,
    .export_model = mf_export,
};
