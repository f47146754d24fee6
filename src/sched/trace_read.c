/* trace_read.c — a Chrome trace written by omptensor, read back into a trace:
 * the "X" events carry kind (cat), tensor, bytes, op, run, device bytes,
 * flags and the time issued (optional: older files lack it) in their args, which is everything the summary and the budget check
 * need.
 *
 * The file is input like any other (issue 14): every field read goes
 * through one reader (`get`, below) that checks it is present, of the JSON
 * type the writer gives it and inside the range the in-memory event can hold
 * (times: 0 .. 2^53 us, so that nanoseconds fit int64 exactly; bytes:
 * 0 .. INT64_MAX; run, op, device: int), and the sums the summary makes are
 * checked as they are read. Anything else is OT_ERR_FORMAT naming the file,
 * the event (traceEvents[i]) and the field. A path that is not a regular
 * file (a FIFO, a directory) is refused before anything is read. */
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/checked.h"
#include "core/file.h"
#include "sched/trace_impl.h"

static const char *const cats[OT_TRACE_KIND_COUNT] = {"run",    "kernel", "upload", "download", "alloc",
                                                       "free",   "remote", "mark",   "disk"};

/* The largest time a trace may hold: 2^53 us (285 years). Below it a time in
 * microseconds is an exact double step of 1 and its nanoseconds (< 9.01e18)
 * fit int64. */
#define MAX_US 9007199254740992.0
#define MAX_US_INT ((json_int_t)1 << 53)
#define MAX_NS ((uint64_t)1000 << 53)

typedef enum kind_t { T_INT, T_TIME, T_STR, T_OBJ } kind_t;

/* What the reader expects of one field. */
typedef struct field {
  const char *name; /* as it is named in messages: "ts", "args.bytes" */
  kind_t type;
  json_int_t lo, hi; /* T_INT: the accepted range */
} field;

enum { F_PH, F_CAT, F_TS, F_DUR, F_PID, F_ARGS, F_TENSOR, F_BYTES, F_OP, F_RUN, F_DEVBYTES, F_DELTA, F_FLAGS, F_N };

/* Every field of an "X" event, in the order they are checked. */
static const field fields[F_N] = {
    [F_PH] = {"ph", T_STR, 0, 0},
    [F_CAT] = {"cat", T_STR, 0, 0},
    [F_TS] = {"ts", T_TIME, 0, 0},
    [F_DUR] = {"dur", T_TIME, 0, 0},
    [F_PID] = {"pid", T_INT, -1, INT_MAX}, /* the OpenMP device number */
    [F_ARGS] = {"args", T_OBJ, 0, 0},
    [F_TENSOR] = {"args.tensor", T_STR, 0, 0},
    [F_BYTES] = {"args.bytes", T_INT, 0, INT64_MAX},
    [F_OP] = {"args.op", T_INT, -1, INT_MAX},
    [F_RUN] = {"args.run", T_INT, 0, INT_MAX},
    [F_DEVBYTES] = {"args.device_bytes", T_INT, 0, INT64_MAX},
    [F_DELTA] = {"args.block_delta", T_INT, -INT64_MAX, INT64_MAX},
    [F_FLAGS] = {"args.flags", T_INT, 0, OT_TRACE_FLAGS_ALL},
};

static const field budget_field = {"otherData.budget_bytes", T_INT, 0, INT64_MAX};
/* optional: files written before issue 17 lack it (the event was then issued at ts) */
static const field issued_field = {"args.issued", T_TIME, 0, 0};
static const field host_field = {"args.host_bytes", T_INT, 0, INT64_MAX};

/* Where the reader is, for messages. */
typedef struct rd {
  const char *path;
  size_t ev;       /* index in traceEvents; (size_t)-1: the document itself */
  const char *cat; /* the event's kind once read, else NULL */
} rd;

#define HINT "not as omptensor --trace writes it"

