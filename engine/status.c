/*
 * The live view of a run (engine/status.h): libmicrohttpd in external-poll
 * mode (its epoll descriptor and timeout) driven by a libev loop on a
 * thread of its own, serving documents the coordinator renders, each once
 * for every client.
 */
#include "engine/status.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/prom.h"
#include "core/wait.h"
#include "engine/engine.h"
#include "scheduler/aggregate.h"
#include "status_page.h"
#include "strata/core.h"
#include "strata/version.h"
#include "strata_build_info.h"

static const char *const phase_names[] = {"loading", "shipping", "running", "finished", "failed"};
#define N_PHASES 5

/* A rendered document: the body of one libmicrohttpd response, which
 * every request for it is queued with. The library counts the connections
 * sending a response and frees it (and with it the document, free_doc)
 * once the last is done and the view has let go of it. */
typedef struct doc {
  size_t len;
  char text[];
} doc;

/* Bytes of every document alive: the current ones and those that slow
 * clients still hold. Written on both threads. */
static atomic_size_t g_kept;

typedef struct status {
  /* The server's thread and what only it touches. */
  int fd;
  struct MHD_Daemon *d;
  struct ev_loop *loop;
  ev_io io;
  ev_timer timer;
  ev_async stop;
  pthread_t thread;
  int running;
  /* The documents served, swapped in under mu; a request queues the
   * current one under it (which takes the library's reference). */
  pthread_mutex_t mu;
  struct MHD_Response *json, *prom;
  size_t json_bytes, prom_bytes; /* theirs (the coordinator's thread) */
  /* Fixed answers, made once. */
  struct MHD_Response *page, *not_found, *not_allowed, *unavailable;
  char url[200];
  /* The coordinator's side. */
  const strata_app *app;
  const strata_engine_opts *o;
  int workers;
  strata__phase phase;
  char msg[1024];
  double t0, cpu0, start_unix;
  const strata__agg *agg; /* the run's aggregator while it lasts */
  int done;               /* passes summed */
  int pending;            /* a change not rendered yet */
  double next_render;
  strata__view view;
} status;

static status *g_st;

