/* sched.h — planning a program under a device memory budget, and running it.
 *
 *     ot_sched_opts o = ot_sched_opts_default();
 *     o.strategy = OT_STRATEGY_BALANCED;
 *     ot_plan *plan;
 *     if (ot_sched_plan(ctx, prog, &o, &plan) != OT_OK) ... ot_last_error() ...
 *     for (token ...) { ...write inputs, set scalars...; ot_sched_run(plan, trace); }
 *     ot_plan_destroy(plan);
 *
 * The plan is computed once, before anything runs (liveness, placement of
 * every device copy at an offset of the budget arena, evictions, write-backs,
 * upload times); running it only replays those decisions. A replay does not
 * plan again.
 *
 * Budget and feasibility. Device copies live in one arena per plan of
 * floor(budget / 256) * 256 bytes; each storage takes its size rounded up to
 * 256 (OT_SCHED_ALIGN). An op's working set is the sum of those rounded sizes
 * over the distinct storages it reads or writes (zero-byte storages take
 * nothing). A budget is feasible iff it is >= the largest working set
 * (ot_sched_min_budget); otherwise ot_sched_plan fails with OT_ERR_BUDGET
 * naming the op, its bytes and the budget. Strategy `none` needs the sum over
 * all storages instead.
 *
 * Eviction: when space is needed, the planner evicts the contiguous range of
 * resident copies (not used by the current op) with the lowest cost, where a
 * copy costs reload_bytes / distance_to_next_use (reload_bytes doubles for a
 * dirty copy, which must be written home first). For equal sizes this is
 * Belady's rule (farthest next use first); clean copies go before dirty ones.
 * Searching contiguous ranges also resolves fragmentation; if the current
 * op's own copies block every range, they are relocated (written home if
 * dirty, reloaded), which always succeeds when the budget is feasible.
 * Dead copies are freed right after their last use; outputs and persistent
 * tensors are written home right after their last write.
 *
 * Prefetch strategies:
 *   none        everything resident for the whole run; fails if it does not fit
 *   minimal     each upload right before the op that needs it; the fewest
 *               transfers (Belady-optimal for equal sizes)
 *   balanced    the next op's uploads are placed while the current op runs
 *               (double buffering), evicting only copies needed later than
 *               them; this may cost a few more transfers than minimal
 *   aggressive  as balanced, then every upload is issued as soon as the space
 *               it will occupy is free
 *
 * Between runs the plan keeps resident a set of clean weights/persistent
 * copies (those a steady replay finds useful, chosen so that a run ends with
 * exactly the set it started from); the first run starts from an empty
 * device. ot_sched_invalidate forgets them.
 *
 * Unified memory placements (backend usm). Kernels use the managed homes
 * themselves; the plan decides per storage (ot_sched_opts.usm_placement):
 *   resident  prefetched to the device ahead of its first use and kept;
 *   streamed  prefetched into the arena ahead of each use and dropped after
 *             it: a clean read-only copy by dropping the device duplicate
 *             (read-mostly advice; no copy home), a dirty one by a prefetch
 *             home, a dead one discarded;
 *   remote    never migrated: kernels read it in place over PCIe (preferred
 *             location host, accessed by the device); no device bytes.
 * The budget covers resident + streamed (the arena, as for map); remote
 * storages take none. auto: if everything fits, everything is resident;
 * otherwise every storage that no op writes and that is only used by
 * low-intensity ops (a matrix-vector product reads each weight byte once,
 * at most twice per run) is remote, except the largest of them that still
 * fit in what the rest of the plan leaves free of the budget, which stay
 * resident. Prefill-style GEMMs (many flops per byte) get their weights
 * streamed. On an emulated device (offload-host) the same decisions are
 * made; remote storages are read in place from their host homes and moves
 * are copies, so the tests check the same plans without a GPU.
 *
 * Set OMPTENSOR_DEBUG=plan to print every plan (decisions and reasons) on
 * stderr when it is made.
 *
 * Several devices (pipeline placement). With opts.n_stages > 1 (or
 * OT_SCHED_ALL_DEVICES on a context with several devices) ot_sched_plan
 * splits the op list into n consecutive stages, stage k on the context's
 * device device_index + k, and returns one plan that runs them in order:
 *   - the split minimises max_k (W_k + ops_k) / budget_k, where W_k is the
 *     bytes of the weights and persistent state (KV caches) stage k touches
 *     (each counted once per stage that uses it), i.e. weights are spread in
 *     proportion to the budgets; a stage whose largest op working set does
 *     not fit its device is never chosen. Every stage gets at least one op
 *     (with fewer ops than devices, fewer stages are used);
 *   - each stage is a sub-program (the same ops, tensors and scalars) planned
 *     by the single-device planner under its own device's budget, so it
 *     offloads to the host as one device would;
 *   - a storage used by several stages: a weight (never written) gets its own
 *     copy on every device that uses it (tied embeddings); a written storage
 *     is an activation passed at the stage boundary: the stage that writes it
 *     writes it home after its last write (when a later stage or the next run
 *     reads it), and a stage that reads it before writing it uploads it as an
 *     input (never kept between runs). So every device only ever holds copies
 *     that the home also holds after the writer's stage; a KV cache used by one
 *     layer's ops stays with that layer's stage.
 *   - the boundary goes through the host (device -> home -> device), on the
 *     plans' own transfer threads; for a decode step that is the hidden state
 *     (kilobytes). A direct omp_target_memcpy between devices is not done yet.
 * Stages run one after the other on the calling thread (one token's step is
 * sequential); the trace holds one RUN event per stage (later stages carry
 * OT_TRACE_STAGE and share the run number), events carry their device.
 * ot_plan_get_stats sums the stages (peak_bytes and arena_bytes: the sum over
 * the devices); ot_plan_stage gives each stage.
 *
 * Micro-batches (a pipeline planned with opts.micro_batches > 1). One run
 * keeps all but one device idle; ot_sched_run_micro runs n runs of the
 * program (micro-batches: in batched decoding, groups of sequences) so that
 * micro-batch m is in stage k while m + 1 is in stage k - 1, stage k on its
 * own thread and device, each device streaming its own weights over its own
 * link. For that, each stage has private homes of the values that cross it
 * (the program's inputs and outputs, the activations at its boundaries):
 * copied in from the micro-batch's packet (host memory, one per micro-batch
 * in flight) before the stage runs it and out after, so two stages never
 * share a home. A value written by one stage and read by one other goes
 * device to device where it can (opts.stage_copies, ot_stage_copies below:
 * the writer's write-back lands in a mailbox on the reader's device);
 * otherwise it is copied home by the writer, into the packet, and uploaded
 * by the reader (host staging). A run of n micro-batches over S stages takes
 * n + S - 1 stage times where one after another takes n * S. Persistent
 * state used by more than one stage is refused (its value would depend on
 * which micro-batch got there first). In the trace each micro-batch is a run
 * of its own (the later stages' RUN events carry its number and
 * OT_TRACE_STAGE), so kernels of different runs overlap in time on
 * different devices.
 */
