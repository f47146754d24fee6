/* cmd_demo.c — `omptensor demo`: the main job on a built-in default.
 *
 * A deterministic synthetic Llama-shaped model, generated in memory from a
 * seed (no download), about 4x the demo's budget, generates tokens with
 * offloading and prints tokens/s and the memory summary. Without a GPU it is
 * small enough to finish in well under a minute on two cores; on a GPU it
 * takes Llama-2-7B's layer shapes in bf16. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "report.h"
#include "omptensor/models.h"

enum { OPT_HELP = 1, OPT_SIZE, OPT_MAXNEW, OPT_SEED };

static const ot_opt demo_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"size", 0, "SIZE", "weight bytes of the synthetic model (default: 128MB on the host/emulated device, 8GiB on a GPU; "
     "at least the smallest model, one layer)", OPT_SIZE},
    {"max-new-tokens", 'n', "N", "tokens to generate (default 32)", OPT_MAXNEW},
    {"seed", 0, "N", "seed of the synthetic weights and prompt (default 1)", OPT_SEED},
    {0}};

/* The settings the demo reads: not the host memory budget (its synthetic
 * weights have no checkpoint files to read from) and not the generation
 * ones (--max-new-tokens and --seed are its own, above). */
static const ot_setting demo_settings[] = {OT_SET_GPU_MEMORY_LIMIT, OT_SET_OFFLOAD, OT_SET_BACKEND,       OT_SET_DEVICE,
                                           OT_SET_DEVICES,          OT_SET_TRACE,   OT_SET_DTYPE,         OT_SET_JSON,
                                           OT_SET_USM_PLACEMENT,    OT_SET_COMPUTE};
#define N_DEMO_SETTINGS (int)(sizeof demo_settings / sizeof demo_settings[0])

typedef struct demo_args {
  ot_cli_session *s;
  ot_size size;
  const char *size_text; /* as given, for messages */
  int max_new, help;
  uint64_t seed;
} demo_args;

static ot_status on_opt(void *user, const ot_opt *o, const char *v) {
  demo_args *a = user;
  ot_status st;
  if (ot_cli_session_option(a->s, o, v, &st)) return st;
  if (!o) return ot_set_error(OT_ERR_INVALID_ARG, "unexpected argument '%s' (demo takes no model; see omptensor demo --help)", v);
  switch (o->id) {
  case OPT_HELP: a->help = 1; return OT_OK;
  case OPT_SIZE:
    a->size_text = v;
    OT_TRY(ot_size_parse(v, &a->size));
    if (a->size.kind != OT_SIZE_BYTES)
      return ot_set_error(OT_ERR_INVALID_ARG, "a size in bytes is needed (e.g. 128MB), not a percentage");
    return OT_OK;
  case OPT_MAXNEW: return ot_cli_int(v, 1, 4096, &a->max_new);
  case OPT_SEED: return ot_args_u64(v, 0, UINT64_MAX, &a->seed);
  default: return ot_set_error(OT_ERR_INVALID_ARG, "unhandled option --%s", o->name);
  }
}

/* A Llama shape whose weights take about `bytes` in dtype wt: the layer
 * shapes are fixed (small ones off the GPU, Llama-2-7B's on a GPU) and the
 * depth fills the size. */
static void demo_config(uint64_t bytes, int gpu, ot_dtype wt, ot_hf_config *c) {
  ot_llama_synthetic_config(c, gpu ? 4096 : 512, gpu ? 11008 : 1408, gpu ? 32 : 8, gpu ? 32 : 4, gpu ? 32000 : 8192, 0);
  c->max_position_embeddings = 512;
  /* A small --size: halve the widths until the embedding (the largest single
   * weight) takes at most a sixth of the size, two thirds of the default
   * budget, so that every op fits beside its activations and the model is
   * deep rather than all embedding. */
  while (c->hidden_size > 64 && ot_dtype_bytes(wt, c->vocab_size * c->hidden_size) > bytes / 6) {
    c->hidden_size /= 2;
    c->intermediate_size /= 2;
    c->vocab_size /= 2;
    if (c->hidden_size / c->num_heads < 16) c->num_heads /= 2, c->num_kv_heads = (c->num_kv_heads + 1) / 2;
  }
  c->head_dim = c->hidden_size / c->num_heads;
  int64_t D = c->hidden_size, kv = c->num_kv_heads * c->head_dim;
  uint64_t per_layer = ot_dtype_bytes(wt, 2 * D * D + 2 * D * kv + 3 * D * c->intermediate_size);
  uint64_t io = 2 * ot_dtype_bytes(wt, c->vocab_size * D);
  c->num_layers = bytes > io + per_layer ? (int64_t)((bytes - io) / per_layer) : 1;
}

