/* cmd_trace.c — `omptensor trace summarize|plot TRACE.json`. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "prompt.h"
#include "trace_svg.h"

static int usage(void) {
  printf("usage: omptensor trace summarize TRACE.json|-\n"
         "       omptensor trace plot TRACE.json|- -o timeline.svg|timeline.png\n\n"
         "Reads a trace written with --trace (Chrome trace JSON; it also opens in\n"
         "https://ui.perfetto.dev). summarize prints the memory summary: peak and current\n"
         "device bytes, budget, bytes to device and host, uploads, evictions, write-backs\n"
         "avoided, transfer time overlapped with compute. plot draws, per device, memory\n"
         "over time against the budget, lanes for kernels, uploads, write-backs and\n"
         "evictions, and lines where each run and each marked phase (prefill, decode)\n"
         "starts: SVG, or PNG when the file name ends in .png (through librsvg). - reads the\n"
         "trace from stdin.\n");
  return 0;
}

/* TRACE.json, or - for stdin. */
static ot_status read_trace(const char *path, ot_trace **t, uint64_t *budget) {
  if (strcmp(path, "-")) return ot_trace_read_chrome(path, t, budget);
  char *text;
  size_t len;
  OT_TRY(ot_cli_read_text("-", OT_CLI_TRACE_MAX, &text, &len));
  ot_status st = ot_trace_read_chrome_text(text, len, "stdin", t, budget);
  free(text);
  return st;
}

int ot_cli_trace(int argc, char **argv) {
  const char *prog = "omptensor trace";
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return usage();
  if (argc < 3) {
    fprintf(stderr, "%s: expected summarize|plot TRACE.json (see omptensor trace --help)\n", prog);
    return 2;
  }
  const char *verb = argv[1], *path = argv[2], *out = NULL;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
      if (i + 1 >= argc || !argv[i + 1][0]) {
        fprintf(stderr, "%s: option '%s' needs a value (FILE.svg or FILE.png)\n", prog, argv[i]);
        return 2;
      }
      out = argv[++i];
    } else {
      fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[i]);
      return 2;
    }
  }
  int plot = !strcmp(verb, "plot");
  if (!plot && strcmp(verb, "summarize")) {
    fprintf(stderr, "%s: unknown action '%s' (summarize or plot)\n", prog, verb);
    return 2;
  }
  if (plot && !out) {
    fprintf(stderr, "%s: plot needs -o FILE.svg or -o FILE.png\n", prog);
    return 2;
  }
  if (plot && !strcmp(out, "-"))
    return ot_cli_fail(prog, ot_set_error(OT_ERR_INVALID_ARG, "-o -: the picture is a file written whole, not a "
                                                              "stream to stdout; give FILE.svg or FILE.png"));
  if (plot && ot_trace_plot_check_path(out) != OT_OK) return ot_cli_fail(prog, OT_ERR_INVALID_ARG);
  ot_trace *t;
  uint64_t budget = 0;
  ot_status st = read_trace(path, &t, &budget);
  if (st != OT_OK) return ot_cli_fail(prog, st);
  if (plot) {
    st = ot_trace_plot(t, budget, out);
    if (st == OT_OK) printf("wrote %s\n", out);
  } else {
    ot_trace_summary s = ot_trace_summarize(t);
    ot_trace_summary_print(&s, stdout);
    st = ot_trace_check_budget(t, budget ? budget : UINT64_MAX);
    if (st == OT_OK) printf("budget check: device bytes never exceeded %s\n", budget && budget != UINT64_MAX ? "the budget" : "(no budget limit)");
    else printf("budget check: FAILED: %s\n", ot_last_error());
    ot_trace_destroy(t);
    return st == OT_OK ? 0 : 1; /* the trace breaks the guarantee: a failure, not bad input */
  }
  ot_trace_destroy(t);
  return st == OT_OK ? 0 : ot_cli_fail(prog, st);
}
