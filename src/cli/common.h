/* common.h (internal) — what the model-running subcommands share: settings
 * from flags/env/--config, the context and scheduler options they imply,
 * progress on a terminal, the JSON summary, and exit codes. */
#ifndef OT_CLI_COMMON_H
#define OT_CLI_COMMON_H

#include <stdio.h>

#include "omptensor/args.h"
#include "omptensor/comm.h"
#include "omptensor/omptensor.h"
#include "omptensor/lm.h"
#include "omptensor/sched.h"
#include "omptensor/settings.h"
#include "omptensor/trace.h"

/* Exit status for a failed call: 2 for bad input or usage (the user can fix
 * the command or the file), 1 for a failure while running. */
int ot_cli_exit_code(ot_status s);

/* Prints "PROG: MESSAGE" on stderr as one line (control bytes escaped) and
 * returns the exit code for s. Notices held back (below) are dropped with
 * bad input's error (2) and follow a failure's (1) on its line: "(noticed
 * before: ...)". */
int ot_cli_fail(const char *prog, ot_status s);

/* The library's notices ("no GPU: pinned host memory falls back to ...") are
 * held back from the start (main calls ot_cli_notices_hold), so that bad
 * input ends in exactly one line. ot_cli_input_accepted prints them once the
 * command's input has passed every check and its real work starts (the
 * model loaded and planned; --verbose: at once), and later ones as they
 * come; ot_cli_notices_finish, at exit, prints what is still held unless
 * the exit status is 2. */
void ot_cli_notices_hold(void);
void ot_cli_input_accepted(void);
void ot_cli_notices_finish(int exit_status);
/* The command's own notice, held back and printed like the library's. */
void ot_cli_notice(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Settings collected while parsing; --config is applied after the parse so
 * flags win whatever their order (settings.h keeps sources apart). */
typedef struct ot_cli_session {
  const char *prog;
  ot_settings settings;
  char *config_path;
  ot_ctx *ctx;
  ot_trace *trace;
  ot_sched_opts sched;
  int micro_batches; /* run --micro-batches (0: not given), copied into sched at the start */
  ot_stage_copies stage_copies; /* run --stage-copies (default auto), likewise */
  int verbose;
  int tty; /* stderr is a terminal: draw progress bars */
  int settings_loaded;
  ot_comm *comm; /* the job's ranks under mpirun / srun (ranks.c); NULL: one process */
} ot_cli_session;

void ot_cli_session_init(ot_cli_session *s, const char *prog);
/* Handles the shared options (settings, --config, --verbose); returns 1 if it did. */
int ot_cli_session_option(ot_cli_session *s, const ot_opt *o, const char *value, ot_status *st);
/* After parsing: the environment and the --config file under the flags
 * (once; ot_cli_session_start calls it too), for a command that needs the
 * settings before it creates the context. */
ot_status ot_cli_session_settings(ot_cli_session *s);
/* After parsing: environment, --config file, then the context, scheduler
 * options and the trace. */
ot_status ot_cli_session_start(ot_cli_session *s);
void ot_cli_session_end(ot_cli_session *s);

/* A budget too small (OT_ERR_BUDGET) gets where the budget came from in
 * front: "--gpu-memory-limit: op ... needs ...", or the environment
 * variable, or the --config file's key. Returns st. */
ot_status ot_cli_budget_error(const ot_cli_session *s, ot_status st);

/* The shared start of a model command's option handler: the session's
 * options, then the one positional MODEL_DIR into *model (a second one is an
 * error). Returns 1 if it handled (o, v), with *st set. */
int ot_cli_session_or_model(ot_cli_session *s, const ot_opt *o, const char *v, const char **model, ot_status *st);

/* The shared option table (settings + --config + --verbose). */
const ot_opt *ot_cli_common_opts(void);

/* Progress callback for ot_progress_fn: a bar redrawn on one line on a terminal
 * (ending with a newline), a plain "load: 40%" line per 10 % otherwise. `user` is the session. */
void ot_cli_progress(void *user, const char *what, uint64_t done, uint64_t total);
/* Ends a bar left open by a phase that stopped early (before an error message). */
void ot_cli_progress_end(void);

/* The weight dtype --dtype asks for (int8 means q8b), or keep the checkpoint's. */
ot_dtype ot_cli_weight_dtype(const ot_settings *st);

/* Option values as the int and float the library's option structs hold
 * (ot_args_int / ot_args_float: decimal only, all of v, within [lo, hi]);
 * the option parser names the option in front of the message. */
ot_status ot_cli_int(const char *v, int lo, int hi, int *out);
ot_status ot_cli_float(const char *v, double lo, double hi, float *out);

#endif
