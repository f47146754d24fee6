/* test_hostile_config.c — issue 14, class 1: sizes in config.json that
 * overflow, narrow or exceed memory. Before the fix a GPT-2 n_layer of
 * 4294967297 was cut to an int in one place and used as 64 bits in another
 * (a heap-buffer overflow in the trainer's add_param), sizes around 2^53
 * overflowed llama.c's shape arithmetic and 2^31 layers ended in an
 * allocation abort. Every size is now range-checked where it is read (one
 * table of fields, ot_hf_config_check for configs a caller fills in), the
 * weights must be addressable, and their bytes are checked against the host
 * memory available before anything is allocated: each case is a status
 * with a message naming config.json, the field and the value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_test.h"
#include "omptensor/models.h"
#include "ot_test.h"
#include "ot_testio.h"

static char *dir; /* a fresh temporary directory per test (ot_testio.h) */

static int setup(void **state) {
  (void)state;
  dir = ot_tmpdir_create();
  return dir ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(dir);
  dir = NULL;
  return 0;
}

/* Fails unless s == want and the message holds every needle (NULL-ended):
 * ot_testio.h's check, with this file's line. */
#define expect_err(s, want, what, ...) ot_check_error(__FILE__, __LINE__, (s), (want), (what), __VA_ARGS__)
#define EXPECT_ERR(expr, want, ...) expect_err((expr), (want), #expr, __VA_ARGS__, (const char *)0)

/* Small configs with some keys replaced: "key": value pairs in `over`
 * take the place of the defaults' (jansson refuses duplicate keys). */
static const char *with(const char *base, const char *over) {
  static char buf[2048];
  char keys[2048];
  snprintf(keys, sizeof keys, "%s", over);
  /* the keys named in `over` */
  const char *names[16];
  int n = 0;
  for (char *q = keys; (q = strchr(q, '"')) && n < 16;) {
    char *e = strchr(q + 1, '"');
    if (!e) break;
    *e = '\0';
    names[n++] = q + 1;
    q = strchr(e + 1, ',');
    if (!q) break;
    q++;
  }
  /* base is "k": v, "k": v ...; keep the pairs `over` does not name */
  size_t k = (size_t)snprintf(buf, sizeof buf, "{%s", over);
  char b[2048];
  snprintf(b, sizeof b, "%s", base);
  for (char *pair = strtok(b, ","); pair; pair = strtok(NULL, ",")) {
    int named = 0;
    for (int i = 0; i < n; i++) {
      char quoted[128];
      snprintf(quoted, sizeof quoted, "\"%s\"", names[i]);
      if (strstr(pair, quoted)) named = 1;
    }
    if (!named) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", k > 1 ? "," : "", pair);
  }
  snprintf(buf + k, sizeof buf - k, "}");
  return buf;
}

static const char GPT2_BASE[] = "\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2,"
                                " \"vocab_size\": 10, \"n_positions\": 4";
static const char LLAMA_BASE[] = "\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64,"
                                 " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 100,"
                                 " \"max_position_embeddings\": 16";
#define GPT2(over) with(GPT2_BASE, over)
#define LLAMA(over) with(LLAMA_BASE, over)

static ot_status parse(const char *json, ot_hf_config *c) {
  return ot_hf_config_parse(json, strlen(json), "m/config.json", c);
}

