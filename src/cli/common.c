/* common.c — see common.h. */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common.h"
#include "prompt.h"
#include "omptensor/models.h"

int ot_cli_exit_code(ot_status s) {
  switch (s) {
  case OT_OK: return 0;
  case OT_ERR_INVALID_ARG:
  case OT_ERR_SHAPE:
  case OT_ERR_DTYPE:
  case OT_ERR_IO:
  case OT_ERR_FORMAT:
  case OT_ERR_NOT_FOUND:
  case OT_ERR_BUDGET:
  case OT_ERR_NUMERIC: /* NaN/Inf results: the weights or the dtype asked for, the input to fix */
  case OT_ERR_UNSUPPORTED: return 2;
  default: return 1;
  }
}

/* The library's notices (status.h), held back until the input is accepted:
 * bad input is then one line, the error, and a run that starts says "no GPU"
 * (or whatever the notice is) once, before its real work. */
static struct {
  pthread_mutex_t mu;
  enum { NOTICES_HOLD, NOTICES_PASS, NOTICES_DROP } mode;
  char *held[16];
  int n;
} notices = {PTHREAD_MUTEX_INITIALIZER, NOTICES_HOLD, {0}, 0};

static void print_notice(const char *m) {
  ot_cli_progress_end();
  fprintf(stderr, "omptensor: %s\n", m);
}

static void on_notice(void *user, const char *m) {
  (void)user;
  pthread_mutex_lock(&notices.mu);
  if (notices.mode == NOTICES_PASS) print_notice(m);
  else if (notices.mode == NOTICES_HOLD && notices.n < (int)(sizeof notices.held / sizeof notices.held[0]))
    notices.held[notices.n] = strdup(m), notices.n += notices.held[notices.n] != NULL;
  pthread_mutex_unlock(&notices.mu);
}

/* Prints (pass) or forgets what is held; what comes later is printed or dropped. */
static void notices_end(int pass) {
  pthread_mutex_lock(&notices.mu);
  for (int i = 0; i < notices.n; i++) {
    if (pass) print_notice(notices.held[i]);
    free(notices.held[i]);
  }
  notices.n = 0;
  notices.mode = pass ? NOTICES_PASS : NOTICES_DROP;
  pthread_mutex_unlock(&notices.mu);
}

void ot_cli_notices_hold(void) { ot_set_notice_handler(on_notice, NULL); }