#ifndef OMPTENSOR_SCHED_H
#define OMPTENSOR_SCHED_H

#include <stdint.h>
#include <stdio.h>

#include "omptensor/context.h"
#include "omptensor/program.h"
#include "omptensor/status.h"
#include "omptensor/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OT_SCHED_ALIGN 256

typedef enum ot_strategy {
  OT_STRATEGY_NONE = 0,
  OT_STRATEGY_MINIMAL,
  OT_STRATEGY_BALANCED,
  OT_STRATEGY_AGGRESSIVE,
  OT_STRATEGY_COUNT
} ot_strategy;

const char *ot_strategy_name(ot_strategy s);

/* How a micro-batched pipeline's activations cross from one stage's device
 * to the next (opts.stage_copies; "Micro-batches" above):
 *   AUTO  device to device where the two devices can reach each other (a
 *         CUDA build: the driver's peer access, NVLink or a PCIe switch;
 *         the host-offload plugin's emulated devices: always; AMD GPUs:
 *         not asked yet, so never), through host memory where not
 *   HOST  always through pinned host memory (device -> home -> packet ->
 *         home -> device), as before device-to-device copies existed
 *   PEER  device to device, refused (OT_ERR_UNSUPPORTED, naming the
 *         devices) where the devices cannot reach each other or a stage's
 *         budget has no room for its mailboxes
 * A value goes device to device when exactly one stage writes it, exactly
 * one later stage reads it, and the program neither fills it nor wants it
 * home (a hidden state between layers); the others (the program's inputs,
 * its logits, what several stages read) stay on the host path. The reading
 * stage holds a mailbox per value and micro-batch in flight on its device
 * (opts.micro_batches of them), planned out of its budget and counted in
 * its trace's device bytes; the writing stage's write-back lands there, a
 * copy between devices (flagged OT_TRACE_PEER, in the summary's
 * bytes_peer, not in bytes_to_host), and the reader's upload is a copy
 * within its device. */