static double unix_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- rendering (the coordinator's thread) ---- */

static void put_json_extra(strata_json *j, void *ud) {
  status *s = ud;
  const strata_app *app = s->app;
  strata_json_object_begin(j, "status");
  strata_json_string(j, "phase", phase_names[s->phase]);
  strata_json_string(j, "message", s->msg);
  strata_json_int(j, "passes_done", s->done);
  strata_json_int(j, "passes", s->o->passes);
  strata_json_array_begin(j, "objectives");
  for (int i = 0; i < app->n_objectives; i++)
    strata_json_string(j, NULL, app->objective_names[i]);
  strata_json_array_end(j);
  strata_json_array_begin(j, "controls");
  for (int i = 0; i < app->n_controls; i++)
    strata_json_string(j, NULL, app->control_names[i]);
  strata_json_array_end(j);
  strata_json_number(j, "elapsed_s", strata_now() - s->t0);
  strata_json_double(j, "start_unix", s->start_unix);
  strata_json_double(j, "time_unix", unix_now());
  strata_json_string(j, "url", s->url);
  strata_json_object_end(j);
  /* "name=value" each, as a checkpoint records them. */
  strata_json_object_begin(j, "settings");
  for (int i = 0; i < s->o->n_settings; i++) {
    const char *kv = s->o->settings[i], *eq = strchr(kv, '=');
    if (!eq)
      continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
    strata_json_string(j, name, eq + 1);
  }
  strata_json_object_end(j);
}

/* Prometheus' text format (core/prom.h). */
#define family strata__prom_family
#define sample strata__prom_sample
#define label_value strata__prom_label

/* A field of strata_worker_stats, as a sample value. */
typedef enum { F_DOUBLE, F_U64, F_I32 } field_kind;

static double field(const strata_worker_stats *t, size_t off, field_kind k) {
  const char *p = (const char *)t + off;
  double v = 0;
  if (k == F_DOUBLE)
    memcpy(&v, p, sizeof v);
  if (k == F_U64) {
    uint64_t u;
    memcpy(&u, p, sizeof u);
    v = (double)u;
  }
  if (k == F_I32) {
    int32_t i;
    memcpy(&i, p, sizeof i);
    v = i;
  }
  return v;
}

/* One sample per worker: a field of its totals (last < 0) or of its
 * stats in the last summed pass (NaN before the first). */
static void per_worker(FILE *f, const strata_run_result *r, int done, int last, const char *name,
                       const char *type, const char *help, size_t off, field_kind k) {
  family(f, name, type, help);
  for (int w = 0; w < r->workers; w++) {
    const strata_worker_stats *t =
        last ? (done ? &r->per_pass_worker[(size_t)(done - 1) * (size_t)r->workers + (size_t)w]
                     : NULL)
             : (r->worker_total ? &r->worker_total[w] : NULL);
    char lab[32];
    snprintf(lab, sizeof lab, "worker=\"%d\"", w);
    sample(f, name, lab, t ? field(t, off, k) : NAN);
  }
}
#define WS(m) offsetof(strata_worker_stats, m)

static void render_prom(FILE *f, const status *s, const strata_run_result *r, int done) {
  const strata_app *app = s->app;
  char lab[1024], v1[128], v2[128], v3[256];
  label_value(v1, sizeof v1, app->name);
  label_value(v2, sizeof v2, strata_mode_name(s->o->mode));
  label_value(v3, sizeof v3, STRATA_GIT_REV);
  family(f, "strata_info", "gauge",
         "the run: app, mode, strata version and git revision (always 1)");
  snprintf(lab, sizeof lab, "app=\"%s\",mode=\"%s\",version=\"%s\",git_rev=\"%s\"", v1, v2,
           STRATA_VERSION, v3);
  sample(f, "strata_info", lab, 1);
  family(f, "strata_phase", "gauge", "1 for the phase the run is in, 0 for the others");
  for (int p = 0; p < N_PHASES; p++) {
    snprintf(lab, sizeof lab, "phase=\"%s\"", phase_names[p]);
    sample(f, "strata_phase", lab, p == (int)s->phase);
  }
  family(f, "strata_start_time_seconds", "gauge",
         "when the run started, seconds since the Unix epoch");
  sample(f, "strata_start_time_seconds", NULL, s->start_unix);
  family(f, "strata_workers", "gauge", "worker ranks of the run");
  sample(f, "strata_workers", NULL, s->workers);
  family(f, "strata_passes", "gauge", "data passes the run is to make");
  sample(f, "strata_passes", NULL, s->o->passes);
  family(f, "strata_passes_completed_total", "counter", "data passes summed so far");
  sample(f, "strata_passes_completed_total", NULL, done);
  family(f, "strata_examples_total", "counter",
         "training examples processed so far (passes x examples)");
  sample(f, "strata_examples_total", NULL, (double)done * (double)r->n_examples);
  family(f, "strata_load_seconds", "gauge", "seconds the coordinator took to load and schedule");
  sample(f, "strata_load_seconds", NULL, r->load_s);
  family(f, "strata_setup_seconds", "gauge", "seconds shipping the workers their blocks");
  sample(f, "strata_setup_seconds", NULL, r->setup_s);
  family(f, "strata_training_seconds_total", "counter", "wall seconds since the passes started");
  sample(f, "strata_training_seconds_total", NULL, r->wall_s);
  family(f, "strata_pass_seconds", "gauge",
         "wall seconds of the last summed pass (the slowest worker's); NaN "
         "before the first");
  sample(f, "strata_pass_seconds", NULL, done ? r->per_pass[done - 1].time_s : NAN);
  family(f, "strata_time_per_pass_seconds", "gauge",
         "median wall seconds per pass over the passes after the first (the "
         "first alone while it is the only one)");
  sample(f, "strata_time_per_pass_seconds", NULL, done ? r->time_per_pass_s : NAN);
  family(f, "strata_examples_per_second", "gauge", "examples / strata_time_per_pass_seconds");
  sample(f, "strata_examples_per_second", NULL, done ? r->updates_per_s : NAN);
  family(f, "strata_objective", "gauge",
         "the app's objectives after the last summed pass (NaN: not scored)");
  for (int i = 0; i < app->n_objectives; i++) {
    label_value(v1, sizeof v1, app->objective_names[i]);
    snprintf(lab, sizeof lab, "name=\"%s\"", v1);
    sample(f, "strata_objective", lab, done ? r->per_pass[done - 1].objectives[i] : NAN);
  }
  if (app->n_controls) {
    family(f, "strata_control", "gauge",
           "the app's control values (a learning rate, say) of the last summed "
           "pass");
    for (int i = 0; i < app->n_controls; i++) {
      label_value(v1, sizeof v1, app->control_names[i]);
      snprintf(lab, sizeof lab, "name=\"%s\"", v1);
      sample(f, "strata_control", lab, done ? r->per_pass[done - 1].control[i] : NAN);
    }
  }
  uint64_t sent = 0, recv = 0, evalb = 0;
  for (int w = 0; w < r->workers && r->worker_total; w++) {
    const strata_worker_stats *t = &r->worker_total[w];
    sent += t->bytes_sent;
    recv += t->bytes_recv;
    evalb += t->eval_bytes;
  }
  family(f, "strata_bytes_sent_total", "counter",
         "bytes the workers sent: rotating blocks, table traffic or factors "
         "(evaluation excluded)");
  sample(f, "strata_bytes_sent_total", NULL, (double)sent);
  family(f, "strata_bytes_received_total", "counter",
         "bytes the workers received (evaluation excluded)");
  sample(f, "strata_bytes_received_total", NULL, (double)recv);
  family(f, "strata_eval_bytes_total", "counter", "bytes the workers moved to evaluate the model");
  sample(f, "strata_eval_bytes_total", NULL, (double)evalb);
  family(f, "strata_coordinator_cpu_seconds_total", "counter",
         "CPU seconds of the coordinator process");
  sample(f, "strata_coordinator_cpu_seconds_total", NULL, r->coordinator_cpu_s);
  per_worker(f, r, done, 0, "strata_worker_pass_seconds_total", "counter",
             "wall seconds of the worker's passes", WS(time_s), F_DOUBLE);
  per_worker(f, r, done, 0, "strata_worker_compute_seconds_total", "counter",
             "seconds inside the app's compute (and applying factors)", WS(compute_s), F_DOUBLE);
  per_worker(f, r, done, 0, "strata_worker_wait_seconds_total", "counter",
             "seconds blocked on incoming blocks, rows or factors, or on "
             "outgoing buffers",
             WS(wait_s), F_DOUBLE);
  per_worker(f, r, done, 0, "strata_worker_eval_seconds_total", "counter",
             "seconds exchanging and scoring the model (outside the pass times)", WS(eval_s),
             F_DOUBLE);
  per_worker(f, r, done, 0, "strata_worker_cpu_seconds_total", "counter",
             "CPU seconds of the worker process", WS(cpu_s), F_DOUBLE);
  per_worker(f, r, done, 0, "strata_worker_delay_seconds_total", "counter",
             "injected straggler sleep (--straggler)", WS(delay_s), F_DOUBLE);
  per_worker(f, r, done, 0, "strata_worker_bytes_sent_total", "counter",
             "bytes the worker sent (evaluation excluded)", WS(bytes_sent), F_U64);
  per_worker(f, r, done, 0, "strata_worker_bytes_received_total", "counter",
             "bytes the worker received (evaluation excluded)", WS(bytes_recv), F_U64);
  per_worker(f, r, done, 1, "strata_worker_last_pass_seconds", "gauge",
             "the worker's wall seconds in the last summed pass", WS(time_s), F_DOUBLE);
  per_worker(f, r, done, 1, "strata_worker_last_pass_wait_seconds", "gauge",
             "the worker's seconds waiting in the last summed pass", WS(wait_s), F_DOUBLE);
  strata__facts facts;
  if (!strata__mode_facts(s->o->mode, s->o, r->workers, &facts)) {
    if (facts.counts_clocks)
      per_worker(f, r, done, 0, "strata_worker_clocks_total", "counter", "clocks the worker ended",
                 WS(clocks), F_I32);
    /* The mode's own families: histograms of its reads' or factors' ages. */
    strata__facts_status(&facts, f, r, done);
  }
}

static void free_doc(void *cls) {
  doc *d = cls;
  atomic_fetch_sub(&g_kept, sizeof *d + d->len);
  strata_free(d);
}

/* A response of type `type` whose body is what put writes; NULL when out
 * of memory. */
static struct MHD_Response *render_to_response(void (*put)(FILE *f, void *ud), void *ud,
                                               const char *type, size_t *bytes) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  put(f, ud);
  doc *d = NULL;
  if (fclose(f) == 0 && buf && (d = strata_malloc(sizeof *d + len + 1))) {
    /* Counted by strata's allocator, as all of the engine's memory. */
    d->len = len;
    memcpy(d->text, buf, len + 1);
    atomic_fetch_add(&g_kept, sizeof *d + len);
  }
  free(buf);
  if (!d)
    return NULL;
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback_cls(d->len, d->text, free_doc, d);
  if (!resp) {
    free_doc(d);
    return NULL;
  }
  if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES ||
      MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES) {
    MHD_destroy_response(resp);
    return NULL;
  }
  *bytes = sizeof *d + d->len;
  return resp;
}

