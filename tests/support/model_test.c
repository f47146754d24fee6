/* model_test.c — see model_test.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_test.h"
#include "models.h"
#include "ot_test.h"

char *ot_test_model_path(const char *set, const char *file) {
  const char *root = getenv("OT_TEST_DATA");
  if (!root) fail_msg("OT_TEST_DATA is not set (ctest sets it to tests/data)");
  size_t n = strlen(root) + strlen(set) + strlen(file) + 16;
  char *p = malloc(n);
  snprintf(p, n, "%s/models/%s%s%s", root, set, file[0] ? "/" : "", file);
  return p;
}

void ot_test_generate(ot_ctx *ctx, const char *set, const int32_t *prompt, int n_prompt, int n_gen,
                      ot_strategy strategy, ot_trace *tr, ot_test_gen *out) {
  assert_true(n_gen <= (int)(sizeof out->tokens / sizeof out->tokens[0]));
  char *dir = ot_test_model_path(set, "");
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  char npy[] = "/tmp/ot_model_test_XXXXXX";
  int fd = mkstemp(npy);
  assert_true(fd >= 0);
  close(fd);
  ot_gen_opts g = ot_gen_opts_default();
  g.max_new_tokens = n_gen;
  g.logits_out = npy;
  g.sched.strategy = strategy;
  g.trace = tr;
  ot_gen_result r;
  OT_ASSERT_OK(ot_generate(m, prompt, n_prompt, &g, &r));
  OT_ASSERT_OK(ot_npy_read(npy, &out->logits));
  out->n_tokens = r.n_tokens;
  memcpy(out->tokens, r.tokens, (size_t)r.n_tokens * sizeof *r.tokens);
  unlink(npy);
  ot_gen_result_free(&r);
  ot_lm_destroy(m);
  free(dir);
}