void ot_cli_notice(const char *fmt, ...) {
  char m[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  on_notice(NULL, m);
}

void ot_cli_input_accepted(void) { notices_end(1); }

void ot_cli_notices_finish(int exit_status) { notices_end(exit_status != 2); }

/* m on stderr as part of one line: a parser's text may carry a newline, a
 * quoted file name any byte; scripts and batch logs grep for the line, and
 * a terminal should not take control bytes from it. */
static void put_one_line(const char *m) {
  for (; *m; m++) {
    unsigned char c = (unsigned char)*m;
    if (c == '\n' || c == '\r' || c == '\t') fputc(' ', stderr);
    else if (c < 0x20 || c == 0x7f) fprintf(stderr, "\\x%02x", c);
    else fputc(c, stderr);
  }
}

int ot_cli_fail(const char *prog, ot_status s) {
  ot_cli_progress_end(); /* after a bar cut short, the error starts its own line */
  int rc = ot_cli_exit_code(s);
  const char *m = ot_last_error();
  if (!m[0]) m = ot_status_str(s);
  /* Messages from the option parser already start with "PROG: ". */
  size_t n = strlen(prog);
  if (!strncmp(m, prog, n) && m[n] == ':' && m[n + 1] == ' ') m += n + 2;
  /* Exactly one line. Bad input: the error alone. A failure while running
   * before the work started: what the library noticed until then ("no GPU:
   * pinned host memory falls back ...") may explain it, so it follows the
   * error on the same line, not on lines of its own. */
  fprintf(stderr, "%s: ", prog);
  put_one_line(m);
  pthread_mutex_lock(&notices.mu);
  for (int i = 0; i < notices.n; i++) {
    if (rc != 2) {
      fputs(i ? "; " : " (noticed before: ", stderr);
      put_one_line(notices.held[i]);
    }
    free(notices.held[i]);
  }
  if (rc != 2 && notices.n) fputc(')', stderr);
  notices.n = 0;
  notices.mode = NOTICES_DROP; /* nothing after the error */
  pthread_mutex_unlock(&notices.mu);
  fputc('\n', stderr);
  return rc;
}

enum { OPT_VERBOSE = -2000 };

const ot_opt *ot_cli_common_opts(void) {
  static const ot_opt opts[] = {
      {"verbose", 'v', NULL, "print the settings, the plan summary and where each value came from", OPT_VERBOSE},
      {0}};
  return opts;
}

void ot_cli_session_init(ot_cli_session *s, const char *prog) {
  memset(s, 0, sizeof *s);
  s->prog = prog;
  ot_settings_init(&s->settings);
  s->sched = ot_sched_opts_default();
  s->tty = isatty(STDERR_FILENO);
}

int ot_cli_session_option(ot_cli_session *s, const ot_opt *o, const char *value, ot_status *st) {
  *st = OT_OK;
  if (!o) return 0;
  if (o->id == OT_OPT_SETTING) {
    *st = ot_settings_set_flag(&s->settings, o->name, value);
    return 1;
  }
  if (o->id == OT_OPT_CONFIG) {
    free(s->config_path);
    s->config_path = strdup(value);
    if (!s->config_path) *st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
    return 1;
  }
  if (o->id == OPT_VERBOSE) {
    s->verbose = 1;
    return 1;
  }
  return 0;
}

/* --config FILE, or - for stdin (a settings file is a stream of text). */
static ot_status load_config(ot_cli_session *s) {
  if (strcmp(s->config_path, "-")) return ot_settings_load_file(&s->settings, s->config_path);
  char *text;
  size_t len;
  OT_TRY(ot_cli_read_text("-", OT_CLI_CONFIG_MAX, &text, &len));
  ot_status st = ot_settings_load_yaml(&s->settings, text, len, "stdin");
  free(text);
  return st;
}

ot_status ot_cli_session_settings(ot_cli_session *s) {
  if (s->settings_loaded) return OT_OK;
  OT_TRY(ot_settings_load_env(&s->settings));
  if (s->config_path) OT_TRY(load_config(s));
  s->settings_loaded = 1;
  return OT_OK;
}

ot_status ot_cli_session_start(ot_cli_session *s) {
  OT_TRY(ot_cli_session_settings(s));
  if (s->verbose) ot_cli_input_accepted(); /* --verbose: notices as they come, beside the settings */
  if (s->verbose) ot_settings_print(stderr, &s->settings);
  ot_ctx_opts o = ot_ctx_opts_default();
  o.verbose = s->verbose;
  OT_TRY(ot_settings_to_ctx_opts(&s->settings, &o));
  OT_TRY(ot_ctx_create(&o, &s->ctx));
  s->sched.strategy = s->settings.offload;
  s->sched.usm_placement = s->settings.usm_placement;
  s->sched.compute = s->settings.compute;
  s->sched.device_index = 0;
  s->sched.n_stages = OT_SCHED_ALL_DEVICES; /* --devices N: the model split over N devices */
  s->sched.micro_batches = s->micro_batches;
  s->sched.stage_copies = s->stage_copies;
  /* Always traced: the summary (and --json) report measured bytes and peaks;
   * the file is written only with --trace. */
  OT_TRY(ot_trace_create(&s->trace));
  return OT_OK;
}

ot_status ot_cli_budget_error(const ot_cli_session *s, ot_status st) {
  if (st != OT_ERR_BUDGET) return st;
  /* the host budget's refusal names --cpu-memory-limit itself; blaming the
   * device budget there pointed the wrong way (issue 43) */
  if (strstr(ot_last_error(), "host memory budget")) {
    switch (s->settings.source[OT_SET_CPU_MEMORY_LIMIT]) {
    case OT_SRC_ENV: return ot_prefix_error(st, "OMPTENSOR_CPU_MEMORY_LIMIT");
    case OT_SRC_FILE:
      return ot_prefix_error(st, "%s: memory.max_cpu_memory", s->settings.file ? s->settings.file : "--config");
    default: return st;
    }
  }
  switch (s->settings.source[OT_SET_GPU_MEMORY_LIMIT]) {
  case OT_SRC_FLAG: return ot_prefix_error(st, "--gpu-memory-limit");
  case OT_SRC_ENV: return ot_prefix_error(st, "OMPTENSOR_GPU_MEMORY_LIMIT");
  case OT_SRC_FILE:
    return ot_prefix_error(st, "%s: memory.max_gpu_memory", s->settings.file ? s->settings.file : "--config");
  default: return st; /* the device's own size: the message says what to give */
  }
}

void ot_cli_session_end(ot_cli_session *s) {
  ot_trace_destroy(s->trace);
  ot_ctx_destroy(s->ctx);
  ot_comm_destroy(s->comm); /* MPI_Finalize: the last MPI call of the process */
  ot_settings_release(&s->settings);
  free(s->config_path);
  memset(s, 0, sizeof *s);
}

/* One progress display per process (the CLI runs one job): the phase being
 * shown, its last percentage, and whether a bar is drawn without its newline
 * yet (an error then starts on a fresh line). */
static struct {
  const char *what;
  int pct;
  int open;
} bar = {NULL, -1, 0};

void ot_cli_progress_end(void) {
  if (bar.open) fputc('\n', stderr);
  bar.open = 0;
}

/* Columns of the terminal on stderr; 80 when it cannot tell. */
static int term_cols(void) {
  struct winsize ws;
  return ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

void ot_cli_progress(void *user, const char *what, uint64_t done, uint64_t total) {
  ot_cli_session *s = user;
  if (what != bar.what) {
    ot_cli_progress_end(); /* a new phase while a bar is open: keep the old one's line */
    bar.what = what, bar.pct = -1;
  }
  int pct = total ? (int)(100.0 * (double)done / (double)total) : 100;
  if (pct > 100) pct = 100;
  if (pct == bar.pct) return;
  if (s && s->tty) {
    char tail[80];
    if (!strcmp(what, "load")) {
      char a[32], b[32];
      ot_size_format(done, a, sizeof a);
      ot_size_format(total, b, sizeof b);
      snprintf(tail, sizeof tail, "%3d%% %s / %s", pct, a, b);
    } else {
      snprintf(tail, sizeof tail, "%3d%% %llu / %llu", pct, (unsigned long long)done, (unsigned long long)total);
    }
    /* The bar shrinks (or goes) on a narrow terminal: a line that wraps
     * cannot be redrawn with '\r'. */
    int w = term_cols() - 1 - 10 - 3 - (int)strlen(tail);
    w = w > 30 ? 30 : w;
    fprintf(stderr, "\r%-9s ", what);
    if (w >= 5) {
      int fill = pct * w / 100;
      fputc('[', stderr);
      for (int i = 0; i < w; i++) fputc(i < fill ? '#' : ' ', stderr);
      fputs("] ", stderr);
    }
    fprintf(stderr, "%s\033[K", tail); /* \033[K: clear what a longer previous line left */
    bar.open = done < total;
    if (!bar.open) fputc('\n', stderr);
    fflush(stderr);
  } else {
    /* Not a terminal (a batch job's log): a plain line per 10 %, and the end. */
    if (pct / 10 == bar.pct / 10 && done < total) return;
    fprintf(stderr, "%s: %d%%\n", what, pct);
  }
  bar.pct = pct;
}

ot_dtype ot_cli_weight_dtype(const ot_settings *st) {
  if (!st->has_dtype) return OT_DTYPE_KEEP;
  return st->dtype == OT_I8 ? OT_Q8B : st->dtype; /* --dtype int8: block-quantized int8 weights */
}

ot_status ot_cli_int(const char *v, int lo, int hi, int *out) {
  int64_t x;
  OT_TRY(ot_args_int(v, lo, hi, &x));
  *out = (int)x;
  return OT_OK;
}

ot_status ot_cli_float(const char *v, double lo, double hi, float *out) {
  double d;
  OT_TRY(ot_args_float(v, lo, hi, &d));
  *out = (float)d;
  return OT_OK;
}

int ot_cli_session_or_model(ot_cli_session *s, const ot_opt *o, const char *v, const char **model, ot_status *st) {
  if (ot_cli_session_option(s, o, v, st)) return 1;
  if (o) return 0;
  *st = *model ? ot_set_error(OT_ERR_INVALID_ARG, "one model directory expected, got '%s' too", v) : OT_OK;
  if (!*model) *model = v;
  return 1;
}
