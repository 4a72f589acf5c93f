/*
 * --disrupt prob=P,slot=MS: a thread that competes for this rank's CPU in
 * random time slots (the disruption experiments of LazyTables 5.3), and the
 * straggler's sleep.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "scheduler/protocol.h"
#include "strata/core.h"

struct strata__disrupt {
  pthread_t th;
  atomic_int stop;
  double prob, slot_s;
  strata_rng rng;
};

double strata__straggle_ms(int ms, int spin) {
  double t0 = strata_now();
  if (spin) {
    volatile double x = 1.0;
    while (strata_now() - t0 < ms / 1000.0) x = x * 1.0000001 + 1e-9;
    return strata_now() - t0;
  }
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return strata_now() - t0;
}

static void *disrupt_main(void *arg) {
  strata__disrupt *d = arg;
  while (!atomic_load(&d->stop)) {
    double end = strata_now() + d->slot_s;
    if (strata_rng_uniform(&d->rng) < d->prob) {
      /* The burst: pure CPU, as a competing process would use. */
      volatile double x = 1.0;
      while (strata_now() < end && !atomic_load(&d->stop)) x = x * 1.0000001 + 1e-9;
    } else {
      double left = end - strata_now();
      if (left > 0) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
      }
    }
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
