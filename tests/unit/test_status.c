/*
 * Unit tests for the live status (engine/status.c), in process: the view
 * is opened on 127.0.0.1:0 and fed by an aggregator the test drives, as
 * the coordinator would; a small HTTP client reads what it serves. The
 * documents render the aggregator's state (Prometheus text, the metrics
 * JSON), the fixed answers keep their codes and headers, and a client that
 * does not read keeps the version it asked for while later clients get
 * the next one; every document is freed once its last client is done. A
 * table mode's run renders its mode's own families and sections (the
 * clock differentials, vap's in-transit histogram), from the figures the
 * back-end and the rule report in their own layouts.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "engine/status.h"
#include "leakcheck.h"
#include "scheduler/aggregate.h"
#include "strata/version.h"
#include "strata_build_info.h"

/* ---- an app of two SUM partials, each its own objective, and a rate ---- */

static const strata_reduce p_ops[2] = {STRATA_REDUCE_SUM, STRATA_REDUCE_SUM};
static const char *const p_objectives[2] = {"loss", "acc"};
static const char *const p_controls[1] = {"lr"};

static void p_objective_values(const void *cfg, const strata_problem *p, const double *partials,
                               double *values) {
  (void)cfg, (void)p;
  values[0] = partials[0];
  values[1] = partials[1];
}

/* A quarter more each pass: exact in binary, so the text is exact too. */
static void p_pass_control(const void *cfg, const strata_problem *prob, int pass,
                           const double *objectives, int known, const double *prev, double *ctl) {
  (void)cfg, (void)prob, (void)objectives, (void)known, (void)prev;
  ctl[0] = 0.25 * (pass + 1);
}

static const strata_app p_app = {.name = "probe",
                                 .n_partials = 2,
                                 .partial_reduce = p_ops,
                                 .n_objectives = 2,
                                 .objective_names = p_objectives,
                                 .n_controls = 1,
                                 .control_names = p_controls,
                                 .pass_control = p_pass_control,
                                 .objectives = p_objective_values};

enum { P = 2 };
static const char *const settings[] = {"rank=7"};

/* The view on a free port and an aggregator of `passes` passes that tells
 * it of each summed pass. */
typedef struct fixture {
  strata_engine_opts o;
  strata_problem prob;
  strata_run_result r;
  strata__agg agg;
  int port;
} fixture;

static void open_run(fixture *f, int passes) {
  memset(f, 0, sizeof *f);
  f->o = (strata_engine_opts){.mode = STRATA_MODE_SCHEDULED, .passes = passes, .depth = 1,
                              .settings = settings, .n_settings = 1};
  assert_int_equal(strata__status_open("127.0.0.1:0", &p_app, &f->o, P), 0);
  const char *url = strata__status_url();
  assert_int_equal(strncmp(url, "http://127.0.0.1:", 17), 0);
  f->port = atoi(url + 17);
  assert_true(f->port > 0);
  f->prob.n_examples = 10;
  f->agg = (strata__agg){.app = &p_app, .opts = &f->o,
                         .setup = {.workers = P, .strata = P, .depth = 1, .passes = passes,
                                   .worker = -1},
                         .prob = &f->prob, .res = &f->r, .lag = 1, .view = strata__status_view()};
  assert_int_equal(strata__agg_open(&f->agg), 0);
  const strata__view *v = strata__status_view();
  v->phase(v->ud, STRATA__PHASE_RUNNING, &f->agg);
  strata__agg_start(&f->agg);
  assert_int_equal(strata__agg_decide_first(&f->agg), 0);
}

/* Pass `pass` from every worker: worker w took 1 + w seconds and sent
 * 100 (w + 1) bytes; partials pass + 1 and 0.5 each. */
static void sum_pass(fixture *f, int pass) {
  for (int w = 0; w < P; w++) {
    pass_report rep;
    strata__report_begin(&rep, pass, w);
    rep.stats.time_s = 1 + w;
    rep.stats.bytes_sent = 100 * (uint64_t)(w + 1);
    rep.partials[0] = pass + 1;
    rep.partials[1] = 0.5;
    assert_int_equal(strata__agg_report(&f->agg, &rep), 0);
  }
}

/* Summed passes render paced; a phase renders at once. */
static void render_now(fixture *f) {
  const strata__view *v = strata__status_view();
  v->phase(v->ud, STRATA__PHASE_RUNNING, &f->agg);
}

