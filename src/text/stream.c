/* stream.c — see textstream.h.
 *
 * The decode of a list of tokens is not the sum of its tokens' decodes: a
 * run of byte-fallback tokens is one character (or, if its bytes are not
 * UTF-8, one U+FFFD per byte: a later byte can turn an earlier "A" into
 * U+FFFD), byte-level tokens are joined before they are read as UTF-8,
 * Strip and Metaspace treat the text's start apart, and transformers'
 * clean-up joins " ." into ".". So the stream cuts the list only at a
 * boundary where the decoders cannot join what is on either side (a clean
 * boundary: not inside a run of byte tokens; not inside a byte-level
 * character), decodes each stretch between the last cut and the newest
 * clean boundary once, as a continuation of what came before
 * (ot_tok_decode_list's cont), and runs the clean-up as a stream of its
 * own. What it hands out is then exactly the decode of all ids, in pieces
 * of whole UTF-8, and each id is decoded once: the cost grows with the
 * ids, never with their square.
 *
 * Which boundaries are clean depends on the decoder chain: decoders that
 * work on each token alone (Replace, Metaspace, Strip) before the first
 * that joins tokens, then ByteFallback (a run of byte tokens joins) or
 * ByteLevel (bytes join into characters) or Fuse; after a decoder that
 * fused the tokens into one, only Fuse and a Strip of the start may follow
 * (a Strip of the start is the text's start only). A chain outside this
 * (a Replace over the fused text, say) could rewrite text at any distance,
 * so its stream hands everything out at finish. */
#include <stdlib.h>
#include <string.h>

#include "omptensor/textstream.h"
#include "text/tokenizer_internal.h"

typedef enum { CUT_ANY, CUT_BYTE_RUN, CUT_UTF8, CUT_NEVER } cut_rule;

/* transformers' clean-up as a stream: stage k replaces from[k] by to[k] in
 * what stage k - 1 gave it, holding back an end that could still begin
 * from[k] (which starts with a space: never half a character). */
typedef struct cleanup {
  bytes pend[OT_TOK_N_CLEANUP];
} cleanup;

struct ot_text_stream {
  const ot_tokenizer *tk;
  int skip_special, finished;
  ids all;    /* every id pushed */
  ids f;      /* those decoded: the special ones left out where skipped */
  size_t at;  /* f[0 .. at) is decoded and handed out */
  size_t cut; /* the newest clean boundary, at <= cut <= f.n */
  cut_rule rule;
  int pre_k;       /* the decoders before the one that joins (applied to a token to see what it is) */
  int strip_start; /* a Strip of the start after a fuse: the first stretch must not decode to nothing */
  int prev_byte;   /* CUT_BYTE_RUN: the last token was a byte token */
  unsigned char tail[3]; /* CUT_UTF8: the last bytes so far */
  size_t n_tail;
  bytes text, piece, scratch;
  cleanup cu;
};

/* The rule of tk's decoder chain (see the opening comment). */
static void classify(ot_text_stream *ts) {
  const ot_tokenizer *tk = ts->tk;
  int phase = 0; /* 0: per token; 1: per token after ByteFallback; 2: fused */
  ts->rule = CUT_ANY;
  ts->pre_k = 0;
  for (int k = 0; k < tk->n_dec; k++) {
    const edit *e = &tk->dec[k];
    const int per_token = e->kind == ED_REPLACE || e->kind == ED_METASPACE || e->kind == ED_STRIP;
    if (phase < 2 && per_token) continue;
    if (phase == 0 && (e->kind == ED_BYTEFALLBACK || e->kind == ED_BYTELEVEL)) {
      ts->rule = e->kind == ED_BYTEFALLBACK ? CUT_BYTE_RUN : CUT_UTF8;
      ts->pre_k = k;
      phase = e->kind == ED_BYTEFALLBACK ? 1 : 2;
    } else if (e->kind == ED_FUSE) {
      phase = 2;
    } else if (phase == 2 && e->kind == ED_STRIP && e->n_stop == 0) {
      ts->strip_start |= e->n_start > 0;
    } else {
      ts->rule = CUT_NEVER;
      return;
    }
  }
}

