/* embed.c — load a model, generate, from ~70 lines of C.
 *
 *     embed MODEL_DIR [-n NEW_TOKENS] (-t TEXT | ID [ID ...])
 *
 * MODEL_DIR is a Hugging Face directory (config.json + safetensors) of a
 * Llama or GPT-2. With -t the prompt is text, encoded by the directory's
 * tokenizer.json, and the continuation is printed as it is generated (the
 * model's EOS ids from generation_config.json stop it); else the IDs are the
 * prompt's token ids and the generated ids are printed. Then the decode
 * speed. Every failure is a status with a message from ot_last_error()
 * naming the file or option. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omptensor/omptensor.h"

/* Text as it becomes final: whole UTF-8 characters, straight out. */
static ot_status print_piece(void *user, const char *piece, size_t n) {
  (void)user;
  fwrite(piece, 1, n, stdout);
  fflush(stdout);
  return OT_OK;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR [-n NEW_TOKENS] (-t TEXT | ID [ID ...])\n", argv[0]);
    return 2;
  }
  int n_new = 16, n_prompt = 0;
  const char *text = NULL;
  int32_t *prompt = malloc((size_t)argc * sizeof *prompt);
  for (int i = 2; prompt && i < argc; i++) {
    if (!strcmp(argv[i], "-t") && i + 1 < argc) {
      text = argv[++i];
      continue;
    }
    int is_n = !strcmp(argv[i], "-n") && i + 1 < argc;
    const char *a = is_n ? argv[++i] : argv[i];
    char *end;
    long v = strtol(a, &end, 10);
    if (*end || end == a || v < 0 || v > INT32_MAX) {
      fprintf(stderr, "embed: '%s' is not a token id or count\n", a);
      free(prompt);
      return 2;
    }
    if (is_n) n_new = (int)v;
    else prompt[n_prompt++] = (int32_t)v;
  }

  /* The defaults: the first device if there is one (else the host), its
   * memory as the budget; ot_gen_opts.sched.budget_bytes would lower it. */
  ot_ctx_opts co = ot_ctx_opts_default();
  ot_ctx *ctx = NULL;
  ot_lm *m = NULL;
  ot_tokenizer *tk = NULL;
  ot_gen_result r = {0};
  ot_gen_opts g = ot_gen_opts_default(); /* greedy */
  ot_status s = prompt ? ot_ctx_create(&co, &ctx) : OT_ERR_OUT_OF_MEMORY;
  if (s == OT_OK) s = ot_gen_opts_from_model(argv[1], &g); /* its EOS ids, generation_config.json */
  g.max_new_tokens = n_new;
  g.on_text = print_piece;
  if (s == OT_OK) s = ot_model_load(ctx, argv[1], OT_DTYPE_KEEP, NULL, NULL, &m);
  if (s == OT_OK && text) s = ot_tokenizer_load(argv[1], &tk);
  if (s == OT_OK && text) s = ot_generate_text(m, tk, text, strlen(text), &g, &r, NULL, NULL);
  else if (s == OT_OK) s = ot_generate(m, prompt, n_prompt, &g, &r);
  if (s == OT_OK) {
    if (!text) {
      printf("tokens:");
      for (int i = 0; i < r.n_tokens; i++) printf(" %d", (int)r.tokens[i]);
    }
    printf("\n%d tokens%s, prompt %.1f ms, %.1f tokens/s (%s backend, omptensor %s)\n", r.n_tokens,
           r.stopped_at_eos ? " (stopped at EOS)" : "", r.prefill_ms, r.decode_tokens_per_second,
           ot_backend_name(ot_ctx_backend(ctx)), ot_version());
  } else {
    fprintf(stderr, "embed: %s: %s\n", ot_status_str(s), ot_last_error());
  }
  ot_gen_result_free(&r);
  ot_tokenizer_destroy(tk);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  free(prompt);
  return s == OT_OK ? 0 : 1;
}
