/* fuzz_st_index.c — model.safetensors.index.json through ot_st_index_parse. */
#include "fuzz_common.h"
#include "io/st_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = ot_fuzz_copy(data, size);
  ot_st_index ix;
  memset(&ix, 0, sizeof ix);
  if (ot_st_index_parse(buf, size, "fuzz.index.json", &ix) == OT_OK) {
    for (int i = 0; i < ix.n; i++)
      if (ix.shard[i] < 0 || ix.shard[i] >= ix.n_shards) abort();
  }
  ot_st_index_free(&ix);
  free(buf);
  return 0;
}
