/* cli_test.c — see cli_test.h. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_test.h"
#include "ot_testio.h"

extern char **environ;

/* Whether dir/name is an executable file; its path into buf. */
static int exe_at(char *buf, size_t cap, const char *dir, const char *name) {
  snprintf(buf, cap, "%s/%s", dir, name);
  return access(buf, X_OK) == 0;
}

const char *ot_test_cli(void) {
  static char path[4096];
  const char *env = getenv("OT_CLI");
  if (env && *env) {
    if (access(env, X_OK) == 0) return env;
    fprintf(stderr, "OT_CLI='%s' is not an executable file (unset it to use the omptensor beside the test)\n", env);
    return NULL;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "cannot read /proc/self/exe to find the omptensor command: set OT_CLI\n");
    return NULL;
  }
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0'; /* the test's folder */
  if (exe_at(path, sizeof path, self, "omptensor")) return path;
  slash = strrchr(self, '/');
  if (slash) *slash = '\0'; /* one up */
  if (exe_at(path, sizeof path, self, "omptensor")) return path;
  fprintf(stderr, "no omptensor command beside the test binary or one folder up (%s): build it or set OT_CLI\n", self);
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

ot_cli_res ot_test_cli_run(const char *dir, const char *stdin_path, double deadline_s, const char *const *args) {
  const ot_cli_run_opts o = {dir, dir, stdin_path, NULL, deadline_s, -1, NULL, NULL};
  return ot_test_cli_run_with(&o, args);
}

ot_cli_res ot_test_cli_run_with(const ot_cli_run_opts *o, const char *const *args) {
  const char *cli = ot_test_cli();
  if (!cli) fail_msg("no omptensor command to run (see above)");
  const char *argv[64];
  int argc = 0;
  argv[argc++] = cli;
  for (int i = 0; args[i]; i++) {
    assert_true(argc < 63);
    argv[argc++] = args[i];
  }
  argv[argc] = NULL;
  char outp[4096], errp[4096];
  ot_tmp_path(outp, sizeof outp, o->out_dir, "cli.stdout");
  ot_tmp_path(errp, sizeof errp, o->out_dir, "cli.stderr");
  posix_spawn_file_actions_t fa;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, o->stdin_path ? o->stdin_path : "/dev/null", O_RDONLY, 0);
  const int pipe_out = o->stdout_fd > 0;
  if (pipe_out) posix_spawn_file_actions_adddup2(&fa, o->stdout_fd, STDOUT_FILENO);
  else posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t n = 0, k = 0, ne = 0;
  while (environ[n]) n++;
  while (o->extra_env && o->extra_env[ne]) ne++;
  char **envp = calloc(n + ne + 2, sizeof *envp);
  assert_non_null(envp);
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "OMPTENSOR_", 10) && strncmp(environ[i], "OMP_NUM_THREADS=", 16)) envp[k++] = environ[i];
  envp[k++] = (char *)"OMP_NUM_THREADS=1";
  for (size_t i = 0; i < ne; i++) envp[k++] = (char *)o->extra_env[i];
  pid_t pid;
  double t0 = now_s();
  char cwd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  if (o->cwd) assert_int_equal(chdir(o->cwd), 0); /* posix_spawn runs the child where we are */
  int rc = posix_spawn(&pid, cli, &fa, NULL, (char *const *)argv, envp);
  if (o->cwd) assert_int_equal(chdir(cwd), 0);
  posix_spawn_file_actions_destroy(&fa);
  free(envp);
  if (rc != 0) fail_msg("cannot start %s: %s", cli, strerror(rc));
  if (pipe_out) { /* the child has it: the test's reader then sees the end when the child exits */
    close(o->stdout_fd);
    ot_write_bytes(o->out_dir, "cli.stdout", "", 0);
  }
  ot_cli_res r = {.status = -1};
  int ws = 0;
  for (;;) {
    pid_t w = waitpid(pid, &ws, WNOHANG);
    if (w == pid) break;
    assert_int_equal(w, 0);
    if (o->deadline_s > 0 && now_s() - t0 > o->deadline_s) {
      kill(pid, SIGKILL);
      assert_int_equal(waitpid(pid, &ws, 0), pid);
      r.hung = 1;
      break;
    }
    if (o->on_wait) o->on_wait(o->wait_user, (int)pid);
    struct timespec d = {0, 5000000};
    nanosleep(&d, NULL);
  }
  r.seconds = now_s() - t0;
  if (WIFEXITED(ws)) r.status = WEXITSTATUS(ws);
  if (WIFSIGNALED(ws)) r.signal = WTERMSIG(ws);
  r.out = ot_read_file(outp, NULL);
  r.err = ot_read_file(errp, NULL);
  return r;
}

void ot_cli_res_free(ot_cli_res *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}
