/* st_header.c — parse and validate a safetensors header (jansson).
 *
 * Everything a later read relies on is checked here, once: the dtype is one
 * we hold, the shape is a short list of non-negative integers whose element
 * count does not overflow, the byte range matches the shape, and the ranges
 * tile the data section exactly — sorted by offset, each begins where the
 * previous one ends, the first at 0 and the last at the end of the file —
 * as the reference reader requires (huggingface/safetensors,
 * Metadata::validate: InvalidOffset; read_metadata: MetadataIncompleteBuffer).
 * So no two tensors share bytes, and a header length that is a few bytes off
 * (the JSON still parsing, every tensor read from shifted offsets) is
 * refused rather than silently read. After this a read can fail only on an
 * I/O error. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "io/fileio.h"
#include "io/json_util.h"
#include "io/st_internal.h"

static const struct { const char *s; ot_dtype t; } st_dtypes[] = {
    {"F32", OT_F32}, {"F16", OT_F16}, {"BF16", OT_BF16}, {"I32", OT_I32}, {"I8", OT_I8},
};

/* Valid in the safetensors format but not held by omptensor: named so the
 * message can say "unsupported" rather than "unknown". */
static const char *const st_unsupported[] = {"F64",     "I64",     "U64",     "U32",    "I16",
                                             "U16",     "U8",      "BOOL",    "F8_E4M3", "F8_E5M2",
                                             "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",     "C64"};

const char *ot_st_dtype_str(ot_dtype t) {
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (st_dtypes[i].t == t) return st_dtypes[i].s;
  return NULL;
}

static ot_status parse_dtype(const char *label, const char *name, const json_t *v, ot_dtype *out) {
  if (!json_is_string(v))
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': dtype is %s, expected a string such as \"F32\"", label, name,
                   ot_json_kind(v));
  const char *s = json_string_value(v);
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (strcmp(s, st_dtypes[i].s) == 0) {
      *out = st_dtypes[i].t;
      return OT_OK;
    }
  for (size_t i = 0; i < sizeof st_unsupported / sizeof st_unsupported[0]; i++)
    if (strcmp(s, st_unsupported[i]) == 0)
      return ot_fail(OT_ERR_DTYPE, "%s: tensor '%s': unsupported dtype %s (omptensor reads F32, F16, BF16, I32, I8)",
                     label, name, s);
  return ot_fail(OT_ERR_DTYPE, "%s: tensor '%s': unknown dtype \"%.40s\" (omptensor reads F32, F16, BF16, I32, I8)",
                 label, name, s);
}

static void shape_str(char *buf, size_t cap, const int64_t *shape, int ndim) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

static ot_status parse_shape(const char *label, const char *name, const json_t *v, ot_st_info *info) {
  if (!json_is_array(v))
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': shape is %s, expected a list of non-negative integers", label,
                   name, ot_json_kind(v));
  size_t nd = json_array_size(v);
  if (nd > OT_ST_MAX_DIMS)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions; omptensor supports at most %d", label,
                   name, nd, OT_ST_MAX_DIMS);
  info->ndim = (int)nd;
  int64_t numel = 1;
  for (size_t i = 0; i < OT_ST_MAX_DIMS; i++) info->shape[i] = 1;
  for (size_t i = 0; i < nd; i++) {
    const json_t *d = json_array_get(v, i);
    if (!json_is_integer(d) || json_integer_value(d) < 0)
      return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': shape element %zu is %s, expected a non-negative integer",
                     label, name, i, json_is_integer(d) ? "negative" : ot_json_kind(d));
    info->shape[i] = (int64_t)json_integer_value(d);
    if (ot_mul_i64(numel, info->shape[i], &numel))
      return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': the shape's element count overflows 64 bits", label, name);
  }
  uint64_t bytes;
  if (ot_mul_u64((uint64_t)numel, (uint64_t)ot_dtype_bytes(info->dtype, 1), &bytes))
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': the shape's byte count overflows 64 bits", label, name);
  info->numel = numel;
  info->bytes = bytes;
  return OT_OK;
}

