/* trace_svg.h (internal) — `omptensor trace plot`. */
#ifndef OT_CLI_TRACE_SVG_H
#define OT_CLI_TRACE_SVG_H

#include "omptensor/trace.h"

/* Device bytes over time with the budget line, and kernel / upload /
 * write-back lanes per device. */
ot_status ot_trace_plot_svg(const ot_trace *t, uint64_t budget, const char *path);

#endif
