/* fault.h (internal) — fault injection for tests of the error paths.
 *
 *     OMPTENSOR_FAULT="device_alloc:2,transfer:5" ./my_program
 *
 * makes the 2nd device allocation and the 5th transfer fail, as if the
 * driver had refused them; every other operation runs normally. Kinds:
 *
 *   device_alloc   ot_mem_alloc(OT_MEM_DEVICE, ...)   (a plan's device arena)
 *   pinned_alloc   ot_mem_alloc(OT_MEM_PINNED, ...)   (map-backend homes)
 *   managed_alloc  ot_mem_alloc(OT_MEM_MANAGED, ...)  (usm-backend homes)
 *   transfer       one copy or prefetch of the transfer thread (sched/movement.c),
 *                  upload or write-back
 *   write          one step of writing an output file (core/file.h): creating
 *                  the temporary, a write, fsync, close, rename/exchange, a
 *                  directory fsync, a hard link; fails as if the disk were full
 *
 * N counts from 1 over the whole process, per kind; only allocations of
 * at least one byte and only real transfers (not the no-op moves of the
 * host backend) count. The variable is read once, at the first check; a
 * malformed value is reported on stderr once and injects nothing. */
#ifndef OT_CORE_FAULT_H
#define OT_CORE_FAULT_H

#include "omptensor/status.h"

typedef enum ot_fault_kind {
  OT_FAULT_DEVICE_ALLOC = 0,
  OT_FAULT_PINNED_ALLOC,
  OT_FAULT_MANAGED_ALLOC,
  OT_FAULT_TRANSFER,
  OT_FAULT_WRITE,
  OT_FAULT_KIND_COUNT
} ot_fault_kind;

/* Counts one operation of `kind`; 1 if this one must fail. Thread-safe
 * (the transfer thread calls it). Costs one atomic increment when
 * injection is configured, one relaxed load when not. */
int ot_fault_hit(ot_fault_kind kind);

/* Tests: replaces the configuration (same syntax as OMPTENSOR_FAULT; NULL
 * or "" turns injection off) and restarts every count from zero.
 * OT_ERR_INVALID_ARG for a malformed spec (injection is then off). */
ot_status ot_fault_configure(const char *spec);

/* Tests: how many operations of `kind` were counted since the last
 * configuration (only counted while some injection is configured). */
unsigned long ot_fault_count(ot_fault_kind kind);

/* Tests: hook(kind, n) is called at every count of an operation (n: its
 * number since the last configuration), before it is decided whether it
 * fails; counting runs while a hook is set, even with no injection
 * configured. A crash-safety test kills its own process from the hook at
 * the n-th write. NULL removes it. */
typedef void (*ot_fault_hook)(ot_fault_kind kind, unsigned long n);
void ot_fault_set_hook(ot_fault_hook hook);

#endif