/* The report's values and the edges of every range, read from config.json. */
static void test_sizes_range_checked(void **state) {
  (void)state;
  static const struct {
    const char *over;
    int llama;
    const char *field, *value, *range;
  } bad[] = {
      /* the report: n_layer past 2^32 (was cut to int: 1 layer for the loops that count in int) */
      {"\"n_layer\": 4294967297", 0, "\"n_layer\"", "4294967297", "[1, 65536]"},
      {"\"n_layer\": 2147483648", 0, "\"n_layer\"", "2147483648", "[1, 65536]"},
      {"\"n_layer\": 65537", 0, "\"n_layer\"", "65537", "[1, 65536]"},
      /* sizes around 2^53 (llama.c's shape arithmetic overflowed) */
      {"\"hidden_size\": 9007199254740992", 1, "\"hidden_size\"", "9007199254740992", "[1, 1048576]"},
      {"\"vocab_size\": 9007199254740993", 1, "\"vocab_size\"", "9007199254740993", "[1, 2147483647]"},
      {"\"intermediate_size\": 9007199254740992", 1, "\"intermediate_size\"", "9007199254740992",
       "[1, 4194304]"},
      {"\"num_attention_heads\": 9007199254740992", 1, "\"num_attention_heads\"", "9007199254740992",
       "[1, 65536]"},
      {"\"max_position_embeddings\": 9007199254740992", 1, "\"max_position_embeddings\"", "9007199254740992",
       "[1, 2147483647]"},
      {"\"num_hidden_layers\": 2147483648", 1, "\"num_hidden_layers\"", "2147483648", "[1, 65536]"},
      {"\"num_key_value_heads\": 9223372036854775807", 1, "\"num_key_value_heads\"", "9223372036854775807",
       "[1, 65536]"},
      {"\"head_dim\": 512", 1, "\"head_dim\"", "512", "[1, 256]"},
      {"\"head_dim\": -8", 1, "\"head_dim\"", "-8", "[1, 256]"},
      {"\"n_inner\": 4294967296", 0, "\"n_inner\"", "4294967296", "[1, 4194304]"},
      {"\"n_positions\": 0", 0, "\"n_positions\"", "0", "[1, 2147483647]"},
      {"\"vocab_size\": -1", 0, "\"vocab_size\"", "-1", "[1, 2147483647]"},
      /* a derived size: head_dim = n_embd / n_head */
      {"\"n_embd\": 4096, \"n_head\": 8", 0, "head_dim 512", "n_embd / n_head", "[1, 256]"},
      /* every size in range, but the weights beyond an address space: vocab 2^31 - 1 x 2^20 */
      {"\"vocab_size\": 2147483647, \"n_embd\": 1048576, \"n_head\": 4096", 0, "vocab_size x n_embd",
       "2^47", "address"},
      {"\"num_hidden_layers\": 65536, \"hidden_size\": 1048576, \"num_attention_heads\": 4096", 1,
       "num_hidden_layers x the layers", "2^47", "address"},
  };
  ot_hf_config c;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "case %zu", i);
    expect_err(parse(bad[i].llama ? LLAMA(bad[i].over) : GPT2(bad[i].over), &c), OT_ERR_FORMAT, what,
               "m/config.json", bad[i].field, bad[i].value, bad[i].range, (const char *)0);
  }
  /* the largest values that make addressable weights load */
  OT_ASSERT_OK(parse(GPT2("\"n_layer\": 65536"), &c));
  assert_int_equal(c.num_layers, 65536);
  OT_ASSERT_OK(parse(GPT2("\"vocab_size\": 2147483647, \"n_positions\": 2147483647"), &c));
  assert_int_equal(c.vocab_size, 2147483647);
  assert_int_equal(ot_hf_config_num_params(&c), ((int64_t)2147483647 + 2147483647) * 8 + 2 * 8 + 1 * (4 * 64 + 4 * 8 + 2 * 8 * 32 + 32 + 8 + 4 * 8));
  OT_ASSERT_OK(parse(LLAMA("\"head_dim\": 256"), &c));
  assert_int_equal(c.head_dim, 256);
}

/* A config a caller fills in (the demo does) goes through the same checks. */
static void test_struct_checked(void **state) {
  (void)state;
  ot_hf_config c;
  OT_ASSERT_OK(parse(LLAMA(""), &c));
  OT_ASSERT_OK(ot_hf_config_check(&c, "mine"));
  ot_hf_config b = c;
  b.num_layers = (int64_t)1 << 31;
  EXPECT_ERR(ot_hf_config_check(&b, "mine"), OT_ERR_INVALID_ARG, "mine", "\"num_hidden_layers\"", "2147483648");
  b = c;
  b.head_dim = 0;
  EXPECT_ERR(ot_hf_config_check(&b, "mine"), OT_ERR_INVALID_ARG, "mine", "\"head_dim\" is 0");
  b = c;
  b.num_kv_heads = 3;
  EXPECT_ERR(ot_hf_config_check(&b, "mine"), OT_ERR_INVALID_ARG, "not a multiple of num_key_value_heads (3)");
  b = c;
  b.hidden_size = (int64_t)1 << 53;
  EXPECT_ERR(ot_hf_config_check(&b, "mine"), OT_ERR_INVALID_ARG, "\"hidden_size\"", "9007199254740992");
  b = c;
  b.norm_eps = -1;
  EXPECT_ERR(ot_hf_config_check(&b, "mine"), OT_ERR_INVALID_ARG, "rms_norm_eps -1");
  OT_ASSERT_OK(parse(GPT2(""), &c));
  b = c;
  b.head_dim = 3;
  EXPECT_ERR(ot_hf_config_check(&b, "mine"), OT_ERR_INVALID_ARG, "n_head 2 x head_dim 3 is not n_embd 8");
  b = c;
  b.arch = (ot_arch)7;
  EXPECT_ERR(ot_hf_config_check(&b, "mine"), OT_ERR_INVALID_ARG, "neither llama nor gpt2");
  EXPECT_ERR(ot_hf_config_check(NULL, "mine"), OT_ERR_INVALID_ARG, "NULL");

  /* the models check what they are given before they use a size */
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  OT_ASSERT_OK(parse(LLAMA(""), &c));
  c.num_layers = (int64_t)1 << 31; /* was calloc(2^31 layers): an allocation abort under ASan */
  ot_lm *m = (ot_lm *)1;
  EXPECT_ERR(ot_llama_synthetic(ctx, &c, OT_F32, 1, NULL, NULL, &m), OT_ERR_INVALID_ARG, "synthetic model's config",
             "\"num_hidden_layers\"", "2147483648");
  assert_null(m);
  OT_ASSERT_OK(parse(GPT2(""), &c));
  c.hidden_size = (int64_t)1 << 53;
  EXPECT_ERR(ot_gpt2_shapes(ctx, &c, NULL, OT_F32, &m), OT_ERR_INVALID_ARG, "\"n_embd\"", "9007199254740992");
  ot_ctx_destroy(ctx);
}