typedef struct render_args {
  status *s;
  const strata_run_result *r;
  int done;
} render_args;

static void put_json(FILE *f, void *ud) {
  render_args *a = ud;
  const strata_engine_opts *o = a->s->o;
  strata__metrics_render(f, a->r, a->done, o->argv, o->argc, a->r->cfg && a->r->problem.n_data > 0,
                         put_json_extra, a->s);
  fputc('\n', f);
}

static void put_prom(FILE *f, void *ud) {
  render_args *a = ud;
  render_prom(f, a->s, a->r, a->done);
}

/* A result for the time before the aggregator has one. */
static void bare_result(const status *s, strata_run_result *r) {
  memset(r, 0, sizeof *r);
  r->app = s->app;
  r->mode = s->o->mode;
  r->opts = s->o;
  r->workers = s->workers;
  r->passes = s->o->passes;
  r->depth = s->o->depth;
}

#define JSON_TYPE "application/json"
#define PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Renders both documents from r's first `done` passes and swaps them in. */
static void publish(status *s, const strata_run_result *r, int done) {
  double t = strata_now();
  render_args a = {s, r, done};
  size_t jb = 0, pb = 0;
  struct MHD_Response *j = render_to_response(put_json, &a, JSON_TYPE, &jb);
  struct MHD_Response *p = render_to_response(put_prom, &a, PROM_TYPE, &pb);
  /* Out of memory: the documents before stay. */
  struct MHD_Response *oj = NULL, *op = NULL;
  pthread_mutex_lock(&s->mu);
  if (j)
    oj = s->json, s->json = j;
  if (p)
    op = s->prom, s->prom = p;
  pthread_mutex_unlock(&s->mu);
  /* Clients still sending them keep them until they are done. */
  if (oj)
    MHD_destroy_response(oj);
  if (op)
    MHD_destroy_response(op);
  if (j)
    s->json_bytes = jb;
  if (p)
    s->prom_bytes = pb;
  double now = strata_now(), cost = now - t;
  s->next_render = now + fmax(STRATA__STATUS_MIN_GAP, cost / STRATA__STATUS_SHARE);
  s->pending = 0;
}