static ot_status parse_offsets(const char *label, const char *name, const json_t *v, const ot_st_header *h,
                               ot_st_info *info) {
  const json_t *b = json_array_get(v, 0), *e = json_array_get(v, 1);
  if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(b) || !json_is_integer(e) ||
      json_integer_value(b) < 0 || json_integer_value(e) < 0)
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': data_offsets must be [begin, end], two non-negative integers",
                   label, name);
  uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
  if (begin > end)
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                   label, name, begin, end);
  if (end > h->data_bytes)
    return ot_fail(OT_ERR_FORMAT,
                   "%s: tensor '%s' data_offsets [%" PRIu64 ", %" PRIu64 "] beyond the data section (%" PRIu64
                   " bytes); the file is truncated or corrupt",
                   label, name, begin, end, h->data_bytes);
  if (end - begin != info->bytes) {
    char sh[128];
    shape_str(sh, sizeof sh, info->shape, info->ndim);
    return ot_fail(OT_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                   " bytes but shape %s of %s needs %" PRIu64,
                   label, name, begin, end, end - begin, sh, ot_st_dtype_str(info->dtype), info->bytes);
  }
  if (ot_add_u64(h->data_start, begin, &info->offset))
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overflow the file offset",
                   label, name, begin, end);
  return OT_OK;
}

static ot_status parse_tensor(const char *label, const char *name, const json_t *v, ot_st_header *h,
                              ot_st_info *info) {
  if (!json_is_object(v))
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': entry is %s, expected an object with dtype, shape, data_offsets",
                   label, name, ot_json_kind(v));
  static const char *const keys[] = {"dtype", "shape", "data_offsets"};
  for (int i = 0; i < 3; i++)
    if (!json_object_get(v, keys[i]))
      return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s': no \"%s\"", label, name, keys[i]);
  OT_TRY(parse_dtype(label, name, json_object_get(v, "dtype"), &info->dtype));
  OT_TRY(parse_shape(label, name, json_object_get(v, "shape"), info));
  OT_TRY(parse_offsets(label, name, json_object_get(v, "data_offsets"), h, info));
  char *copy;
  OT_TRY(ot_io_strdup(name, &copy));
  info->name = copy;
  return OT_OK;
}

static ot_status parse_metadata(const char *label, const json_t *v, ot_st_header *h) {
  if (json_is_null(v)) return OT_OK;
  if (!json_is_object(v))
    return ot_fail(OT_ERR_FORMAT, "%s: __metadata__ is %s, expected an object of strings", label, ot_json_kind(v));
  h->meta = calloc(2 * json_object_size(v) + 1, sizeof *h->meta);
  if (!h->meta) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory reading __metadata__", label);
  const char *k;
  const json_t *val;
  json_object_foreach((json_t *)v, k, val) {
    if (!json_is_string(val))
      return ot_fail(OT_ERR_FORMAT, "%s: __metadata__ value of '%s' is %s, expected a string", label, k,
                     ot_json_kind(val));
    char **kv = h->meta + 2 * h->n_meta;
    OT_TRY(ot_io_strdup(k, &kv[0]));
    h->n_meta++; /* counted once the key is owned, so a failure below frees it */
    OT_TRY(ot_io_strdup(json_string_value(val), &kv[1]));
  }
  return OT_OK;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const ot_st_info *)a)->name, ((const ot_st_info *)b)->name);
}

