/* plan_impl.h (internal) — a plan: the decisions of the planner, replayed by
 * the executor.
 *
 * A schedule is one run's list of events, sorted by slot: slot i holds what
 * happens before op i runs (slot n_ops: after the last op). Within a slot,
 * write-backs come first, then frees, then placements (uploads and allocs),
 * so a placement may reuse space freed in its own slot. */
#ifndef OT_SCHED_PLAN_IMPL_H
#define OT_SCHED_PLAN_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <strings.h>

#include "omptensor/sched.h"
#include "sched/program_impl.h"

/* OT_EV_RECOMPUTE (ot_sched_opts.recompute): runs an op (ot_plan_event.src_op)
 * again on the copies resident then, rebuilding an activation an earlier
 * eviction dropped; the first event of a rebuild (why OT_WHY_RECOMPUTE)
 * places the storage's block, the next ones (OT_WHY_RECOMPUTE_MORE: the
 * ops that wrote into it after, in order) do not. They come after the
 * slot's placements (the ops' inputs are uploaded there). */
typedef enum ot_ev_kind { OT_EV_DOWNLOAD = 0, OT_EV_FREE, OT_EV_UPLOAD, OT_EV_ALLOC, OT_EV_RECOMPUTE } ot_ev_kind;

/* Why an event is there (ot_plan_print says it in words). */
typedef enum ot_ev_reason {
  OT_WHY_FIRST_USE = 0, /* upload: the op reads it and it is not resident */
  OT_WHY_RELOAD,        /* upload: it was evicted earlier in the run */
  OT_WHY_OUTPUT,        /* alloc: the op writes all of it; no copy needed */
  OT_WHY_DEAD,          /* free: no later use (and not kept for the next run) */
  OT_WHY_EVICT,         /* free (+ write-back if dirty): space for another copy */
  OT_WHY_RELOCATE,      /* free (+ write-back): the op's own copies blocked every placement */
  OT_WHY_LAST_WRITE,    /* download: output/persistent written home after its last write */
  OT_WHY_NOT_KEPT,      /* free at the end: not in the set kept between runs */
  OT_WHY_ALL_RESIDENT,  /* strategy none: placed for the whole run */
  OT_WHY_KEEP_SET,      /* upload at the end of a handed-over first run: into the set kept between runs */
  OT_WHY_CROSS,         /* download: a host op reads it next (hybrid compute) */
  OT_WHY_HOST_WRITE,    /* free: a host op writes its home, so the copy is stale (hybrid compute) */
  OT_WHY_RECOMPUTE,     /* recompute: rebuilt by its producing op before op `op` reads it (the eviction
                           that dropped it is an OT_WHY_EVICT free flagged OT_TRACE_RECOMPUTE) */
  OT_WHY_RECOMPUTE_MORE, /* recompute: a later op of its chain writes into the block rebuilt (placed by the
                           OT_WHY_RECOMPUTE event before it) */
} ot_ev_reason;

typedef struct ot_plan_event {
  int slot;           /* issued before op `slot` (n_ops: at the end of the run) */
  int op;             /* the op it serves / the slot the planner decided it in */
  unsigned char kind, why;
  unsigned flags;     /* OT_TRACE_* flags for the trace */
  int st;             /* storage index in the program */
  size_t off, block;  /* arena range */
  int next_use;       /* evictions: next use (>= n_ops: in the next run); -1 none */
  int for_st;         /* evictions: the storage it made room for (-1) */
  int src_op;         /* OT_EV_RECOMPUTE: the op run again (0 otherwise) */
} ot_plan_event;

typedef struct ot_resident {
  int st;
  size_t off;
  int dirty;          /* defer_writeback: the copy is newer than its home */
} ot_resident;

typedef struct ot_schedule {
  int n_ev, cap_ev;
  ot_plan_event *ev;
  int *slot_start;    /* [n_ops + 2]: first event of each slot */
  int n_start;
  ot_resident *start; /* copies resident when the run starts (dirty only with defer_writeback) */
  ot_plan_stats stats;
} ot_schedule;

/* Index of `s` among names[0 .. n) by case-insensitive match, -1 if none
 * (s may be NULL): the option parsers (strategy, usm placement, compute). */
static inline int ot_name_index(const char *const *names, int n, const char *s) {
  for (int i = 0; s && i < n; i++)
    if (strcasecmp(s, names[i]) == 0) return i;
  return -1;
}

/* Index in ps->uses (increasing) of its first use >= op i (n_uses: none):
 * a binary search, as a weight of a long program has many uses. */