/* The run as the aggregator has it now. */
static void publish_now(status *s) {
  strata_run_result r;
  if (s->agg)
    strata__agg_snapshot(s->agg, s->done, &r);
  else
    bare_result(s, &r);
  r.coordinator_cpu_s = strata_cpu_seconds() - s->cpu0;
  r.coordinator_wall_s = strata_now() - s->t0;
  publish(s, &r, s->agg ? s->done : 0);
}

static void on_phase(void *ud, strata__phase phase, const strata__agg *agg) {
  status *s = ud;
  s->phase = phase;
  s->agg = agg;
  publish_now(s);
}

/* Whether a summed pass may be rendered now: paced, and not while the
 * documents that slow clients still hold (older than the current ones)
 * take more than STRATA__STATUS_KEEP bytes, so that clients who do not
 * read cannot make the view keep a version per render. */
static int may_render(const status *s) {
  size_t kept = atomic_load(&g_kept), cur = s->json_bytes + s->prom_bytes;
  return strata_now() >= s->next_render && (kept <= cur || kept - cur <= STRATA__STATUS_KEEP);
}

static void on_summed(void *ud, const strata__agg *agg, int pass) {
  status *s = ud;
  s->agg = agg;
  s->done = pass + 1;
  s->pending = 1;
  if (may_render(s))
    publish_now(s);
}