static void close_run(fixture *f) {
  strata__status_close(0);
  strata__agg_close(&f->agg);
  strata_run_result_close(&f->r);
}

/* ---- a small HTTP client ---- */

typedef struct reply {
  int code;
  char *head; /* status line and headers */
  char *body;
  size_t body_len;
  char *all;
} reply;

static int connect_to(int port, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  if (rcvbuf)
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  return fd;
}

static void send_request(int fd, const char *method, const char *path) {
  char req[256];
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                   method, path);
  assert_int_equal(send(fd, req, (size_t)n, 0), n);
}

/* Everything until the server closes, split into head and body. */
static void read_reply(int fd, reply *out) {
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  assert_non_null(buf);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
      assert_non_null(buf);
    }
    ssize_t got = recv(fd, buf + len, cap - len, 0);
    assert_true(got >= 0);
    if (got == 0)
      break;
    len += (size_t)got;
  }
  close(fd);
  buf[len] = '\0';
  char *end = strstr(buf, "\r\n\r\n");
  assert_non_null(end);
  *end = '\0';
  out->all = buf;
  out->head = buf;
  out->body = end + 4;
  out->body_len = len - (size_t)(out->body - buf);
  assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &out->code), 1);
}

static void http(int port, const char *method, const char *path, reply *out) {
  int fd = connect_to(port, 0);
  send_request(fd, method, path);
  read_reply(fd, out);
}