/* OT_ERR_FORMAT: "PATH: traceEvents[I] (CAT): WHAT (HINT)". */
static ot_status OT_PRINTF(2, 3) bad(const rd *r, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (r->ev == (size_t)-1) return ot_fail(OT_ERR_FORMAT, "%s: %s (%s)", r->path, what, HINT);
  if (r->cat) return ot_fail(OT_ERR_FORMAT, "%s: traceEvents[%zu] (%s): %s (%s)", r->path, r->ev, r->cat, what, HINT);
  return ot_fail(OT_ERR_FORMAT, "%s: traceEvents[%zu]: %s (%s)", r->path, r->ev, what, HINT);
}

/* The shortest %g that reads back as d. */
static void fmt_real(char *buf, size_t n, double d) {
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, d);
    if (strtod(buf, NULL) == d) return;
  }
}

/* What v is, for a message: "missing", "a string ('abc')", "1e+300", ... */
static void describe(const json_t *v, char *buf, size_t n) {
  if (!v) {
    snprintf(buf, n, "missing");
    return;
  }
  switch (json_typeof(v)) {
  case JSON_OBJECT: snprintf(buf, n, "an object"); break;
  case JSON_ARRAY: snprintf(buf, n, "an array (%zu elements)", json_array_size(v)); break;
  case JSON_STRING: {
    char s[28];
    size_t k = 0;
    for (const char *p = json_string_value(v); *p && k < sizeof s - 4; p++) s[k++] = *p >= 32 && *p < 127 ? *p : '?';
    if (json_string_length(v) > k) s[k++] = '.', s[k++] = '.', s[k++] = '.';
    s[k] = 0;
    snprintf(buf, n, "a string ('%s')", s);
    break;
  }
  case JSON_INTEGER: snprintf(buf, n, "%lld", (long long)json_integer_value(v)); break;
  case JSON_REAL:
    fmt_real(buf, n, json_real_value(v));
    if (!strpbrk(buf, ".eni")) strncat(buf, ".0", n - strlen(buf) - 1); /* 512.0, not 512: it is a real */
    break;
  case JSON_TRUE: snprintf(buf, n, "true"); break;
  case JSON_FALSE: snprintf(buf, n, "false"); break;
  default: snprintf(buf, n, "null"); break;
  }
}

/* The one reader of a field: v (NULL if absent) must be what f says. For
 * T_INT *i gets the value, for T_TIME *ns the time in nanoseconds, for
 * T_STR *s the string, for T_OBJ nothing more. */
static ot_status get(const rd *r, const field *f, const json_t *v, json_int_t *i, uint64_t *ns, const char **s) {
  char got[64];
  describe(v, got, sizeof got);
  switch (f->type) {
  case T_OBJ:
    if (!json_is_object(v)) return bad(r, "field %s is %s, expected an object", f->name, got);
    return OT_OK;
  case T_STR:
    if (!json_is_string(v)) return bad(r, "field %s is %s, expected a string", f->name, got);
    *s = json_string_value(v);
    return OT_OK;
  case T_INT:
    if (!json_is_integer(v) || json_integer_value(v) < f->lo || json_integer_value(v) > f->hi)
      return bad(r, "field %s is %s, expected an integer in %lld..%lld", f->name, got, (long long)f->lo,
                 (long long)f->hi);
    *i = json_integer_value(v);
    return OT_OK;
  case T_TIME: {
    /* an integer or a real number of microseconds, 0 .. 2^53 */
    int ok = json_is_integer(v) ? json_integer_value(v) >= 0 && json_integer_value(v) <= MAX_US_INT
                                : json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) <= MAX_US;
    if (!ok) return bad(r, "field %s is %s, expected a number of microseconds in 0..%.0f", f->name, got, MAX_US);
    double us = json_number_value(v);
    *ns = (uint64_t)(us * 1000.0 + 0.5); /* <= 2^53 * 1000 + 0.5: fits */
    return OT_OK;
  }
  }
  return OT_OK;
}