static int by_begin(const void *a, const void *b) {
  const ot_st_info *x = *(const ot_st_info *const *)a, *y = *(const ot_st_info *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

/* The ranges, sorted by (begin, end), must tile [0, data_bytes): each begins
 * where the previous one ended (an empty tensor, [k, k], sits at such a
 * boundary), the first at 0, the last ends at data_bytes. A range that
 * begins before the previous end overlaps it; one that begins after leaves
 * a gap; an end short of data_bytes leaves bytes after the last tensor. */
static ot_status check_tiling(const char *label, ot_st_header *h) {
  const ot_st_info **order = malloc((size_t)(h->n ? h->n : 1) * sizeof *order);
  if (!order) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory checking tensor ranges", label);
  for (int i = 0; i < h->n; i++) order[i] = &h->tensors[i];
  qsort(order, (size_t)h->n, sizeof *order, by_begin);
  const uint64_t d = h->data_start;
  const ot_st_info *prev = NULL; /* the tensor that ends at `at` */
  uint64_t at = 0;               /* end of the tiling so far, relative to the data section */
  ot_status s = OT_OK;
  for (int i = 0; i < h->n && s == OT_OK; i++) {
    const ot_st_info *t = order[i];
    uint64_t b = t->offset - d, e = b + t->bytes;
    if (b < at)
      s = ot_fail(OT_ERR_FORMAT,
                  "%s: tensors '%s' data_offsets [%" PRIu64 ", %" PRIu64 "] and '%s' [%" PRIu64 ", %" PRIu64
                  "] overlap",
                  label, prev->name, prev->offset - d, at, t->name, b, e);
    else if (b > at)
      s = ot_fail(OT_ERR_FORMAT,
                  "%s: tensor '%s' data_offsets [%" PRIu64 ", %" PRIu64 "] leave bytes [%" PRIu64 ", %" PRIu64
                  ") of the data section unused%s%s%s; safetensors tensors cover the data section exactly: the file "
                  "is corrupt",
                  label, t->name, b, e, at, b, prev ? " (after '" : "", prev ? prev->name : "", prev ? "')" : "");
    at = e;
    prev = t;
  }
  if (s == OT_OK && at != h->data_bytes)
    s = prev ? ot_fail(OT_ERR_FORMAT,
                       "%s: the tensors end at byte %" PRIu64 " of the data section (last '%s') but it holds %" PRIu64
                       " bytes: %" PRIu64 " bytes after the last tensor; the header length or the data_offsets are "
                       "wrong, or the file is corrupt (safetensors tensors cover the data section exactly)",
                       label, at, prev->name, h->data_bytes, h->data_bytes - at)
             : ot_fail(OT_ERR_FORMAT,
                       "%s: the header lists no tensor data but the data section holds %" PRIu64
                       " bytes; the header length is wrong or the file is corrupt",
                       label, h->data_bytes);
  free(order);
  return s;
}

static ot_status parse_root(const char *label, const json_t *root, ot_st_header *h) {
  if (!json_is_object(root))
    return ot_fail(OT_ERR_FORMAT, "%s: the header is %s, expected an object of tensors", label,
                   ot_json_kind(root));
  size_t cap = json_object_size(root);
  h->tensors = calloc(cap ? cap : 1, sizeof *h->tensors);
  if (!h->tensors) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tensor entries", label, cap);
  const char *name;
  const json_t *v;
  json_object_foreach((json_t *)root, name, v) {
    if (strcmp(name, "__metadata__") == 0) {
      OT_TRY(parse_metadata(label, v, h));
      continue;
    }
    OT_TRY(parse_tensor(label, name, v, h, &h->tensors[h->n]));
    h->n++;
  }
  OT_TRY(check_tiling(label, h));
  qsort(h->tensors, (size_t)h->n, sizeof *h->tensors, by_name);
  return OT_OK;
}

ot_status ot_st_header_parse(const char *json, size_t len, uint64_t data_start, uint64_t data_bytes,
                             const char *label, ot_st_header *out) {
  if (!json || !label || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_st_header_parse: NULL argument");
  memset(out, 0, sizeof *out);
  out->data_start = data_start;
  out->data_bytes = data_bytes;
  json_t *root;
  OT_TRY(ot_json_parse(json, len, label, "header", &root));
  ot_status s = parse_root(label, root, out);
  json_decref(root);
  if (s != OT_OK) ot_st_header_free(out);
  return s;
}

ot_status ot_st_check_prefix(const unsigned char prefix[8], uint64_t file_size, const char *label,
                             uint64_t *header_len) {
  if (file_size < 8)
    return ot_fail(OT_ERR_FORMAT, "%s: truncated: %" PRIu64 " bytes, too short for the 8-byte header length", label,
                   file_size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | prefix[i];
  if (n > file_size - 8)
    return ot_fail(OT_ERR_FORMAT,
                   "%s: header length %" PRIu64 " beyond the file (%" PRIu64
                   " bytes); the file is truncated or not safetensors",
                   label, n, file_size);
  if (n > OT_ST_MAX_HEADER)
    return ot_fail(OT_ERR_FORMAT, "%s: header length %" PRIu64 " exceeds the %" PRIu64 "-byte limit", label, n,
                   OT_ST_MAX_HEADER);
  *header_len = n;
  return OT_OK;
}

ot_status ot_st_parse_buffer(const void *buf, size_t len, const char *label, ot_st_header *out) {
  if (!buf && len) return ot_fail(OT_ERR_INVALID_ARG, "ot_st_parse_buffer: NULL buffer");
  uint64_t n;
  OT_TRY(ot_st_check_prefix(buf, len, label, &n));
  return ot_st_header_parse((const char *)buf + 8, (size_t)n, 8 + n, len - 8 - n, label, out);
}

void ot_st_header_free(ot_st_header *h) {
  if (!h) return;
  for (int i = 0; i < h->n; i++) free((char *)h->tensors[i].name);
  /* a tensor whose name was copied but failed validation later is not
   * counted in n; parse_tensor copies the name last, so there is none */
  free(h->tensors);
  for (int i = 0; i < 2 * h->n_meta; i++) free(h->meta[i]);
  free(h->meta);
  memset(h, 0, sizeof *h);
}

const ot_st_info *ot_st_bsearch(const ot_st_info *infos, int n, const char *name) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(infos[mid].name, name);
    if (c == 0) return &infos[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}
