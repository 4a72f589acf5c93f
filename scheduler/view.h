/*
 * scheduler/view.h - how the engine follows a run on rank 0 (internal to
 * libstrata): the hooks the coordinator and the aggregator call, which the
 * live status (engine/status.h) fills.
 */
#ifndef STRATA_SCHEDULER_VIEW_H
#define STRATA_SCHEDULER_VIEW_H

struct strata__agg;

/* The phases of a run on rank 0, as the live view (engine/status.h)
 * reports them. */
typedef enum strata__phase {
  STRATA__PHASE_LOADING,  /* loading and scheduling */
  STRATA__PHASE_SHIPPING, /* sending the workers their blocks */
  STRATA__PHASE_RUNNING,  /* the passes */
  STRATA__PHASE_FINISHED,
  STRATA__PHASE_FAILED
} strata__phase;

/* Hooks the engine hands the coordinator to follow a run (the live view);
 * each is called on the coordinator's thread and must return quickly. */
typedef struct strata__view {
  /* The run enters a phase; agg: the run's aggregator (its problem loaded). */
  void (*phase)(void *ud, strata__phase phase, const struct strata__agg *agg);
  /* Pass `pass` is summed into the aggregator's result. */
  void (*summed)(void *ud, const struct strata__agg *agg, int pass);
  /* From every poll of the coordinator's waits. */
  void (*tick)(void *ud);
  void *ud;
} strata__view;

#endif
