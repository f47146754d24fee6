/* npy_header.c — parse the .npy header, a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * (NumPy's own reader uses ast.literal_eval; this accepts the subset NumPy
 * writes: quoted strings, True/False, tuples of integers, keys in any order). */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "io/npy_internal.h"

static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

ot_status ot_npy_preamble_size(const unsigned char *buf, size_t len, const char *label, size_t *total) {
  if (len < 10 || memcmp(buf, magic, 6) != 0)
    return ot_fail(OT_ERR_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", label);
  unsigned major = buf[6];
  size_t hlen, fixed;
  if (major == 1) {
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    fixed = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return ot_fail(OT_ERR_FORMAT, "%s: truncated .npy preamble", label);
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    fixed = 12;
  } else {
    return ot_fail(OT_ERR_FORMAT, "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0 are)", label, major,
                   (unsigned)buf[7]);
  }
  if (hlen > OT_NPY_MAX_HEADER)
    return ot_fail(OT_ERR_FORMAT, "%s: .npy header of %zu bytes is larger than the %zu-byte limit", label, hlen,
                   OT_NPY_MAX_HEADER);
  *total = fixed + hlen;
  return OT_OK;
}

typedef struct cursor {
  const char *p, *end;
  const char *label;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return 1;
  }
  return 0;
}

static ot_status syntax(const cursor *c, const char *what) {
  int left = (int)(c->end - c->p);
  return ot_fail(OT_ERR_FORMAT, "%s: malformed .npy header: %s near \"%.*s\"", c->label, what, left < 20 ? left : 20, c->p);
}

/* A quoted string into buf (truncated to cap-1; the keys and dtypes we
 * accept are short). */
static ot_status string_lit(cursor *c, char *buf, size_t cap) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return syntax(c, "expected a quoted string");
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (n + 1 < cap) buf[n++] = *c->p;
    c->p++;
  }
  if (c->p >= c->end) return syntax(c, "unterminated string");
  c->p++;
  buf[n] = '\0';
  return OT_OK;
}

static ot_status shape_lit(cursor *c, ot_npy_array *out) {
  if (!eat(c, '(')) return syntax(c, "shape must be a tuple");
  out->ndim = 0;
  out->numel = 1;
  while (!eat(c, ')')) {
    skip_ws(c);
    int64_t v = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c->p - '0', &v))
        return syntax(c, "shape dimension too large");
      c->p++;
    }
    if (c->p == start) return syntax(c, "shape must hold non-negative integers");
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 long */
    if (out->ndim == OT_NPY_MAX_DIMS)
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: .npy array has more than %d dimensions", c->label, OT_NPY_MAX_DIMS);
    out->shape[out->ndim++] = v;
    if (__builtin_mul_overflow(out->numel, v, &out->numel)) return syntax(c, "element count overflows");
    if (!eat(c, ',') && !(skip_ws(c), c->p < c->end && *c->p == ')')) return syntax(c, "expected ',' or ')'");
  }
  return OT_OK;
}

static ot_status descr(cursor *c, ot_npy_array *out) {
  char d[32];
  OT_TRY(string_lit(c, d, sizeof d));
  if (strcmp(d, "<f4") == 0) out->dtype = OT_F32;
  else if (strcmp(d, "<i4") == 0) out->dtype = OT_I32;
  else if (strcmp(d, "<i8") == 0 || strcmp(d, "<u2") == 0) out->dtype = OT_I32; /* widened or narrowed on read */
  else
    return ot_fail(OT_ERR_DTYPE,
                   "%s: .npy dtype '%s' is not supported (only '<f4' float32, '<i4' int32, and '<i8' int64 or "
                   "'<u2' uint16 read as int32)",
                   c->label, d);
  out->item_bytes = d[2] == '8' ? 8 : d[2] == '2' ? 2 : 4;
  return OT_OK;
}

static ot_status fortran(cursor *c) {
  skip_ws(c);
  size_t left = (size_t)(c->end - c->p);
  if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
    c->p += 5;
    return OT_OK;
  }
  if (left >= 4 && memcmp(c->p, "True", 4) == 0)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: .npy array is in Fortran order; save it C-contiguous", c->label);
  return syntax(c, "fortran_order must be True or False");
}

static ot_status dict(cursor *c, ot_npy_array *out) {
  int seen = 0; /* bits: descr, fortran_order, shape */
  if (!eat(c, '{')) return syntax(c, "expected '{'");
  while (!eat(c, '}')) {
    char key[32];
    OT_TRY(string_lit(c, key, sizeof key));
    if (!eat(c, ':')) return syntax(c, "expected ':'");
    int bit = !strcmp(key, "descr") ? 1 : !strcmp(key, "fortran_order") ? 2 : !strcmp(key, "shape") ? 4 : 0;
    if (!bit) return ot_fail(OT_ERR_FORMAT, "%s: malformed .npy header: unknown key '%s'", c->label, key);
    if (seen & bit) return ot_fail(OT_ERR_FORMAT, "%s: malformed .npy header: key '%s' twice", c->label, key);
    seen |= bit;
    OT_TRY(bit == 1 ? descr(c, out) : bit == 2 ? fortran(c) : shape_lit(c, out));
    if (!eat(c, ',') && !(skip_ws(c), c->p < c->end && *c->p == '}')) return syntax(c, "expected ',' or '}'");
  }
  if (seen != 7)
    return ot_fail(OT_ERR_FORMAT, "%s: malformed .npy header: missing %s", c->label,
                   !(seen & 1) ? "'descr'" : !(seen & 2) ? "'fortran_order'" : "'shape'");
  return OT_OK;
}

ot_status ot_npy_parse_header(const unsigned char *buf, size_t len, const char *label, ot_npy_array *out,
                              size_t *data_offset) {
  if (!buf || !label || !out || !data_offset) return ot_fail(OT_ERR_INVALID_ARG, "ot_npy_parse_header: NULL argument");
  memset(out, 0, sizeof *out);
  size_t total;
  OT_TRY(ot_npy_preamble_size(buf, len, label, &total));
  if (len < total)
    return ot_fail(OT_ERR_FORMAT, "%s: truncated: the .npy header needs %zu bytes, the file has %zu", label, total,
                   len);
  size_t fixed = buf[6] == 1 ? 10 : 12;
  cursor c = {(const char *)buf + fixed, (const char *)buf + total, label};
  OT_TRY(dict(&c, out));
  *data_offset = total;
  return OT_OK;
}
