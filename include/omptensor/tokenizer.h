/* tokenizer.h — Hugging Face tokenizer.json in C: text to token ids and back.
 *
 *     ot_tokenizer *tk;
 *     if (ot_tokenizer_load("model_dir", &tk) != OT_OK) ... ot_last_error() ...
 *     int32_t *ids; size_t n;
 *     ot_tokenizer_encode(tk, "Hello", 5, 1, &ids, &n);   // 1: add the special tokens the file's template adds
 *     char *text; size_t len;
 *     ot_tokenizer_decode(tk, ids, n, 1, &text, &len);     // 1: skip special tokens
 *     free(ids); free(text); ot_tokenizer_destroy(tk);
 *
 * What the reader supports (anything else in the file is OT_ERR_UNSUPPORTED
 * naming the file, the field and the value, never ignored). Every field it
 * reads is typed as the tokenizers library's serde types type it: a wrong
 * type, a missing field the library requires, or null where it takes none,
 * is OT_ERR_FORMAT naming the file and the field's JSON path
 * ("model.byte_fallback: expected a boolean, found a string").
 *   model          BPE: vocab (ids any u32, dense or not, held in memory
 *                  that grows with their count; up to 2^31-2 here), merges
 *                  (all "a b" strings or all [a, b] pairs; each two tokens
 *                  of vocab whose join is one too, else refused as the
 *                  library refuses it), ignore_merges, unk_token,
 *                  byte_fallback (<0xHH> tokens), fuse_unk; no dropout
 *                  (but 0), subword prefix or suffix
 *   normalizer     Prepend, Replace (a String or a Regex pattern), NFC,
 *                  NFD, NFKC, NFKD (utf8proc), Strip (whitespace, left /
 *                  right), Sequence of those
 *   pre_tokenizer  ByteLevel (add_prefix_space, use_regex: GPT-2's
 *                  pattern), Split (a regex or a string; behavior Isolated,
 *                  Removed, MergedWithPrevious, MergedWithNext, Contiguous;
 *                  invert), Metaspace (replacement, prepend_scheme always,
 *                  first or never, or the older add_prefix_space; split),
 *                  Digits (individual_digits), Punctuation (behavior),
 *                  Sequence of those
 *   post_processor ByteLevel (ids unchanged), TemplateProcessing (the
 *                  single-sequence template: special tokens around $A),
 *                  Sequence of those (one template at most)
 *   decoder        ByteLevel (the bytes of all tokens read as UTF-8, each
 *                  invalid stretch one U+FFFD), Replace (String or Regex),
 *                  ByteFallback (a <0xHH> run that is not UTF-8: one
 *                  U+FFFD per byte), Fuse, Strip, Metaspace, Sequence of
 *                  those; none: the tokens joined with spaces
 *   added_tokens   as the library matches them: those with normalized
 *                  false in the text as given, longest first, then the
 *                  others in each normalized stretch (in time linear in
 *                  the text); lstrip, rstrip, single_word, special; an
 *                  entry's "id" is typed but, as the library, not used: a
 *                  token takes the id of its text in vocab, or the next
 *                  after vocab's size
 * A folder's tokenizer_config.json (and special_tokens_map.json), as
 * transformers 5 reads them: bos/eos/pad/unk_token (ot_tokenizer_role_id;
 * each becomes special), additional_special_tokens, split_special_tokens,
 * added_tokens_decoder (its flags win), clean_up_tokenization_spaces (which
 * transformers 5 skips for BPE unless clean_up_tokenization_spaces_for_bpe_
 * even_though_it_will_corrupt_output is true too); add_bos_token and
 * add_eos_token are dropped beside a tokenizer.json, as transformers 5
 * drops them (the file's template stands). A named token that is not in
 * tokenizer.json is refused. Other keys (chat_template, model_max_length,
 * tokenizer_class, ...) do not change ids or text and are not read; nor is
 * the pipeline transformers 5 rebuilds for some tokenizer classes from
 * their own code (this reader runs tokenizer.json's).
 * Regular expressions are PCRE2's, in UTF mode with Unicode properties
 * (\p{L}, \p{N}), as the tokenizers library's Oniguruma patterns expect.
 */
#ifndef OMPTENSOR_TOKENIZER_H
#define OMPTENSOR_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_tokenizer ot_tokenizer;

