/*
 * strata/engine.h - running an app: roles, passes, metrics.
 *
 * strata_engine_run is called on every rank with the same app, config and
 * options. In scheduled mode rank 0 becomes the coordinator and ranks 1..P
 * the workers; in serial mode one process runs the same load, schedule and
 * compute path with P = 1 and no messages.
 */
#ifndef STRATA_ENGINE_H
#define STRATA_ENGINE_H

#include <stdint.h>

#include "strata/app.h"
#include "strata/table.h"
#include "strata/transport.h"

typedef struct strata_engine_opts {
  strata_mode mode;        /* strata/app.h; 0 is STRATA_MODE_SCHEDULED. With no transport
                              (t NULL) scheduled and serial both run serially; the
                              parameter-server modes need a transport */
  int strata;              /* B; 0 = number of workers */
  int depth;               /* pipeline chunks per rotating block, >= 1 */
  int passes;              /* >= 1 */
  uint64_t seed;
  const char *metrics_out; /* JSON summary path or NULL */
  const char *model_out;   /* model directory or NULL */
  int progress;            /* log one line per pass at INFO */
  /* Parameter-server modes (zero/NULL elsewhere; strata_engine_resolve
   * fills the mode's defaults). */
  int staleness;           /* s: bsp/absp 0; ssp/essp >= 0; unused by async */
  double wpc;              /* work per clock in passes: < 1 divides a pass into
                              round(1/wpc) clocks, >= 1 (whole) spans passes */
  strata_prefetch prefetch;
  /* Stragglers and disruption, every mode. */
  int straggler_ms;        /* worker i sleeps this long at clocks i, i + P, ...
                              (scheduled mode: at passes i, i + P, ...) */
  int straggler_spin;      /* ... busy instead of asleep: it keeps its CPU
                              share, as a slow machine keeps its cores */
  double disrupt_prob;     /* each time slot, with this probability ... */
  int disrupt_slot_ms;     /* ... a thread competes for the CPU for the slot */
  /* Parameter-server modes: besides the model, score each worker's view
   * (its table cache as it stands at its pass end) and report it per pass
   * as view_objectives: what the workers' reads saw. */
  int score_view;
  /* The settings that belong to the mode alone, in its own layout
   * (strata/modes.h): sfb's --peers and --check-replicas, say.
   * strata_mode_options lists them and strata_mode_set sets one by name;
   * all zero is the mode's defaults. */
  strata_mode_settings mode_settings;

  /* Checkpoints (docs/failure.md). With checkpoint_dir, a checkpoint is
   * written there after every checkpoint_every passes (>= 1): each rank
   * writes its own part, the coordinator a manifest naming them last, and
   * the previous checkpoint is removed once the new one is complete. The
   * directory must not hold a checkpoint already, unless the run resumes
   * from it. With resume_dir, the run continues from the last complete
   * checkpoint there: its parameters, metrics and verdicts so far; it is
   * refused when the app, the mode, the number of workers, the data (size
   * and checksum of what load produced) or a setting in `settings`
   * differ, or a part is missing or damaged. A resumed scheduled or serial
   * run equals the run it continues bit for bit; passes may be raised
   * (equal to the checkpoint's passes, nothing runs and the checkpoint's
   * model is exported). Every rank must see the directories (a shared
   * file system): the coordinator reads every part when it resumes. */
  const char *checkpoint_dir;
  int checkpoint_every;
  const char *resume_dir;
  /* The settings that change a run's result, "name=value" each (a program
   * on strata_main: every option not marked STRATA_OPT_RESUMABLE), which
   * a checkpoint records and a resume compares; NULL: none. */
  const char *const *settings;
  int n_settings;
  /* Losing a rank (docs/failure.md). Every rank watches the others over
   * its own connection to the coordinator: a rank that dies (killed,
   * crashed, out of memory) is noticed at once, one that stops making
   * progress (stopped, livelocked) after stall_timeout seconds (0: the
   * default, from the pass times seen so far). Then on_lost is called
   * once, from the engine's watchdog thread, with a message naming the
   * lost rank and the pass, and with report = 1 on the one rank that
   * should print it (rank 0, or worker 0 when rank 0 is the one lost);
   * the engine then ends this process with exit code 1 at once (MPI
   * cannot be finalized with a rank gone). NULL: the process just ends.
   * Under strata_main, which catches SIGINT and SIGTERM, the same thread
   * ends a run interrupted on any rank (or in serial mode): on_lost gets "rank 0 (the coordinator) was interrupted by
   * SIGTERM during pass 4 of 20" (report = 1 on rank 0; serial mode:
   * "interrupted by SIGTERM ..."), and every rank exits with 128 + the
   * signal. */
  double stall_timeout;
  void (*on_lost)(void *ud, const char *msg, int report);
  void *on_lost_ud;
  /* Where the coordinator listens for the workers' connections of the
   * watch (docs/failure.md, "Threat model"): NULL picks 127.0.0.1 when
   * every rank runs on its host, else its address on the workers' network;
   * "any" listens on every interface; else an IPv4 address of the
   * coordinator's host ("10.0.0.5"). strata_engine_resolve refuses any
   * other text. A connection must first prove it knows a secret made for
   * the run, which only the job's ranks learn (over MPI). */
  const char *watch_address;
  /* Memory before work: after loading, the coordinator estimates what every
   * rank will hold (blocks and the engine's copies of them) and refuses,
   * before anything is shipped, a run whose ranks on one host need more
   * than it has available: mem_limit bytes if > 0, else what each host
   * measures (strata_mem_available). strata_engine_run also makes it the
   * process's limit (strata_mem_set_limit), which load's readers and
   * strata_problem_fits check their sizes against before they allocate. */
  uint64_t mem_limit;
  /* The live status (docs/cli.md, "Live status"). With status_addr
   * ("HOST:PORT", "[V6]:PORT" or ":PORT" for every address; port 0 picks
   * a free one) rank 0 serves the run over HTTP from the start of
   * strata_engine_run: /metrics (the Prometheus text format), /status.json
   * (what strata_metrics_write writes, over the passes so far, with the
   * run's phase and settings) and / (a page that draws them). An address
   * it cannot listen on fails the run before any work. The server runs on
   * a thread of its own and never holds up the run. on_status (NULL: none)
   * is called once on rank 0 with the URL. Once strata_engine_run returns,
   * its end is published and the server keeps serving until
   * strata_engine_status_close (or strata_run_result_close). argv and
   * argc: the command line /status.json shows (NULL: none). */
  const char *status_addr;
  double status_linger; /* seconds strata_engine_status_close keeps serving */
  void (*on_status)(void *ud, const char *url);
  void *on_status_ud;
  const char *const *argv;
  int argc;
  /* Round apps (strata/round.h): rounds in flight, >= 1 (0: 1). Round t is
   * scheduled from the state after round t - round_depth. */
  int round_depth;
  /* Round runs: each round's record (its latency, bytes each way, the
   * slowest worker's compute and longest wait) as a JSON line into this
   * file, written when the run ends well; NULL: none. */
  const char *round_trace;
  /* > 0: stop once the app's convergence measure is at most tol
   * (strata_app.tol; a round app's schedule_round); 0: never. */
  double tol;
} strata_engine_opts;

