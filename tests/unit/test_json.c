/*
 * Unit tests for core/json.c: structure, escaping, non-finite numbers, and
 * that every output parses (checked with python3's json module).
 */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "strata/core.h"
#include "strata/json.h"

static size_t live0;
static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  live0 = strata_alloc_live();
  snprintf(tmpdir, sizeof tmpdir, "/tmp/strata_test_json.XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(strata_alloc_live(), live0);
  return 0;
}

/* A writer into memory; mem_finish() returns the text (free it). The
 * memstream's buffer and size live in static storage: GCC's
 * -Wdangling-pointer otherwise takes the result for a pointer to a local. */
typedef struct mem {
  FILE *f;
  strata_json j;
} mem;

static char *mem_buf;
static size_t mem_len;

static void mem_open(mem *m) {
  mem_buf = NULL;
  mem_len = 0;
  m->f = open_memstream(&mem_buf, &mem_len);
  assert_non_null(m->f);
  strata_json_init(&m->j, m->f);
}

static char *mem_finish(mem *m) {
  fclose(m->f);
  return mem_buf;
}

/*
 * Writes text to a file in tmpdir and runs python3 on it: the file must
 * parse, and when `check` is given (a Python expression over `d`), it must
 * hold. Returns the exit status of python3.
 */
static int py_run(const char *text, const char *check, int quiet) {
  char data[128], script[128], cmd[512];
  snprintf(data, sizeof data, "%s/doc.json", tmpdir);
  snprintf(script, sizeof script, "%s/check.py", tmpdir);
  FILE *f = fopen(data, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  f = fopen(script, "w");
  assert_non_null(f);
  fprintf(f,
          "import json, math, sys\n"
          "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
          "ok = %s\n"
          "if not ok:\n"
          "    print('python check failed; document was:', repr(d))\n"
          "sys.exit(0 if ok else 1)\n",
          check ? check : "True");
  fclose(f);
  snprintf(cmd, sizeof cmd, "python3 '%s' '%s'%s", script, data, quiet ? " >/dev/null 2>&1" : "");
  int rc = system(cmd);
  return rc;
}

static int py_check(const char *text, const char *check) { return py_run(text, check, 0); }

static void test_python_available(void **state) {
  (void)state;
  /* The checks below rely on python3; a broken document must be caught. */
  assert_int_equal(system("python3 -c 'import json' >/dev/null 2>&1"), 0);
  assert_int_not_equal(py_run("{\"a\": 1,}", NULL, 1), 0);
  assert_int_not_equal(py_run("{\"a\": 1}", "d == {'a': 2}", 1), 0);
  assert_int_equal(py_check("{\"a\": 1}", "d == {'a': 1}"), 0);
}

static void test_scalars_exact_text(void **state) {
  (void)state;
  mem m;
  mem_open(&m);
  strata_json_object_begin(&m.j, NULL);
  strata_json_int(&m.j, "i", -12);
  strata_json_bool(&m.j, "t", 1);
  strata_json_bool(&m.j, "f", 0);
  strata_json_string(&m.j, "s", "x");
  strata_json_string(&m.j, "n", NULL);
  strata_json_number(&m.j, "d", 0.5);
  strata_json_object_end(&m.j);
  char *out = mem_finish(&m);
  assert_string_equal(out,
                      "{\n  \"i\": -12,\n  \"t\": true,\n  \"f\": false,\n  \"s\": \"x\",\n"
                      "  \"n\": null,\n  \"d\": 0.5\n}\n");
  assert_int_equal(py_check(out, "d == {'i': -12, 't': True, 'f': False, 's': 'x', 'n': None, "
                                 "'d': 0.5}"),
                   0);
  free(out);
}

static void test_empty_containers(void **state) {
  (void)state;
  mem m;
  mem_open(&m);
  strata_json_object_begin(&m.j, NULL);
  strata_json_object_begin(&m.j, "o");
  strata_json_object_end(&m.j);
  strata_json_array_begin(&m.j, "a");
  strata_json_array_end(&m.j);
  strata_json_array_begin(&m.j, "aa");
  strata_json_array_begin(&m.j, NULL);
  strata_json_array_end(&m.j);
  strata_json_object_begin(&m.j, NULL);
  strata_json_object_end(&m.j);
  strata_json_array_end(&m.j);
  strata_json_object_end(&m.j);
  char *out = mem_finish(&m);
  assert_int_equal(py_check(out, "d == {'o': {}, 'a': [], 'aa': [[], {}]}"), 0);
  free(out);

  mem_open(&m);
  strata_json_array_begin(&m.j, NULL);
  strata_json_array_end(&m.j);
  out = mem_finish(&m);
  assert_string_equal(out, "[]\n");
  free(out);
}

static void test_nested_objects_and_arrays(void **state) {
  (void)state;
  mem m;
  mem_open(&m);
  strata_json *j = &m.j;
  strata_json_object_begin(j, NULL);
  strata_json_string(j, "app", "mf");
  strata_json_array_begin(j, "per_pass");
  for (int p = 0; p < 3; p++) {
    strata_json_object_begin(j, NULL);
    strata_json_int(j, "pass", p + 1);
    strata_json_array_begin(j, "workers");
    for (int w = 0; w < 2; w++) {
      strata_json_object_begin(j, NULL);
      strata_json_int(j, "w", w);
      strata_json_number(j, "t", 0.25 * (p + 1) + w);
      strata_json_object_end(j);
    }
    strata_json_array_end(j);
    strata_json_array_begin(j, "m");
    for (int r = 0; r < 2; r++) {
      strata_json_array_begin(j, NULL);
      for (int cc = 0; cc < 3; cc++) strata_json_int(j, NULL, r * 3 + cc);
      strata_json_array_end(j);
    }
    strata_json_array_end(j);
    strata_json_object_end(j);
  }
  strata_json_array_end(j);
  strata_json_object_begin(j, "build");
  strata_json_string(j, "git_rev", "abc");
  strata_json_object_begin(j, "inner");
  strata_json_bool(j, "deep", 1);
  strata_json_object_end(j);
  strata_json_object_end(j);
  strata_json_int(j, "after", 7);
  strata_json_object_end(j);
  char *out = mem_finish(&m);
  const char *want =
      "d == {'app': 'mf', 'per_pass': [{'pass': p + 1, 'workers': [{'w': w, 't': 0.25 * (p + 1) "
      "+ w} for w in range(2)], 'm': [[0, 1, 2], [3, 4, 5]]} for p in range(3)], "
      "'build': {'git_rev': 'abc', 'inner': {'deep': True}}, 'after': 7}";
  assert_int_equal(py_check(out, want), 0);
  /* The file ends with a newline after the top-level value. */
  size_t n = strlen(out);
  assert_true(n > 2 && out[n - 1] == '\n' && out[n - 2] == '}');
  free(out);
}

static void test_deep_nesting_within_limit(void **state) {
  (void)state;
  /* STRATA_JSON_MAX_DEPTH - 1 levels of containers. */
  const int levels = STRATA_JSON_MAX_DEPTH - 1;
  mem m;
  mem_open(&m);
  for (int i = 0; i < levels; i++) {
    if (i % 2 == 0)
      strata_json_object_begin(&m.j, NULL); /* inside an array: no key */
    else
      strata_json_array_begin(&m.j, "a");
    strata_json_int(&m.j, i % 2 == 0 ? "x" : NULL, i);
  }
  for (int i = levels - 1; i >= 0; i--) {
    strata_json_int(&m.j, i % 2 == 0 ? "y" : NULL, -i);
    if (i % 2 == 0)
      strata_json_object_end(&m.j);
    else
      strata_json_array_end(&m.j);
  }
  char *out = mem_finish(&m);
  /* Walk the structure back down in Python. */
  char check[1024];
  snprintf(check, sizeof check,
           "(lambda f: f(f, d, 0))(lambda f, v, i: i == %d or ("
           "(isinstance(v, dict) and v['x'] == i and v['y'] == -i and "
           "(i + 1 == %d or f(f, v['a'], i + 1))) or "
           "(isinstance(v, list) and v[0] == i and v[-1] == -i and "
           "(i + 1 == %d or f(f, v[1], i + 1)))))",
           levels, levels, levels);
  assert_int_equal(py_check(out, check), 0);
  free(out);
}

static void test_string_escaping_exact(void **state) {
  (void)state;
  mem m;
  mem_open(&m);
  strata_json_string(&m.j, NULL, "q\"b\\n\nr\rt\tc\001\037e");
  char *out = mem_finish(&m);
  assert_string_equal(out, "\"q\\\"b\\\\n\\nr\\rt\\tc\\u0001\\u001fe\"");
  free(out);
}

static void test_string_escaping_round_trips(void **state) {
  (void)state;
  /* Every control character, quotes and backslashes, in keys and values. */
  char all[40];
  int n = 0;
  for (int ch = 1; ch < 0x20; ch++) all[n++] = (char)ch;
  all[n++] = '"';
  all[n++] = '\\';
  all[n++] = '/';
  all[n++] = 'z';
  all[n] = '\0';
  mem m;
  mem_open(&m);
  strata_json_object_begin(&m.j, NULL);
  strata_json_string(&m.j, "ctl", all);
  strata_json_string(&m.j, "k\"e\\y\n", "v");
  strata_json_string(&m.j, "path", "C:\\dir\\\"file\".txt");
  strata_json_string(&m.j, "utf8", "caf\xc3\xa9 \xe2\x82\xac");
  strata_json_string(&m.j, "", "");
  strata_json_array_begin(&m.j, "arr");
  strata_json_string(&m.j, NULL, "line1\nline2");
  strata_json_string(&m.j, NULL, "\"");
  strata_json_array_end(&m.j);
  strata_json_object_end(&m.j);
  char *out = mem_finish(&m);
  /* Raw control characters never reach the output. */
  for (const char *p = out; *p; p++)
    if ((unsigned char)*p < 0x20) assert_int_equal(*p, '\n');
  assert_int_equal(
      py_check(out, "d == {'ctl': ''.join(chr(c) for c in range(1, 32)) + '\"\\\\/z', "
                    "'k\"e\\\\y\\n': 'v', 'path': 'C:\\\\dir\\\\\"file\".txt', "
                    "'utf8': 'caf\\u00e9 \\u20ac', '': '', 'arr': ['line1\\nline2', '\"']}"),
      0);
  free(out);
}

static void test_nonfinite_numbers_become_null(void **state) {
  (void)state;
  mem m;
  mem_open(&m);
  strata_json_object_begin(&m.j, NULL);
  strata_json_number(&m.j, "a", NAN);
  strata_json_number(&m.j, "b", INFINITY);
  strata_json_number(&m.j, "c", -INFINITY);
  strata_json_number(&m.j, "ok", 1.5);
  strata_json_array_begin(&m.j, "arr");
  strata_json_number(&m.j, NULL, NAN);
  strata_json_number(&m.j, NULL, 2.0);
  strata_json_number(&m.j, NULL, -INFINITY);
  strata_json_array_end(&m.j);
  strata_json_object_end(&m.j);
  char *out = mem_finish(&m);
  assert_null(strstr(out, "nan"));
  assert_null(strstr(out, "inf"));
  assert_null(strstr(out, "NaN"));
  assert_null(strstr(out, "Infinity"));
  assert_int_equal(py_check(out, "d == {'a': None, 'b': None, 'c': None, 'ok': 1.5, "
                                 "'arr': [None, 2.0, None]}"),
                   0);
  free(out);
}

static void test_numbers_round_trip(void **state) {
  (void)state;
  mem m;
  mem_open(&m);
  strata_json_object_begin(&m.j, NULL);
  strata_json_int(&m.j, "imax", INT64_MAX);
  strata_json_int(&m.j, "imin", INT64_MIN);
  strata_json_int(&m.j, "zero", 0);
  strata_json_number(&m.j, "big", 1e300);
  strata_json_number(&m.j, "tiny", 1e-300);
  strata_json_number(&m.j, "neg", -0.001953125);
  strata_json_number(&m.j, "third", 1.0 / 3.0);
  strata_json_number(&m.j, "nzero", -0.0);
  strata_json_object_end(&m.j);
  char *out = mem_finish(&m);
  assert_int_equal(
      py_check(out, "d['imax'] == 2**63 - 1 and d['imin'] == -2**63 and d['zero'] == 0 and "
                    "type(d['imax']) is int and d['big'] == 1e300 and "
                    "abs(d['tiny'] / 1e-300 - 1) < 1e-8 and d['neg'] == -0.001953125 and "
                    "abs(d['third'] - 1/3) < 1e-8 and d['nzero'] == 0"),
      0);
  free(out);
}

static void test_file_output_parses(void **state) {
  (void)state;
  /* Through a real FILE, as strata_metrics_write uses it. */
  char path[128];
  snprintf(path, sizeof path, "%s/real.json", tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "app", "mf");
  strata_json_number(&j, "test_rmse", NAN);
  strata_json_array_begin(&j, "argv");
  strata_json_string(&j, NULL, "--data");
  strata_json_string(&j, NULL, "a \"quoted\" path\\x");
  strata_json_array_end(&j);
  strata_json_object_end(&j);
  fclose(f);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '%s'",
           path);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_python_available, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scalars_exact_text, setup, teardown),
      cmocka_unit_test_setup_teardown(test_empty_containers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nested_objects_and_arrays, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deep_nesting_within_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_string_escaping_exact, setup, teardown),
      cmocka_unit_test_setup_teardown(test_string_escaping_round_trips, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nonfinite_numbers_become_null, setup, teardown),
      cmocka_unit_test_setup_teardown(test_numbers_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_file_output_parses, setup, teardown),
  };
  return cmocka_run_group_tests_name("json", tests, NULL, NULL);
}