typedef enum ot_stage_copies { OT_STAGE_COPY_AUTO = 0, OT_STAGE_COPY_HOST, OT_STAGE_COPY_PEER } ot_stage_copies;
const char *ot_stage_copies_name(ot_stage_copies c);
/* "auto", "host", "peer" -> *out; OT_ERR_INVALID_ARG naming the choices. */
ot_status ot_stage_copies_parse(const char *s, ot_stage_copies *out);
ot_status ot_strategy_parse(const char *s, ot_strategy *out);

/* Where a tensor lives while a usm plan runs (backend usm only; see
 * "Unified memory placements" above):
 *   auto      chosen per storage by predicted time (the default)
 *   resident  everything prefetched to the device ahead of its first use and
 *             kept: strategy none's plan (fails if it does not fit)
 *   streamed  everything through the budget's arena, nothing kept between
 *             runs: prefetched ahead of each use, dropped after it
 *   remote    every storage no op writes (weights, inputs) read in place
 *             over PCIe, never migrated; the rest planned as usual */
typedef enum ot_usm_placement {
  OT_USM_AUTO = 0,
  OT_USM_RESIDENT,
  OT_USM_STREAMED,
  OT_USM_REMOTE,
  OT_USM_PLACEMENT_COUNT
} ot_usm_placement;

const char *ot_usm_placement_name(ot_usm_placement p);
ot_status ot_usm_placement_parse(const char *s, ot_usm_placement *out); /* "auto" | "resident" | "streamed" | "remote" */

/* Where ops run (hybrid compute, "Hybrid compute" in src/sched/README.md):
 *   auto    hybrid when the plan predicts it faster, else gpu (the default)
 *   gpu     every op on the plan's device; what does not fit streams over PCIe
 *   hybrid  ops whose weights would stream are split between the device and
 *           the host's cores, which read those weights in host memory while
 *           PCIe streams the rest: a decode step is then bounded by the sum
 *           of the two bandwidths, not by PCIe. The split is chosen from the
 *           rates (ot_sched_opts.host_read_rate, OT_RATE_PINNED) so that both
 *           finish together. Needs a device other than the host (a GPU, or
 *           the host-offload plugin) and backend map. */
typedef enum ot_compute {
  OT_COMPUTE_AUTO = 0,
  OT_COMPUTE_GPU,
  OT_COMPUTE_HYBRID,
  OT_COMPUTE_COUNT
} ot_compute;

const char *ot_compute_name(ot_compute c);
ot_status ot_compute_parse(const char *s, ot_compute *out); /* "auto" | "gpu" | "hybrid" */

#define OT_SCHED_ALL_DEVICES (-1) /* n_stages: every context device from device_index on */