static int kind_of(const char *cat) {
  for (int k = 0; k < OT_TRACE_KIND_COUNT; k++)
    if (!strcmp(cat, cats[k])) return k;
  return -1;
}

/* The sums the summary will make, checked as the events are read. */
typedef struct sums {
  uint64_t to_device, to_host;
} sums;

/* traceEvents[i] into *ev (*take = 0 for the events that are not read: the
 * metadata "M" and counter "C" events, which repeat what the "X" events
 * hold). */
static ot_status read_event(rd *r, const json_t *e, uint64_t t0, sums *sum, ot_trace_event *ev, int *take) {
  *take = 0;
  if (!json_is_object(e)) {
    char got[64];
    describe(e, got, sizeof got);
    return bad(r, "is %s, expected an object (an event)", got);
  }
  const char *ph = NULL, *cat = NULL, *name = NULL;
  OT_TRY(get(r, &fields[F_PH], json_object_get(e, "ph"), NULL, NULL, &ph));
  if (!strcmp(ph, "M") || !strcmp(ph, "C")) return OT_OK;
  const int instant = !strcmp(ph, "i"); /* a mark (ot_trace_mark): no dur */
  if (strcmp(ph, "X") && !instant)
    return bad(r, "field ph is '%.16s', expected X, i, M or C (the phases omptensor writes)", ph);
  OT_TRY(get(r, &fields[F_CAT], json_object_get(e, "cat"), NULL, NULL, &cat));
  int kind = kind_of(cat);
  if (kind < 0)
    return bad(r, "field cat is '%.32s', expected one of run, kernel, upload, download, alloc, free, remote, mark, disk", cat);
  r->cat = cats[kind];
  if (instant != (kind == OT_TRACE_MARK))
    return instant ? bad(r, "field ph is 'i' (instant): only marks are instant events, expected X")
                   : bad(r, "field ph is 'X': a mark is an instant event, expected i");
  json_int_t v[F_N] = {0};
  uint64_t ts = 0, dur = 0;
  const json_t *args = json_object_get(e, "args");
  for (int f = F_TS; f < F_N; f++) {
    if (f == F_DUR && instant) continue; /* dur stays 0 */
    const json_t *src = f < F_TENSOR ? json_object_get(e, fields[f].name) : json_object_get(args, fields[f].name + 5);
    OT_TRY(get(r, &fields[f], src, &v[f], f == F_TS ? &ts : &dur, &name));
  }
  uint64_t issued = ts;
  const json_t *iv = json_object_get(args, "issued");
  if (iv) OT_TRY(get(r, &issued_field, iv, NULL, &issued, NULL));
  json_int_t host = 0; /* optional (a disk read's; files before issue 23 have none) */
  const json_t *hv = json_object_get(args, "host_bytes");
  if (hv) OT_TRY(get(r, &host_field, hv, &host, NULL, NULL));
  uint64_t end;
  if (ot_add_u64(ts, dur, &end) || end > MAX_NS)
    return bad(r, "field dur: ts + dur = %.17g us is past the largest time a trace holds, %.0f us",
               json_number_value(json_object_get(e, "ts")) + json_number_value(json_object_get(e, "dur")), MAX_US);
  uint64_t *total = kind == OT_TRACE_UPLOAD ? &sum->to_device : kind == OT_TRACE_DOWNLOAD ? &sum->to_host : NULL;
  if (total && ot_add_u64(*total, (uint64_t)v[F_BYTES], total))
    return bad(r, "field args.bytes: the bytes copied %s add up past %llu",
               kind == OT_TRACE_UPLOAD ? "to the device" : "home", (unsigned long long)UINT64_MAX);
  memset(ev, 0, sizeof *ev);
  ev->kind = (ot_trace_kind)kind;
  ev->flags = (unsigned)v[F_FLAGS];
  ev->run = (int)v[F_RUN];
  ev->op = (int)v[F_OP];
  ev->device = (int)v[F_PID];
  ev->name = name;
  ev->bytes = (uint64_t)v[F_BYTES];
  ev->device_bytes = (uint64_t)v[F_DEVBYTES];
  ev->block_delta = (int64_t)v[F_DELTA];
  ev->host_bytes = (uint64_t)host;
  /* absolute times (ot_trace_add makes them relative to t0 again) */
  if (ot_add_u64(t0, ts, &ev->start_ns) || ot_add_u64(t0, end, &ev->end_ns) || ot_add_u64(t0, issued, &ev->issued_ns))
    return bad(r, "field ts: the time does not fit this process's clock");
  *take = 1;
  return OT_OK;
}

