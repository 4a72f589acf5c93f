/*
 * --disrupt prob=P,slot=MS: a thread that competes for this rank's CPU in
 * random time slots (the disruption experiments of LazyTables 5.3), and the
 * straggler's delay on the ring (parameter-server modes serve their shard
 * through it instead: strata_table_serve_for).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "worker/worker.h"
#include "strata/core.h"

struct strata__disrupt {
  pthread_t th;
  atomic_int stop;
  double prob, slot_s;
  strata_rng rng;
};

/* Pure CPU until `end` (or *stop), as a competing process would use. */
static void burn_until(double end, atomic_int *stop) {
  volatile double x = 1.0;
  while (strata_now() < end && !(stop && atomic_load(stop))) x = x * 1.0000001 + 1e-9;
}

/* Sleeps until `end`, through interruptions. */
static void sleep_until(double end) {
  for (double left; (left = end - strata_now()) > 0;) {
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

double strata__straggle_ms(int ms, int spin) {
  double t0 = strata_now();
  if (spin) burn_until(t0 + ms / 1000.0, NULL);
  else sleep_until(t0 + ms / 1000.0);
  return strata_now() - t0;
}

static void *disrupt_main(void *arg) {
  strata__disrupt *d = arg;
  while (!atomic_load(&d->stop)) {
    double end = strata_now() + d->slot_s;
    if (strata_rng_uniform(&d->rng) < d->prob) burn_until(end, &d->stop);
    else sleep_until(end);
  }
  return NULL;
}

int strata__disrupt_start(double prob, int slot_ms, uint64_t seed, strata__disrupt **out) {
  *out = NULL;
  strata__disrupt *d = strata_calloc(1, sizeof *d);
  if (!d) return strata_err_set(STRATA_ENOMEM, "out of memory for --disrupt");
  d->prob = prob;
  d->slot_s = slot_ms / 1000.0;
  atomic_init(&d->stop, 0);
  strata_rng_seed(&d->rng, seed);
  if (pthread_create(&d->th, NULL, disrupt_main, d) != 0) {
    strata_free(d);
    return strata_err_set(STRATA_EINVAL, "--disrupt: cannot start its thread");
  }
  *out = d;
  return 0;
}

void strata__disrupt_stop(strata__disrupt *d) {
  if (!d) return;
  atomic_store(&d->stop, 1);
  pthread_join(d->th, NULL);
  strata_free(d);
}
