/* fuzz_gguf.c — a GGUF file image through ot_gguf_open_mem, then every
 * query on what it accepted (issue 21). */
#include "fuzz_common.h"
#include "omptensor/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = ot_fuzz_copy(data, size);
  ot_gguf *g = NULL;
  if (buf && ot_gguf_open_mem(buf, size, "fuzz.gguf", &g) == OT_OK) {
    for (int i = 0; i < ot_gguf_num_kv(g); i++) {
      ot_gguf_vtype t, e;
      uint64_t n;
      const char *k = ot_gguf_key_at(g, i, &t, &e, &n);
      int64_t iv;
      double fv;
      (void)ot_gguf_get_int(g, k, &iv);
      (void)ot_gguf_get_float(g, k, &fv);
      const char *s = ot_gguf_get_string(g, k);
      if (s && strlen(s) > size) abort();
      if (t == OT_GGUF_V_ARRAY && e == OT_GGUF_V_STRING && n && !ot_gguf_get_array_string(g, k, n - 1)) abort();
    }
    for (int i = 0; i < ot_gguf_num_tensors(g); i++) {
      const ot_gguf_tensor *t = ot_gguf_tensor_at(g, i);
      /* an accepted tensor lies inside the buffer */
      if (t->offset > size || t->bytes > size - t->offset || t->ndim < 1 || t->ndim > 4) abort();
      if (ot_gguf_find_tensor(g, t->name) != t) abort();
    }
    ot_gguf_close(g);
  }
  free(buf);
  return 0;
}
