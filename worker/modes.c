/*
 * The mode table: each mode's name and the back-end that runs it. A new
 * back-end is one file defining a strata__backend and one line here (and
 * its value in strata_mode).
 */
#include <math.h>
#include <string.h>

#include "strata/core.h"
#include "worker/backend.h"

extern const strata__backend strata__ring_backend;  /* worker/ring.c */
extern const strata__backend strata__table_backend; /* worker/tables.c */

static const struct {
  const char *name;
  const strata__backend *backend;
} modes[STRATA_N_MODES] = {
    [STRATA_MODE_SCHEDULED] = {"scheduled", &strata__ring_backend},
    [STRATA_MODE_SERIAL] = {"serial", &strata__ring_backend},
    [STRATA_MODE_BSP] = {"bsp", &strata__table_backend},
    [STRATA_MODE_ABSP] = {"absp", &strata__table_backend},
    [STRATA_MODE_SSP] = {"ssp", &strata__table_backend},
    [STRATA_MODE_ESSP] = {"essp", &strata__table_backend},
    [STRATA_MODE_ASYNC] = {"async", &strata__table_backend},
};

const char *strata_mode_name(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES ? modes[m].name : "?";
}

int strata_mode_parse(const char *name, strata_mode *out) {
  char list[256] = "";
  size_t used = 0;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    if (name && !strcmp(name, modes[m].name)) {
      *out = (strata_mode)m;
      return 0;
    }
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", m ? ", " : "", modes[m].name);
  }
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE, "unknown mode '%s': one of %s",
                        name ? strata_quote(q, sizeof q, name, strlen(name)) : "", list);
}

int strata_mode_is_ps(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES && modes[m].backend == &strata__table_backend;
}

const strata__backend *strata__backend_of(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES ? modes[m].backend : NULL;
}

int strata__mode_all_rotating(strata_mode m) {
  const strata__backend *b = strata__backend_of(m);
  return b && b->all_rotating;
}

int strata__mode_control_lag(const strata_engine_opts *o) {
  const strata__backend *b = strata__backend_of(o->mode);
  return b && b->control_lag ? b->control_lag(o) : 2;
}

int strata__mode_check(const strata_engine_opts *o, const strata_app *app,
                       const strata_problem *p, const strata_schedule *s, int depth) {
  const strata__backend *b = strata__backend_of(o->mode);
  return b && b->check ? b->check(o, app, p, s, depth) : 0;
}

int strata_engine_resolve(strata_engine_opts *o, int s_given, int wpc_given, int pf_given) {
  const strata__backend *b = strata__backend_of(o->mode);
  if (!b) return strata_err_set(STRATA_EUSAGE, "unknown mode %d", (int)o->mode);
  return b->resolve(o, s_given, wpc_given, pf_given);
}

int strata__clocks_per_pass(double wpc) {
  if (wpc >= 1) return 0;
  return (int)lround(1.0 / wpc);
}
