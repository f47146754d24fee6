/* trace_chrome.c — Chrome trace JSON (chrome://tracing, ui.perfetto.dev).
 *
 * One process per device; threads: 1 compute (kernels), 2 transfers
 * (uploads, write-backs), 3 memory (placements and frees, zero length); a
 * counter "device bytes" per device. Times in microseconds. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "sched/trace_impl.h"

enum { LANE_COMPUTE = 1, LANE_TRANSFER = 2, LANE_MEMORY = 3, LANE_HOST = 4, LANE_DISK = 5 };

static const char *const kind_cat[OT_TRACE_KIND_COUNT] = {"run",  "kernel", "upload", "download", "alloc",
                                                           "free", "remote", "mark",   "disk"};

static int lane_of(ot_trace_kind k, unsigned flags) {
  switch (k) {
  case OT_TRACE_KERNEL: return flags & OT_TRACE_HOST ? LANE_HOST : LANE_COMPUTE;
  case OT_TRACE_RUN: return LANE_COMPUTE;
  case OT_TRACE_UPLOAD:
  case OT_TRACE_DOWNLOAD:
  case OT_TRACE_REMOTE: return LANE_TRANSFER;
  case OT_TRACE_DISK: return LANE_DISK;
  default: return LANE_MEMORY;
  }
}

/* Adds obj to arr; returns 0 when out of memory. */
static int push(json_t *arr, json_t *obj) { return obj && json_array_append_new(arr, obj) == 0; }

static json_t *meta(const char *what, int pid, int tid, const char *name) {
  return json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", what, "ph", "M", "pid", pid, "tid", tid, "args", "name",
                   name);
}

static int add_device_meta(json_t *arr, int dev) {
  char nm[64];
  snprintf(nm, sizeof nm, "device %d", dev);
  return push(arr, meta("process_name", dev, 0, nm)) && push(arr, meta("thread_name", dev, LANE_COMPUTE, "compute")) &&
         push(arr, meta("thread_name", dev, LANE_TRANSFER, "transfers")) &&
         push(arr, meta("thread_name", dev, LANE_MEMORY, "memory")) &&
         push(arr, meta("thread_name", dev, LANE_HOST, "host compute")) &&
         push(arr, meta("thread_name", dev, LANE_DISK, "disk reads"));
}

/* A mark: a global instant event (Perfetto draws a line across every
 * track) with the args an "X" event has, so that it reads back the same. */
static json_t *mark_json(const ot_trace_event *e) {
  return json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:i, s:{s:s, s:I, s:i, s:i, s:I, s:I, s:i, s:f}}", "name", e->name,
                   "cat", kind_cat[e->kind], "ph", "i", "s", "g", "ts", (double)e->start_ns / 1000.0, "pid",
                   e->device, "tid", 0, "args", "tensor", e->name, "bytes", (json_int_t)e->bytes, "op", e->op, "run",
                   e->run, "device_bytes", (json_int_t)e->device_bytes, "block_delta", (json_int_t)e->block_delta,
                   "flags", (int)e->flags, "issued", (double)e->issued_ns / 1000.0);
}