/* Checks the mode's settings and fills its defaults: staleness < 0 means
 * "not given"; wpc is given by the flag wpc_given, and otherwise, when > 0,
 * is the app's default for the modes that take one. A flag the mode does
 * not take is refused with a message naming the modes that take it (each
 * mode's back-end or rule says which: strata/modes.h). Also checks the
 * mode's own settings (mode_settings) and watch_address. STRATA_EUSAGE +
 * message. */
STRATA_EXPORT int strata_engine_resolve(strata_engine_opts *o, int staleness_given,
                                        int wpc_given, int prefetch_given);

/* The options of mode m's own settings (their fields in
 * strata_engine_opts.mode_settings; a table ending with {NULL}), or NULL
 * when it has none. Modes that share an owner (a back-end, or a table
 * rule) return the same table. */
STRATA_EXPORT const strata_option *strata_mode_options(strata_mode m);
/* Sets the option `name` (without "--"; a flag takes value NULL) of
 * o->mode's own settings from its text, checked as the command line checks
 * it. STRATA_EUSAGE with a message when the mode has no such option or the
 * value is refused. */
STRATA_EXPORT int strata_mode_set(strata_engine_opts *o, const char *name, const char *value);

/* The set-up the app's callbacks see in a run of app with options o
 * (resolved: strata_engine_resolve) and `workers` workers, on worker
 * `worker` (0..workers-1) or, with worker -1, on the coordinator (load,
 * schedule, export_model; also what a program hands app->check). Fills
 * every field of *out, the mode's clock rule (staleness, wpc) included. */