typedef struct ot_sched_opts {
  ot_strategy strategy;  /* default balanced */
  int device_index;      /* which of the context's devices (0 .. ot_ctx_num_devices-1); the first stage's */
  uint64_t budget_bytes; /* 0: the context's budget for that device (for a pipeline: every stage's budget) */
  int n_stages;          /* 0 or 1: one device; > 1: a pipeline over that many devices (see above);
                            OT_SCHED_ALL_DEVICES: as many as the context has from device_index on */
  int defer_writeback;   /* 1: persistent tensors kept on the device between runs are not written
                            home after each run (see ot_sched_sync); every strategy; never an output; in a pipeline only the state one
                            stage alone uses. OT_DEFER_IF_RESIDENT: the same, but only where the
                            plan keeps everything on the device (backend map, one device, no host
                            ops, nothing but inputs uploaded by a replay); else 0 (a decode step:
                            its KV rows stay on the device instead of 2 copies a layer a token) */
  unsigned transfer_delay_us; /* debugging: every transfer of the plan first waits this long (0, the
                            default: none). Results must not change: a kernel that ran before
                            its upload finished, or a block reused while a write-back still read
                            it, shows up as wrong numbers (the tests use it) */
  ot_usm_placement usm_placement; /* backend usm: how tensors are placed (default auto); any other
                            value on another backend is OT_ERR_INVALID_ARG */
  int probe_budget;      /* 1: check the budget independently once, on a CUDA GPU (ot_budget_probe) */
  ot_compute compute;    /* where ops run (above; default auto). One device, strategies other than none */
  double host_read_rate; /* hybrid: bytes/s the host's cores read weights at in a matvec; 0: from
                            measure_rates, else 40e9 */
  double pcie_rate;      /* hybrid: bytes/s the device's weight stream gets beside the host ops; 0: from
                            measure_rates, else 54e9 */
  ot_status (*measure_rates)(int dev, double *host_read_rate, double *pcie_rate); /* hybrid: called
                            (pcie_rate NULL when given) only when a plan that streams weighs a split and no
                            host rate is given; a failure fails the plan; ot_generate passes
                            ot_k_host_rates (kernels.h) */
  double cross_latency_s; /* hybrid: seconds one small copy between host and device takes; 0: measured
                            once per process (a few 4 KiB copies each way) */
  const unsigned char *host_ops; /* testing: n_ops flags, 1 = run that op on the host (implies hybrid, and
                            the choice above is not made); NULL: chosen */
  int recompute;          /* 1: an activation the planner must evict may be dropped and recomputed right
                            before its next use (its producing op run again) instead of written home and
                            read back, where the cost model below finds that cheaper ("Recomputation" in
                            src/sched/README.md). 0, the default: never (plans as before, bitwise). Ignored
                            for strategy none, pipelines, hybrid compute and the usm backend */
  double pcie_bytes_per_s; /* recompute: the rate an offloaded activation goes home and back at; 0: 54e9 */
  double flops_per_s;     /* recompute: the rate the producing op runs at (its flops hint); 0: 20e12 */
  int micro_batches;      /* pipelines: > 1 plans the stages so that ot_sched_run_micro can run up to
                            this many micro-batches at once, a different one in each stage ("Micro-
                            batches" above); 0 or 1, the default: stages share the program's homes and
                            run one after another. Ignored for one device */
  ot_stage_copies stage_copies; /* micro-batched pipelines: how values cross between stages' devices (above);
                            OT_STAGE_COPY_AUTO, the default: device to device where the devices reach each
                            other */
} ot_sched_opts;

ot_sched_opts ot_sched_opts_default(void);

typedef struct ot_plan ot_plan;

/* Plans `prog` (which must outlive the plan and not change while it is used). */
ot_status ot_sched_plan(ot_ctx *ctx, const ot_program *prog, const ot_sched_opts *opts, ot_plan **out);
void ot_plan_destroy(ot_plan *plan); /* NULL is fine; frees the plan's device memory */

