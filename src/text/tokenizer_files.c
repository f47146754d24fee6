/* tokenizer_files.c — the files of a Hugging Face model directory that
 * tokenize its text and configure its generation, copied into another
 * (tokenizer.h, ot_tokenizer_copy_files): a checkpoint written from a
 * trained model is then a directory transformers and `omptensor run` load
 * with its text, as save_pretrained of the model and its tokenizer writes. */
#include <stdio.h>

#include "core/file.h"
#include "text/tokenizer_internal.h"

#define MAX_COPY (1u << 30) /* the reader's own limit on tokenizer.json */

/* The files transformers' tokenizers and GenerationConfig read. */
static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                    "generation_config.json", "tokenizer.model", "vocab.json", "merges.txt",
                                    "added_tokens.json"};

ot_status ot_tokenizer_copy_files(const char *from_dir, const char *to_dir, int *copied) {
  if (copied) *copied = 0;
  if (!from_dir || !to_dir) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_copy_files: NULL argument");
  if (ot_path_kind_of(from_dir, NULL) != OT_PATH_DIR) return OT_OK; /* a file (a GGUF): nothing beside it to copy */
  ot_status st = OT_OK;
  for (size_t k = 0; st == OT_OK && k < sizeof files / sizeof *files; k++) {
    char src[4096], dst[4096];
    if (snprintf(src, sizeof src, "%s/%s", from_dir, files[k]) >= (int)sizeof src ||
        snprintf(dst, sizeof dst, "%s/%s", to_dir, files[k]) >= (int)sizeof dst)
      return ot_fail(OT_ERR_INVALID_ARG, "%s: the path is too long", from_dir);
    char *buf = NULL;
    size_t len = 0;
    st = ot_file_read(src, MAX_COPY, &buf, &len);
    if (st == OT_ERR_NOT_FOUND) { /* the source has no such file */
      ot_clear_error();
      st = OT_OK;
      continue;
    }
    if (st == OT_OK) st = ot_file_write(dst, buf, len); /* atomic: a temporary renamed over dst */
    if (st == OT_OK && copied) ++*copied;
    free(buf);
  }
  return st;
}