static void on_tick(void *ud) {
  status *s = ud;
  if (s->pending && may_render(s))
    publish_now(s);
}

/* ---- serving (the server's thread) ---- */

/* The current document of *which (503 before there is one: out of memory
 * at the first render). Queued under the lock, so that the coordinator
 * cannot let go of the response before the library holds it for this
 * connection; a HEAD request gets the same answer, the headers only. */
static enum MHD_Result serve_doc(status *s, struct MHD_Connection *conn,
                                 struct MHD_Response *const *which) {
  pthread_mutex_lock(&s->mu);
  enum MHD_Result ret = *which ? MHD_queue_response(conn, MHD_HTTP_OK, *which)
                               : MHD_queue_response(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                                                    s->unavailable);
  pthread_mutex_unlock(&s->mu);
  return ret;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req_cls) {
  status *s = cls;
  (void)version;
  (void)upload;
  (void)upload_size;
  (void)req_cls;
  int head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (!head && strcmp(method, MHD_HTTP_METHOD_GET) != 0)
    return MHD_queue_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, s->not_allowed);
  if (strcmp(url, "/metrics") == 0)
    return serve_doc(s, conn, &s->prom);
  if (strcmp(url, "/status.json") == 0)
    return serve_doc(s, conn, &s->json);
  if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
    return MHD_queue_response(conn, MHD_HTTP_OK, s->page);
  return MHD_queue_response(conn, MHD_HTTP_NOT_FOUND, s->not_found);
}

/* After every run of the daemon: wake again when it has timeouts due. */
static void rearm(status *s) {
  MHD_UNSIGNED_LONG_LONG ms = 0;
  ev_timer_stop(s->loop, &s->timer);
  if (MHD_get_timeout(s->d, &ms) == MHD_YES) {
    ev_timer_set(&s->timer, (double)ms / 1000.0, 0.0);
    ev_timer_start(s->loop, &s->timer);
  }
}

/* A connection is ready (the epoll descriptor) or a timeout is due. */
static void run_daemon(status *s) {
  MHD_run(s->d);
  rearm(s);
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  (void)revents;
  run_daemon(w->data);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  run_daemon(w->data);
}

static void on_stop(struct ev_loop *loop, ev_async *w, int revents) {
  (void)w;
  (void)revents;
  ev_break(loop, EVBREAK_ALL);
}

static void *serve(void *arg) {
  status *s = arg;
  /* Signals are the main thread's (its waits end on SIGINT and SIGTERM). */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  rearm(s);
  ev_run(s->loop, 0);
  return NULL;
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" into host (empty: any) and port. */
static int split_addr(const char *addr, char *host, size_t n, char *port, size_t pn) {
  const char *colon = strrchr(addr, ':');
  if (!colon || !colon[1] || strlen(colon + 1) >= pn)
    return -1;
  size_t hl = (size_t)(colon - addr);
  const char *h = addr;
  if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']')
    h++, hl -= 2;
  else if (memchr(addr, ':', hl))
    return -1; /* an IPv6 address needs brackets */
  if (hl >= n)
    return -1;
  memcpy(host, h, hl);
  host[hl] = '\0';
  for (const char *p = colon + 1; *p; p++)
    if (*p < '0' || *p > '9')
      return -1;
  if (atol(colon + 1) > 65535)
    return -1;
  snprintf(port, pn, "%s", colon + 1);
  return 0;
}

