/* fuzz_trace.c — a trace file (`omptensor trace summarize|plot`) through
 * ot_trace_read_chrome_text, the reader behind ot_trace_read_chrome.
 *
 * An accepted trace must keep the reader's promises (trace.h): every event
 * within the ranges it checks, the summary's byte sums exact (no
 * saturation: the reader refuses sums past uint64); the budget check may
 * fail but must not misbehave; and the trace written back
 * (ot_trace_chrome_text, what ot_trace_write_chrome writes) reads back to
 * the same events and budget. */
#include "fuzz_common.h"
#include "sched/trace_impl.h"

#define MAX_NS ((uint64_t)1000 << 53)

/* Times go through microseconds as doubles: exact below 2^50 ns (13 days),
 * within a part in 2^40 above. */
static int close_ns(uint64_t a, uint64_t b) {
  uint64_t d = a > b ? a - b : b - a;
  return d == 0 || (a >= (1ull << 50) && d <= 1 + a / (1ull << 40));
}

static void check_same(const ot_trace *a, uint64_t ba, const ot_trace *b, uint64_t bb) {
  if (ba != bb || ot_trace_count(a) != ot_trace_count(b)) abort();
  for (size_t i = 0; i < ot_trace_count(a); i++) {
    const ot_trace_event *x = ot_trace_event_at(a, i), *y = ot_trace_event_at(b, i);
    if (x->kind != y->kind || x->flags != y->flags || x->run != y->run || x->op != y->op || x->device != y->device ||
        strcmp(x->name, y->name) || x->bytes != y->bytes || x->block_delta != y->block_delta ||
        x->device_bytes != y->device_bytes || !close_ns(x->start_ns, y->start_ns) || !close_ns(x->end_ns, y->end_ns))
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = ot_fuzz_copy(data, size);
  if (!buf) return 0;
  ot_trace *t;
  uint64_t budget;
  if (ot_trace_read_chrome_text(buf, size, "fuzz.json", &t, &budget) == OT_OK) {
    unsigned __int128 up = 0, down = 0;
    for (size_t i = 0; i < ot_trace_count(t); i++) {
      const ot_trace_event *e = ot_trace_event_at(t, i);
      if ((unsigned)e->kind >= OT_TRACE_KIND_COUNT || (e->flags & ~(unsigned)OT_TRACE_FLAGS_ALL) || e->run < 0 ||
          e->op < -1 || e->device < -1 || !e->name || e->end_ns < e->start_ns || e->end_ns > MAX_NS ||
          e->bytes > (uint64_t)INT64_MAX || e->device_bytes > (uint64_t)INT64_MAX || e->block_delta == INT64_MIN)
        abort();
      if (e->kind == OT_TRACE_UPLOAD) up += e->bytes;
      if (e->kind == OT_TRACE_DOWNLOAD) down += e->bytes;
    }
    ot_trace_summary s = ot_trace_summarize(t);
    if (s.bytes_to_device != up || s.bytes_to_host != down || !(s.wall_s >= 0) || !(s.overlap_s >= 0) ||
        s.overlap_s > s.transfer_s * (1 + 1e-9) + 1e-9)
      abort();
    (void)ot_trace_check_budget(t, budget ? budget : UINT64_MAX);
    char *text;
    if (ot_trace_chrome_text(t, &text) == OT_OK) {
      ot_trace *back;
      uint64_t b2;
      if (ot_trace_read_chrome_text(text, strlen(text), "fuzz-rewritten.json", &back, &b2) != OT_OK) abort();
      check_same(t, budget, back, b2);
      ot_trace_destroy(back);
      free(text);
    }
    ot_trace_destroy(t);
  }
  free(buf);
  return 0;
}
