/* fuzz_genconfig.c — generation_config.json through ot_hf_gen_config_parse. */
#include <math.h>
#include <string.h>

#include "fuzz_common.h"
#include "omptensor/hfconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = ot_fuzz_copy(data, size);
  static const char empty[1] = {0};
  ot_hf_gen_config g;
  if (ot_hf_gen_config_parse(buf ? buf : empty, size, "fuzz/generation_config.json", &g) == OT_OK) {
    /* What generation relies on: every value it applies within the range
     * the sampler takes, and the notice text terminated. */
    if (!g.found || g.n_eos < 0 || g.n_eos > OT_HF_MAX_EOS) abort();
    if (g.has_temperature && !(g.temperature >= 0 && g.temperature <= 100)) abort();
    if (g.has_top_p && !(g.top_p > 0 && g.top_p <= 1)) abort();
    if ((g.has_top_k && (g.top_k < 0 || g.top_k > INT32_MAX)) ||
        (g.has_max_new_tokens && (g.max_new_tokens < 0 || g.max_new_tokens > INT32_MAX)))
      abort();
    for (int i = 0; i < g.n_eos; i++)
      if (g.eos_token_ids[i] < 0) abort();
    if (memchr(g.not_applied, 0, sizeof g.not_applied) == NULL) abort();
  } else if (g.found) {
    abort(); /* a refused file leaves nothing half-read */
  }
  free(buf);
  return 0;
}
