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

/* How to run it: output files cli.stdout and cli.stderr go to out_dir;
 * the command runs in `cwd` (NULL: ours); standard input from stdin_path
 * (NULL: /dev/null); the environment is ours without OMPTENSOR_* (a setting
 * in the caller's shell must not leak into a test) with one OpenMP thread
 * (the suite shares two cores) plus extra_env ("K=V" strings,
 * NULL-terminated; may be NULL); killed after deadline_s seconds (0:
 * never). */
typedef struct ot_cli_run_opts {
  const char *out_dir, *cwd, *stdin_path;
  const char *const *extra_env;
  double deadline_s;
  /* > 0: the command's stdout is this descriptor, e.g. a pipe's write end
   * the test reads itself (closed here once the command runs), and the
   * result's `out` is empty; 0 or less: the file cli.stdout */
  int stdout_fd;
  /* called about every 5 ms while the command runs, with its process id
   * (a test sends it a signal from here); may be NULL */
  void (*on_wait)(void *user, int pid);
  void *wait_user;
} ot_cli_run_opts;

/* Runs the command (ot_test_cli()) with args (NULL-terminated, without the
 * program name). A command that cannot start fails the test. */
ot_cli_res ot_test_cli_run_with(const ot_cli_run_opts *o, const char *const *args);
/* The usual case: in and out of `dir`, a deadline. */
ot_cli_res ot_test_cli_run(const char *dir, const char *stdin_path, double deadline_s, const char *const *args);
void ot_cli_res_free(ot_cli_res *r);

#endif