ot_status ot_text_stream_new(const ot_tokenizer *tk, int skip_special, ot_text_stream **out) {
  if (!tk || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_text_stream_new: NULL argument");
  ot_text_stream *ts = calloc(1, sizeof *ts);
  if (!ts || !bytes_add(&ts->text, "", 0)) {
    free(ts);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "text stream: no host memory");
  }
  ts->text.p[0] = 0;
  ts->tk = tk;
  ts->skip_special = skip_special;
  classify(ts);
  *out = ts;
  return OT_OK;
}

void ot_text_stream_destroy(ot_text_stream *ts) {
  if (!ts) return;
  free(ts->all.v), free(ts->f.v);
  free(ts->text.p), free(ts->piece.p), free(ts->scratch.p);
  for (int k = 0; k < OT_TOK_N_CLEANUP; k++) free(ts->cu.pend[k].p);
  free(ts);
}

/* ---- clean boundaries ------------------------------------------------------------- */

/* Whether the bytes s[0..n) (n <= 3, the end of the byte stream) end in
 * the first bytes of a character that later bytes could complete. */
static int incomplete(const unsigned char *s, size_t n) {
  for (size_t k = 1; k <= n; k++) { /* a lead byte k bytes from the end */
    unsigned lo, hi;
    const unsigned c = s[n - k];
    const size_t want = c < 0x80 ? 0 : ot_utf8_lead(c, &lo, &hi);
    if (!want) {
      if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
      return 0;
    }
    if (want <= k) return 0; /* complete, or ill-formed already */
    for (size_t j = n - k + 1; j < n; j++)
      if (s[j] < (j == n - k + 1 ? lo : 0x80) || s[j] > (j == n - k + 1 ? hi : 0xBF)) return 0;
    return 1;
  }
  return 0;
}

/* The newest filtered token (index f.n - 1): moves cut to the newest clean
 * boundary it makes. */
static ot_status note_boundary(ot_text_stream *ts) {
  const size_t j = ts->f.n - 1;
  if (ts->rule == CUT_ANY) {
    ts->cut = ts->f.n;
    return OT_OK;
  }
  if (ts->rule == CUT_NEVER) return OT_OK;
  /* the token as the joining decoder sees it: after the per-token decoders before it */
  ts->scratch.n = 0;
  OT_TRY(ot_tok_decode_list(ts->tk, &ts->f.v[j], 1, 0, ts->pre_k, j > 0, &ts->scratch));
  if (ts->rule == CUT_BYTE_RUN) {
    unsigned char b;
    const int is_byte = ot_tok_byte_token(&ts->scratch, &b);
    if (!is_byte) ts->cut = ts->f.n; /* a run ends before it, and nothing joins it to what follows */
    else if (!ts->prev_byte) ts->cut = j; /* a run starts: the boundary before it is clean */
    ts->prev_byte = is_byte;
    return OT_OK;
  }
  ot_tok_unbyte(&ts->scratch); /* CUT_UTF8: the byte stream's last bytes */
  for (size_t i = 0; i < ts->scratch.n; i++) {
    if (ts->n_tail == 3) memmove(ts->tail, ts->tail + 1, 2), ts->n_tail = 2;
    ts->tail[ts->n_tail++] = (unsigned char)ts->scratch.p[i];
  }
  if (!incomplete(ts->tail, ts->n_tail)) ts->cut = ts->f.n;
  return OT_OK;
}

/* ---- the clean-up stream ------------------------------------------------------------ */

/* Stage k over in[0..n) (after what it held back), into out; last: hold nothing. */
static int cleanup_stage(cleanup *c, int k, const char *in, size_t n, int last, bytes *out) {
  bytes *p = &c->pend[k];
  if (!bytes_add(p, in, n)) return 0;
  const char *from = ot_tok_cleanup_from[k], *to = ot_tok_cleanup_to[k];
  const size_t nf = strlen(from), nt = strlen(to);
  size_t i = 0;
  while (i < p->n) {
    const size_t left = p->n - i;
    if (left >= nf && !memcmp(p->p + i, from, nf)) {
      if (!bytes_add(out, to, nt)) return 0;
      i += nf;
    } else if (!last && left < nf && !memcmp(p->p + i, from, left)) {
      break; /* could still be from[k]: wait for what follows */
    } else {
      size_t j = i + 1; /* up to the next possible start */
      while (j < p->n && p->p[j] != from[0]) j++;
      if (!bytes_add(out, p->p + i, j - i)) return 0;
      i = j;
    }
  }
  memmove(p->p, p->p + i, p->n - i);
  p->n -= i;
  return 1;
}