static inline int ot_uses_from(const ot_prog_storage *ps, int i) {
  int lo = 0, hi = ps->n_uses;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (ps->uses[mid] < i) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

struct ot_movement;

/* One stage of a pipeline plan (pipeline.c): ops [first_op, first_op + n_ops)
 * of the program, recorded again as a sub-program and planned on one device. */
/* A value that crosses a stage of a micro-batched pipeline (pipeline.c):
 * the stage's own storage of the program's storage `st`, copied in from the
 * run's packet before the stage runs and out after it. */
typedef struct ot_stage_home {
  int st;             /* the program's storage */
  ot_tensor *mine;    /* the stage's storage of the same bytes (I8; sub uses views of it) */
  unsigned char in, out;
  unsigned char peer; /* it crosses device to device (ot_stage_copies): while a micro-batch runs, mine's home
                         is that micro-batch's mailbox on stage mail_stage's device, at mail_off of its slot */
  int mail_stage;     /* the reading stage (which holds the mailboxes) */
  size_t mail_off;
  void *host_home;    /* mine's host home while a mailbox stands in for it */
} ot_stage_home;

typedef struct ot_stage {
  int first_op, n_ops;
  int dev_index;
  uint64_t weight_bytes;
  ot_program *sub;
  ot_plan *plan;
  int n_homes;        /* private homes (micro-batched pipelines only): the values that cross the stage */
  ot_stage_home *homes;
  int n_views;        /* the views of them that sub's ops use (destroyed with the stage) */
  ot_tensor **views;
  /* mailboxes (values reaching this stage device to device, ot_stage_copies): n_mail values, mail_slots
   * slots (one per micro-batch in flight) of mail_slot_bytes each, on this stage's device; made at the
   * first micro-batched run (mail NULL until then) */
  int n_mail, mail_slots;
  size_t mail_slot_bytes;
  void *mail;
} ot_stage;

/* Executor state of one storage. */
typedef struct ot_exec_storage {
  int resident;
  size_t off;
  uint64_t ready;     /* transfer that must finish before a kernel uses it (0: none) */
  uint64_t home_ready; /* write-back that must finish before a host op uses the home (0: none) */
  int home_due;       /* usm on a GPU: a write-back was planned; the pages go home when the copy is freed */
  int held;           /* its write-back waits for the pending batch (executor.c, defer_download) */
} ot_exec_storage;

/* What of a device copy may differ from its home (ot_op_wrote, program.h).
 * Why: a batched decode step appends one row per sequence to each KV cache
 * of a layer, gigabytes at batch 32; written home whole after every step,
 * the caches doubled the bytes a step moved over PCIe (H200, issue 19).
 * known = 0: anything may differ, a write-back copies the whole storage
 * (every copy placed without an upload, every copy an op wrote without
 * declaring, a copy handed over by another plan). known = 1: only the
 * ranges rg (pairs {offset, length} from the storage's byte 0) differ. */
typedef struct ot_exec_dirty {
  int known;
  int marked;       /* declared by the op now running */
  size_t n, cap;    /* ranges in rg, and its room (pairs) */
  size_t *rg;
} ot_exec_dirty;

/* Where a storage lives while the plan runs (usm placements, sched.h). */
typedef enum ot_place {
  OT_PLACE_NONE = 0,  /* not usm, or an empty/unused storage */
  OT_PLACE_RESIDENT,  /* on the device, not uploaded by a steady replay (kept, or made there each run) */
  OT_PLACE_STREAMED,  /* uploaded into the arena by every steady replay (an input: reloaded within it) */
  OT_PLACE_REMOTE,    /* read in place from its home; no device bytes */
} ot_place;

struct ot_plan {
  ot_ctx *ctx;
  ot_program *prog;   /* what the planner and the executor see: *src, or `view` for usm placements */
  const ot_program *src; /* the caller's program (its version is checked before every run) */
  uint64_t version;   /* the program version planned */
  /* usm placements (placement.c): `view` is a copy of *src whose storage
   * table (view_st) gives remote storages no block and streamed ones no
   * KEEP role, so the planner and the executor need no other change */
  ot_usm_placement usm;   /* requested */
  ot_program view;
  ot_prog_storage *view_st;
  unsigned char *place;   /* [n_st] ot_place (NULL: not usm) */
  /* hybrid compute (hybrid.c): host_op[i] = 1 runs op i on the host's
   * cores, on homes. The planner and the executor then see `view` (below)
   * whose host ops have no accesses (nothing of theirs is placed) and whose
   * storages list only the device ops' uses; the host ops' accesses are
   * read from src. Not with usm placements (one view at a time). */
  unsigned char *host_op; /* [n_ops] or NULL: every op on the device */
  int n_host_ops;
  ot_op *view_ops;        /* the view's op table (hybrid) */
  int *view_uses;         /* its storages' use lists, one buffer (hybrid) */
  double host_rate;       /* bytes/s the split was chosen with */
  ot_strategy strategy;
  int defer;          /* defer_writeback in effect (sched.h) */
  int synced;         /* ot_sched_sync wrote the deferred copies home and no run came after: a later sync
                         touches nothing (a held decode plan's caches may be gone by then) */
  int recompute;      /* ot_sched_opts.recompute in effect (not for usm, pipelines, strategy none;
                         the planner also skips it for hybrid plans) */
  double rc_pcie, rc_flops; /* its cost model's rates (bytes/s, flops/s) */
  unsigned transfer_delay_us; /* ot_sched_opts.transfer_delay_us, for the transfer thread */
  int dev_index, dev; /* context index and device number (OT_DEVICE_HOST for the host) */
  uint64_t budget;
  size_t capacity;    /* arena bytes: budget rounded down to OT_SCHED_ALIGN */
  size_t extent;      /* highest arena offset any schedule uses */
  ot_schedule first, steady;
  /* plan handoff (ot_sched_plan_after): the copies the previous plan kept,
   * as storages of this program at their offsets there; the first schedule
   * starts from them (first.start). Only while planning. */
  const ot_resident *handoff;
  int n_handoff;
  /* executor */
  int runs;           /* runs done since the last invalidate */
  void *base;         /* device arena, NULL until the first run (or handed over by the previous plan) */
  size_t base_bytes;  /* its size: extent, or the previous plan's for a handed-over one (without device
                         memory, host: the same bookkeeping, so plans hand over as on a device) */
  int inherited_live; /* the first run finds first.start resident in base (handed over, not yet run) */
  int spent;          /* its device memory went to a later plan (ot_sched_plan_after): it cannot run */
  struct ot_movement *mv;
  struct ot_disk *disk; /* file-homed weights' reader and staging ring (disk.h), made at the first run that reads */
  size_t ring_bytes;    /* its size, chosen by the homes pass (homes.c; 0: none needed then) */
  ot_exec_storage *xs; /* [n_st] */
  ot_exec_dirty *dirty; /* [n_st] */
  void **args;        /* [max_args] device addresses for ot_op_exec */
  struct ot_verify_rec *vrec; /* [n_st] OMPTENSOR_VERIFY records (sched/verify.h); NULL when off */
  uint64_t reserved;  /* device bytes held outside the arena for this plan's runs (a micro-batched pipeline
                         stage's mailboxes, pipeline_micro.c): planned out of its budget and counted in every
                         trace event's device bytes, so the budget check covers them */
  int probe_budget;   /* ot_sched_opts.probe_budget */
  ot_budget_probe probe;
  /* pipeline (pipeline.c): n_stages > 0 makes this plan a list of stage plans;
   * the fields above the executor's are then only ctx, prog, version,
   * strategy, dev_index, dev (the first stage's), budget (the first stage's) */
  int n_stages;
  ot_stage *stages;
  /* micro-batched pipelines (opts.micro_batches > 1, pipeline_micro.c):
   * each run's values that cross stages in a packet of its own, laid out
   * by pk_off (per program storage; SIZE_MAX: not in a packet), then the
   * program's scalars */
  int micro;          /* the stages have private homes */
  size_t *pk_off;     /* [n_st] */
  size_t pk_bytes;
  unsigned char *packets; /* n_packets * pk_bytes */
  int n_packets;
};

/* Plans the usm placements and the schedules of a single-device usm plan
 * (placement.c); ot_plan_schedules builds the schedules of plan->prog. */
ot_status ot_place_plan(ot_plan *plan);
/* Hybrid compute (hybrid.c): plans with the host ops opts asks for or the
 * split it chooses (every op on the device when it does not pay, or for
 * compute gpu); ot_hybrid_free drops what the view held. */
ot_status ot_hybrid_plan(ot_plan *plan, const ot_sched_opts *o);
void ot_hybrid_free(ot_plan *plan);
ot_status ot_plan_schedules(ot_plan *plan);
void ot_place_free(ot_plan *plan);
/* Fills the placement fields of both schedules' stats (after ot_place_plan
 * or for a plan without placements: predicted_s only). */
void ot_place_stats(ot_plan *plan);

const char *ot_place_name(int place); /* "resident", "streamed", "remote", "-" */
/* Sorts storage indices by block size, largest first (ties: by index). */
void ot_sort_by_block_desc(int *v, int n, const ot_program *p);

/* Gives the lazy storages of the finished plan the homes it needs and
 * counts their bytes into the stats (homes.c). */
ot_status ot_plan_homes(ot_plan *plan);

/* Builds the two schedules (planner.c). */
ot_status ot_plan_build(ot_plan *plan);
/* Moves uploads (and victims' frees) earlier per strategy, then sorts (prefetch.c). */
/* host: the plan's host ops (hybrid compute; NULL: none): balanced moves an
 * upload to the previous device op, past the host ops in between. */
ot_status ot_schedule_finish(ot_schedule *s, const ot_program *p, ot_strategy strat, size_t capacity,
                             const unsigned char *host);
ot_status ot_schedule_push(ot_schedule *s, ot_plan_event e);
void ot_schedule_free(ot_schedule *s);

/* Splits `prog` into n_stages stages and plans each (pipeline.c); fills the
 * pipeline fields of `plan` (ctx, prog, version, strategy set by the caller). */
ot_status ot_pipeline_plan(ot_plan *plan, const ot_sched_opts *o, int n_stages);
ot_status ot_pipeline_run(ot_plan *plan, ot_trace *trace);
void ot_pipeline_free(ot_plan *plan);

#endif
