/* trace_read.c — a Chrome trace written by omptensor, read back into a trace:
 * the "X" events carry kind (cat), tensor, bytes, op, run, device bytes and
 * flags in their args, which is everything the summary and the budget check
 * need. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "sched/trace_impl.h"

static const char *const cats[OT_TRACE_KIND_COUNT] = {"run", "kernel", "upload", "download", "alloc", "free"};

static int kind_of(const char *cat) {
  for (int k = 0; cat && k < OT_TRACE_KIND_COUNT; k++)
    if (!strcmp(cat, cats[k])) return k;
  return -1;
}

ot_status ot_trace_read_chrome(const char *path, ot_trace **out, uint64_t *budget) {
  *out = NULL;
  if (budget) *budget = 0;
  json_error_t err;
  char *text;
  size_t len;
  OT_TRY(ot_file_read(path, (size_t)4 << 30, &text, &len)); /* a regular file only: a FIFO would block */
  json_t *root = json_loadb(text, len, 0, &err);
  free(text);
  if (!root) {
    if (err.line < 1) /* jansson could not read the file; its text names it and says why */
      return ot_fail(strstr(err.text, "No such file") ? OT_ERR_NOT_FOUND : OT_ERR_IO, "%s", err.text);
    return ot_fail(OT_ERR_FORMAT, "%s: invalid JSON at line %d: %s (not a trace written with --trace?)", path,
                   err.line, err.text);
  }
  json_t *arr = json_object_get(root, "traceEvents");
  json_t *other = json_object_get(root, "otherData");
  if (!json_is_array(arr) || !json_is_object(other) ||
      strcmp(json_string_value(json_object_get(other, "producer")) ? json_string_value(json_object_get(other, "producer")) : "", "omptensor")) {
    json_decref(root);
    return ot_fail(OT_ERR_FORMAT, "%s: not a trace written by omptensor (--trace): no traceEvents/otherData.producer", path);
  }
  if (budget) *budget = (uint64_t)json_integer_value(json_object_get(other, "budget_bytes"));
  ot_trace *t;
  ot_status s = ot_trace_create(&t);
  if (s != OT_OK) {
    json_decref(root);
    return s;
  }
  uint64_t t0 = ot_trace_t0(t);
  size_t i;
  json_t *e;
  json_array_foreach(arr, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    int kind = kind_of(json_string_value(json_object_get(e, "cat")));
    if (!ph || strcmp(ph, "X") || kind < 0) continue;
    json_t *a = json_object_get(e, "args");
    double ts = json_number_value(json_object_get(e, "ts")), dur = json_number_value(json_object_get(e, "dur"));
    const char *name = json_string_value(json_object_get(a, "tensor"));
    if (!json_is_object(a) || !name || ts < 0 || dur < 0) {
      s = ot_fail(OT_ERR_FORMAT, "%s: event %zu is missing args.tensor or has negative times", path, i);
      break;
    }
    ot_trace_event ev = {0};
    ev.kind = (ot_trace_kind)kind;
    ev.flags = (unsigned)json_integer_value(json_object_get(a, "flags"));
    ev.run = (int)json_integer_value(json_object_get(a, "run"));
    ev.op = (int)json_integer_value(json_object_get(a, "op"));
    ev.device = (int)json_integer_value(json_object_get(e, "pid"));
    ev.name = name;
    ev.bytes = (uint64_t)json_integer_value(json_object_get(a, "bytes"));
    ev.device_bytes = (uint64_t)json_integer_value(json_object_get(a, "device_bytes"));
    ev.block_delta = (int64_t)json_integer_value(json_object_get(a, "block_delta"));
    ev.start_ns = t0 + (uint64_t)(ts * 1000.0 + 0.5);
    ev.end_ns = t0 + (uint64_t)((ts + dur) * 1000.0 + 0.5);
    if (ot_trace_add(t, &ev) == (size_t)-1) {
      s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory for the trace", path);
      break;
    }
  }
  if (s == OT_OK && budget && *budget) ot_trace_set_budget(t, *budget);
  json_decref(root);
  if (s != OT_OK) {
    ot_trace_destroy(t);
    return s;
  }
  *out = t;
  return OT_OK;
}
