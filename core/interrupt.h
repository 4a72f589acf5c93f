/*
 * core/interrupt.h - SIGINT and SIGTERM, caught in one place (internal to
 * libstrata).
 *
 * A program that calls strata__interrupt_catch (the CLI driver, before
 * MPI_Init) has SIGINT and SIGTERM caught by a handler that does two
 * async-signal-safe things: it notes the first signal, and writes a byte to
 * a pipe. The handler may run on any thread: Open MPI's and OpenBLAS's
 * threads start before a signal mask of ours could reach them, so blocking
 * the signals everywhere cannot be relied on, and nothing here depends on
 * which thread takes them. One thread acts: the liveness watch
 * (comm/live.h), which every run has from the start of strata_engine_run
 * (serial runs too), reads the pipe in its event loop and ends the run on
 * every rank with one message and exit code 128 + the signal. Before a
 * watch starts the signal is only noted, and the watch acts on it as soon
 * as it starts; after it has stopped (the run is over: its verdict given)
 * the signal is only noted, and the wait of --status-linger polls it.
 *
 * A SIGINT ignored when the program starts (a background job of a
 * non-interactive shell, nohup) stays ignored, as the shell meant.
 */
#ifndef STRATA_CORE_INTERRUPT_H
#define STRATA_CORE_INTERRUPT_H

/* Installs the handler for SIGINT and SIGTERM. Call once, from the main
 * thread, before any thread starts. Returns 0 or STRATA_EIO (no pipe). */
int strata__interrupt_catch(void);
/* The pipe's read end (non-blocking, close-on-exec): readable once a
 * signal was caught. -1 when not catching. */
int strata__interrupt_fd(void);
/* The first signal caught (SIGINT or SIGTERM); 0 when none. Thread-safe. */
int strata__interrupt_signal(void);
/* Gives SIGINT and SIGTERM their default action again (a run whose watch
 * could not start: nothing would act on them); a signal already caught is
 * raised again, so the process ends as the default action would end it. */
void strata__interrupt_release(void);
/* "SIGINT", "SIGTERM", "signal N". */
const char *strata__interrupt_name(int sig);
/* The exit code of a process interrupted by sig: 128 + sig, as a shell
 * reports a process that a signal ended (130 for SIGINT, 143 for SIGTERM). */
static inline int strata__interrupt_code(int sig) { return 128 + sig; }

#endif