/* `path`: a tokenizer.json, or a folder holding one (then also its
 * tokenizer_config.json and special_tokens_map.json where present), or a
 * GGUF file (ot_tokenizer_load_gguf below). */
ot_status ot_tokenizer_load(const char *path, ot_tokenizer **out);
/* The same from tokenizer.json's text in memory; `label` names it in messages. */
ot_status ot_tokenizer_parse(const char *json, size_t len, const char *label, ot_tokenizer **out);
void ot_tokenizer_destroy(ot_tokenizer *tk); /* NULL is fine */

/* A tokenizer from a GGUF file's metadata (llama.cpp's tokenizer.ggml.*
 * keys; a GGUF carries no tokenizer.json): tokenizer.ggml.model "llama"
 * (sentencepiece: tokens, scores, token_type; merges generated from the
 * scores as transformers does) or "gpt2" (byte-level BPE: tokens, merges,
 * tokenizer.ggml.pre one of default, gpt2, llama3, llama-v3, llama-bpe,
 * falcon3, qwen2, deepseek-r1-qwen). Control tokens are special added
 * tokens, user-defined ones added tokens; BOS / EOS as add_bos_token /
 * add_eos_token say (default: BOS for "llama" only); the bos, eos,
 * padding and unknown token ids are the roles (ot_tokenizer_role_id).
 * Anything else (another model or pre, arrays of the wrong type or length,
 * an id outside the vocabulary, a merge of non-tokens) is refused naming
 * `label` (the file) and the key: OT_ERR_UNSUPPORTED for what is valid but
 * not read, OT_ERR_FORMAT for what is broken, OT_ERR_NOT_FOUND where the
 * file has no tokenizer.ggml.model at all. src/text/tokenizer_gguf.c says
 * how each part follows llama.cpp and transformers. */
typedef struct ot_gguf ot_gguf;
ot_status ot_tokenizer_from_gguf(const ot_gguf *g, const char *label, ot_tokenizer **out);
/* The same from the file at `path` (ot_tokenizer_load takes a .gguf path too). */
ot_status ot_tokenizer_load_gguf(const char *path, ot_tokenizer **out);

/* Encodes `len` bytes of UTF-8 text (invalid UTF-8 is OT_ERR_INVALID_ARG
 * with its byte offset). `add_special`: also the special tokens the
 * post-processor's template adds (BOS, ...). *ids is malloc'ed. */
ot_status ot_tokenizer_encode(const ot_tokenizer *tk, const char *text, size_t len, int add_special, int32_t **ids,
                              size_t *n);

/* Decodes ids to UTF-8 text (*text malloc'ed and NUL-terminated);
 * `skip_special` leaves out the special added tokens. An id outside the
 * vocabulary is OT_ERR_INVALID_ARG naming it. */
ot_status ot_tokenizer_decode(const ot_tokenizer *tk, const int32_t *ids, size_t n, int skip_special, char **text,
                              size_t *len);

/* The vocabulary size (largest id + 1) and one token's text as stored (NULL
 * outside the vocabulary). */
int32_t ot_tokenizer_vocab_size(const ot_tokenizer *tk);
const char *ot_tokenizer_token(const ot_tokenizer *tk, int32_t id);
/* Whether id is a special added token. */
int ot_tokenizer_is_special(const ot_tokenizer *tk, int32_t id);

/* Copies the files of model directory from_dir that tokenize its text and
 * configure its generation (tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json, generation_config.json, tokenizer.model,
 * vocab.json, merges.txt, added_tokens.json), those it has, into to_dir,
 * each atomically (a temporary renamed over the name); *copied (if not
 * NULL) how many. A from_dir that is a file (a GGUF) has none to copy. */
ot_status ot_tokenizer_copy_files(const char *from_dir, const char *to_dir, int *copied);

/* The tokens tokenizer_config.json (or special_tokens_map.json) of the
 * folder ot_tokenizer_load read names: bos_token, eos_token, pad_token,
 * unk_token. The id, or -1 where none is named (always -1 for a tokenizer
 * from ot_tokenizer_parse or from a .json path). */
typedef enum { OT_TOKEN_BOS, OT_TOKEN_EOS, OT_TOKEN_PAD, OT_TOKEN_UNK } ot_token_role;
int32_t ot_tokenizer_role_id(const ot_tokenizer *tk, ot_token_role role);

#ifdef __cplusplus
}
#endif
#endif
