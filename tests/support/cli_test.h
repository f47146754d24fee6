/* cli_test.h — for the tests that run the omptensor command. */
#ifndef OT_CLI_TEST_H
#define OT_CLI_TEST_H

/* The `omptensor` command the CLI tests run: $OT_CLI when set (it must be
 * executable), else the one beside this test binary or one folder up
 * (build/PRESET/omptensor for build/PRESET/tests/test_cli; a flat folder of
 * binaries carried to the GPU machine). Found from the running binary, not a
 * path fixed at build time, so the build folder may move. NULL, with a
 * message on stderr, if there is none. */
const char *ot_test_cli(void);

/* What one run of the command did. */
typedef struct ot_cli_res {
  int status; /* exit status, -1 if it did not exit */
  int signal; /* the signal that ended it, 0 if none */
  int hung;   /* killed at the deadline */
  double seconds;
  char *out, *err; /* all of stdout and stderr, NUL-terminated */
} ot_cli_res;

/* Runs the command (ot_test_cli()) with args (NULL-terminated, without the
 * program name) in folder `dir` (relative paths in args are relative to
 * it; its cli.stdout and cli.stderr files receive the output), standard
 * input from `stdin_path` (NULL: /dev/null), without the OMPTENSOR_*
 * variables of our environment and with one OpenMP thread; killed after
 * deadline_s seconds (0: never). A command that cannot start fails the
 * test. */
ot_cli_res ot_test_cli_run(const char *dir, const char *stdin_path, double deadline_s, const char *const *args);
void ot_cli_res_free(ot_cli_res *r);

#endif
