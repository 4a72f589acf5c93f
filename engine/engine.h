/*
 * The engine layer's own parts (internal to libstrata).
 */
#ifndef STRATA_ENGINE_ENGINE_H
#define STRATA_ENGINE_ENGINE_H

#include <stdio.h>

#include "scheduler/coordinator.h"
#include "strata/json.h"

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
