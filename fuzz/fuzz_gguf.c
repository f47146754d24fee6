/* fuzz_gguf.c — a GGUF file image through ot_gguf_open_mem, then every
 * query on what it accepted (issue 21), every key read at every value type
 * (ot_gguf_expect), and the two readers of the metadata: the config
 * (ot_hf_config_from_gguf_mem, gguf_config.c) and the tokenizer
 * (ot_tokenizer_from_gguf) (issue 43). The seeds (make_corpus.sh) hold the
 * keys they read at their own type and at each other one. */
#include "fuzz_common.h"
#include "omptensor/gguf.h"
#include "omptensor/hfconfig.h"
#include "omptensor/tokenizer.h"

/* Each key at each type: a present key is present at exactly its own type. */
static void expect_each_type(const ot_gguf *g, const char *k, ot_gguf_vtype t) {
  for (int w = 0; w < OT_GGUF_V_COUNT; w++) {
    int has = -1;
    ot_status s = ot_gguf_expect(g, k, (ot_gguf_vtype)w, &has);
    if (s == OT_OK && (has != 1 || w != (int)t)) abort(); /* OK only at its own type (and finite) */
    if (s != OT_OK && w == (int)t && t != OT_GGUF_V_F32 && t != OT_GGUF_V_F64) abort();
  }
}

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
      expect_each_type(g, k, t);
    }
    for (int i = 0; i < ot_gguf_num_tensors(g); i++) {
      const ot_gguf_tensor *t = ot_gguf_tensor_at(g, i);
      /* an accepted tensor lies inside the buffer, and no other overlaps it */
      if (t->offset > size || t->bytes > size - t->offset || t->ndim < 1 || t->ndim > 4) abort();
      if (ot_gguf_find_tensor(g, t->name) != t) abort();
      for (int j = 0; j < i && j < 64; j++) {
        const ot_gguf_tensor *u = ot_gguf_tensor_at(g, j);
        if (t->offset < u->offset + u->bytes && u->offset < t->offset + t->bytes) abort();
      }
    }
    /* the config: an accepted one passes the checks a caller's would */
    ot_hf_config c;
    if (ot_hf_config_from_gguf_mem(buf, size, "fuzz.gguf", &c) == OT_OK && ot_hf_config_check(&c, "fuzz") != OT_OK)
      abort();
    ot_tokenizer *tk = NULL;
    if (ot_tokenizer_from_gguf(g, "fuzz.gguf", &tk) == OT_OK) ot_tokenizer_destroy(tk);
    ot_gguf_close(g);
  }
  free(buf);
  return 0;
}
