/* batch.h (internal) — ops the executor may hand to one launch.
 *
 * An op with an encoder (`emit`) writes, for the device addresses and
 * scalars of this run, up to OT_BATCH_MAX_PER_OP fixed-size instructions
 * of its launcher's format, or none where this call is not one its
 * launcher covers. Consecutive ops with the same launcher and no event of
 * the schedule between them (no transfer, wait, recompute or probe) are
 * given to the launcher as one list, run in order, synchronously: on a GPU
 * the step kernel (kernels/step_gpu.h) runs a decode layer's ops in one
 * launch instead of one launch each. An op whose encoder writes nothing
 * ends the list and runs alone through `run`, which stays the op's
 * definition. The scheduler does not read the instructions: the ops layer
 * sets both functions (ops_common.c). */
#ifndef OT_SCHED_BATCH_H
#define OT_SCHED_BATCH_H

#include <stddef.h>

#include "omptensor/program.h"

#define OT_BATCH_MAX_PER_OP 2

/* Writes up to OT_BATCH_MAX_PER_OP instructions at insns (each `insn_bytes`
 * of the launcher's, contiguous) and returns how many; 0: run e alone. It
 * may declare partial writes (ot_op_wrote) like run does. */
typedef int (*ot_op_emit_fn)(const ot_op_exec *e, void *insns);
/* Runs n instructions on OpenMP device dev; returns once they are done.
 * The list is the executor's scratch, rewritten by the next batch: the
 * launcher may change it in place (the step kernel marks fused pairs). */
typedef ot_status (*ot_op_launch_fn)(int dev, void *insns, int n);

/* Gives op `op` of p (the last one added, usually) an encoder for launcher
 * `launch`, whose instructions are insn_bytes each. */
ot_status ot_program_set_batch(ot_program *p, int op, ot_op_emit_fn emit, ot_op_launch_fn launch, size_t insn_bytes);

#endif
