/* tokenizer_field.c — the typed reads of tokenizer.json's and
 * tokenizer_config.json's fields (tokenizer_internal.h): one place that
 * says what a wrong type is, for every field the reader reads. */
#include <stdio.h>

#include "io/json_util.h"
#include "text/tokenizer_internal.h"

_Thread_local uint64_t ot_tok_work;

static const char *const type_names[] = {"a boolean", "a string", "one character", "an integer",
                                         "an array",  "an object", "a number"};

/* What v is, for the message: jansson's kinds, but "a boolean" for both
 * true and false, since the field's expected type is named that way. */
static const char *found(const json_t *v) { return json_is_boolean(v) ? "a boolean" : ot_json_kind(v); }

static int is(const json_t *v, tf_type t) {
  switch (t) {
  case TF_BOOL: return json_is_boolean(v);
  case TF_STRING: return json_is_string(v);
  case TF_CHAR: return json_is_string(v) && json_string_length(v) &&
                       ot_utf8_len((const unsigned char *)json_string_value(v), json_string_length(v)) ==
                           json_string_length(v);
  case TF_UINT: return json_is_integer(v) && json_integer_value(v) >= 0;
  case TF_ARRAY: return json_is_array(v);
  case TF_OBJECT: return json_is_object(v);
  case TF_NUMBER: return json_is_number(v);
  }
  return 0;
}

const char *ot_tok_path(char *buf, size_t n, const char *path, const char *key, long index) {
  int k = snprintf(buf, n, "%s%s%s", path && *path ? path : "", path && *path && key ? "." : "", key ? key : "");
  if (index >= 0 && k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "[%ld]", index);
  return buf;
}

ot_status ot_tok_field(const char *file, const json_t *o, const char *path, const char *key, tf_type t, tf_presence p,
                       const json_t **out) {
  char at[256];
  const json_t *v = json_object_get(o, key);
  *out = NULL;
  if (!v && p != TF_REQUIRED) return OT_OK;
  if (json_is_null(v) && p == TF_OPTIONAL) return OT_OK;
  ot_tok_path(at, sizeof at, path, key, -1);
  if (!v) return ot_fail(OT_ERR_FORMAT, "%s: %s: missing (expected %s)", file, at, type_names[t]);
  if (!is(v, t)) {
    if (t == TF_CHAR && json_is_string(v))
      return ot_fail(OT_ERR_FORMAT, "%s: %s: expected one character, found a string of %zu bytes ('%s')", file, at,
                     json_string_length(v), json_string_value(v));
    return ot_fail(OT_ERR_FORMAT, "%s: %s: expected %s, found %s", file, at, type_names[t],
                   t == TF_UINT && json_is_integer(v) ? "a negative integer" : found(v));
  }
  *out = v;
  return OT_OK;
}

ot_status ot_tok_bool(const char *file, const json_t *o, const char *path, const char *key, tf_presence p, int dflt,
                      int *out) {
  const json_t *v;
  OT_TRY(ot_tok_field(file, o, path, key, TF_BOOL, p, &v));
  *out = v ? json_is_true(v) : dflt;
  return OT_OK;
}

ot_status ot_tok_uint(const char *file, const json_t *o, const char *path, const char *key, tf_presence p,
                      int64_t max, int64_t dflt, int64_t *out) {
  const json_t *v;
  OT_TRY(ot_tok_field(file, o, path, key, TF_UINT, p, &v));
  *out = v ? json_integer_value(v) : dflt;
  if (*out > max) {
    char at[256];
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s: %lld is more than this reader takes (%lld)", file,
                   ot_tok_path(at, sizeof at, path, key, -1), (long long)*out, (long long)max);
  }
  return OT_OK;
}

ot_status ot_tok_str(const char *file, const json_t *o, const char *path, const char *key, tf_type t, tf_presence p,
                     const char **s, size_t *n) {
  const json_t *v;
  OT_TRY(ot_tok_field(file, o, path, key, t, p, &v));
  *s = v ? json_string_value(v) : NULL;
  *n = v ? json_string_length(v) : 0;
  return OT_OK;
}