/* Sizes in range whose weights no host memory holds: refused before anything
 * is allocated (a synthetic Llama of ~100 TiB in f32). */
static void test_host_memory_checked(void **state) {
  (void)state;
  ot_hf_config c;
  OT_ASSERT_OK(parse(LLAMA(""), &c));
  c.hidden_size = 8192, c.intermediate_size = 28672, c.num_heads = 64, c.num_kv_heads = 8, c.head_dim = 128;
  c.num_layers = 30000;
  OT_ASSERT_OK(ot_hf_config_check(&c, "mine"));
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_lm *m = (ot_lm *)1;
  EXPECT_ERR(ot_llama_synthetic(ctx, &c, OT_F32, 1, NULL, NULL, &m), OT_ERR_OUT_OF_MEMORY, "synthetic model's config",
             "the weights need", "TiB", "of host memory, but", "is available", "--dtype");
  assert_null(m);
  /* the KV caches of a generation are checked the same way, before the plan */
  OT_ASSERT_OK(parse(LLAMA("\"max_position_embeddings\": 2147483647, \"num_attention_heads\": 64,"
                           " \"num_key_value_heads\": 64, \"head_dim\": 256"),
                     &c));
  OT_ASSERT_OK(ot_llama_synthetic(ctx, &c, OT_F32, 1, NULL, NULL, &m));
  ot_gen_opts o = ot_gen_opts_default();
  o.max_new_tokens = 100000000; /* 1e8 positions x 64 x 256 x 8 bytes: 13 TB of caches */
  EXPECT_ERR(ot_generate_check(m, 1, &o), OT_ERR_OUT_OF_MEMORY, "KV caches of 100000001 positions", "of host memory",
             "fewer tokens");
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  assert_true(ot_host_memory_available() > 0);
  OT_ASSERT_OK(ot_host_memory_check(1, "a byte"));
  EXPECT_ERR(ot_host_memory_check(UINT64_MAX, "these"), OT_ERR_OUT_OF_MEMORY, "these need", "EiB");
}

/* dir/NAME/config.json holding `json`. */
static void config_dir(const char *name, const char *json) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  assert_int_equal(mkdir(p, 0777), 0);
  snprintf(p, sizeof p, "%s/%s/config.json", dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(json, f);
  fclose(f);
}

#define GPT2_DIR(sizes)                                                                                      \
  "{\"model_type\": \"gpt2\", \"vocab_size\": 256, \"n_positions\": 128, \"resid_pdrop\": 0.0,"              \
  " \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0, " sizes "}"

/* The trainer: the report's heap-buffer overflow (n_layer 2^32 + 1 with
 * init_random), and a GPT-2 whose weights, gradients and moments no host
 * memory holds. */
static void test_trainer(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.init_random = 1;
  o.T = 8;
  ot_gpt2_trainer *g = (ot_gpt2_trainer *)1;
  char p[256];
  config_dir("layers", GPT2_DIR("\"n_embd\": 64, \"n_head\": 4, \"n_layer\": 4294967297"));
  snprintf(p, sizeof p, "%s/layers", dir);
  EXPECT_ERR(ot_gpt2_train_create(ctx, p, &o, NULL, &g), OT_ERR_FORMAT, "layers/config.json", "\"n_layer\"",
             "4294967297", "[1, 65536]");
  assert_null(g);
  config_dir("huge", GPT2_DIR("\"n_embd\": 8192, \"n_head\": 64, \"n_layer\": 30000"));
  snprintf(p, sizeof p, "%s/huge", dir);
  EXPECT_ERR(ot_gpt2_train_create(ctx, p, &o, NULL, &g), OT_ERR_OUT_OF_MEMORY, "huge/config.json", "n_layer 30000",
             "n_embd 8192", "weights, gradients and AdamW moments need", "is available");
  assert_null(g);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_range_checked),
      cmocka_unit_test(test_struct_checked),
      cmocka_unit_test(test_host_memory_checked),
      cmocka_unit_test(test_trainer),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
