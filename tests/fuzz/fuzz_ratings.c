/*
 * strata_ratings_read over every rating format. The low three bits of the
 * header's choice pick the format (0 auto, 1 tsv, 2 dat, 3 csv, 4 libmf,
 * 5 mm, 6 and 7 auto again: the CLI's default); bit 3 reads the file a
 * second time as a test set against the maps of the first read, which
 * looks ids up instead of inserting them.
 */
#include <math.h>

#include "fuzz.h"
#include "strata/apps/ratings.h"

/* What a reader promises of a rating set it returns. */
static void check(const strata_ratings *rs, int test) {
  FUZZ_CHECK(rs->n > 0 && rs->n <= rs->cap && rs->r, "an empty rating set returned");
  if (!test) {
    FUZZ_CHECK(rs->users && rs->items, "a training set without id maps");
    FUZZ_CHECK(rs->n_users == strata_idmap_size(rs->users), "n_users differs from its map");
    FUZZ_CHECK(rs->n_items == strata_idmap_size(rs->items), "n_items differs from its map");
  } else {
    FUZZ_CHECK(!rs->users && !rs->items, "a test set with maps of its own");
  }
  for (size_t k = 0; k < rs->n; k++) {
    const strata_rating *r = &rs->r[k];
    FUZZ_CHECK(r->user < rs->n_users || (test && r->user == STRATA_ID_UNSEEN), "user out of range");
    FUZZ_CHECK(r->item < rs->n_items || (test && r->item == STRATA_ID_UNSEEN), "item out of range");
    FUZZ_CHECK(isfinite(r->value), "a rating that is not finite");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in;
  if (fuzz_input_begin(&in, data, size)) return 0;
  unsigned f = in.choice & 7;
  strata_format fmt = f <= STRATA_FMT_MM ? (strata_format)f : STRATA_FMT_AUTO;
  strata_ratings train = {0}, test = {0};
  int rc = strata_ratings_read(fuzz_path(), fmt, NULL, NULL, &train);
  if (rc == 0) {
    check(&train, 0);
    if (in.choice & 8) {
      rc = strata_ratings_read(fuzz_path(), fmt, train.users, train.items, &test);
      /* The same file against its own maps: every id is known. */
      if (rc == 0) {
        check(&test, 1);
        FUZZ_CHECK(test.n == train.n, "the second read found a different number of ratings");
        for (size_t k = 0; k < test.n; k++)
          FUZZ_CHECK(test.r[k].user == train.r[k].user && test.r[k].item == train.r[k].item,
                     "an id of the file is unknown to its own maps");
      }
    }
  }
  strata_ratings_close(&test);
  strata_ratings_close(&train);
  fuzz_finish(rc, fuzz_path());
  return 0;
}
