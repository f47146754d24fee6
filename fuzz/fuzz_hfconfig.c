/* fuzz_hfconfig.c — config.json through ot_hf_config_parse. */
#include "fuzz_common.h"
#include "omptensor/hfconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = ot_fuzz_copy(data, size);
  static const char empty[1] = {0};
  ot_hf_config c;
  if (ot_hf_config_parse(buf ? buf : empty, size, "fuzz/config.json", &c) == OT_OK) {
    /* What the model builders rely on. */
    if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 ||
        c.vocab_size <= 0 || c.n_eos < 0 || c.n_eos > OT_HF_MAX_EOS)
      abort();
    /* issue 14: every size in its range, the weights addressable, and the
     * same verdict from the check a caller's struct goes through */
    if (c.num_layers > OT_HF_MAX_LAYERS || c.hidden_size > OT_HF_MAX_HIDDEN || c.head_dim > OT_HF_MAX_HEAD_DIM ||
        c.intermediate_size > OT_HF_MAX_INTERMEDIATE || c.num_heads > OT_HF_MAX_HEADS ||
        c.vocab_size > OT_HF_MAX_VOCAB || c.max_position_embeddings < 1 ||
        c.max_position_embeddings > OT_HF_MAX_POSITIONS)
      abort();
    int64_t n = ot_hf_config_num_params(&c);
    if (n < 0 || n > OT_HF_MAX_WEIGHT_BYTES / 4 || ot_hf_config_check(&c, "fuzz") != OT_OK) abort();
  }
  free(buf);
  return 0;
}
