/* fuzz_size.c — size strings ("3.5GB", "40%") and per-device limits
 * ("0:20GB,1:30GB") through ot_size_parse, ot_size_resolve and
 * ot_mem_limit_parse, and the settings entry point the CLI uses. */
#include "fuzz_common.h"
#include "omptensor/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = ot_fuzz_cstr(data, size);
  if (!s) return 0;
  ot_size sz;
  const int size_ok = ot_size_parse(s, &sz) == OT_OK;
  if (size_ok) {
    if (sz.kind == OT_SIZE_BYTES && sz.bytes == 0) abort();
    if (sz.kind == OT_SIZE_BYTES && sz.bytes > INT64_MAX) abort(); /* reported as signed JSON integers */
    if (sz.kind == OT_SIZE_FRACTION && !(sz.fraction > 0 && sz.fraction <= 1)) abort();
    uint64_t b;
    ot_size_resolve(sz, (uint64_t)80 << 30, &b);
    ot_size_resolve(sz, 0, &b);
  }
  ot_mem_limit l;
  const int limit_ok = ot_mem_limit_parse(s, &l) == OT_OK;
  if (limit_ok)
    for (int d = 0; d < OT_MAX_DEVICES; d++) (void)ot_mem_limit_for(&l, d);
  /* one rule for every size (issue 43): a limit without a device list reads
   * as any size does (a bare number was GB below 1024 in a limit only) */
  if (!strchr(s, ':') && (size_ok != limit_ok || (size_ok && (sz.kind != l.all.kind || sz.bytes != l.all.bytes))))
    abort();
  ot_settings st;
  ot_settings_init(&st);
  ot_settings_set_flag(&st, "gpu-memory-limit", s);
  ot_settings_release(&st);
  free(s);
  return 0;
}