/* The listening socket, bound; its URL in s->url. */
static int listen_on(status *s, const char *addr) {
  char host[256], port[16];
  if (split_addr(addr, host, sizeof host, port, sizeof port))
    return strata_err_set(STRATA_EUSAGE,
                          "--status %s: expected HOST:PORT (port 0 picks a free one)", addr);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int g = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
  if (g)
    return strata_err_set(STRATA_EUSAGE, "--status %s: %s", addr, gai_strerror(g));
  int fd = -1;
  errno = 0;
  for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
      continue;
    int one = 1;
    /* A port in TIME_WAIT from an earlier run can be taken again; one
     * another process listens on cannot. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* A long queue: a burst of connections waits to be accepted (or
     * refused at the limits) rather than having its SYNs dropped. */
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN)) {
      int e = errno;
      close(fd);
      fd = -1;
      errno = e;
    }
  }
  int err = errno;
  freeaddrinfo(res);
  if (fd < 0)
    return strata_err_set(STRATA_EIO, "--status %s: cannot listen: %s", addr, strerror(err));
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char name[160] = "127.0.0.1";
  int bound_port = 0;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
    if (ss.ss_family == AF_INET6) {
      struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
      bound_port = ntohs(a6->sin6_port);
      if (!IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr))
        inet_ntop(AF_INET6, &a6->sin6_addr, name, sizeof name);
      else
        snprintf(name, sizeof name, "::1");
    } else {
      struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
      bound_port = ntohs(a4->sin_port);
      if (a4->sin_addr.s_addr != htonl(INADDR_ANY))
        inet_ntop(AF_INET, &a4->sin_addr, name, sizeof name);
    }
  }
  /* Listening on every address: the URL names this host's own. */
  char hostname[128] = "";
  if ((!host[0] || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) &&
      gethostname(hostname, sizeof hostname) == 0 && hostname[0])
    snprintf(name, sizeof name, "%s", hostname);
  snprintf(s->url, sizeof s->url, strchr(name, ':') ? "http://[%s]:%d/" : "http://%s:%d/", name,
           bound_port);
  s->fd = fd;
  return 0;
}

static void status_free(status *s) {
  /* The daemon first: it lets go of the responses its connections hold. */
  if (s->d)
    MHD_stop_daemon(s->d);
  if (s->fd >= 0)
    close(s->fd);
  if (s->loop)
    ev_loop_destroy(s->loop);
  pthread_mutex_destroy(&s->mu);
  struct MHD_Response *all[] = {s->json,      s->prom,        s->page,
                                s->not_found, s->not_allowed, s->unavailable};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i])
      MHD_destroy_response(all[i]);
  strata_free(s);
}

/* A fixed answer: text (static) of type `type`; NULL when out of memory. */
static struct MHD_Response *fixed(const char *text, size_t len, const char *type) {
  /* PERSISTENT: the library neither copies nor frees the text. */
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
  if (r && (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES ||
            MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES)) {
    MHD_destroy_response(r);
    r = NULL;
  }
  return r;
}

static int make_fixed(status *s) {
  static const char nf[] = "404 not found: try /, /metrics or /status.json\n";
  static const char na[] = "405 method not allowed: only GET and HEAD\n";
  static const char un[] = "503 not rendered: out of memory\n";
  static const char text[] = "text/plain; charset=utf-8";
  s->page = fixed(strata__status_page, sizeof strata__status_page - 1, "text/html; charset=utf-8");
  s->not_found = fixed(nf, sizeof nf - 1, text);
  s->not_allowed = fixed(na, sizeof na - 1, text);
  s->unavailable = fixed(un, sizeof un - 1, text);
  if (s->not_allowed &&
      MHD_add_response_header(s->not_allowed, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") != MHD_YES) {
    MHD_destroy_response(s->not_allowed);
    s->not_allowed = NULL;
  }
  return s->page && s->not_found && s->not_allowed && s->unavailable ? 0 : -1;
}

/* Connections at once: STRATA__STATUS_CONNS, but at most half of the
 * process's descriptors (the run's own come first: MPI, the liveness
 * watch, its files). */
static unsigned conn_limit(void) {
  struct rlimit rl;
  unsigned n = STRATA__STATUS_CONNS;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < n)
    n = rl.rlim_cur / 2 < 16 ? 16 : (unsigned)(rl.rlim_cur / 2);
  return n;
}