STRATA_EXPORT void strata_engine_setup(const strata_app *app, const strata_engine_opts *o,
                                       int workers, int worker, strata_setup *out);

/* Bytes of a mode's own figures in each worker's and pass's stats. */
#define STRATA_MODE_STATS 384
#define STRATA_MODE_PASS_STATS 32

typedef struct strata_worker_stats {
  double time_s;    /* pass wall time on that worker (processing + waits) */
  double compute_s; /* inside compute callbacks (and applying an SF app's factors) */
  double apply_s;   /* of compute_s: applying sufficient factors (strata/sf.h) */
  double wait_s;    /* blocked on incoming chunks or outgoing buffers */
  double eval_s;    /* model exchange and evaluation, outside time_s */
  double cpu_s;     /* process CPU time (all threads) over the pass and its evaluation */
  double span_s;    /* wall time over which cpu_s was taken (time_s + evaluation) */
  uint64_t bytes_sent, bytes_recv; /* block or table traffic, evaluation excluded */
  uint64_t eval_bytes;
  double delay_s;   /* injected straggler sleeps */
  int32_t clocks;   /* clocks ended (modes that count clocks: the tables, sfb) */
  /* The mode's own figures: [0] its back-end's (the tables' clock
   * differentials of their reads, sfb's factors and their delays), [1] its
   * table rule's; each in a layout of its own, which the metrics JSON
   * (strata_metrics_write) and the live status show. */
  _Alignas(8) unsigned char mode_stats[2][STRATA_MODE_STATS];
} strata_worker_stats;

typedef struct strata_pass_stats {
  int pass;                 /* 0-based, as every pass index of the C API */
  double time_s;            /* max over workers */
  double compute_s, wait_s; /* max over workers */
  double eval_s;
  uint64_t bytes_sent, bytes_recv; /* sum over workers */
  double objectives[STRATA_MAX_OBJECTIVES]; /* of the model at the pass's end: in
                              parameter-server modes the pure snapshot of the
                              table at the pass's last clock (NaN when the pass
                              ends inside a clock, --wpc > 1) */
  double control[STRATA_MAX_CONTROLS]; /* the pass's control values (app->pass_control) */
  int has_view;             /* score_view: view_objectives are set */
  double view_objectives[STRATA_MAX_OBJECTIVES]; /* the workers' views, summed as
                              the objectives are */
  /* The mode's own figures of the pass ([0] back-end, [1] table rule), as
   * in strata_worker_stats: sfb's replica drift, say. */
  _Alignas(8) unsigned char mode_stats[2][STRATA_MODE_PASS_STATS];
  int64_t rounds;           /* round runs: rounds pulled in the pass */
  double round_latency_s;   /* round runs: their mean latency */
} strata_pass_stats;

