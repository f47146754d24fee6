/* cmd_inspect.c — `omptensor inspect FILE|DIR`: what a checkpoint holds. */
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common.h"
#include "omptensor/hfconfig.h"
#include "omptensor/safetensors.h"

static void print_info(const ot_st_info *t, int shards) {
  char shape[96];
  int k = snprintf(shape, sizeof shape, "[");
  for (int d = 0; d < t->ndim && k < (int)sizeof shape; d++)
    k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  if (k < (int)sizeof shape) snprintf(shape + k, sizeof shape - (size_t)k, "]");
  char b[32];
  ot_size_format(t->bytes, b, sizeof b);
  if (shards > 1) printf("%-60s %-5s %-22s %12s  shard %d\n", t->name, ot_dtype_name(t->dtype), shape, b, t->shard);
  else printf("%-60s %-5s %-22s %12s\n", t->name, ot_dtype_name(t->dtype), shape, b);
}

int ot_cli_inspect(int argc, char **argv) {
  const char *prog = "omptensor inspect";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: omptensor inspect FILE.safetensors | MODEL_DIR\n\n"
             "Lists the tensors of a safetensors file or a Hugging Face model directory (one\n"
             "model.safetensors or shards with model.safetensors.index.json): name, dtype,\n"
             "shape, bytes; and the model's config.json when there is one.\n");
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
