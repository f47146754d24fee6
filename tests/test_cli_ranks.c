/* test_cli_ranks.c — the command started by a launcher of several ranks
 * (mpirun's OMPI_COMM_WORLD_SIZE, srun's SLURM_STEP_NUM_TASKS) in a build
 * without MPI: `train` and `run --prompts` refuse with one line that says
 * mpirun needs an MPI build (instead of every rank running the whole job),
 * exit 2; one task of a launcher (size 1) runs as usual. In an MPI build
 * the variables would make MPI look for a launcher that is not there:
 * test_cli_mpi runs the real thing, and this one checks nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/comm.h"
#include "cli_test.h"
#include "ot_testio.h"

static char *tmp;
static char llama[4096], gpt2[4096];

static void refused_without_mpi(void **state) {
  (void)state;
  if (ot_comm_mpi_built()) {
    print_message("an MPI build: test_cli_mpi runs the ranks for real\n");
    return;
  }
  ot_write_text(tmp, "in.jsonl", "{\"id\": 1, \"prompt_ids\": [1, 2, 3], \"max_new_tokens\": 2}\n");
  ot_write_bytes(tmp, "tokens.bin", "", 0); /* never read: the refusal comes first */
  const char *run_args[] = {"run", llama, "--prompts", "in.jsonl", "--out", "out.jsonl", NULL};
  const char *train_args[] = {"train", gpt2, "--data", "tokens.bin", "--no-dropout", NULL};
  const char *const *cmds[] = {run_args, train_args};
  const char *envs[][2] = {{"OMPI_COMM_WORLD_SIZE=2", NULL}, {"SLURM_STEP_NUM_TASKS=3", NULL}};
  for (int i = 0; i < 4; i++) {
    ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .extra_env = envs[i % 2], .deadline_s = 120};
    ot_cli_res r = ot_test_cli_run_with(&o, cmds[i / 2]);
    size_t lines = 0;
    for (const char *c = r.err; *c; c++) lines += *c == '\n';
    if (r.status != 2 || lines != 1 || !strstr(r.err, "mpirun needs an MPI build") || !strstr(r.err, "-DOT_MPI=ON"))
      fail_msg("%s %s: exit %d, stderr: %s", envs[i % 2][0], cmds[i / 2][0], r.status, r.err);
    ot_cli_res_free(&r);
  }
  char out[4096];
  FILE *f = fopen(ot_tmp_path(out, sizeof out, tmp, "out.jsonl"), "r");
  assert_null(f); /* nothing ran */
  /* one task of a launcher is one process */
  const char *one[] = {"OMPI_COMM_WORLD_SIZE=1", NULL};
  ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .extra_env = one, .deadline_s = 120};
  ot_cli_res r = ot_test_cli_run_with(&o, run_args);
  if (r.status != 0) fail_msg("one task: exit %d: %s", r.status, r.err);
  ot_cli_res_free(&r);
}

int main(void) {
  const char *data = getenv("OT_TEST_DATA");
  if (!data) return fprintf(stderr, "OT_TEST_DATA is not set\n"), 1;
  snprintf(llama, sizeof llama, "%s/models/llama_text", data);
  snprintf(gpt2, sizeof gpt2, "%s/models/gpt2_small", data);
  tmp = ot_tmpdir_create();
  const struct CMUnitTest tests[] = {cmocka_unit_test(refused_without_mpi)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  ot_tmpdir_remove(tmp);
  return rc;
}
