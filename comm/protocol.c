/*
 * The set-up part of the wire protocol both sides compute (comm/protocol.h).
 */
#include "comm/protocol.h"

int strata__setup_blocks(const strata_schedule *s, int w, int all_rot, strata_block *data,
                         strata_block *eval, strata_block *res, strata_block *rot,
                         strata_block **out, size_t *total) {
  int n = 0;
  *total = 0;
#define TAKE(b)          \
  do {                   \
    if ((b)->len) {      \
      out[n++] = (b);    \
      *total += (b)->len; \
    }                    \
  } while (0)
  for (int i = 0; i < s->n_data; i++)
    if (strata_schedule_data_owner(s, i) == w) TAKE(&data[i]);
  for (int i = 0; eval && i < s->n_data; i++)
    if (strata_schedule_data_owner(s, i) == w) TAKE(&eval[i]);
  for (int i = 0; i < s->n_resident; i++)
    if (strata_schedule_resident_owner(s, i) == w) TAKE(&res[i]);
  for (int i = 0; i < s->n_rotating; i++)
    if (all_rot || strata_schedule_rotating_holder(s, i, 0) == w) TAKE(&rot[i]);
#undef TAKE
  return n;
}