static json_t *event_json(const ot_trace_event *e) {
  char nm[300];
  if (e->kind == OT_TRACE_MARK) return mark_json(e);
  if (e->kind == OT_TRACE_KERNEL) /* a recomputation shows as such in Perfetto (and the flag says it too) */
    snprintf(nm, sizeof nm, "%s%s", e->name, e->flags & OT_TRACE_RECOMPUTE ? " (recompute)" : "");
  else if (e->kind == OT_TRACE_RUN) snprintf(nm, sizeof nm, "run %d", e->run);
  else snprintf(nm, sizeof nm, "%s %s", kind_cat[e->kind], e->name);
  json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:{s:s, s:I, s:i, s:i, s:I, s:I, s:i, s:f}}", "name", nm,
                   "cat", kind_cat[e->kind], "ph", "X", "ts", (double)e->start_ns / 1000.0, "dur",
                   (double)(e->end_ns - e->start_ns) / 1000.0, "pid", e->device, "tid", lane_of(e->kind, e->flags), "args",
                   "tensor", e->name, "bytes", (json_int_t)e->bytes, "op", e->op, "run", e->run, "device_bytes",
                   (json_int_t)e->device_bytes, "block_delta", (json_int_t)e->block_delta, "flags", (int)e->flags,
                   "issued", (double)e->issued_ns / 1000.0);
  /* a disk read: the host memory held then (ot_trace_check_host_budget) */
  if (o && e->kind == OT_TRACE_DISK &&
      json_object_set_new(json_object_get(o, "args"), "host_bytes", json_integer((json_int_t)e->host_bytes))) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* At the time the event was issued, not its start: an upload's start is
 * when the transfer thread began the copy, after later events were issued,
 * and the counters came out of time order (15 in one trace). */
static json_t *counter_json(const ot_trace_event *e) {
  return json_pack("{s:s, s:s, s:f, s:i, s:{s:I}}", "name", "device bytes", "ph", "C", "ts",
                   (double)e->issued_ns / 1000.0, "pid", e->device, "args", "bytes", (json_int_t)e->device_bytes);
}

/* The whole trace as JSON (*root; NULL with an error when out of memory). */
static ot_status build(const ot_trace *t, const char *what, json_t **out) {
  *out = NULL;
  /* the budget as an integer; unlimited (UINT64_MAX, and anything past
   * INT64_MAX, which JSON integers here cannot hold) as null */
  uint64_t b = ot_trace_budget(t);
  json_t *root = json_object(), *arr = json_array(),
         *bj = b > (uint64_t)INT64_MAX ? json_null() : json_integer((json_int_t)b);
  int ok = root && arr && json_object_set(root, "traceEvents", arr) == 0 &&
           json_object_set_new(root, "displayTimeUnit", json_string("ms")) == 0 &&
           /* read back by ot_trace_read_chrome (omptensor trace summarize|plot) */
           json_object_set_new(root, "otherData", json_pack("{s:s, s:O}", "producer", "omptensor", "budget_bytes", bj)) == 0;
  json_decref(bj);
  int seen[64] = {0};
  for (size_t i = 0; ok && i < ot_trace_count(t); i++) {
    const ot_trace_event *e = ot_trace_event_at(t, i);
    int d = e->device < 0 ? 0 : e->device % 64;
    if (e->kind != OT_TRACE_MARK && !seen[d]) { /* a mark is of no device */
      seen[d] = 1;
      ok = add_device_meta(arr, e->device);
    }
    ok = ok && push(arr, event_json(e));
    if (ok && e->kind != OT_TRACE_KERNEL && e->kind != OT_TRACE_DOWNLOAD && e->kind != OT_TRACE_REMOTE &&
        e->kind != OT_TRACE_MARK && e->kind != OT_TRACE_DISK)
      ok = push(arr, counter_json(e));
  }
  json_decref(arr);
  if (!ok) {
    json_decref(root);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory to build the trace JSON", what);
  }
  *out = root;
  return OT_OK;
}

ot_status ot_trace_write_chrome(const ot_trace *t, const char *path) {
  if (!t || !path) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_write_chrome: NULL argument");
  char *text;
  OT_TRY(ot_trace_chrome_text(t, &text));
  /* atomically (core/file.h): the old trace or the whole new one, never a part */
  ot_status s = ot_file_write(path, text, strlen(text));
  free(text);
  return s;
}

ot_status ot_trace_chrome_text(const ot_trace *t, char **text) {
  if (!t || !text) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_chrome_text: NULL argument");
  *text = NULL;
  json_t *root;
  OT_TRY(build(t, "trace", &root));
  *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  return *text ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "trace: no host memory for the trace JSON text");
}
