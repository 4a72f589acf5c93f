/*
 * The engine layer's own parts (internal to libstrata).
 */
#ifndef STRATA_ENGINE_ENGINE_H
#define STRATA_ENGINE_ENGINE_H

#include "scheduler/coordinator.h"

/* Serial mode: the coordinator's load and aggregation and the worker's
 * pass loop in one process, with P = 1 and no messages. */
int strata__serial_run(const strata__run *run, strata_run_result *result);

#endif
