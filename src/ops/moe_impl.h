/* moe_impl.h (ops-internal) — the experts object behind experts.h. */
#ifndef OT_OPS_MOE_IMPL_H
#define OT_OPS_MOE_IMPL_H

#include "ops/ops_impl.h"
#include "omptensor/experts.h"
#include "sched/program_impl.h"

#define OT_MOE_MAX_EXPERTS 256 /* the routing works on the stack */

/* One expert's place in the window. */
typedef struct ot_slot {
  int layer, expert;   /* what it holds (layer -1: nothing) */
  uint64_t used;       /* clock of its last use (least recently used goes first) */
  void *where[3];      /* where the kernels read gate, up, down (ot_op_fill's answer) */
} ot_slot;

struct ot_experts {
  ot_ctx *ctx;
  ot_experts_shape sh;
  ot_tensor **w;        /* [layers x experts x 3]: gate, up, down, borrowed */
  size_t part_off[3], slot_bytes;
  ot_tensor *window;    /* the cache tensor, n_slots x slot_bytes */
  int n_slots;
  ot_slot *slot;        /* [n_slots] */
  uint64_t epoch;       /* the window's cache epoch and address the tags belong to (program.h) */
  void *addr;
  uint64_t clock;
  void *host;           /* routing scratch, for cap_T tokens */
  int64_t cap_T;
  ot_experts_stats stats;
};

#endif
