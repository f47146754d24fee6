/* fuzz_safetensors.c — a whole safetensors file image (8-byte length,
 * JSON header, data) through ot_st_parse_buffer, and the header text alone
 * through ot_st_header_parse with a data size taken from the input.
 * Accepted headers must keep the parser's promises (checked, abort if not):
 * every tensor inside the data section, bytes = numel * element size, and
 * the ranges tiling the data section exactly (issue 14: sorted by offset,
 * each begins where the previous ends, the last ends at the data's end). */
#include "fuzz_common.h"
#include "io/st_internal.h"
#include "omptensor/dtype.h"

static int by_offset(const void *a, const void *b) {
  const ot_st_info *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static void check(const ot_st_header *h) {
  for (int i = 0; i < h->n; i++) {
    const ot_st_info *t = &h->tensors[i];
    if (t->offset < h->data_start || t->bytes > h->data_bytes || t->offset - h->data_start > h->data_bytes - t->bytes)
      abort();
    if (t->ndim < 0 || t->ndim > OT_ST_MAX_DIMS || t->numel < 0 || ot_dtype_bytes(t->dtype, t->numel) != t->bytes)
      abort();
  }
  ot_st_info *sorted = malloc((size_t)(h->n ? h->n : 1) * sizeof *sorted);
  if (!sorted) abort();
  memcpy(sorted, h->tensors, (size_t)h->n * sizeof *sorted);
  qsort(sorted, (size_t)h->n, sizeof *sorted, by_offset);
  uint64_t at = h->data_start;
  for (int i = 0; i < h->n; i++) {
    if (sorted[i].offset != at) abort();
    at += sorted[i].bytes;
  }
  if (at != h->data_start + h->data_bytes) abort();
  free(sorted);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = ot_fuzz_copy(data, size);
  ot_st_header h;
  memset(&h, 0, sizeof h);
  if (ot_st_parse_buffer(buf, size, "fuzz.safetensors", &h) == OT_OK) check(&h);
  ot_st_header_free(&h);
  /* The header parser alone: the first byte picks a data-section size so
   * that offsets beyond / at / inside the data are all reached. */
  if (size > 1) {
    uint64_t data_bytes = (uint64_t)data[0] * 64;
    memset(&h, 0, sizeof h);
    if (ot_st_header_parse(buf + 1, size - 1, 8 + size - 1, data_bytes, "fuzz-header", &h) == OT_OK) check(&h);
    ot_st_header_free(&h);
  }
  free(buf);
  return 0;
}
