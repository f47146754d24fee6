/* json_util.c — jansson loading with messages that name the file. */
#include "io/json_util.h"

#include "core/error.h"

ot_status ot_json_parse(const char *buf, size_t len, const char *label, const char *what, json_t **out) {
  return ot_json_parse_flags(buf, len, label, what, 0, out);
}

ot_status ot_json_parse_flags(const char *buf, size_t len, const char *label, const char *what, size_t flags,
                              json_t **out) {
  json_error_t err;
  json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | flags, &err);
  if (!v)
    return ot_fail(OT_ERR_FORMAT, "%s: invalid JSON %s at line %d, column %d: %s", label, what, err.line, err.column,
                   err.text);
  *out = v;
  return OT_OK;
}

const char *ot_json_kind(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE: return "true";
  case JSON_FALSE: return "false";
  case JSON_NULL: return "null";
  }
  return "?";
}
