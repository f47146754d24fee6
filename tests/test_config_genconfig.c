/* test_config_genconfig.c — generation_config.json: the reference model's
 * file as transformers writes it, what each applied key gives, the keys told
 * as not applied, refusals naming the key, and a missing file; and
 * ot_gen_opts_from_model's precedence of its EOS ids over config.json's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/hfconfig.h"
#include "omptensor/lm.h"
#include "omptensor/status.h"
#include "ot_testio.h"

static ot_status parse(const char *json, ot_hf_gen_config *g) {
  return ot_hf_gen_config_parse(json, strlen(json), "generation_config.json", g);
}

static void test_reference_file(void **state) {
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/models/llama_text", getenv("OT_TEST_DATA"));
  ot_hf_gen_config g;
  OT_ASSERT_OK(ot_hf_gen_config_load(path, &g));
  assert_int_equal(g.found, 1);
  assert_int_equal(g.has_do_sample, 1);
  assert_int_equal(g.do_sample, 0);
  assert_int_equal(g.has_max_new_tokens, 1);
  assert_int_equal(g.max_new_tokens, 20);
  assert_int_equal(g.has_eos, 1);
  assert_int_equal(g.n_eos, 2);
  assert_int_equal(g.eos_token_ids[0], 2);
  assert_int_equal(g.eos_token_ids[1], 677);
  assert_int_equal(g.bos_token_id, 1);
  assert_string_equal(g.not_applied, ""); /* pad_token_id, transformers_version: no effect on tokens */
  /* its EOS ids replace config.json's single one */
  ot_gen_opts o = ot_gen_opts_default();
  OT_ASSERT_OK(ot_gen_opts_from_model(path, &o));
  assert_int_equal(o.n_eos, 2);
  assert_int_equal(o.eos_ids[1], 677);
  assert_int_equal(o.max_new_tokens, 20);
  assert_int_equal(o.greedy, 1);
  /* no file: transformers' defaults, config.json's EOS (none in llama_gqa) */
  snprintf(path, sizeof path, "%s/io/llama_tiny", getenv("OT_TEST_DATA"));
  OT_ASSERT_OK(ot_hf_gen_config_load(path, &g));
  assert_int_equal(g.found, 0);
  o = ot_gen_opts_default();
  OT_ASSERT_OK(ot_gen_opts_from_model(path, &o));
  assert_int_equal(o.n_eos, 1);
  assert_int_equal(o.eos_ids[0], 2); /* llama_tiny's config.json */
  assert_int_equal(o.max_new_tokens, 32);
}

static void test_sampling_defaults(void **state) {
  (void)state;
  ot_hf_gen_config g;
  /* Llama 3's file: sampling, with transformers' top_k 50 where it is absent */
  OT_ASSERT_OK(parse("{\"bos_token_id\": 128000, \"do_sample\": true, \"eos_token_id\": [128001, 128008, 128009],"
                     " \"temperature\": 0.6, \"top_p\": 0.9, \"max_length\": 4096, \"transformers_version\": \"4.45\"}",
                     &g));
  assert_int_equal(g.do_sample, 1);
  assert_true(g.temperature == 0.6 && g.top_p == 0.9);
  assert_int_equal(g.has_top_k, 0);
  assert_int_equal(g.max_length, 4096);
  assert_int_equal(g.n_eos, 3);
  /* Qwen2's: a repetition penalty and a top_k, said as not applied */
  OT_ASSERT_OK(parse("{\"do_sample\": true, \"repetition_penalty\": 1.05, \"temperature\": 0.7, \"top_k\": 20,"
                     " \"top_p\": 0.8, \"num_beams\": 1, \"min_p\": null}",
                     &g));
  assert_int_equal(g.top_k, 20);
  assert_string_equal(g.not_applied, "repetition_penalty 1.05");
  OT_ASSERT_OK(parse("{\"num_beams\": 4, \"no_repeat_ngram_size\": 3, \"renormalize_logits\": false}", &g));
  assert_string_equal(g.not_applied, "num_beams 4, no_repeat_ngram_size 3");
  OT_ASSERT_OK(parse("{}", &g));
  assert_int_equal(g.found, 1);
  assert_int_equal(g.has_do_sample + g.has_temperature + g.has_top_k + g.has_top_p + g.has_eos, 0);
}

static void test_refusals(void **state) {
  (void)state;
  static const struct {
    const char *json, *says;
  } bad[] = {
      {"[]", "expected an object"},
      {"{\"do_sample\": 1}", "\"do_sample\" must be true or false"},
      {"{\"temperature\": -1}", "\"temperature\" is -1"},
      {"{\"temperature\": \"hot\"}", "\"temperature\" must be a number"},
      {"{\"top_p\": 0}", "\"top_p\" is 0"},
      {"{\"top_p\": 1.5}", "\"top_p\" is 1.5"},
      {"{\"top_k\": -3}", "\"top_k\" is -3"},
      {"{\"top_k\": 2.5}", "\"top_k\" must be an integer"},
      {"{\"max_new_tokens\": -1}", "\"max_new_tokens\" is -1"},
      {"{\"eos_token_id\": \"</s>\"}", "\"eos_token_id\" must be a non-negative integer or a list"},
      {"{\"eos_token_id\": [1, -2]}", "\"eos_token_id\" must be"},
      {"{\"eos_token_id\": [1,2,3,4,5,6,7,8,9]}", "9 eos_token_id values"},
      {"{\"top_k\": 1, \"top_k\": 2}", "duplicate"},
      {"{\"top_k\": 1", "generation_config.json"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ot_hf_gen_config g;
    ot_status s = parse(bad[i].json, &g);
    if (s == OT_OK || !strstr(ot_last_error(), bad[i].says) || !strstr(ot_last_error(), "generation_config.json"))
      fail_msg("%s: status %d, message '%s', want one saying '%s'", bad[i].json, s, ot_last_error(), bad[i].says);
    assert_int_equal(g.found, 0); /* nothing half-read */
  }
}

static char notice[512];
static int n_notice;
static void take_notice(void *user, const char *m) {
  (void)user;
  n_notice++;
  snprintf(notice, sizeof notice, "%s", m);
}

/* Issue 43: an eos_token_id outside the vocabulary was refused; transformers
 * runs such a checkpoint (tiny test models keep GPT-2's 50256 over a small
 * vocabulary). It can never be generated: a notice, and the other ids. */
static void test_eos_outside_vocab(void **state) {
  (void)state;
  char *dir = ot_tmpdir_create();
  ot_write_text(dir, "config.json",
                "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
                " \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 16,"
                " \"eos_token_id\": [50256, 2]}");
  ot_set_notice_handler(take_notice, NULL);
  ot_gen_opts o = ot_gen_opts_default();
  OT_ASSERT_OK(ot_gen_opts_from_model(dir, &o));
  ot_set_notice_handler(NULL, NULL);
  assert_int_equal(o.n_eos, 1);
  assert_int_equal(o.eos_ids[0], 2);
  assert_int_equal(n_notice, 1);
  printf("%s\n", notice);
  assert_non_null(strstr(notice, dir));
  assert_non_null(strstr(notice, "eos_token_id 50256 (config.json) is outside the vocabulary of 100 ids"));
  ot_tmpdir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_file),
      cmocka_unit_test(test_sampling_defaults),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_eos_outside_vocab),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
