/*
 * strata/apps/ratings.h - rating triples: file readers, id maps, the synthetic
 * generator and train/test splits (apps/common).
 *
 * A rating set holds dense 0-based user and item indices. Readers remap the
 * arbitrary integer ids found in files to dense indices in order of first
 * appearance; a test file read against the training maps marks ids the maps
 * do not know with STRATA_ID_UNSEEN.
 */
#ifndef STRATA_RATINGS_H
#define STRATA_RATINGS_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"

#define STRATA_ID_UNSEEN UINT32_MAX

typedef struct strata_rating {
  uint32_t user;  /* dense index, or STRATA_ID_UNSEEN in a test set */
  uint32_t item;
  float value;
} strata_rating;

/* Maps arbitrary non-negative integer ids (as found in files) to dense
 * indices 0..n-1 in order of first insertion. */
typedef struct strata_idmap strata_idmap;

STRATA_EXPORT strata_idmap *strata_idmap_create(void);
STRATA_EXPORT void strata_idmap_free(strata_idmap *m); /* NULL ok */
/* Dense index of id, inserting it if new. Returns 0 or STRATA_ENOMEM. */
STRATA_EXPORT int strata_idmap_insert(strata_idmap *m, int64_t id, uint32_t *index);
/* Dense index of id, or STRATA_ID_UNSEEN. */
STRATA_EXPORT uint32_t strata_idmap_find(const strata_idmap *m, int64_t id);
STRATA_EXPORT uint32_t strata_idmap_size(const strata_idmap *m);
/* Original id of dense index i (i < size). */
STRATA_EXPORT int64_t strata_idmap_id(const strata_idmap *m, uint32_t i);

typedef struct strata_ratings {
  strata_rating *r;   /* owned, strata_malloc'd */
  size_t n;
  size_t cap;
  uint32_t n_users;   /* dense index bound: every user < n_users (or UNSEEN) */
  uint32_t n_items;
  strata_idmap *users; /* NULL for synthetic data (ids are the indices) */
  strata_idmap *items;
} strata_ratings;

typedef enum {
  STRATA_FMT_AUTO = 0,
  STRATA_FMT_TSV,   /* MovieLens u.data: user \t item \t rating [\t ts] */
  STRATA_FMT_DAT,   /* MovieLens ratings.dat: user::item::rating[::ts] */
  STRATA_FMT_CSV,   /* ratings.csv: optional header line, user,item,rating[,ts], CRLF ok */
  STRATA_FMT_LIBMF, /* LIBMF text: user item rating, whitespace separated */
  STRATA_FMT_MM     /* Matrix Market coordinate real/integer general, 1-based */
} strata_format;

/* "auto", "tsv", "dat", "csv", "libmf", "mm" -> format; STRATA_EUSAGE if unknown. */
STRATA_EXPORT int strata_format_parse(const char *name, strata_format *out);
STRATA_EXPORT const char *strata_format_name(strata_format f);

/* Releases what a rating set owns and zeroes it; safe on a zeroed set. */
STRATA_EXPORT void strata_ratings_close(strata_ratings *rs);

/*
 * Reads a rating file into rs (zeroed by the caller).
 * - fmt AUTO detects from the first non-comment line: "%%MatrixMarket" -> MM,
 *   "::" -> DAT, a comma -> CSV, a tab -> TSV, else LIBMF.
 * - users/items: when NULL, fresh maps are created and stored in rs (training
 *   file). When given (test file), ids are looked up, not inserted: unknown ids
 *   become STRATA_ID_UNSEEN; rs->users/items stay NULL and n_users/n_items are
 *   copied from the maps' sizes.
 * Errors (message "FILE:LINE: what", or "FILE: what" for whole-file errors;
 * a field or header word it quotes goes through strata_quote):
 * STRATA_ENOENT missing/unreadable file, STRATA_EEMPTY no ratings,
 * STRATA_EPARSE malformed line (too few fields, non-numeric id or rating,
 * trailing garbage), STRATA_ERANGE negative id, id above 2^63 - 1 (ids are
 * int64_t; the message states the limit), NaN or infinite rating, MM
 * index beyond the declared size or entry count different from the header.
 * Blank lines are skipped; '#' comment lines skipped in TSV/LIBMF; CR before
 * LF tolerated everywhere; the last line may lack a newline.
 */
STRATA_EXPORT int strata_ratings_read(const char *path, strata_format fmt,
                                      const strata_idmap *users, const strata_idmap *items,
                                      strata_ratings *rs);

/* Parameters of the synthetic generator. */
typedef struct strata_synth_spec {
  uint32_t users, items;
  uint64_t ratings;
  uint32_t rank;     /* rank of the true low-rank model */
  double noise;      /* std. dev. of Gaussian noise added to each rating */
  uint64_t seed;
  double skew;       /* power-law exponent of user/item popularity (0 = uniform) */
} strata_synth_spec;

/*
 * Parses "synth:users=U,items=I,ratings=N,rank=R,noise=S,seed=X[,skew=A]"
 * (any subset, any order, after the "synth:" prefix; the prefix alone is
 * valid). Fields left out keep the values already in spec, so callers fill
 * defaults first. Errors: STRATA_EUSAGE naming the bad key or value (unknown
 * key, non-number, users/items/ratings/rank == 0, noise < 0, skew < 0).
 */
STRATA_EXPORT int strata_synth_parse(const char *text, strata_synth_spec *spec);
/* Defaults used by the CLI: the Netflix-shaped demo set. */
STRATA_EXPORT void strata_synth_defaults(strata_synth_spec *spec);

/*
 * Generates spec->ratings ratings: rating = 3.5 + b_u + b_i + <p_u, q_i> +
 * noise, with p_u, q_i ~ N(0, 1/sqrt(rank)) per coordinate scaled so the
 * signal has unit-ish variance, biases ~ N(0, 0.3^2); users and items are drawn
 * with popularity proportional to (index + 1)^-skew after a seeded shuffle of
 * indices, so popular ids are spread over the id range. Deterministic for a
 * spec: the same spec gives identical output from the same build.
 * Duplicated (user, item) pairs may occur and are kept.
 */
STRATA_EXPORT int strata_synth_generate(const strata_synth_spec *spec, strata_ratings *rs);

/*
 * Moves a seeded pseudo-random fraction (0 < fraction < 1) of train's ratings
 * into test (zeroed by the caller), keeping the order of the rest.
 * Deterministic for a seed. test gets n_users/n_items of train, no maps.
 */
STRATA_EXPORT int strata_ratings_split(strata_ratings *train, double fraction, uint64_t seed,
                                       strata_ratings *test);

/*
 * Tiles a rating set block-diagonally, as the DSGD benchmarks duplicate
 * Netflix for weak scaling: copy c = 1 .. copies-1 repeats every rating with
 * user + c * n_users and item + c * n_items (unseen indices stay unseen), so
 * the copies share no user or item. n_users and n_items are the bounds to
 * tile by (a test set passes its training set's), and become copies times
 * as large. The id maps, when present, grow to match: copy c of the
 * original id x is x + c * (1 + the largest id). STRATA_EINVAL for
 * copies < 1, STRATA_ERANGE if the indices or ids would overflow,
 * STRATA_ENOMEM.
 */
STRATA_EXPORT int strata_ratings_duplicate(strata_ratings *rs, int copies, uint32_t n_users,
                                           uint32_t n_items);

/* Appends one rating, growing the array. 0 or STRATA_ENOMEM. */
STRATA_EXPORT int strata_ratings_push(strata_ratings *rs, uint32_t user, uint32_t item,
                                      float value);

#endif
