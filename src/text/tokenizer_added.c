/* tokenizer_added.c — finding the added tokens in a text, as the tokenizers
 * library's AddedVocabulary does (a leftmost-longest Aho-Corasick automaton,
 * daachorse's): at each position the longest added token that starts there,
 * scanning on from its end.
 *
 * The cost grows with the text and with the tokens' total size, never with
 * their product: the automaton holds the tokens reversed, and one pass over
 * the text from its end gives, at every position, the longest token that
 * starts there (the deepest match state's longest terminal suffix, through
 * the dictionary links). The trie is text/trie.h's. */
#include "text/tokenizer_internal.h"
#include "text/trie.h"

struct added_ac {
  ot_trie trie;  /* the set's texts, reversed */
  int32_t *fail; /* [n] the longest proper suffix that is a state */
  int32_t *dict; /* [n] the longest terminal suffix (-1: none) */
  int32_t *term; /* [n] the match (index into the set's v) ending here (-1: none) */
};

static void ac_free(added_ac *a) {
  if (!a) return;
  ot_trie_free(&a->trie);
  free(a->fail), free(a->dict), free(a->term);
  free(a);
}

void ot_tok_free_added_sets(ot_tokenizer *tk) {
  for (int s = 0; s < 2; s++) {
    for (int k = 0; k < tk->sets[s].n; k++) free(tk->sets[s].v[k].text);
    free(tk->sets[s].v);
    ac_free(tk->sets[s].ac);
    memset(&tk->sets[s], 0, sizeof tk->sets[s]);
  }
}

/* Failure and dictionary links, the states taken by depth (a counting sort:
 * a state's failure state is shallower, so it is done first). */
static ot_status ac_links(added_ac *a, size_t max_depth) {
  const ot_trie *t = &a->trie;
  size_t *start = calloc(max_depth + 2, sizeof *start), *depth = malloc((size_t)t->n * sizeof *depth);
  int32_t *order = malloc((size_t)t->n * sizeof *order);
  if (!start || !depth || !order) return free(start), free(depth), free(order), OOM();
  depth[0] = 0;
  for (int32_t s = 1; s < t->n; s++) depth[s] = depth[t->parent[s]] + 1; /* a parent comes before its children */
  for (int32_t s = 0; s < t->n; s++) start[depth[s] + 1]++;
  for (size_t d = 1; d <= max_depth + 1; d++) start[d] += start[d - 1];
  for (int32_t s = 0; s < t->n; s++) order[start[depth[s]]++] = s;
  a->fail[0] = 0, a->dict[0] = -1;
  for (int32_t k = 1; k < t->n; k++) {
    const int32_t v = order[k], u = t->parent[v];
    int32_t f = 0;
    if (u) /* the longest proper suffix of u that goes on by the same byte */
      for (int32_t g = a->fail[u];; g = a->fail[g]) {
        const int32_t c = ot_trie_child(t, g, t->byte[v]);
        if (c >= 0) {
          f = c;
          break;
        }
        if (!g) break;
      }
    a->fail[v] = f;
    a->dict[v] = a->term[v] >= 0 ? v : a->dict[f];
  }
  free(start), free(depth), free(order);
  return OT_OK;
}

/* The automaton of one set (none where the set is empty). A text already
 * in the trie keeps its first token (two tokens that normalize alike). */
static ot_status ac_build(added_set *set) {
  size_t total = 1, max_depth = 0;
  for (int k = 0; k < set->n; k++) {
    total += set->v[k].len;
    if (set->v[k].len > max_depth) max_depth = set->v[k].len;
  }
  if (!set->n) return OT_OK;
  added_ac *a = calloc(1, sizeof *a);
  if (!a) return OOM();
  ot_status st = ot_trie_init(&a->trie, total);
  a->fail = malloc(total * sizeof *a->fail), a->dict = malloc(total * sizeof *a->dict);
  a->term = malloc(total * sizeof *a->term);
  if (st == OT_OK && (!a->fail || !a->dict || !a->term)) st = OOM();
  if (st == OT_OK) {
    for (size_t s = 0; s < total; s++) a->term[s] = -1;
    for (int k = 0; k < set->n; k++) {
      const int32_t s = ot_trie_insert(&a->trie, set->v[k].text, set->v[k].len, 1);
      if (a->term[s] < 0) a->term[s] = k;
    }
    st = ac_links(a, max_depth);
  }
  if (st != OT_OK) return ac_free(a), st;
  set->ac = a;
  return OT_OK;
}

ot_status ot_tok_added_longest(const added_set *set, const char *s, size_t n, int32_t *match) {
  const added_ac *a = set->ac;
  int32_t st = 0;
  for (size_t i = n; i-- > 0;) {
    const unsigned char b = (unsigned char)s[i];
    int32_t c = -1;
    if (a)
      for (;;) {
        if ((c = ot_trie_child(&a->trie, st, b)) >= 0 || !st) break;
        st = a->fail[st];
      }
    st = c >= 0 ? c : 0;
    match[i] = a && a->dict[st] >= 0 ? a->term[a->dict[st]] : -1;
  }
  return OT_OK;
}

/* Rust regex's \w (Unicode): what single_word counts as a word character
 * next to the token. */
static const char word_pattern[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";

ot_status ot_tok_build_added(ot_tokenizer *tk) {
  ot_tok_free_added_sets(tk);
  for (int s = 0; s < 2; s++)
    if (!(tk->sets[s].v = calloc(tk->n_add ? (size_t)tk->n_add : 1, sizeof *tk->sets[s].v))) return OOM();
  pcre2_match_data *md = pcre2_match_data_create(4, NULL);
  if (!md) return OOM();
  ot_status st = OT_OK;
  int word = 0;
  for (int k = 0; st == OT_OK && k < tk->n_add; k++) {
    const added_tok *a = &tk->add[k];
    added_set *set = &tk->sets[a->normalized];
    bytes t = {0};
    /* a normalized token is looked for as the normalizer writes it */
    st = a->normalized                       ? ot_tok_normalize(tk, a->content, a->len, md, &t)
         : bytes_add(&t, a->content, a->len) ? OT_OK
                                             : OOM();
    /* the library's decode (simple_id_to_token) gives a normalized token
     * as normalized, "▁[WORD]" for "[WORD]" after Prepend */
    if (st == OT_OK)
      st = a->normalized ? ot_tok_set_token(tk, a->id, t.p ? t.p : "", t.n)
                         : ot_tok_set_token(tk, a->id, a->content, a->len);
    if (st == OT_OK) ot_tok_set_special(tk, a->id, a->special);
    if (st != OT_OK || !t.n) { /* nothing to match */
      free(t.p);
      continue;
    }
    set->v[set->n++] = (added_match){t.p, t.n, k};
    word |= a->single_word;
  }
  pcre2_match_data_free(md);
  for (int s = 0; st == OT_OK && s < 2; s++) st = ac_build(&tk->sets[s]);
  OT_TRY(st);
  if (word && !tk->word_re) {
    int err;
    PCRE2_SIZE at;
    tk->word_re = pcre2_compile((PCRE2_SPTR)word_pattern, sizeof word_pattern - 1, PCRE2_UTF | PCRE2_UCP, &err, &at,
                                NULL);
    if (!tk->word_re) return ot_fail(OT_ERR_STATE, "tokenizer: the \\w pattern does not compile (%d)", err);
  }
  return OT_OK;
}
