/*
 * The engine layer's own parts (internal to libstrata).
 */
#ifndef STRATA_ENGINE_ENGINE_H
#define STRATA_ENGINE_ENGINE_H

#include <stdio.h>

#include "core/mode.h"
#include "scheduler/coordinator.h"
#include "strata/json.h"

/* The mode table (engine/modes.c). */

/* The one answer for a run of mode m with resolved options o (NULL: the
 * mode's answers alone, without the values o decides) and P workers.
 * STRATA_EINVAL for a mode out of range. */
int strata__mode_facts(strata_mode m, const strata_engine_opts *o, int P, strata__facts *f);
/* The mode's checks of a run's problem, the sufficient-factor and round
 * apps' included: before loading (p and s NULL) and after scheduling. */
int strata__mode_check(const strata_engine_opts *o, const strata_app *app,
                       const strata_setup *setup, const strata_problem *p,
                       const strata_schedule *s);
/* The names of the modes pick says yes to ("bsp, absp and ssp", last_sep
 * " and "), into out. */
void strata__mode_list(char *out, size_t n,
                       int (*pick)(const strata__mode_ops *const ops[2], void *ud), void *ud,
                       const char *last_sep);
/* The facts the run's mode makes before any work (rank 0; sfb's
 * topology), into r->mode_data; and their release. */
int strata__mode_prepare(const strata_engine_opts *o, int P, strata_run_result *r);
void strata__mode_release(strata_run_result *r);
/* The mode's words of the configuration echo. */
void strata__mode_echo(char *out, size_t n, const strata_engine_opts *o);
/* The mode's lines of the CLI's summary. */
void strata__mode_summary(FILE *out, const strata_run_result *r);
/* The metrics keys of mode m's owner i (0 back-end, 1 rule): top level or
 * per pass; NULL: none. */
const char *const *strata__mode_keys(strata_mode m, int i, int per_pass);

/* Serial mode: the coordinator's load and aggregation and the worker's
 * pass loop in one process, with P = 1 and no messages. */
int strata__serial_run(const strata__run *run, strata_run_result *result);

/* The JSON summary (strata_metrics_write's) of r's first `done` passes,
 * written to f; the app's description of the problem only with describe
 * (once it is loaded); extra (NULL: none) adds members to the top-level
 * object before its per-pass array. */
int strata__metrics_render(FILE *f, const strata_run_result *r, int done, const char *const *argv,
                           int argc, int describe, void (*extra)(strata_json *j, void *ud),
                           void *ud);

/* Refuses (STRATA_EINVAL, naming it) an app whose objective, control,
 * unit or describe keys would collide with the engine's keys in the
 * metrics JSON, or with each other. prob: the loaded problem, for describe
 * (NULL: its keys are not checked). */
int strata__metrics_check_keys(const strata_app *app, const void *cfg, const strata_problem *prob);
/* The engine's keys: at the top level (per_pass 0) or in each per_pass
 * entry; NULL-terminated. */
const char *const *strata__metrics_keys(int per_pass);

#endif
