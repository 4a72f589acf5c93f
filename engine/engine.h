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

#endif
