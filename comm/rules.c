/*
 * Which consistency rule each table mode follows: the rule column of the
 * mode table (strata/modes.h); strata_table_open opens a table under its
 * mode's rule.
 */
#include <stddef.h>

#include "comm/rule.h"
#include "strata/core.h"

/* The rule of the modes that have none (ring and sfb modes). */
const strata__table_rule strata__none_rule = {.mode = {.name = NULL}};

#define RULE_EXTERN_(id, name, backend, rule, summary) \
  extern const strata__table_rule strata__##rule##_rule;
STRATA_MODES(RULE_EXTERN_)
#undef RULE_EXTERN_

static const strata__table_rule *const rules[STRATA_N_MODES] = {
#define RULE_(id, name, backend, rule, summary) [STRATA_MODE_##id] = &strata__##rule##_rule,
    STRATA_MODES(RULE_)
#undef RULE_
};

const strata__table_rule *strata__table_rule_of(strata_mode m) {
  if ((unsigned)m >= STRATA_N_MODES || rules[m] == &strata__none_rule) return NULL;
  return rules[m];
}

int strata_table_open(strata_transport *t, const strata_table_conf *conf, const float *init,
                      strata_table **out) {
  *out = NULL;
  const strata__table_rule *rule = strata__table_rule_of(conf->mode);
  if (!rule)
    return strata_err_set(STRATA_EINVAL, "table: --mode %s has no table rule",
                          strata_mode_name(conf->mode));
  return strata__table_open_rule(t, conf, rule, init, out);
}
