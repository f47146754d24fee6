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
  }
  free(buf);
  return 0;
}
