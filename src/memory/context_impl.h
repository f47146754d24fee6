/* context_impl.h (internal) — the context's fields, for the runtime's layers. */
#ifndef OT_CORE_CONTEXT_IMPL_H
#define OT_CORE_CONTEXT_IMPL_H

#include <stdatomic.h>

#include "omptensor/context.h"
#include "omptensor/memory.h"

struct ot_ctx {
  ot_backend backend;        /* resolved, never AUTO */
  int n_dev;                 /* devices in use (the host counts as one) */
  int dev[OT_MAX_DEVICES];   /* their OpenMP numbers; OT_DEVICE_HOST for the host */
  uint64_t budget[OT_MAX_DEVICES];
  uint64_t free_at_create[OT_MAX_DEVICES]; /* device free memory when the context was made (0: unknown) */
  ot_mem_space home_space;   /* where tensor homes live for this backend */
  int verbose;
  uint64_t host_budget;      /* ot_ctx_opts.host_budget_bytes (0: none): weights may be homed in their files */
  atomic_uint_fast64_t host_bytes; /* host homes and staging rings allocated now (tensor.c, sched/disk.c) */
};

#endif
