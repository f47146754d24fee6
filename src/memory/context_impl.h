/* context_impl.h (internal) — the context's fields, for the runtime's layers. */
#ifndef OT_CORE_CONTEXT_IMPL_H
#define OT_CORE_CONTEXT_IMPL_H

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
};

#endif