/* Round runs (strata/round.h): what the coordinator measured of its rounds.
 * A round's latency is the time from the coordinator sending its work to
 * holding every partial of it (in serial mode: the apply and push it
 * waited for); latency_hist counts them in buckets of 5% width: bucket b
 * holds [1e-6 * 1.05^b, 1e-6 * 1.05^(b+1)) seconds, the last one
 * everything longer. */
#define STRATA_ROUND_HIST 400
typedef struct strata_round_stats {
  int64_t count;           /* rounds pulled */
  int depth;               /* rounds in flight (--round-depth) */
  int converged;           /* schedule_round ended the run */
  double latency_sum_s, latency_max_s;
  uint64_t latency_hist[STRATA_ROUND_HIST];
  uint64_t bytes_out;      /* steps sent to the workers, all of them */
  uint64_t bytes_in;       /* pushes received */
  uint64_t ids_out;        /* variable ids sent, summed over workers */
  double worker_compute_s; /* summed over rounds: the slowest worker's apply and push */
  double worker_wait_s;    /* summed over rounds: the longest worker's wait for its step */
} strata_round_stats;

/* The median (q = 0.5) or another quantile of the round latencies, in
 * seconds, from the histogram (each bucket's middle); NaN with no rounds. */
STRATA_EXPORT double strata_round_latency_quantile(const strata_round_stats *s, double q);

/* Everything a run measured; filled on the coordinator (rank 0). */
typedef struct strata_run_result {
  const strata_app *app;
  const void *cfg;
  strata_mode mode;
  const strata_engine_opts *opts; /* as the run used them (defaults resolved) */
  int workers, strata, depth, passes;
  uint64_t n_examples;
  double load_s;          /* app load + schedule on the coordinator */
  double setup_s;         /* shipping blocks to workers */
  double wall_s;          /* training passes, first start to last report */
  double time_per_pass_s; /* median of pass times, passes 2..N (pass 1 if N = 1) */
  double updates_per_s;   /* n_examples / time_per_pass_s */
  double mean_pass_s;     /* max over workers of the mean of its pass times,
                             passes 2..N: the throughput view, for modes whose
                             workers' passes do not line up (SSP, stragglers) */
  double window_pass_s;   /* the same view robust to outliers: per worker, the
                             median over windows of P consecutive passes
                             (2..P+1, P+2..2P+1, ...) of their mean, max over
                             workers; mean_pass_s with fewer passes */
  double coordinator_cpu_s, coordinator_wall_s; /* whole run, loading included */
  double coordinator_train_cpu_s; /* CPU while the passes ran (over wall_s) */
  strata_pass_stats *per_pass;         /* passes entries */
  strata_worker_stats *per_pass_worker; /* passes * workers entries */
  strata_worker_stats *worker_total;   /* workers entries */
  double objectives[STRATA_MAX_OBJECTIVES]; /* of the last pass */
  strata_problem problem; /* as loaded; parameter blocks hold final values
                             when the model was exported, data is freed */
  int peers_blocked; /* the run failed and could not be ended on every rank
                        (see strata_engine_run): peers may wait for this
                        rank forever and MPI may still write into its
                        buffers, so the caller must end the job at once
                        (strata_comm_abort) before releasing the result.
                        Set on every rank; 0 after every clean end. */
  int workers_done;  /* rank 0: every worker is through with the run (it
                        sent its last message) and waits in
                        strata_engine_finish for the verdict */
  /* The mode's own facts of the run, which its back-end made before any
   * work (sfb: the partial-broadcast topology) and the metrics JSON shows;
   * NULL: none. strata_run_result_close releases it. */
  void *mode_data;
  /* Checkpoints: passes restored by --resume (0: none; per_pass and the
   * totals then hold those passes as the earlier run measured them), the
   * checkpoints this run wrote, the passes of the last one (-1: none) and
   * the bytes of its parts, and the seconds the slowest worker spent
   * writing its parts (outside every pass's time_s). */
  int resumed_passes;
  int checkpoints;
  int checkpoint_last;
  uint64_t checkpoint_bytes;
  double checkpoint_s;
  /* Why the run ended: "passes" (it ran every pass asked for), "tolerance"
   * (it converged: --tol, or a round app's schedule_round), "diverged". On a
   * stop before the last pass asked for, passes is the passes it ran. */
  const char *stop_reason;
  /* Round runs: rounds_per_pass > 0 and the rounds' figures. */
  uint64_t rounds_per_pass;
  strata_round_stats rounds;
  /* Rank 0 of a run over MPI: the connections to its watch it closed
   * because they did not prove themselves workers of this run, until
   * strata_engine_run returned (each is also logged, at most one line
   * every few seconds). */
  int watch_refused;
} strata_run_result;