/* A header's value ("" when absent). */
static const char *header(const reply *r, const char *name, char *out, size_t n) {
  out[0] = '\0';
  for (const char *p = strstr(r->head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
    size_t k = strlen(name);
    if (strncasecmp(p + 2, name, k) == 0 && p[2 + k] == ':') {
      const char *v = p + 3 + k;
      while (*v == ' ')
        v++;
      size_t m = strcspn(v, "\r");
      snprintf(out, n, "%.*s", (int)(m < n ? m : n - 1), v);
      break;
    }
  }
  return out;
}

static void expect_line(const reply *r, const char *line) {
  char want[256];
  snprintf(want, sizeof want, "\n%s\n", line);
  if (!strstr(r->body, want))
    fail_msg("no line '%s' in:\n%s", line, r->body);
}

static int passes_done(const reply *r) {
  const char *p = strstr(r->body, "\"passes_done\": ");
  assert_non_null(p);
  return atoi(p + strlen("\"passes_done\": "));
}

/* ---- tests ---- */

/* /metrics and /status.json render the aggregator's passes; HEAD, 404 and
 * 405 answer as documented; the end of the run is rendered at once. */
static void test_status_renders_the_run(void **state) {
  (void)state;
  fixture f;
  open_run(&f, 3);
  sum_pass(&f, 0);
  sum_pass(&f, 1);
  render_now(&f);
  reply m, j, h, nf, na, page;
  http(f.port, "GET", "/metrics", &m);
  assert_int_equal(m.code, 200);
  char v[128];
  assert_string_equal(header(&m, "Content-Type", v, sizeof v),
                      "text/plain; version=0.0.4; charset=utf-8");
  assert_string_equal(header(&m, "Cache-Control", v, sizeof v), "no-store");
  expect_line(&m, "strata_info{app=\"probe\",mode=\"scheduled\",version=\"" STRATA_VERSION
                  "\",git_rev=\"" STRATA_GIT_REV "\"} 1");
  expect_line(&m, "strata_phase{phase=\"running\"} 1");
  expect_line(&m, "strata_workers 2");
  expect_line(&m, "strata_passes 3");
  expect_line(&m, "strata_passes_completed_total 2");
  expect_line(&m, "strata_examples_total 20");
  expect_line(&m, "strata_pass_seconds 2");
  expect_line(&m, "strata_objective{name=\"loss\"} 4"); /* pass 2: 2 + 2 */
  expect_line(&m, "strata_objective{name=\"acc\"} 1");
  expect_line(&m, "strata_control{name=\"lr\"} 0.5");
  expect_line(&m, "strata_bytes_sent_total 600");
  expect_line(&m, "strata_worker_pass_seconds_total{worker=\"1\"} 4");
  expect_line(&m, "strata_worker_last_pass_seconds{worker=\"0\"} 1");

  http(f.port, "GET", "/status.json", &j);
  assert_int_equal(j.code, 200);
  assert_string_equal(header(&j, "Content-Type", v, sizeof v), "application/json");
  assert_int_equal(passes_done(&j), 2);
  assert_non_null(strstr(j.body, "\"phase\": \"running\""));
  assert_non_null(strstr(j.body, "\"rank\": \"7\""));
  assert_non_null(strstr(j.body, "\"per_pass\": ["));

  http(f.port, "HEAD", "/metrics", &h);
  assert_int_equal(h.code, 200);
  assert_int_equal(h.body_len, 0);
  char len[32];
  snprintf(len, sizeof len, "%zu", m.body_len);
  assert_string_equal(header(&h, "Content-Length", v, sizeof v), len);

  http(f.port, "GET", "/nope", &nf);
  assert_int_equal(nf.code, 404);
  assert_non_null(strstr(nf.body, "try /, /metrics or /status.json"));
  http(f.port, "POST", "/metrics", &na);
  assert_int_equal(na.code, 405);
  assert_string_equal(header(&na, "Allow", v, sizeof v), "GET, HEAD");
  http(f.port, "GET", "/", &page);
  assert_int_equal(page.code, 200);
  assert_string_equal(header(&page, "Content-Type", v, sizeof v), "text/html; charset=utf-8");
  assert_non_null(strstr(page.body, "status.json"));

  sum_pass(&f, 2);
  assert_int_equal(strata__agg_finish(&f.agg), 0);
  strata__status_end(&f.r, 0);
  reply fin;
  http(f.port, "GET", "/status.json", &fin);
  assert_non_null(strstr(fin.body, "\"phase\": \"finished\""));
  assert_int_equal(passes_done(&fin), 3);
  close_run(&f);
  reply *all[] = {&m, &j, &h, &nf, &na, &page, &fin};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    free(all[i]->all);
}

/* Clients that ask for /status.json and do not read share one copy of the
 * version they asked for (strata's allocator counts no more for twenty of
 * them), and gets it whole while the next render serves later clients,
 * or hangs up halfway; closing the view frees every version (the
 * teardown's count).
 * The document is larger than the socket buffers take, so the server must
 * keep it. */
static void test_status_slow_client_keeps_its_version(void **state) {
  (void)state;
  enum { DONE = 3000 };
  fixture f;
  open_run(&f, DONE + 10);
  for (int p = 0; p < DONE; p++)
    sum_pass(&f, p);
  render_now(&f);
  enum { SLOW = 20 };
  int slow[SLOW];
  size_t before = strata_alloc_live();
  for (int i = 0; i < SLOW; i++) {
    slow[i] = connect_to(f.port, 4096);
    send_request(slow[i], "GET", "/status.json");
    /* The answer has begun (from the version now). */
    char c;
    assert_int_equal(recv(slow[i], &c, 1, MSG_PEEK), 1);
  }
  size_t held_bytes = strata_alloc_live() - before;
  reply first;
  http(f.port, "GET", "/status.json", &first);
  assert_int_equal(passes_done(&first), DONE);
  print_message("/status.json of %zu bytes after %d passes\n", first.body_len, DONE);
  assert_true(first.body_len > 1000000);
  print_message("%d clients that do not read hold %zu bytes more\n", SLOW, held_bytes);
  assert_true(held_bytes < first.body_len);

  sum_pass(&f, DONE);
  render_now(&f);
  reply next;
  http(f.port, "GET", "/status.json", &next);
  assert_int_equal(passes_done(&next), DONE + 1);
  /* Two read their answer to the end; the others hang up halfway. */
  for (int i = 2; i < SLOW; i++)
    close(slow[i]);
  for (int i = 0; i < 2; i++) {
    reply held;
    read_reply(slow[i], &held);
    assert_int_equal(held.code, 200);
    char v[32], want[32];
    snprintf(want, sizeof want, "%zu", held.body_len);
    assert_string_equal(header(&held, "Content-Length", v, sizeof v), want);
    assert_int_equal(held.body_len, first.body_len);
    assert_memory_equal(held.body, first.body, first.body_len);
    free(held.all);
  }
  close_run(&f);
  free(first.all);
  free(next.all);
}

/* The layouts the table back-end (worker/tables.c, table_stats) and the
 * vap rule (comm/rules/vap.c, vap_stats) keep a worker's figures in. */
typedef struct table_fig {
  uint64_t reads;
  int64_t diff_sum;
  int32_t diff_min, pad;
  uint64_t hist[STRATA_TABLE_HIST];
} table_fig;
typedef struct vap_fig {
  double bound, max_inflight, max_ratio;
  uint64_t deltas, flushes, splits, waits;
  double wait_s;
  uint64_t pushes, acks, hist[34];
  int32_t enforced, pad;
} vap_fig;

/* A vap run's passes: each worker read 10 rows at differential 0 and took
 * 4 deltas, each leaving its row half the bound in transit. /metrics shows
 * the clocks, the clock differentials and vap's histogram; /status.json
 * the consistency and vap sections. */
static void test_status_renders_a_mode(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  f.o = (strata_engine_opts){.mode = STRATA_MODE_VAP,
                             .passes = 2,
                             .depth = 1,
                             .wpc = 1,
                             .settings = settings,
                             .n_settings = 1};
  assert_int_equal(strata_mode_set(&f.o, "value-bound", "0.5"), 0);
  assert_int_equal(strata_engine_resolve(&f.o, 0, 0, 0), 0);
  strata__facts facts;
  assert_int_equal(strata__mode_facts(f.o.mode, &f.o, P, &facts), 0);
  assert_int_equal(strata__status_open("127.0.0.1:0", &p_app, &f.o, P), 0);
  f.port = atoi(strata__status_url() + 17);
  f.prob.n_examples = 10;
  f.agg = (strata__agg){.app = &p_app,
                        .opts = &f.o,
                        .setup = {.workers = P,
                                  .strata = P,
                                  .depth = 1,
                                  .passes = 2,
                                  .worker = -1,
                                  .mode = STRATA_MODE_VAP},
                        .prob = &f.prob,
                        .res = &f.r,
                        .facts = &facts,
                        .lag = 1,
                        .view = strata__status_view()};
  assert_int_equal(strata__agg_open(&f.agg), 0);
  const strata__view *v = strata__status_view();
  v->phase(v->ud, STRATA__PHASE_RUNNING, &f.agg);
  strata__agg_start(&f.agg);
  assert_int_equal(strata__agg_decide_first(&f.agg), 0);
  for (int pass = 0; pass < 2; pass++)
    for (int w = 0; w < P; w++) {
      pass_report rep;
      strata__report_begin(&rep, pass, w);
      rep.stats.time_s = 1;
      rep.stats.clocks = 1;
      table_fig t = {.reads = 10};
      t.hist[0] = 10;
      vap_fig x = {
          .bound = 0.5, .max_inflight = 0.25, .max_ratio = 0.5, .deltas = 4, .enforced = 1};
      x.hist[8] = 4;
      memcpy(rep.stats.mode_stats[0], &t, sizeof t);
      memcpy(rep.stats.mode_stats[1], &x, sizeof x);
      assert_int_equal(strata__agg_report(&f.agg, &rep), 0);
    }
  render_now(&f);
  reply m, j;
  http(f.port, "GET", "/metrics", &m);
  expect_line(&m, "strata_worker_clocks_total{worker=\"1\"} 2");
  expect_line(&m, "strata_clock_differential_bucket{le=\"0\"} 40");
  expect_line(&m, "strata_clock_differential_count 40");
  expect_line(&m, "strata_vap_inflight_ratio_bucket{le=\"0.4375\"} 0");
  expect_line(&m, "strata_vap_inflight_ratio_bucket{le=\"0.5\"} 16");
  expect_line(&m, "strata_vap_inflight_ratio_count 16");
  http(f.port, "GET", "/status.json", &j);
  assert_non_null(strstr(j.body, "\"consistency\": {"));
  assert_non_null(strstr(j.body, "\"staleness\": \"unbounded\""));
  assert_non_null(strstr(j.body, "\"vap\": {"));
  assert_non_null(strstr(j.body, "\"bound\": 0.5"));
  assert_non_null(strstr(j.body, "\"max_inflight\": 0.25"));
  close_run(&f);
  free(m.all);
  free(j.all);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_status_renders_the_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_status_slow_client_keeps_its_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_status_renders_a_mode, setup, teardown),
  };
  return cmocka_run_group_tests_name("status", tests, NULL, NULL);
}