/* The whole document; takes a reference to nothing (root stays the caller's). */
static ot_status read_doc(const char *path, const json_t *root, ot_trace **out, uint64_t *budget) {
  rd r = {path, (size_t)-1, NULL};
  const json_t *arr = json_object_get(root, "traceEvents"), *other = json_object_get(root, "otherData");
  const char *producer = json_string_value(json_object_get(other, "producer"));
  if (!json_is_array(arr) || !producer || strcmp(producer, "omptensor"))
    return ot_fail(OT_ERR_FORMAT, "%s: not a trace written by omptensor (--trace): no traceEvents/otherData.producer",
                   path);
  /* the budget: an integer; null (or -1, as versions before issue 14 wrote
   * it) is unlimited */
  const json_t *bj = json_object_get(other, "budget_bytes");
  json_int_t b = 0;
  uint64_t bud;
  if (json_is_null(bj) || (json_is_integer(bj) && json_integer_value(bj) == -1)) bud = UINT64_MAX;
  else {
    OT_TRY(get(&r, &budget_field, bj, &b, NULL, NULL));
    bud = (uint64_t)b;
  }
  ot_trace *t;
  OT_TRY(ot_trace_create(&t));
  uint64_t t0 = ot_trace_t0(t);
  sums sum = {0, 0};
  ot_status s = OT_OK;
  for (size_t i = 0; s == OT_OK && i < json_array_size(arr); i++) {
    ot_trace_event ev;
    int take;
    r.ev = i;
    r.cat = NULL;
    s = read_event(&r, json_array_get(arr, i), t0, &sum, &ev, &take);
    if (s == OT_OK && take && ot_trace_add(t, &ev) == (size_t)-1)
      s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory for the trace (at traceEvents[%zu])", path, i);
  }
  if (s != OT_OK) {
    ot_trace_destroy(t);
    return s;
  }
  if (bud) ot_trace_set_budget(t, bud);
  if (budget) *budget = bud;
  *out = t;
  return OT_OK;
}

static ot_status from_json(const char *path, json_t *root, const json_error_t *err, ot_trace **out, uint64_t *budget) {
  if (!root)
    return ot_fail(OT_ERR_FORMAT, "%s: invalid JSON at line %d: %s (not a trace written with --trace?)", path,
                   err->line, err->text);
  ot_status s = read_doc(path, root, out, budget);
  json_decref(root);
  return s;
}

ot_status ot_trace_read_chrome(const char *path, ot_trace **out, uint64_t *budget) {
  if (!out || !path) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_read_chrome: NULL argument");
  *out = NULL;
  if (budget) *budget = 0;
  /* one checked read (core/file.h): a regular file only, so a FIFO or a
   * directory is refused before anything is read and cannot block */
  char *text;
  size_t len;
  OT_TRY(ot_file_read(path, (size_t)4 << 30, &text, &len));
  ot_status s = ot_trace_read_chrome_text(text, len, path, out, budget);
  free(text);
  return s;
}

ot_status ot_trace_read_chrome_text(const char *text, size_t len, const char *name, ot_trace **out, uint64_t *budget) {
  if (!out || !name || (!text && len)) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_read_chrome_text: NULL argument");
  *out = NULL;
  if (budget) *budget = 0;
  json_error_t err;
  json_t *root = json_loadb(text ? text : "", len, 0, &err);
  return from_json(name, root, &err, out, budget);
}