/* s[0..n) through all ten stages, appended to out. */
static ot_status cleanup_feed(cleanup *c, const char *s, size_t n, int last, bytes *out, bytes *tmp) {
  bytes cur = {0};
  if (!bytes_add(&cur, s, n)) return OOM();
  for (int k = 0; k < OT_TOK_N_CLEANUP; k++) {
    tmp->n = 0;
    if (!cleanup_stage(c, k, cur.p, cur.n, last, tmp)) return free(cur.p), OOM();
    bytes x = cur;
    cur = *tmp;
    *tmp = x;
  }
  int ok = bytes_add(out, cur.p, cur.n);
  free(cur.p);
  return ok ? OT_OK : OOM();
}

/* ---- handing out -------------------------------------------------------------------- */

/* Decodes f[at .. upto) as a continuation of what is out, into ts->piece
 * (through the clean-up where the tokenizer has it) and ts->text. */
static ot_status emit(ot_text_stream *ts, size_t upto, int last) {
  bytes raw = {0};
  ts->piece.n = 0;
  ot_status st = bytes_add(&raw, "", 0) ? OT_OK : OOM();
  if (st == OT_OK && upto > ts->at)
    st = ot_tok_decode_list(ts->tk, ts->f.v + ts->at, upto - ts->at, 0, ts->tk->n_dec, ts->at > 0, &raw);
  /* the text's start is stripped until something is left: cut there only then */
  if (st == OT_OK && !last && ts->strip_start && ts->at == 0 && !raw.n) return free(raw.p), OT_OK;
  if (st == OT_OK)
    st = ts->tk->clean_up ? cleanup_feed(&ts->cu, raw.p, raw.n, last, &ts->piece, &ts->scratch)
                          : bytes_add(&ts->piece, raw.p, raw.n) ? OT_OK : OOM();
  free(raw.p);
  if (st == OT_OK && !bytes_add(&ts->text, ts->piece.p, ts->piece.n)) st = OOM();
  if (st == OT_OK) ts->text.p[ts->text.n] = 0; /* bytes_add leaves room for it */
  if (st == OT_OK) ts->at = upto;
  return st;
}

static void hand_out(ot_text_stream *ts, const char **piece, size_t *n) {
  *piece = ts->piece.p ? ts->piece.p : "";
  *n = ts->piece.n;
}

ot_status ot_text_stream_push(ot_text_stream *ts, int32_t id, const char **piece, size_t *n) {
  if (!ts || !piece || !n) return ot_fail(OT_ERR_INVALID_ARG, "ot_text_stream_push: NULL argument");
  *piece = "";
  *n = 0;
  if (ts->finished) return ot_fail(OT_ERR_STATE, "text stream: an id pushed after ot_text_stream_finish");
  const tok_entry *e = ot_tok_entry(ts->tk, id);
  if (!e)
    return ot_fail(OT_ERR_INVALID_ARG, "id %d is not in the vocabulary of %s (%d ids)", id, ts->tk->file,
                   ts->tk->n_ids);
  if (!ids_add(&ts->all, id)) return OOM();
  if (ts->skip_special && e->special) return OT_OK;
  if (!ids_add(&ts->f, id)) return ts->all.n--, OOM();
  ot_status st = note_boundary(ts);
  ts->piece.n = 0;
  if (st == OT_OK && ts->cut > ts->at) st = emit(ts, ts->cut, 0);
  if (st != OT_OK) return st;
  hand_out(ts, piece, n);
  return OT_OK;
}

ot_status ot_text_stream_finish(ot_text_stream *ts, const char **piece, size_t *n) {
  if (!ts || !piece || !n) return ot_fail(OT_ERR_INVALID_ARG, "ot_text_stream_finish: NULL argument");
  *piece = "";
  *n = 0;
  if (ts->finished) return OT_OK;
  OT_TRY(emit(ts, ts->f.n, 1));
  ts->finished = 1;
  hand_out(ts, piece, n);
  return OT_OK;
}

const char *ot_text_stream_text(const ot_text_stream *ts, size_t *len) {
  if (len) *len = ts ? ts->text.n : 0;
  return ts && ts->text.p ? ts->text.p : "";
}

const int32_t *ot_text_stream_ids(const ot_text_stream *ts, size_t *n) {
  if (n) *n = ts ? ts->all.n : 0;
  return ts ? ts->all.v : NULL;
}
