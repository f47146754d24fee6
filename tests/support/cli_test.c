/* cli_test.c — see cli_test.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_test.h"

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
