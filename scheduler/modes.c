/*
 * Execution modes: which back-end serves the rotating blocks, and the
 * settings each parameter-server mode takes.
 */
#include <math.h>
#include <string.h>

#include "scheduler/protocol.h"
#include "strata/engine.h"

int strata_engine_is_ps(const char *mode) {
  static const char *const ps[] = {"bsp", "absp", "ssp", "essp", "async"};
  for (size_t i = 0; mode && i < sizeof ps / sizeof *ps; i++)
    if (!strcmp(mode, ps[i])) return 1;
  return 0;
}

int strata__control_lag(const strata_engine_opts *o) {
  if (!o || !o->mode || (strcmp(o->mode, "ssp") && strcmp(o->mode, "essp"))) return 2;
  /* s clocks span s / K passes with K clocks per pass, s * W with W >= 1. */
  int K = strata__clocks_per_pass(o->wpc);
  int span = K ? (o->staleness + K - 1) / K : o->staleness * (int)o->wpc;
  return 2 + span;
}

int strata__clocks_per_pass(double wpc) {
  if (wpc >= 1) return 0;
  return (int)lround(1.0 / wpc);
}

int strata_engine_resolve(strata_engine_opts *o, int s_given, int wpc_given, int pf_given) {
  const char *m = o->mode;
  if (!strata_engine_is_ps(m)) {
    if (s_given || wpc_given || pf_given)
      return strata_err_set(STRATA_EUSAGE,
                            "--%s applies to the parameter-server modes (bsp, absp, ssp, essp, "
                            "async), not --mode %s",
                            s_given ? "staleness" : wpc_given ? "wpc" : "prefetch", m);
    o->wpc = 0; /* an app default does not apply */
    return 0;
  }
  if (s_given && o->staleness < 0)
    return strata_err_set(STRATA_EUSAGE, "--staleness must be >= 0, got %d", o->staleness);
  if (wpc_given && !(o->wpc > 0 && isfinite(o->wpc)))
    return strata_err_set(STRATA_EUSAGE, "--wpc must be > 0, got %g", o->wpc);
  if (wpc_given && (o->wpc > 1e6 || o->wpc < 1e-6))
    return strata_err_set(STRATA_EUSAGE,
                          "--wpc %g is out of range: at most 1e6 passes per clock or clocks per pass",
                          o->wpc);
  if (!strcmp(m, "bsp") && wpc_given && o->wpc != 1)
    return strata_err_set(STRATA_EUSAGE, "--mode bsp is one clock per pass: use --mode absp --wpc %g",
                          o->wpc);
  if ((!strcmp(m, "bsp") || !strcmp(m, "absp")) && s_given && o->staleness != 0)
    return strata_err_set(STRATA_EUSAGE, "--mode %s has staleness 0: use --mode ssp --staleness %d",
                          m, o->staleness);
  if (!strcmp(m, "async") && s_given)
    return strata_err_set(STRATA_EUSAGE, "--mode async never waits: --staleness does not apply");
  if (!s_given) o->staleness = (!strcmp(m, "ssp") || !strcmp(m, "essp")) ? 1 : 0;
  /* Not given: the app's default (wpc > 0 on entry) where the mode takes one. */
  if (!wpc_given && (!(o->wpc > 0) || !strcmp(m, "bsp"))) o->wpc = 1;
  if (o->wpc >= 1 && o->wpc != floor(o->wpc))
    return strata_err_set(STRATA_EUSAGE, "--wpc above 1 must be a whole number of passes, got %g",
                          o->wpc);
  if (o->wpc < 1 && fabs(1.0 / o->wpc - (double)lround(1.0 / o->wpc)) > 1e-6)
    return strata_err_set(STRATA_EUSAGE,
                          "--wpc below 1 must divide a pass evenly (1/2, 1/3, ...), got %g", o->wpc);
  /* Aggressive everywhere, as LazyTables runs it: under SSP the
   * conservative prefetcher leaves each worker s clocks alone with its own
   * updates, and the model the workers' sums make swings (docs/cli.md,
   * "Prefetch", has the measurements). With s = 0 both ask for the same rows. */
  if (!pf_given) o->prefetch = STRATA_PREFETCH_AGGRESSIVE;
  if (!strcmp(m, "async") && o->prefetch != STRATA_PREFETCH_AGGRESSIVE)
    return strata_err_set(STRATA_EUSAGE,
                          "--mode async needs --prefetch aggressive: its reads never wait, so "
                          "only the prefetcher brings other workers' updates");
  return 0;
}
