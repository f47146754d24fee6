/* trace_svg.c — a trace as an SVG picture: device memory over time against
 * the budget, and lanes for kernels and transfers, one block per device. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_svg.h"
#include "omptensor/file.h"

#define W 1200.0  /* drawing width in px */
#define LEFT 90.0 /* room for labels */
#define MEM_H 160.0
#define LANE_H 26.0

static void esc(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
  }
}

static double gib(uint64_t b) { return (double)b / (double)(1ull << 30); }

ot_status ot_trace_plot_svg(const ot_trace *t, uint64_t budget, const char *path) {
  size_t n = ot_trace_count(t);
  if (n == 0) return ot_set_error(OT_ERR_INVALID_ARG, "trace plot: the trace has no events");
  if (budget == UINT64_MAX) budget = 0; /* no limit: no budget line, and the scale follows the peak */
  uint64_t t_end = 1, peak = 1;
  int devs[16], ndev = 0;
  for (size_t i = 0; i < n; i++) {
    const ot_trace_event *e = ot_trace_event_at(t, i);
    if (e->end_ns > t_end) t_end = e->end_ns;
    if (e->device_bytes > peak) peak = e->device_bytes;
    int known = 0;
    for (int d = 0; d < ndev; d++) known |= devs[d] == e->device;
    if (!known && ndev < 16) devs[ndev++] = e->device;
  }
  uint64_t top = budget > peak ? budget : peak;
  /* Drawn in memory, then written atomically (omptensor/file.h): the old
   * picture or the whole new one. */
  char *svg = NULL;
  size_t svg_len = 0;
  FILE *f = open_memstream(&svg, &svg_len);
  if (!f) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory to draw the picture: %s", path, strerror(errno));
  double block_h = MEM_H + 3 * LANE_H + 50;
  double H = 40 + ndev * block_h;
  double sx = (W - LEFT - 20) / (double)t_end;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"11\">\n", W, H);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">omptensor trace: %.3f s, peak %.3f GiB, budget %.3f GiB%s</text>\n",
          LEFT, (double)t_end / 1e9, gib(peak), gib(budget), budget ? "" : " (no limit)");
  for (int d = 0; d < ndev; d++) {
    double y0 = 40 + d * block_h, ym = y0 + MEM_H;
    fprintf(f, "<text x=\"4\" y=\"%.1f\" font-weight=\"bold\">device %d</text>\n", y0 + 12, devs[d]);
    /* memory axis and budget line */
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", LEFT, y0 + 20, LEFT, ym);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", LEFT, ym, W - 20, ym);
    double scale = (MEM_H - 24) / (double)top;
    if (budget) {
      double yb = ym - (double)budget * scale;
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-dasharray=\"6,4\"/>\n",
              LEFT, yb, W - 20, yb);
      fprintf(f, "<text x=\"4\" y=\"%.1f\" fill=\"#d62728\">budget %.2f GiB</text>\n", yb + 4, gib(budget));
    }
    fprintf(f, "<text x=\"4\" y=\"%.1f\">device bytes</text>\n", ym - 4);
    /* the memory step line, from the recorded counter */
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
    double last_y = ym;
    fprintf(f, "%.1f,%.1f ", LEFT, ym);
    for (size_t i = 0; i < n; i++) {
      const ot_trace_event *e = ot_trace_event_at(t, i);
      if (e->device != devs[d] || e->kind == OT_TRACE_KERNEL || e->kind == OT_TRACE_DOWNLOAD) continue;
      double x = LEFT + (double)e->start_ns * sx, y = ym - (double)e->device_bytes * scale;
      fprintf(f, "%.1f,%.1f %.1f,%.1f ", x, last_y, x, y);
      last_y = y;
    }
    fprintf(f, "%.1f,%.1f\"/>\n", W - 20, last_y);
    /* lanes */
    const char *lane_name[3] = {"kernels", "uploads", "write-backs"};
    for (int l = 0; l < 3; l++) {
      double yl = ym + 10 + l * LANE_H;
      fprintf(f, "<text x=\"4\" y=\"%.1f\">%s</text>\n", yl + 15, lane_name[l]);
      fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f4f4f4\"/>\n", LEFT, yl,
              W - 20 - LEFT, LANE_H - 4);
    }
    for (size_t i = 0; i < n; i++) {
      const ot_trace_event *e = ot_trace_event_at(t, i);
      int l = e->kind == OT_TRACE_KERNEL ? 0 : e->kind == OT_TRACE_UPLOAD ? 1 : e->kind == OT_TRACE_DOWNLOAD ? 2 : -1;
      if (e->device != devs[d] || l < 0) continue;
      double x = LEFT + (double)e->start_ns * sx, w = (double)(e->end_ns - e->start_ns) * sx;
      if (w < 0.5) w = 0.5;
      const char *col = l == 0 ? "#2ca02c" : l == 1 ? "#1f77b4" : "#ff7f0e";
      fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>", x,
              ym + 10 + l * LANE_H, w, LANE_H - 4, col);
      esc(f, e->name);
      fprintf(f, " (%.3f ms, %llu bytes)</title></rect>\n", (double)(e->end_ns - e->start_ns) / 1e6,
              (unsigned long long)e->bytes);
    }
    /* time ticks */
    for (int k = 0; k <= 10; k++) {
      double x = LEFT + k * (W - 20 - LEFT) / 10;
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%.3gs</text>\n", x,
              ym + 10 + 3 * LANE_H + 12, (double)t_end / 1e9 * k / 10);
    }
  }
  fputs("</svg>\n", f);
  int bad = ferror(f);
  ot_status st = fclose(f) != 0 || bad ? ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory to draw the picture", path)
                                       : ot_file_write(path, svg, svg_len);
  free(svg);
  return st;
}
