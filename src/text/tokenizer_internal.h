/* tokenizer_internal.h — what the tokenizer's files share (tokenizer.c
 * loads, tokenizer_encode.c encodes, tokenizer_decode.c decodes): the
 * loaded tokenizer, growable byte strings and lists, UTF-8 helpers. */
#ifndef OT_TEXT_TOKENIZER_INTERNAL_H
#define OT_TEXT_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"
#include "omptensor/tokenizer.h"
#include "text/strmap.h"

typedef enum { PT_BYTELEVEL, PT_SPLIT, PT_METASPACE } pt_kind;
typedef enum { PS_ALWAYS, PS_NEVER, PS_FIRST } prepend_scheme;

/* Normalizers and decoders that edit text: Prepend (a = what), Replace (a
 * = the pattern, a string, or re = the compiled Regex; b = its
 * replacement); normalizers also NFC/NFD/NFKC/NFKD and Strip (whitespace;
 * n_start / n_stop: left / right); decoders also Strip (a = the character,
 * n_start / n_stop how many), Metaspace (a = the replacement, scheme),
 * ByteLevel, ByteFallback, Fuse. */
typedef enum {
  ED_PREPEND,
  ED_REPLACE,
  ED_NFC,
  ED_NFD,
  ED_NFKC,
  ED_NFKD,
  ED_WSTRIP,
  ED_BYTELEVEL,
  ED_BYTEFALLBACK,
  ED_FUSE,
  ED_STRIP,
  ED_METASPACE
} ed_kind;
typedef struct edit {
  ed_kind kind;
  char *a, *b;
  size_t na, nb;
  pcre2_code *re;
  int n_start, n_stop;
  prepend_scheme scheme;
} edit;
typedef enum { B_ISOLATED, B_REMOVED, B_PREV, B_NEXT, B_CONTIG } split_beh;

typedef struct pretok {
  pt_kind kind;
  int add_prefix_space, use_regex, invert;
  split_beh beh;
  char *repl; /* Metaspace: the replacement character (UTF-8) */
  size_t n_repl;
  prepend_scheme scheme;
  int split;
  pcre2_code *re; /* Split, or ByteLevel's GPT-2 pattern */
} pretok;

/* An added token as tokenizer.json (and tokenizer_config.json's
 * added_tokens_decoder) give it. */
typedef struct added_tok {
  char *content;
  size_t len;
  int32_t id;
  unsigned char lstrip, rstrip, single_word, normalized, special;
} added_tok;

/* The added tokens one pass matches: [0] those with normalized false, in
 * the text as given; [1] the others, their content normalized, in each
 * normalized stretch; with the automaton that finds them
 * (tokenizer_added.c). */
typedef struct added_match {
  char *text; /* what is matched (owned) */
  size_t len;
  int tok; /* index into the tokenizer's add */
} added_match;
typedef struct added_ac added_ac;
typedef struct added_set {
  added_match *v;
  int n;
  added_ac *ac; /* NULL: no token to match */
} added_set;

/* The tokens tokenizer_config.json names (ot_tokenizer_role_id). */
enum { ROLE_BOS, ROLE_EOS, ROLE_PAD, ROLE_UNK, N_ROLES };

/* One id's token text (as decoding starts from it) and whether it is special. */
typedef struct tok_entry {
  char *text; /* NUL-terminated */
  size_t len;
  unsigned char special;
} tok_entry;

struct ot_tokenizer {
  char *file; /* for messages */
  ot_strmap vocab;
  ot_pairmap merges; /* (left id, right id) -> (rank, the joined token's id) */
  tok_entry *ent; /* the tokens of the ids, in the order they were first set */
  int32_t n_ent, cap_ent;
  ot_idmap by_id;   /* id -> index into ent: ids need not be dense */
  int32_t n_ids;    /* one past the largest id */
  int32_t n_vocab;  /* entries of model.vocab (the library's model vocabulary size) */
  added_tok *add;   /* every added token, one per content, in the order first added */
  int n_add, cap_add;
  ot_strmap added_ids; /* an added token's content -> its id */
  ot_idmap add_ix;     /* id -> index into add */
  added_set sets[2];
  pcre2_code *word_re; /* Rust's \w, for single_word (NULL: no such token) */
  pretok *pt;
  int n_pt;
  int byte_level; /* a ByteLevel pre-tokenizer: BPE works on mapped bytes */
  edit *norm, *dec; /* the normalizers and the decoders, in order */
  int n_norm, n_dec;
  int ignore_merges, byte_fallback, fuse_unk;
  int32_t unk;
  int32_t *pre, *post; /* the template's special ids before and after $A */
  int n_pre, n_post, has_template;
  /* tokenizer_config.json */
  int clean_up;       /* decode applies transformers' clean_up_tokenization */
  int split_special;  /* split_special_tokens: special tokens' text is plain text */
  int32_t role[N_ROLES]; /* -1: not named */
};