/* The weights' bytes of config c in dtype wt (UINT64_MAX when they would
 * overflow): the layers with their norms, the embedding and head, the final
 * norm. */
static uint64_t weight_bytes(const ot_hf_config *c, ot_dtype wt) {
  int64_t D = c->hidden_size, kv = c->num_kv_heads * c->head_dim;
  uint64_t per_layer = ot_dtype_bytes(wt, 2 * D * D + 2 * D * kv + 3 * D * c->intermediate_size + 2 * D);
  uint64_t need = 2 * ot_dtype_bytes(wt, c->vocab_size * D) + ot_dtype_bytes(wt, D);
  if ((uint64_t)c->num_layers > (UINT64_MAX - need) / per_layer) return UINT64_MAX;
  return need + (uint64_t)c->num_layers * per_layer;
}

/* A --size below the smallest synthetic model (one layer of the narrowest
 * shape) cannot be honoured: refused by name, not a larger model made (and
 * its budget, a quarter of the size given, then blamed on the budget). */
static ot_status check_size(const demo_args *a, const ot_hf_config *c, ot_dtype wt, uint64_t size) {
  const uint64_t need = weight_bytes(c, wt);
  /* (a deeper model may pass the size by its norms' few bytes: demo_config
   * counts the size in whole layers without them) */
  if (!a->size_text || c->num_layers > 1 || need <= size) return OT_OK;
  char nb[OT_SIZE_FORMAT_LEN];
  return ot_set_error(OT_ERR_INVALID_ARG,
                      "--size %s: the smallest synthetic model (one layer, hidden %lld, vocab %lld, %s) takes %llu "
                      "bytes (%s); give at least that",
                      a->size_text, (long long)c->hidden_size, (long long)c->vocab_size, ot_dtype_name(wt),
                      (unsigned long long)need, ot_size_format(need, nb, sizeof nb));
}

/* The synthetic weights live in host memory (pinned or pageable): a --size
 * that does not fit is refused before anything is allocated, not found out
 * by allocating until the kernel kills us. */
static ot_status check_host_memory(const demo_args *a, const ot_hf_config *c, ot_dtype wt) {
  const uint64_t need = weight_bytes(c, wt), avail = ot_host_memory_available();
  if (!avail || need <= avail) return OT_OK;
  char nb[32], ab[32];
  ot_size_format(need, nb, sizeof nb);
  ot_size_format(avail, ab, sizeof ab);
  return ot_set_error(OT_ERR_INVALID_ARG,
                      "--size %s: the synthetic model's weights take %llu bytes (%s) of host memory, and %llu bytes "
                      "(%s) are available (MemAvailable, within any cgroup limit); give a smaller --size",
                      a->size_text ? a->size_text : "(default)", (unsigned long long)need, nb, (unsigned long long)avail,
                      ab);
}