/* Plans `prog` to run next on prev's device, starting from the device
 * copies prev keeps between runs (a prompt's plan followed by the decode
 * plan: the weights stay on the device instead of being uploaded again).
 *   - The new plan's first run starts with those copies of prev's that prog
 *     uses (the same storages; not prog's inputs), where prev left them, and
 *     uses prev's device memory as it is: prev must have run (else there is
 *     nothing to hand over), and the caller must not write their homes in
 *     between (or call ot_sched_invalidate on the new plan, which then
 *     uploads them again).
 *   - The memory is never grown (that would hold both at once): if the new
 *     plan needs more than prev's, its arena is capped at prev's; if that
 *     is infeasible, it starts from an empty device.
 *   - Strategy none places the rest around the handed-over copies.
 *   - Nothing is handed over (the plan is ot_sched_plan's) for a pipeline
 *     or the usm backend.
 * Whatever was handed over, on success prev no longer holds device memory
 * (deferred persistent copies were written home first) and cannot run
 * (OT_ERR_STATE): destroy it. So the budget holds across both plans.
 * ot_plan_get_stats(new, 0).inherited_bytes says how much was handed over;
 * a run that follows a failure, or ot_sched_invalidate, uploads those
 * copies again at its start (their ranges stay reserved). */
ot_status ot_sched_plan_after(ot_plan *prev, const ot_program *prog, const ot_sched_opts *opts, ot_plan **out);

/* The smallest feasible budget for the non-`none` strategies (the largest
 * working set, see above) and the op that needs it (may be NULL). */
ot_status ot_sched_min_budget(const ot_program *prog, uint64_t *bytes, int *op);
/* The bytes of every storage of the program at once (each rounded up to
 * OT_SCHED_ALIGN): the budget above which nothing is ever evicted, and what
 * strategy `none` needs. */
ot_status ot_sched_total_bytes(const ot_program *prog, uint64_t *bytes);

/* Runs the program once. Kernels run on the calling thread; transfers on the
 * plan's transfer thread. When it returns OT_OK every output and persistent
 * tensor's home holds its result (persistent ones: unless defer_writeback
 * kept them on the device, see ot_sched_sync). `trace` may be NULL. */
ot_status ot_sched_run(ot_plan *plan, ot_trace *trace);

/* Runs the program n times, as n micro-batches ("Micro-batches" above):
 * fill(user, m) writes run m's inputs into the program's input tensors (and
 * sets its scalars), take(user, m) reads run m's outputs from the program's
 * output tensors. Both are called on the calling thread: fill for every m
 * in order before any stage runs, take for every m in order after all
 * have. A pipeline planned with micro_batches > 1 runs micro-batch m in
 * stage k while m + 1 is in stage k - 1, each stage on its own thread and
 * device; any other plan runs the n one after another. Each micro-batch's
 * results are those of ot_sched_run on its inputs. take may be NULL. On a
 * failure: the first error (the others stop at their next
 * micro-batch) and take is not called. */
typedef ot_status (*ot_micro_fn)(void *user, int m);
ot_status ot_sched_run_micro(ot_plan *plan, int n, ot_micro_fn fill, ot_micro_fn take, void *user, ot_trace *trace);

/* Forgets the device copies kept between runs (after the caller wrote the
 * home of a weight or persistent tensor). With defer_writeback it first
 * writes the changed ones home (ot_sched_sync), so write homes only after a
 * sync: a home written before it would be overwritten. */
void ot_sched_invalidate(ot_plan *plan);

/* ot_sched_opts.defer_writeback: defer only where everything is resident. */
#define OT_DEFER_IF_RESIDENT 2