/* ---- GPT-2's byte <-> printable-codepoint table (tokenizer.c fills it) ---- */
extern uint16_t ot_tok_b2u[256];
extern int16_t ot_tok_u2b[512];
void ot_tok_byte_table(void);

static inline size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  o[0] = (char)(0xC0 | (cp >> 6));
  o[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

/* ---- growable byte strings and lists ---- */
typedef struct bytes {
  char *p;
  size_t n, cap;
} bytes;

typedef struct span {
  size_t off, len;
} span;

typedef struct spans {
  span *v;
  size_t n, cap;
} spans;

typedef struct ids {
  int32_t *v;
  size_t n, cap;
} ids;

static inline int grow_to(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 1;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *np = realloc(*p, c * elem);
  if (!np) return 0;
  *p = np;
  *cap = c;
  return 1;
}

static inline int bytes_add(bytes *b, const char *s, size_t n) {
  if (!grow_to((void **)&b->p, &b->cap, b->n + n + 1, 1)) return 0;
  if (n) memcpy(b->p + b->n, s, n); /* s may be NULL when n is 0 (an empty buffer) */
  b->n += n;
  return 1;
}

static inline int spans_add(spans *s, size_t off, size_t len) {
  if (!len) return 1;
  if (!grow_to((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return 0;
  s->v[s->n++] = (span){off, len};
  return 1;
}

static inline int ids_add(ids *d, int32_t id) {
  if (!grow_to((void **)&d->v, &d->cap, d->n + 1, sizeof *d->v)) return 0;
  d->v[d->n++] = id;
  return 1;
}

#define OOM() ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory")

/* ---- typed fields (tokenizer_field.c) ----
 * Every field of tokenizer.json and tokenizer_config.json that the reader
 * reads is read through ot_tok_field, typed as the tokenizers library's
 * serde types take it: a wrong type is refused naming the file, the
 * field's JSON path ("model.byte_fallback", "decoder.decoders[2].start"),
 * the type found and the one expected, never read as the default. */
typedef enum { TF_BOOL, TF_STRING, TF_CHAR, TF_UINT, TF_ARRAY, TF_OBJECT, TF_NUMBER } tf_type;
typedef enum {
  TF_REQUIRED, /* a Rust field without a default: missing or null is refused */
  TF_DEFAULT,  /* #[serde(default)]: missing takes the default, null is refused */
  TF_OPTIONAL, /* Option<T>: missing or null takes the default */
} tf_presence;
/* Field `key` of object o (at JSON path `path`) of type t: *out the value,
 * NULL where it is absent (or null, where allowed). TF_CHAR: a string of one
 * code point; TF_UINT: an integer >= 0. */
ot_status ot_tok_field(const char *file, const json_t *o, const char *path, const char *key, tf_type t, tf_presence p,
                       const json_t **out);
/* The same for a boolean (*out = dflt where absent), an integer 0..max (a
 * larger one is OT_ERR_UNSUPPORTED), a string (TF_STRING or TF_CHAR; *s NULL
 * where absent). */
ot_status ot_tok_bool(const char *file, const json_t *o, const char *path, const char *key, tf_presence p, int dflt,
                      int *out);
ot_status ot_tok_uint(const char *file, const json_t *o, const char *path, const char *key, tf_presence p,
                      int64_t max, int64_t dflt, int64_t *out);
ot_status ot_tok_str(const char *file, const json_t *o, const char *path, const char *key, tf_type t, tf_presence p,
                     const char **s, size_t *n);
/* path + "." + key (key NULL: none) + "[index]" (index < 0: none) into buf. */
const char *ot_tok_path(char *buf, size_t n, const char *path, const char *key, long index);

/* Steps of this thread's tokenizer loops whose count input could inflate
 * (added-token matching, table entries, ...): the tests read it to assert
 * that a cost grows with the input's size. */
extern _Thread_local uint64_t ot_tok_work;

/* Appends s[0..n) to b with every `from` (nf bytes) replaced by to[0..nt). */
int ot_tok_add_replaced(bytes *b, const char *s, size_t n, const char *from, size_t nf, const char *to, size_t nt);
/* The same with every match of re (a Regex pattern) replaced, as the
 * tokenizers library's Replace does it through Oniguruma. 0: out of memory;
 * < 0: PCRE2's error (its match limit: a pattern that backtracks). */
int ot_tok_add_replaced_re(bytes *b, const char *s, size_t n, const pcre2_code *re, pcre2_match_data *md,
                           const char *to, size_t nt);
/* A match that PCRE2 gave up (rc: its error, the match or depth limit a
 * backtracking pattern reaches), as a status: never taken for "no match". */
ot_status ot_tok_regex_failed(int rc);
/* The normalizers over one stretch of text, into *out. */
ot_status ot_tok_normalize(const ot_tokenizer *tk, const char *s, size_t n, pcre2_match_data *md, bytes *out);
/* The two sets of added tokens from tk->add (again after tokenizer_config.json changed a flag);
 * also each added token's text and special flag in the id table. */
ot_status ot_tok_build_added(ot_tokenizer *tk);
void ot_tok_free_added_sets(ot_tokenizer *tk);
/* For each position i of s[0..n): match[i] the longest of the set's tokens
 * that starts there (an index into set->v; -1: none), in time linear in n. */
ot_status ot_tok_added_longest(const added_set *set, const char *s, size_t n, int32_t *match);
/* ---- decoding (tokenizer_decode.c), the parts the text stream uses ---- */
/* Decoders [k0, k1) over the tokens of ids[0..n) (each must have a token),
 * their texts appended to out (no clean-up). cont: the ids continue an
 * earlier list (a stream's later tokens): no decoder treats its first
 * token as the text's first (Metaspace, Strip's start after a fuse), and
 * without decoders it starts with the joining space. */
ot_status ot_tok_decode_list(const ot_tokenizer *tk, const int32_t *ids, size_t n, int k0, int k1, int cont,
                             bytes *out);
/* ByteLevel's decoding of one token: its characters back to bytes (kept
 * whole if one is outside GPT-2's table). */
void ot_tok_unbyte(bytes *t);
/* Whether t is a byte-fallback token "<0xHH>" (*b its byte), as the library reads it. */
int ot_tok_byte_token(const bytes *t, unsigned char *b);
/* transformers' clean_up_tokenization: from[k] becomes to[k], k in order. */
enum { OT_TOK_N_CLEANUP = 10 };
extern const char *const ot_tok_cleanup_from[OT_TOK_N_CLEANUP];
extern const char *const ot_tok_cleanup_to[OT_TOK_N_CLEANUP];

/* ---- the id table and the added tokens (tokenizer_vocab.c) ---- */
/* id's token (NULL: no such id). */
const tok_entry *ot_tok_entry(const ot_tokenizer *tk, int32_t id);
/* Sets id's token text (adding the id); its special flag stays. */
ot_status ot_tok_set_token(ot_tokenizer *tk, int32_t id, const char *s, size_t n);
/* Marks id (which must have a token) special or not. */
void ot_tok_set_special(ot_tokenizer *tk, int32_t id, int special);
/* The added token with that id (NULL: none). */
added_tok *ot_tok_added_by_id(const ot_tokenizer *tk, int32_t id);
/* s[0..n)'s id, as the library's token_to_id: added tokens first, then the
 * model's vocabulary (-1: neither). */
int32_t ot_tok_find(const ot_tokenizer *tk, const char *s, size_t n);
/* Adds one token as the library's AddedVocabulary::add_tokens does: its id
 * is that of the same content added before, else the vocabulary's, else
 * *next_id (which then grows); a later token of the same content replaces
 * the flags. An empty content is ignored. */
ot_status ot_tok_add_token(ot_tokenizer *tk, const added_tok *t, int32_t *next_id);
/* model (the BPE model's object) and added_tokens (an array) of tokenizer.json. */
ot_status ot_tok_load_model(ot_tokenizer *tk, const json_t *model);
ot_status ot_tok_load_added(ot_tokenizer *tk, const json_t *added);
void ot_tok_free_vocab(ot_tokenizer *tk);
/* tokenizer_config.json (and special_tokens_map.json) of folder dir, where there is one. */
ot_status ot_tok_load_config(ot_tokenizer *tk, const char *dir);


#endif
