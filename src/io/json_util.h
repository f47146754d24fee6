/* json_util.h (internal) — jansson with our error messages. */
#ifndef OT_IO_JSON_UTIL_H
#define OT_IO_JSON_UTIL_H

#include <jansson.h>
#include <stddef.h>

#include "omptensor/status.h"

/* Parses `len` bytes as one JSON value; duplicate object keys are an error
 * (a checkpoint that names a tensor twice is ambiguous). `label` (the file)
 * and `what` ("header", "config") go into the message, with jansson's line,
 * column and reason: "config.json: invalid JSON config at line 3, column 7:
 * ...". */
ot_status ot_json_parse(const char *buf, size_t len, const char *label, const char *what, json_t **out);
/* The same with more of jansson's decoding flags (JSON_DECODE_INT_AS_REAL
 * for files whose integers may exceed 64 bits). */
ot_status ot_json_parse_flags(const char *buf, size_t len, const char *label, const char *what, size_t flags,
                              json_t **out);

/* With its article, for messages: "an object", "an array", "a string",
 * "an integer", "a real number", "true", "false", "null". */
const char *ot_json_kind(const json_t *v);

#endif