/* defer_writeback: a persistent tensor the plan keeps resident between runs
 * (weights being trained, optimizer moments, a KV cache) is then written home
 * only when the plan evicts it, when it leaves the kept set, on
 * ot_sched_sync and on ot_plan_destroy, not after every run: a training step
 * or a decoded token no longer pays a copy of the whole state. Its home is
 * stale between syncs. ot_sched_sync writes every such copy home and waits
 * (a pipeline's: every stage's); without defer_writeback (or before the first
 * run) it does nothing. If a run fails, the device copies are lost and the
 * homes hold the last sync. */
ot_status ot_sched_sync(ot_plan *plan);

/* Prints every decision with its reason. */
void ot_plan_print(const ot_plan *plan, FILE *f);

/* What the plan will do per run: for the first run (steady = 0) or the
 * replays (steady = 1). */
typedef struct ot_plan_stats {
  uint64_t arena_bytes;      /* the arena capacity (budget rounded down to 256) */
  uint64_t peak_bytes;       /* highest device bytes in use */
  uint64_t kept_bytes;       /* resident when a run starts: kept from the run before, or (first run) handed over */
  uint64_t inherited_bytes;  /* first run: the copies handed over by the previous plan (ot_sched_plan_after) */
  int uploads, downloads, evictions, allocs;
  uint64_t bytes_up, bytes_down;
  /* usm placements (all 0 on other backends): storages and bytes of each
   * kind; remote bytes are read in place over PCIe once per use, per run */
  int n_resident, n_streamed, n_remote;
  uint64_t resident_bytes, streamed_bytes, remote_bytes, remote_read_bytes;
  double predicted_s;        /* the plan's predicted transfer time per run (bytes over the measured rates) */
  /* hybrid compute (all 0 when every op runs on the device) */
  int n_host_ops;            /* ops the host's cores run */
  uint64_t host_read_bytes;  /* bytes those ops read in host memory per run (weights and activations) */
  uint64_t cross_bytes;      /* activation bytes copied between host and device compute per run */
  double host_read_rate;     /* the rate the split was chosen with (bytes/s) */
  /* lazy homes (ot_tensor_create_lazy; the same in both schedules' stats):
   * bytes of host memory the plan gave lazy storages, and those it did not
   * need (their tensors live and die on the device) */
  uint64_t lazy_home_bytes, lazy_skipped_bytes;
  /* a host budget (ot_ctx_opts.host_budget_bytes; all 0 without file homes): of the weights homed
   * in their checkpoint files, the bytes this plan keeps in host memory and those it reads from the
   * files when it uploads them; the bytes read per run (this schedule: the aligned spans); the
   * staging ring; the host memory the context holds with this plan's ring (homes + rings) */
  uint64_t host_weight_bytes, disk_weight_bytes, disk_read_bytes, ring_bytes, host_bytes;
  /* recomputation (ot_sched_opts.recompute): activations dropped instead of written home and
   * rebuilt before their next use, the ops run again to rebuild them (one or a few per rebuild:
   * the op that wrote it whole and those that wrote into it after), those ops' flops hints summed */
  int recomputes;
  uint64_t recompute_bytes;  /* bytes of the activations rebuilt (not written home, not read back) */
  int recompute_kernels;
  double recompute_flops;
} ot_plan_stats;

ot_plan_stats ot_plan_get_stats(const ot_plan *plan, int steady);

/* The independent budget check (opts.probe_budget, a CUDA GPU, one device).
 * The plan's own count of device bytes is what the trace checks; this one
 * asks the driver, at the planned peak of the first replay, with every
 * transfer finished. Two readings, and which one decides:
 *   - a cudaMalloc of (free memory when the context was made - budget -
 *     OT_PROBE_MARGIN), freed at once. It decides for map, whose device
 *     memory is cudaMalloc'ed and cannot be evicted: it succeeds iff the
 *     process holds at most budget + margin more than at the start. It
 *     cannot decide for usm: on the H200 (driver 580, 2026-12-01) a
 *     cudaMalloc evicts live managed pages to make room (1 GiB prefetched
 *     to the device, cudaMalloc of free - 512 MiB succeeded;
 *     tests/test_usm_memory.c);
 *   - cudaMemGetInfo's drop since the start. It decides for usm when it is
 *     within budget + margin (UVM's cache of evicted pages only adds to
 *     it): always so for a plan whose weights are remote (nothing
 *     migrates). Where it is larger (pages migrated and UVM kept their
 *     chunks) nothing here can decide: conclusive = 0. */
