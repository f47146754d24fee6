/* test_cli_gpu_wait.c — OMPTENSOR_GPU_WAIT, how the host waits for a GPU
 * (src/memory/gpu_wait.h): `omptensor info` says which mode is asked for and
 * where from (and, on a GPU, what each context has, read back from the
 * driver); a value that is not spin, yield or block is refused by name
 * before any work. The speed it buys is measured on the GPU machine
 * (bench/wait_h200.sh), not here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_test.h"
#include "ot_testio.h"

static char *tmp;

static int setup(void **state) {
  (void)state;
  if (!getenv("OT_TEST_DATA") || !ot_test_cli()) return -1;
  tmp = ot_tmpdir_create();
  return tmp ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(tmp);
  return 0;
}

static ot_cli_res run(const char *env, const char *const *args) {
  const char *e[] = {env, NULL};
  ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .extra_env = env ? e : NULL, .deadline_s = 60};
  return ot_test_cli_run_with(&o, args);
}

static void test_info_says_the_mode(void **state) {
  (void)state;
  const char *info[] = {"info", NULL};
  static const struct {
    const char *env, *says;
  } cases[] = {
      {NULL, "GPU wait:   spin (default; OMPTENSOR_GPU_WAIT=spin|yield|block"},
      {"OMPTENSOR_GPU_WAIT=yield", "GPU wait:   yield (from OMPTENSOR_GPU_WAIT"},
      {"OMPTENSOR_GPU_WAIT=BLOCK", "GPU wait:   block (from OMPTENSOR_GPU_WAIT"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ot_cli_res r = run(cases[i].env, info);
    if (r.status != 0 || !strstr(r.out, cases[i].says))
      fail_msg("info with %s: exit %d, stdout %s", cases[i].env ? cases[i].env : "nothing", r.status, r.out);
    ot_cli_res_free(&r);
  }
}

static void test_bad_value_refused(void **state) {
  (void)state;
  char model[4200];
  snprintf(model, sizeof model, "%s/models/llama_gqa", getenv("OT_TEST_DATA"));
  const char *args[] = {"run", model, "--prompt-ids", "1,2", "-n", "1", NULL};
  ot_cli_res r = run("OMPTENSOR_GPU_WAIT=fast", args);
  if (r.status != 2 || !strstr(r.err, "OMPTENSOR_GPU_WAIT='fast': use spin") || r.out[0])
    fail_msg("run with OMPTENSOR_GPU_WAIT=fast: exit %d, stdout %s, stderr %s", r.status, r.out, r.err);
  ot_cli_res_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_info_says_the_mode),
      cmocka_unit_test(test_bad_value_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