int ot_cli_demo(int argc, char **argv) {
  const char *prog = "omptensor demo";
  ot_cli_session s;
  ot_cli_session_init(&s, prog);
  demo_args a = {.s = &s, .max_new = 32, .seed = 1};
  ot_opt settings[N_DEMO_SETTINGS + 2];
  const ot_opt *tables[] = {demo_opts, ot_settings_opts_of(demo_settings, N_DEMO_SETTINGS, settings),
                            ot_cli_common_opts(), NULL};
  ot_status st = ot_args_parse(prog, argc, argv, tables, on_opt, &a);
  if (st == OT_OK && a.help) {
    printf("usage: omptensor demo [options]\n\n"
           "Generates tokens with a deterministic synthetic Llama-shaped model (made in memory\n"
           "from a seed) about 4x larger than the device memory budget, offloading as it goes,\n"
           "and prints tokens/s and the memory summary. --gpu-memory-limit defaults to a quarter\n"
           "of --size (at most the device's memory).\n\noptions:\n");
    ot_args_print_help(stdout, tables);
    ot_cli_session_end(&s);
    return 0;
  }
  /* The budget is a quarter of the model unless the user chose one. */
  int gpu = 0;
  uint64_t size = 0, capacity = 0;
  ot_dtype wt = OT_F32;
  if (st == OT_OK) {
    ot_ctx *probe = NULL;
    ot_ctx_opts po = ot_ctx_opts_default();
    st = ot_settings_to_ctx_opts(&s.settings, &po);
    if (st == OT_OK) st = ot_ctx_create(&po, &probe);
    if (st == OT_OK && ot_ctx_backend(probe) != OT_BACKEND_HOST) {
      uint64_t fr = 0, tot = 0;
      ot_device_memory(ot_ctx_device(probe, 0), &fr, &tot);
      gpu = tot > 0;
      capacity = ot_device_capacity(ot_ctx_device(probe, 0));
    }
    ot_ctx_destroy(probe);
    wt = s.settings.has_dtype ? ot_cli_weight_dtype(&s.settings) : gpu ? OT_BF16 : OT_F32;
    size = a.size.kind == OT_SIZE_BYTES ? a.size.bytes : gpu ? (8ull << 30) : 128000000ull;
  }
  ot_hf_config cfg;
  demo_config(size, gpu, wt, &cfg);
  if (st == OT_OK) st = check_size(&a, &cfg, wt, size);
  if (st == OT_OK && s.settings.source[OT_SET_GPU_MEMORY_LIMIT] == OT_SRC_DEFAULT) {
    /* in bytes, whole: a size's text would be read by the size rules; and
     * never more than the device holds (a --size beyond 4x its memory) */
    uint64_t budget = size / 4 > 0 ? size / 4 : 1;
    if (capacity && budget > capacity) budget = capacity;
    char b[32];
    snprintf(b, sizeof b, "%lluB", (unsigned long long)budget);
    st = ot_settings_set(&s.settings, OT_SRC_DEFAULT, "gpu-memory-limit", b);
  }
  if (st == OT_OK) st = check_host_memory(&a, &cfg, wt);
  if (st == OT_OK) st = ot_cli_session_start(&s);
  if (st == OT_OK) st = ot_cli_check_trace(&s);
  ot_lm *m = NULL;
  ot_gen_opts g = ot_gen_opts_default();
  g.max_new_tokens = a.max_new;
  g.sched = s.sched;
  if (st == OT_OK) {
    /* The plans under the budget on the shapes alone, before a byte of the
     * weights is made: a budget too small is bad input, said in one line. */
    st = ot_llama_shapes(s.ctx, &cfg, NULL, wt, &m);
    if (st == OT_OK) st = ot_generate_check(m, 16, &g);
    if (st == OT_ERR_BUDGET && s.settings.source[OT_SET_GPU_MEMORY_LIMIT] == OT_SRC_DEFAULT)
      st = ot_prefix_error(st, "--size %llu bytes: the default budget, a quarter of it, is too small (give a larger "
                           "--size or a --gpu-memory-limit)", (unsigned long long)size);
    else st = ot_cli_budget_error(&s, st);
    ot_lm_destroy(m);
    m = NULL;
  }
  if (st == OT_OK) {
    ot_cli_input_accepted();
    fprintf(stderr, "demo: synthetic Llama, %lld layers, hidden %lld, vocab %lld, %s weights (seed %llu)\n",
            (long long)cfg.num_layers, (long long)cfg.hidden_size, (long long)cfg.vocab_size, ot_dtype_name(wt),
            (unsigned long long)a.seed);
    st = ot_llama_synthetic(s.ctx, &cfg, wt, a.seed, ot_cli_progress, &s, &m);
  }
  /* A fixed pseudo-random prompt of 16 tokens from the seed. */
  int32_t prompt[16];
  uint64_t x = a.seed * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < 16; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    prompt[i] = (int32_t)(x % (uint64_t)cfg.vocab_size);
  }
  ot_gen_result r = {0};
  if (st == OT_OK) {
    g.trace = s.trace;
    g.progress = ot_cli_progress;
    g.progress_user = &s;
    st = ot_generate(m, prompt, 16, &g, &r);
  }
  if (st == OT_OK) st = ot_cli_report(&s, "synthetic-llama", m, &r, stdout);
  int rc = st == OT_OK ? 0 : ot_cli_fail(prog, st);
  ot_gen_result_free(&r);
  ot_lm_destroy(m);
  ot_cli_session_end(&s);
  return rc;
}
