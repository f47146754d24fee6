/* cmd_inspect.c — `omptensor inspect FILE|DIR`: what a checkpoint holds. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common.h"
#include "omptensor/gguf.h"
#include "omptensor/hfconfig.h"
#include "omptensor/safetensors.h"

/* "[d0, d1, ...]" into shape[96]. */
static void format_shape(const int64_t *dims, int ndim, char shape[96]) {
  int k = snprintf(shape, 96, "[");
  for (int d = 0; d < ndim && k < 96; d++) k += snprintf(shape + k, 96 - (size_t)k, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (k < 96) snprintf(shape + k, 96 - (size_t)k, "]");
}

static void print_info(const ot_st_info *t, int shards) {
  char shape[96];
  format_shape(t->shape, t->ndim, shape);
  char b[32];
  ot_size_format(t->bytes, b, sizeof b);
  if (shards > 1) printf("%-60s %-5s %-22s %12s  shard %d\n", t->name, ot_dtype_name(t->dtype), shape, b, t->shard);
  else printf("%-60s %-5s %-22s %12s\n", t->name, ot_dtype_name(t->dtype), shape, b);
}

/* A GGUF file: its version, metadata (arrays by type and length) and tensors. */
static int inspect_gguf(const char *prog, const char *path) {
  ot_gguf *g;
  ot_status st = ot_gguf_open(path, &g);
  if (st != OT_OK) return ot_cli_fail(prog, st);
  const char *arch = ot_gguf_get_string(g, "general.architecture");
  printf("GGUF version %u, architecture %s, %d metadata keys, %d tensors, alignment %llu\n", ot_gguf_version(g),
         arch ? arch : "(none)", ot_gguf_num_kv(g), ot_gguf_num_tensors(g), (unsigned long long)ot_gguf_alignment(g));
  for (int i = 0; i < ot_gguf_num_kv(g); i++) {
    ot_gguf_vtype t, e;
    uint64_t count;
    const char *key = ot_gguf_key_at(g, i, &t, &e, &count);
    int64_t iv;
    double fv;
    if (t == OT_GGUF_V_STRING) printf("  %-44s string  %.60s\n", key, ot_gguf_get_string(g, key));
    else if (t == OT_GGUF_V_ARRAY) printf("  %-44s array of %llu %s\n", key, (unsigned long long)count, ot_gguf_vtype_name(e));
    else if (ot_gguf_get_int(g, key, &iv)) printf("  %-44s %-7s %lld\n", key, ot_gguf_vtype_name(t), (long long)iv);
    else if (ot_gguf_get_float(g, key, &fv)) printf("  %-44s %-7s %g\n", key, ot_gguf_vtype_name(t), fv);
    else printf("  %-44s %s\n", key, ot_gguf_vtype_name(t));
  }
  uint64_t total = 0;
  for (int i = 0; i < ot_gguf_num_tensors(g); i++) {
    const ot_gguf_tensor *t = ot_gguf_tensor_at(g, i);
    char shape[96], b[32];
    format_shape(t->shape, t->ndim, shape);
    ot_size_format(t->bytes, b, sizeof b);
    printf("%-60s %-5s %-22s %12s\n", t->name, ot_gguf_type_name(t->type), shape, b);
    total += t->bytes;
  }
  char b[32];
  ot_size_format(total, b, sizeof b);
  printf("%d tensors, %s (%llu bytes)\n", ot_gguf_num_tensors(g), b, (unsigned long long)total);
  ot_gguf_close(g);
  return 0;
}

int ot_cli_inspect(int argc, char **argv) {
  const char *prog = "omptensor inspect";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: omptensor inspect FILE.safetensors | FILE.gguf | MODEL_DIR\n\n"
             "Lists the tensors of a safetensors file or a Hugging Face model directory (one\n"
             "model.safetensors or shards with model.safetensors.index.json): name, dtype,\n"
             "shape, bytes; and the model's config.json when there is one. A GGUF file\n"
             "(llama.cpp's format): its metadata and tensors with their ggml types.\n");
      return 0;
    }
    if (argv[i][0] == '-') {
      fprintf(stderr, "%s: unknown option '%s' (see omptensor inspect --help)\n", prog, argv[i]);
      return 2;
    }
  }
  if (argc != 2) {
    fprintf(stderr, "%s: expected one FILE.safetensors or MODEL_DIR, got %d arguments (see omptensor inspect --help)\n",
            prog, argc - 1);
    return 2;
  }
  const char *path = argv[1];
  if (ot_gguf_is_file(path)) return inspect_gguf(prog, path);
  ot_ckpt *ck;
  ot_status st = ot_ckpt_open(path, &ck);
  if (st != OT_OK) return ot_cli_fail(prog, st);
  int n = ot_ckpt_count(ck), shards = ot_ckpt_num_shards(ck);
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    print_info(ot_ckpt_at(ck, i), shards);
    total += ot_ckpt_at(ck, i)->bytes;
  }
  char b[32];
  ot_size_format(total, b, sizeof b);
  printf("%d tensors in %d file(s), %s (%llu bytes)\n", n, shards, b, (unsigned long long)total);
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    ot_hf_config c;
    if (ot_hf_config_load(path, &c) == OT_OK)
      printf("config: %s (%s), hidden %lld, layers %lld, heads %lld/%lld kv, head_dim %lld, intermediate %lld, "
             "vocab %lld, positions %lld, tied embeddings %s\n",
             c.model_type, c.architecture, (long long)c.hidden_size, (long long)c.num_layers, (long long)c.num_heads,
             (long long)c.num_kv_heads, (long long)c.head_dim, (long long)c.intermediate_size, (long long)c.vocab_size,
             (long long)c.max_position_embeddings, c.tie_word_embeddings ? "yes" : "no");
    else
      printf("config: %s\n", ot_last_error());
  }
  ot_ckpt_close(ck);
  return 0;
}
