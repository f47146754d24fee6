/* trace_svg.h (internal) — `omptensor trace plot`. */
#ifndef OT_CLI_TRACE_SVG_H
#define OT_CLI_TRACE_SVG_H

#include <stddef.h>

#include "omptensor/trace.h"

/* The output's format comes from its extension, .svg or .png (any case);
 * anything else is OT_ERR_INVALID_ARG naming the path (checked before the
 * trace is read). */
ot_status ot_trace_plot_check_path(const char *path);

/* Per device: device bytes over time against the budget, y-axis ticks in
 * the unit the sizes call for, kernel / upload / write-back / eviction
 * lanes, the phases marked (ot_trace_mark) and run starts; every device
 * the trace holds. Written atomically to path as SVG or PNG (by its
 * extension). budget 0 or UINT64_MAX: no budget line. */
ot_status ot_trace_plot(const ot_trace *t, uint64_t budget, const char *path);

/* The SVG text of that picture (*svg malloc'd, *len bytes) and its size in
 * px; `path` names the output in messages. */
ot_status ot_trace_svg_text(const ot_trace *t, uint64_t budget, const char *path, char **svg, size_t *len, int *w_px,
                            int *h_px);

/* SVG text rendered to a w x h px PNG at path (trace_png.c: librsvg, loaded
 * when called). OT_ERR_UNSUPPORTED with what to install when this build
 * or this machine has no librsvg. */
ot_status ot_svg_write_png(const char *svg, size_t len, int w, int h, const char *path);

#endif
