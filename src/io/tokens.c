/* tokens.c — training tokens from llm.c .bin or .npy files. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "omptensor/tokens.h"
#include "omptensor/npy.h"
#include "io/fileio.h"

struct ot_tokens {
  char *path;
  int32_t *tok; /* [n] */
  int64_t n;
  int64_t pos;  /* first token of the next window */
};

/* llm.c's .bin: the header says how many uint16 tokens follow; the file
 * must hold exactly those (a shorter one was cut off while being written, a
 * longer one is not what the header describes). Little-endian, as llm.c
 * writes it (read on a little-endian host). */
static ot_status read_bin(int fd, uint64_t size, const char *path, ot_tokens *d) {
  int32_t h[OT_TOKENS_BIN_HEADER_INTS];
  if (size < OT_TOKENS_BIN_HEADER_INTS * 4)
    return ot_set_error(OT_ERR_FORMAT, "%s: truncated: an llm.c .bin file starts with a %d-byte header", path,
                        OT_TOKENS_BIN_HEADER_INTS * 4);
  OT_TRY(ot_io_pread_full(fd, h, sizeof h, 0, path));
  if (h[1] != OT_TOKENS_BIN_VERSION)
    return ot_set_error(OT_ERR_FORMAT, "%s: llm.c .bin version %" PRId32 " is not supported (version %d, uint16 tokens, is)",
                        path, h[1], OT_TOKENS_BIN_VERSION);
  if (h[2] < 0)
    return ot_set_error(OT_ERR_FORMAT, "%s: the .bin header gives a negative token count (%" PRId32 ")", path, h[2]);
  /* The size first: a wrong count must not make us allocate for it. */
  int64_t hb = OT_TOKENS_BIN_HEADER_INTS * 4;
  if ((int64_t)size != hb + 2 * (int64_t)h[2])
    return ot_set_error(OT_ERR_FORMAT, "%s: %s: the .bin header says %" PRId32 " tokens (%" PRId64 " bytes after the "
                        "header), the file holds %" PRId64 " bytes after it",
                        path, (int64_t)size < hb + 2 * (int64_t)h[2] ? "truncated" : "excess data", h[2], 2 * (int64_t)h[2],
                        (int64_t)size - hb);
  d->n = h[2];
  d->tok = malloc((size_t)(d->n ? d->n : 1) * sizeof *d->tok);
  if (!d->tok) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory for %" PRId64 " tokens", path, d->n);
  /* Read in chunks through a small buffer, widening as we go. */
  uint16_t buf[4096];
  for (int64_t got = 0; got < d->n;) {
    size_t want = d->n - got < 4096 ? (size_t)(d->n - got) : 4096;
    OT_TRY(ot_io_pread_full(fd, buf, 2 * want, (uint64_t)(hb + 2 * got), path));
    for (size_t i = 0; i < want; i++) d->tok[got + (int64_t)i] = buf[i];
    got += (int64_t)want;
  }
  return OT_OK;
}

static ot_status read_npy(const char *path, ot_tokens *d) {
  ot_npy_array a;
  ot_status s = ot_npy_read(path, &a);
  if (s != OT_OK) return s;
  if (a.dtype != OT_I32 || a.ndim != 1) {
    s = ot_set_error(OT_ERR_FORMAT, "%s: token ids must be a 1-D integer array (int32, int64 or uint16), not %d-D %s",
                     path, a.ndim, a.dtype == OT_I32 ? "integers" : "floats");
    ot_npy_free(&a);
    return s;
  }
  d->tok = a.data; /* the array's buffer is ours now */
  d->n = a.numel;
  return OT_OK;
}

static ot_status load(const char *path, int64_t vocab, ot_tokens *d) {
  int fd;
  uint64_t size;
  ot_status s = ot_io_open_read(path, &fd, &size); /* a regular file only: a FIFO would block */
  if (s != OT_OK) return s;
  unsigned char m[4] = {0};
  size_t got = size < 4 ? (size_t)size : 4;
  s = ot_io_pread_full(fd, m, got, 0, path);
  int32_t magic = (int32_t)((uint32_t)m[0] | (uint32_t)m[1] << 8 | (uint32_t)m[2] << 16 | (uint32_t)m[3] << 24);
  if (s != OT_OK) {
  } else if (got == 4 && magic == OT_TOKENS_BIN_MAGIC) s = read_bin(fd, size, path, d);
  else if (got >= 1 && m[0] == 0x93) s = OT_OK; /* \x93NUMPY: below */
  else
    s = ot_set_error(OT_ERR_FORMAT,
                     "%s: not a token file: expected an llm.c .bin (magic %d, got %" PRId32 ") or a .npy of ids",
                     path, OT_TOKENS_BIN_MAGIC, got == 4 ? magic : 0);
  int npy = s == OT_OK && !d->tok;
  close(fd);
  if (npy) s = read_npy(path, d);
  for (int64_t i = 0; s == OT_OK && i < d->n; i++)
    if (d->tok[i] < 0 || d->tok[i] >= vocab)
      s = ot_set_error(OT_ERR_FORMAT, "%s: token %" PRId64 " is id %" PRId32 ", outside the model's vocabulary "
                       "(ids 0..%" PRId64 ")", path, i, d->tok[i], vocab - 1);
  return s;
}

ot_status ot_tokens_open(const char *path, int64_t vocab, ot_tokens **out) {
  *out = NULL;
  ot_tokens *d = calloc(1, sizeof *d);
  if (!d || !(d->path = strdup(path))) {
    free(d);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory", path);
  }
  ot_status s = load(path, vocab, d);
  if (s != OT_OK) {
    ot_tokens_close(d);
    return s;
  }
  *out = d;
  return OT_OK;
}

void ot_tokens_close(ot_tokens *d) {
  if (!d) return;
  free(d->tok);
  free(d->path);
  free(d);
}

int64_t ot_tokens_count(const ot_tokens *d) { return d->n; }

void ot_tokens_rewind(ot_tokens *d) { d->pos = 0; }

ot_status ot_tokens_next(ot_tokens *d, int B, int T, int32_t *inputs, int32_t *targets) {
  int64_t need = (int64_t)B * T + 1;
  if (B < 1 || T < 1 || d->n < need)
    return ot_set_error(OT_ERR_INVALID_ARG, "%s: %" PRId64 " tokens, but one step of --batch %d x --seq %d needs "
                        "%" PRId64 " (B*T+1); use a longer file or a smaller batch",
                        d->path, d->n, B, T, need);
  /* At the end of the file, start over: training for more steps than the
   * file has windows makes several passes (epochs) over it, as llm.c's
   * loader does; a partial last window would mix the end and the start. */
  if (d->pos + need > d->n) d->pos = 0;
  const int32_t *w = d->tok + d->pos;
  memcpy(inputs, w, (size_t)(need - 1) * sizeof *w);
  memcpy(targets, w + 1, (size_t)(need - 1) * sizeof *w);
  d->pos += need - 1;
  return OT_OK;
}