#define OT_PROBE_MARGIN (512ull << 20) /* the runtime's own device memory: kernel arguments, cuBLAS, stacks */
typedef struct ot_budget_probe {
  int done;               /* it ran */
  int conclusive;         /* one of the readings decides (above) */
  int ok;                 /* conclusive and the budget held */
  int alloc_ok;           /* the allocation succeeded */
  uint64_t free_at_start; /* device free memory when the context was made */
  uint64_t probe_bytes;   /* what it allocated */
  uint64_t free_at_peak;  /* cudaMemGetInfo at the peak, before the allocation (UVM's cache counts as used) */
  uint64_t planned_bytes; /* the plan's own count there */
  int op;                 /* the op before which it ran */
  double seconds;         /* its own time (waiting for the transfers, the allocation), to leave out of timings */
} ot_budget_probe;

/* The probe of the plan's last run that made one (done = 0 if none). */
ot_status ot_plan_budget_probe(const ot_plan *plan, ot_budget_probe *out);

/* Stages of a plan: 1 for a single-device plan. */
int ot_plan_num_stages(const ot_plan *plan);

typedef struct ot_plan_stage_info {
  int first_op, n_ops;   /* the stage's ops in the program: [first_op, first_op + n_ops) */
  int device_index;      /* context index of its device */
  int device;            /* OpenMP device number */
  uint64_t budget;
  uint64_t weight_bytes; /* weights and persistent state it uses (blocks; what the split balanced) */
  const ot_plan *plan;   /* the stage's single-device plan (of a sub-program; for stats and printing) */
  int peer_values;       /* micro-batched: values that reach this stage device to device (ot_stage_copies) */
  uint64_t mailbox_bytes; /* their mailboxes on this device (inside budget; the stage's plan got the rest) */
} ot_plan_stage_info;

/* Stage k (0 .. ot_plan_num_stages - 1); a single-device plan is its own stage 0. */
ot_status ot_plan_stage(const ot_plan *plan, int k, ot_plan_stage_info *out);

/* Activation checkpointing, the trainers' --checkpoint mode:
 *   none  every activation is kept (the scheduler offloads them to host
 *         memory and reloads them for the backward when the budget is tight);
 *   all   every layer is a checkpoint: only its input is kept, and its
 *         forward is recorded again, into fresh tensors, right before its
 *         backward (the activations of the first forward die at once);
 *   auto  no layer is recorded twice; the step is planned with
 *         ot_sched_opts.recompute = 1 (and the trainer's rates), so the
 *         planner decides per activation it must evict whether to write it
 *         home and read it back or to run its producing op again right
 *         before its next use. Where the step fits, nothing is evicted and
 *         the plan is the plain one. */
typedef enum ot_recompute { OT_RECOMPUTE_NONE = 0, OT_RECOMPUTE_ALL, OT_RECOMPUTE_AUTO } ot_recompute;
const char *ot_recompute_name(ot_recompute c);
ot_status ot_recompute_parse(const char *s, ot_recompute *out); /* "none" | "all" | "auto" */

/* The cost model: 1 if producing `bytes` again (`flops` over flops_per_s)
 * is cheaper than offloading them (written home and read back: 2 * bytes
 * over pcie_bytes_per_s). The planner's choice (ot_sched_opts.recompute)
 * is this rule, with the producer's inputs that must be uploaded first
 * added to its side. */
int ot_recompute_cheaper(double bytes, double flops, double pcie_bytes_per_s, double flops_per_s);

#ifdef __cplusplus
}
#endif
#endif
