/*
 * A run's mode as one answer (core/mode.h): each call asks the mode's
 * back-end, then its table rule, through their function pointers.
 */
#include "core/mode.h"

#include <string.h>

int strata__facts_check(const strata__facts *f, const strata_engine_opts *o, const strata_app *app,
                        const strata_setup *setup, const strata_problem *p,
                        const strata_schedule *s) {
  int rc = 0;
  for (int i = 0; i < 2 && !rc; i++)
    if (f->ops[i] && f->ops[i]->check) rc = f->ops[i]->check(o, app, setup, p, s);
  return rc;
}

double strata__facts_memory(const strata__facts *f, const strata__mem_view *v) {
  double bytes = 0;
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->memory) bytes += f->ops[i]->memory(v);
  return bytes;
}

void strata__facts_stats_add(const strata__facts *f, strata_worker_stats *total,
                             const strata_worker_stats *in) {
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->stats_add)
      f->ops[i]->stats_add(total->mode_stats[i], in->mode_stats[i]);
}

void strata__facts_pass_add(const strata__facts *f, strata_pass_stats *pass,
                            const strata_worker_stats *in) {
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->pass_add)
      f->ops[i]->pass_add(pass->mode_stats[i], in->mode_stats[i]);
}

void strata__facts_metrics(const strata__facts *f, strata_json *j, const strata_run_result *r) {
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->metrics) f->ops[i]->metrics(j, r, i);
}

void strata__facts_metrics_pass(const strata__facts *f, strata_json *j, const strata_run_result *r,
                                int pass) {
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->metrics_pass) f->ops[i]->metrics_pass(j, r, pass, i);
}

void strata__facts_metrics_worker(const strata__facts *f, strata_json *j,
                                  const strata_worker_stats *s) {
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->metrics_worker) f->ops[i]->metrics_worker(j, s, i);
}

void strata__facts_echo(const strata__facts *f, char *out, size_t n, const strata_engine_opts *o) {
  if (n) out[0] = '\0';
  /* The rule's words first: its staleness or bound leads the line. */
  for (int i = 1; i >= 0; i--) {
    size_t used = strlen(out);
    if (!f->ops[i] || !f->ops[i]->echo || used + 2 >= n) continue;
    if (used) {
      memcpy(out + used, ", ", 3);
      used += 2;
    }
    f->ops[i]->echo(out + used, n - used, o);
    if (!out[used] && used >= 2) out[used - 2] = '\0';
  }
}

void strata__facts_summary(const strata__facts *f, FILE *out, const strata_run_result *r) {
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->summary) f->ops[i]->summary(out, r, i);
}

void strata__facts_status(const strata__facts *f, FILE *out, const strata_run_result *r, int done) {
  for (int i = 0; i < 2; i++)
    if (f->ops[i] && f->ops[i]->status) f->ops[i]->status(out, r, done, i);
}
