/* fault.c — OMPTENSOR_FAULT (fault.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fault.h"

static const char *const kind_names[OT_FAULT_KIND_COUNT] = {"device_alloc", "pinned_alloc", "managed_alloc",
                                                             "transfer", "write"};

/* fail_at[k] = N (0: never); count[k] = operations seen. `armed` says
 * whether any kind is configured, so an unconfigured process pays one load. */
static atomic_ulong fail_at[OT_FAULT_KIND_COUNT];
static atomic_ulong count[OT_FAULT_KIND_COUNT];
static atomic_int armed;
static _Atomic(ot_fault_hook) hook;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Parses "kind:N,kind:N" into at[]; 0 on success. */
static int parse(const char *spec, unsigned long at[OT_FAULT_KIND_COUNT], char *why, size_t why_len) {
  memset(at, 0, sizeof(unsigned long) * OT_FAULT_KIND_COUNT);
  const char *p = spec;
  while (p && *p) {
    const char *colon = strchr(p, ':');
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    if (!colon || colon > end) {
      snprintf(why, why_len, "'%.*s' is not KIND:N", (int)(end - p), p);
      return -1;
    }
    int k = 0;
    while (k < OT_FAULT_KIND_COUNT &&
           !(strlen(kind_names[k]) == (size_t)(colon - p) && strncmp(kind_names[k], p, (size_t)(colon - p)) == 0))
      k++;
    if (k == OT_FAULT_KIND_COUNT) {
      snprintf(why, why_len, "unknown kind '%.*s' (device_alloc, pinned_alloc, managed_alloc, transfer, write)",
               (int)(colon - p), p);
      return -1;
    }
    char *num_end;
    unsigned long n = (colon[1] >= '0' && colon[1] <= '9') ? strtoul(colon + 1, &num_end, 10) : 0;
    if (n == 0 || num_end != end) {
      snprintf(why, why_len, "'%.*s': N must be a whole number >= 1", (int)(end - p), p);
      return -1;
    }
    at[k] = n;
    p = *end ? end + 1 : end;
  }
  return 0;
}

static void install(const unsigned long at[OT_FAULT_KIND_COUNT]) {
  int any = 0;
  for (int k = 0; k < OT_FAULT_KIND_COUNT; k++) {
    atomic_store(&fail_at[k], at[k]);
    atomic_store(&count[k], 0);
    any |= at[k] != 0;
  }
  atomic_store(&armed, any || atomic_load(&hook) != NULL);
}

static void read_env(void) {
  const char *e = getenv("OMPTENSOR_FAULT");
  if (!e || !*e) return;
  unsigned long at[OT_FAULT_KIND_COUNT];
  char why[160];
  if (parse(e, at, why, sizeof why) != 0) {
    ot_warn_once("fault-env", "OMPTENSOR_FAULT ignored: %s", why);
    return;
  }
  install(at);
}

int ot_fault_hit(ot_fault_kind kind) {
  pthread_once(&env_once, read_env);
  if (!atomic_load_explicit(&armed, memory_order_relaxed)) return 0;
  unsigned long n = atomic_fetch_add(&count[kind], 1) + 1;
  ot_fault_hook h = atomic_load(&hook);
  if (h) h(kind, n);
  return n == atomic_load(&fail_at[kind]);
}

void ot_fault_set_hook(ot_fault_hook h) {
  pthread_once(&env_once, read_env);
  atomic_store(&hook, h);
  int any = h != NULL;
  for (int k = 0; k < OT_FAULT_KIND_COUNT; k++) any |= atomic_load(&fail_at[k]) != 0;
  atomic_store(&armed, any);
}

ot_status ot_fault_configure(const char *spec) {
  pthread_once(&env_once, read_env); /* so a later first check cannot override this */
  unsigned long at[OT_FAULT_KIND_COUNT];
  char why[160];
  if (parse(spec, at, why, sizeof why) != 0) {
    memset(at, 0, sizeof at);
    install(at);
    return ot_fail(OT_ERR_INVALID_ARG, "fault spec '%s': %s", spec, why);
  }
  install(at);
  return OT_OK;
}

unsigned long ot_fault_count(ot_fault_kind kind) { return atomic_load(&count[kind]); }