/*
 * Runs app on this rank. t is the MPI transport (every mode but serial) or
 * NULL (serial mode). result (zeroed by the caller) receives the metrics on
 * rank 0, and peers_blocked on every rank; release it with
 * strata_run_result_close. Returns 0 or a negative code.
 *
 * A failure ends the run on every rank, and rank 0 reports it: an app
 * callback or the engine failing on a worker, or rank 0 failing, during
 * set-up, the passes or the export. Rank 0 returns the code with the
 * failing rank's message in strata_err_msg() ("worker 2: compute failed
 * ...": a worker's message is sent to rank 0); every worker returns the same
 * code with an empty message, its buffers released, all messages of the
 * run settled, so every rank can print (rank 0 only), call
 * strata_comm_finalize and exit with one code, with no MPI_Abort. A worker
 * that has returned 0 may still learn of a late failure in
 * strata_engine_finish, which then returns the code. The exceptions set
 * peers_blocked: a worker that did not stop within some seconds of being
 * told (one deep in a long compute), or ranks that cannot reach each other;
 * a worker then returns its own message, if any. A lost rank, and under
 * strata_main SIGINT or SIGTERM, end the process from the engine's own
 * thread instead (opts.on_lost): exit code 1, or 128 + the signal.
 */
STRATA_EXPORT int strata_engine_run(const strata_app *app, void *cfg,
                                    const strata_engine_opts *opts, strata_transport *t,
                                    strata_run_result *result);

/* Releases the result's arrays and problem, and stops a live status still
 * serving (strata_engine_status_close, without lingering). */
STRATA_EXPORT void strata_run_result_close(strata_run_result *r);

/*
 * Rank 0 of a run with a live status (opts.status_addr): publishes rc as
 * the run's end when it is an error after strata_engine_run returned 0
 * (writing the outputs failed: the phase becomes failed, with
 * strata_err_msg()), keeps serving for opts.status_linger seconds so that
 * scrapers take the final values (SIGINT or SIGTERM end the wait early),
 * then stops the server. r is the run's result, not yet closed. A no-op
 * without a live status (every worker, every run without one).
 */
STRATA_EXPORT void strata_engine_status_close(const strata_run_result *r, int rc);

/*
 * Gives every rank one verdict, so all exit alike even when rank 0 fails
 * after the passes (writing the model or metrics). Rank 0 calls it with its
 * final code once its outputs are written, when result.workers_done is set
 * (and returns rc, or the error of sending when rc is 0); a worker calls it
 * after strata_engine_run returned 0 and gets rank 0's code with an empty
 * message (rank 0 reports), also when another worker failed late and the
 * run was called off while this one waited. A worker's own failure to get
 * the verdict comes with a message. Serial mode (t NULL) returns rc
 * unchanged. Either way the run is over afterwards: a SIGINT or SIGTERM no
 * longer ends the process.
 */
STRATA_EXPORT int strata_engine_finish(strata_transport *t, int rc);

/* Writes the JSON summary atomically (temp file + rename). */
STRATA_EXPORT int strata_metrics_write(const char *path, const strata_run_result *r,
                                       const char *const *argv, int argc);

#endif
