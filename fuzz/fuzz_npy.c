/* fuzz_npy.c — a .npy file image through ot_npy_preamble_size and
 * ot_npy_parse_header. */
#include "fuzz_common.h"
#include "io/npy_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *buf = (unsigned char *)ot_fuzz_copy(data, size);
  size_t total = 0, off = 0;
  if (ot_npy_preamble_size(buf, size, "fuzz.npy", &total) == OT_OK && total <= size) {
    ot_npy_array a;
    memset(&a, 0, sizeof a);
    if (ot_npy_parse_header(buf, total, "fuzz.npy", &a, &off) == OT_OK) {
      if (a.ndim < 0 || a.ndim > OT_NPY_MAX_DIMS || a.numel < 0 || off > total) abort();
    }
    ot_npy_free(&a);
  }
  free(buf);
  return 0;
}