int strata__status_open(const char *addr, const strata_app *app, const strata_engine_opts *o,
                        int workers) {
  if (g_st)
    return strata_err_set(STRATA_EINVAL, "--status: a live status is running already");
  status *s = strata_calloc(1, sizeof *s);
  if (!s)
    return strata_err_set(STRATA_ENOMEM, "--status: out of memory");
  s->fd = -1;
  pthread_mutex_init(&s->mu, NULL);
  s->app = app;
  s->o = o;
  s->workers = workers;
  s->t0 = strata_now();
  s->cpu0 = strata_cpu_seconds();
  s->start_unix = unix_now();
  s->view = (strata__view){on_phase, on_summed, on_tick, s};
  int rc = make_fixed(s) ? strata_err_set(STRATA_ENOMEM, "--status: out of memory") : 0;
  if (!rc)
    rc = listen_on(s, addr);
  if (!rc) {
    /* MHD_USE_EPOLL without an internal thread: one descriptor to watch,
     * MHD_run when it is readable or a timeout is due. The limits bound
     * what clients can hold (engine/status.h). */
    unsigned conns = conn_limit();
    s->d = MHD_start_daemon(
        MHD_USE_EPOLL, 0, NULL, NULL, answer, s, MHD_OPTION_LISTEN_SOCKET, s->fd,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)STRATA__STATUS_TIMEOUT,
        MHD_OPTION_CONNECTION_LIMIT, conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT, conns / 2,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)STRATA__STATUS_CONN_MEMORY, MHD_OPTION_END);
    if (!s->d)
      rc = strata_err_set(STRATA_EIO, "--status %s: the HTTP server did not start", addr);
  }
  if (!rc) {
    s->fd = -1; /* the daemon's now */
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
    s->loop = ev_loop_new(EVFLAG_AUTO);
    if (!info || !s->loop)
      rc = strata_err_set(STRATA_EIO, "--status %s: no event loop", addr);
    else {
      ev_io_init(&s->io, on_io, info->epoll_fd, EV_READ);
      s->io.data = s;
      ev_timer_init(&s->timer, on_timer, 0.0, 0.0);
      s->timer.data = s;
      ev_async_init(&s->stop, on_stop);
      ev_io_start(s->loop, &s->io);
      ev_async_start(s->loop, &s->stop);
    }
  }
  if (!rc) {
    publish_now(s);
    if (pthread_create(&s->thread, NULL, serve, s))
      rc = strata_err_set(STRATA_EIO, "--status: no thread");
    else
      s->running = 1;
  }
  if (rc) {
    status_free(s);
    return rc;
  }
  g_st = s;
  return 0;
}

const char *strata__status_url(void) { return g_st ? g_st->url : ""; }

const strata__view *strata__status_view(void) { return g_st ? &g_st->view : NULL; }

void strata__status_end(const strata_run_result *r, int rc) {
  status *s = g_st;
  if (!s)
    return;
  s->agg = NULL; /* it is gone with the run */
  if (rc && s->phase == STRATA__PHASE_FAILED)
    return;
  if (rc) {
    s->phase = STRATA__PHASE_FAILED;
    snprintf(s->msg, sizeof s->msg, "%s",
             strata_err_msg()[0] ? strata_err_msg() : strata_strerror(rc));
  } else {
    s->phase = STRATA__PHASE_FINISHED;
    s->msg[0] = '\0';
    s->done = r->passes;
  }
  if (r->app && r->per_pass) {
    publish(s, r, s->done);
  } else {
    strata_run_result bare;
    bare_result(s, &bare);
    publish(s, &bare, 0);
  }
}

double strata__status_linger(void) { return g_st ? g_st->o->status_linger : 0; }

static int poll_never(void *ctx, int *done, int *progressed) {
  (void)ctx;
  *done = 0;
  *progressed = 0;
  return 0;
}

void strata__status_close(double linger) {
  status *s = g_st;
  if (!s)
    return;
  if (linger > 0) {
    strata__wait_conf wc = {
        .ceiling = 0.05, .until = strata_now() + linger, .signals = 1, .who = "--status-linger"};
    int rc = strata__wait(poll_never, NULL, &wc);
    if (rc)
      strata_err_clear(); /* a signal ends the linger, not the run */
  }
  if (s->running) {
    ev_async_send(s->loop, &s->stop);
    pthread_join(s->thread, NULL);
  }
  g_st = NULL;
  status_free(s);
}
