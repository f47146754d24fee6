/* trace_svg.c — a trace as a picture: per device, device memory over time
 * against the budget (y-axis ticks in the unit the sizes call for), and
 * lanes for kernels, uploads, write-backs and evictions; the phases the
 * program marked (ot_trace_mark: prefill, decode) and the start of every
 * run as vertical lines. SVG, or PNG through librsvg (trace_png.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trace_svg.h"
#include "omptensor/file.h"
#include "omptensor/settings.h"

#define W 1200.0  /* drawing width in px */
#define LEFT 90.0 /* room for labels */
#define RIGHT 20.0
#define MEM_H 160.0
#define LANE_H 26.0
#define N_LANES 4
#define MAX_RUN_LABELS 20 /* more runs: lines without numbers */

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

/* A round step near range / n: 1, 2, 2.5 or 5 times a power of ten. */
static double nice_step(double range, int n) {
  double raw = range / n, p = pow(10, floor(log10(raw))), m = raw / p;
  return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10);
}

/* Decimals that show every multiple of step exactly (step 2.5: 1, 0.25: 2). */
static int decimals(double step) {
  int d = 0;
  while (d < 6 && fabs(step * pow(10, d) - round(step * pow(10, d))) > 1e-6) d++;
  return d;
}

/* The axis scale: the binary unit of the largest value (as ot_size_format
 * picks it) and ticks at round steps of it up to at least `top`. */
typedef struct axis {
  const char *unit;
  double unit_bytes, step, top; /* step and top in the unit */
  int dec;
} axis;

static axis mem_axis(uint64_t top) {
  static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  axis a = {u[0], 1, 1, 1, 0};
  double v = (double)top;
  for (int i = 1; i < 7 && v >= 1024; i++, v /= 1024) a.unit = u[i], a.unit_bytes *= 1024;
  a.step = nice_step(v > 0 ? v : 1, 5);
  if (a.unit_bytes == 1 && a.step < 1) a.step = 1; /* no fractions of a byte */
  a.top = ceil(v / a.step - 1e-9) * a.step;
  if (a.top <= 0) a.top = a.step;
  a.dec = decimals(a.step);
  return a;
}

/* Time ticks: seconds, milliseconds or microseconds by the trace's length. */
typedef struct taxis {
  const char *unit;
  double unit_ns, step;
  int dec;
} taxis;

static taxis time_axis(uint64_t t_end) {
  taxis a = {"s", 1e9, 0, 0};
  if (t_end < 1000000) a.unit = "us", a.unit_ns = 1e3;
  else if (t_end < 1000000000) a.unit = "ms", a.unit_ns = 1e6;
  a.step = nice_step((double)t_end / a.unit_ns, 10);
  a.dec = decimals(a.step);
  return a;
}

/* A counter sample: the bytes in use after event `i`, issued at `t`. */
typedef struct sample {
  uint64_t t, bytes;
  size_t i;
} sample;

static int cmp_sample(const void *x, const void *y) {
  const sample *a = x, *b = y;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i; /* same time: in the order recorded */
}

static int cmp_int(const void *x, const void *y) {
  int a = *(const int *)x, b = *(const int *)y;
  return a < b ? -1 : a > b;
}

/* Events that change the counter (trace_chrome.c writes a sample for these). */
static int has_counter(const ot_trace_event *e) {
  return e->kind != OT_TRACE_KERNEL && e->kind != OT_TRACE_DOWNLOAD && e->kind != OT_TRACE_REMOTE &&
         e->kind != OT_TRACE_MARK;
}

typedef struct plot {
  const ot_trace *t;
  size_t n;
  uint64_t budget, peak, t0, t_end; /* the time axis runs from the first event (t0) to the last end */
  int *devs, ndev;
  sample *s; /* scratch for one device's samples */
  axis ya;
  taxis xa;
  double sx; /* px per ns */
} plot;

static double xpos(const plot *p, uint64_t ns) { return LEFT + (double)(ns > p->t0 ? ns - p->t0 : 0) * p->sx; }

/* Phase marks (labelled) and run starts (faint) as vertical lines from y0 to y1. */
static void draw_phases(FILE *f, const plot *p, double y0, double y1) {
  int runs = 0;
  for (size_t i = 0; i < p->n; i++) {
    const ot_trace_event *e = ot_trace_event_at(p->t, i);
    runs += e->kind == OT_TRACE_RUN && !(e->flags & OT_TRACE_STAGE);
  }
  for (size_t i = 0; i < p->n; i++) {
    const ot_trace_event *e = ot_trace_event_at(p->t, i);
    double x = xpos(p, e->start_ns);
    if (e->kind == OT_TRACE_RUN && !(e->flags & OT_TRACE_STAGE)) {
      fprintf(f, "<line class=\"run\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#ccc\"/>\n", x, y0, x, y1);
      if (runs <= MAX_RUN_LABELS)
        fprintf(f, "<text class=\"run\" x=\"%.2f\" y=\"%.1f\" fill=\"#999\" font-size=\"9\">%d</text>\n", x + 2,
                y0 + 8, e->run);
    } else if (e->kind == OT_TRACE_MARK) {
      fprintf(f, "<line class=\"mark\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#9467bd\" "
                 "stroke-dasharray=\"4,3\"/>\n", x, y0 - 6, x, y1);
      fprintf(f, "<text class=\"mark\" x=\"%.2f\" y=\"%.1f\" fill=\"#9467bd\">", x + 3, y0 - 8);
      esc(f, e->name);
      fputs("</text>\n", f);
    }
  }
}

/* The y axis: a tick and a label at every step, up to the axis top. */
static void draw_ticks(FILE *f, const plot *p, double ym, double scale) {
  int n = (int)llround(p->ya.top / p->ya.step);
  for (int k = 0; k <= n; k++) {
    double v = k * p->ya.step, y = ym - v * p->ya.unit_bytes * scale;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", LEFT, y, W - RIGHT, y);
    if (k == 0)
      fprintf(f, "<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">0</text>\n", LEFT - 4,
              y + 4);
    else
      fprintf(f, "<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%.*f %s</text>\n",
              LEFT - 4, y + 4, p->ya.dec, v, p->ya.unit);
  }
}

/* The device-bytes step line of device d, its samples in time order. */
static void draw_memory(FILE *f, plot *p, int d, double ym, double scale) {
  size_t m = 0;
  for (size_t i = 0; i < p->n; i++) {
    const ot_trace_event *e = ot_trace_event_at(p->t, i);
    if (e->device == p->devs[d] && has_counter(e)) p->s[m++] = (sample){e->issued_ns, e->device_bytes, i};
  }
  /* a trace read from a file of another version, or events of several
   * threads, may hold them out of order: a line must not run backwards */
  qsort(p->s, m, sizeof *p->s, cmp_sample);
  fprintf(f, "<polyline class=\"memory\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"%.1f,%.1f ",
          LEFT, ym);
  double last_y = ym;
  for (size_t k = 0; k < m; k++) {
    double x = xpos(p, p->s[k].t), y = ym - (double)p->s[k].bytes * scale;
    fprintf(f, "%.2f,%.1f %.2f,%.1f ", x, last_y, x, y);
    last_y = y;
  }
  fprintf(f, "%.1f,%.1f\"/>\n", W - RIGHT, last_y);
}

/* Lanes: 0 kernels, 1 uploads, 2 write-backs (spans), 3 evictions (ticks:
 * a live copy evicted, full height; a clean copy dropped without a
 * write-back, half height). -1: not drawn in a lane. */
static int lane_of(const ot_trace_event *e) {
  switch (e->kind) {
  case OT_TRACE_KERNEL: return 0;
  case OT_TRACE_UPLOAD: return 1;
  case OT_TRACE_DOWNLOAD: return 2;
  case OT_TRACE_FREE: return e->flags & (OT_TRACE_EVICT | OT_TRACE_CLEAN_DROP) ? 3 : -1;
  default: return -1;
  }
}

static void draw_lanes(FILE *f, const plot *p, int d, double ym) {
  static const char *const name[N_LANES] = {"kernels", "uploads", "write-backs", "evictions"};
  static const char *const col[N_LANES] = {"#2ca02c", "#1f77b4", "#ff7f0e", "#d62728"};
  for (int l = 0; l < N_LANES; l++) {
    double yl = ym + 10 + l * LANE_H;
    fprintf(f, "<text class=\"lane\" x=\"4\" y=\"%.1f\">%s</text>\n", yl + 15, name[l]);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f4f4f4\"/>\n", LEFT, yl,
            W - RIGHT - LEFT, LANE_H - 4);
  }
  for (size_t i = 0; i < p->n; i++) {
    const ot_trace_event *e = ot_trace_event_at(p->t, i);
    int l = lane_of(e);
    if (e->device != p->devs[d] || l < 0) continue;
    double yl = ym + 10 + l * LANE_H, x = xpos(p, e->start_ns);
    if (l == 3) {
      int evict = (e->flags & OT_TRACE_EVICT) != 0;
      double h = evict ? LANE_H - 4 : (LANE_H - 4) / 2;
      fprintf(f, "<line class=\"%s\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"%s\"><title>%s ",
              evict ? "evict" : "drop", x, yl + (LANE_H - 4) - h, x, yl + LANE_H - 4, evict ? col[3] : "#8c564b",
              evict ? "evicted" : "dropped clean (no write-back)");
      esc(f, e->name);
      fprintf(f, " (%llu bytes)</title></line>\n", (unsigned long long)e->bytes);
      continue;
    }
    double w = (double)(e->end_ns - e->start_ns) * p->sx;
    if (w < 0.5) w = 0.5;
    fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>", x, yl, w, LANE_H - 4,
            col[l]);
    esc(f, e->name);
    fprintf(f, " (%.3f ms, %llu bytes)</title></rect>\n", (double)(e->end_ns - e->start_ns) / 1e6,
            (unsigned long long)e->bytes);
  }
}

static void draw_time_ticks(FILE *f, const plot *p, double y) {
  double end = (double)p->t_end / p->xa.unit_ns;
  for (int k = 0; k * p->xa.step <= end * (1 + 1e-9); k++) {
    double v = k * p->xa.step, x = LEFT + v * p->xa.unit_ns * p->sx;
    fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%.*f %s</text>\n", x,
            y, p->xa.dec, v, p->xa.unit);
  }
}

static void draw_device(FILE *f, plot *p, int d, double y0) {
  double ym = y0 + MEM_H, lanes_end = ym + 10 + N_LANES * LANE_H;
  double scale = (MEM_H - 28) / (p->ya.top * p->ya.unit_bytes); /* px per byte */
  fprintf(f, "<text class=\"device\" x=\"4\" y=\"%.1f\" font-weight=\"bold\">device %d</text>\n", y0 + 12, p->devs[d]);
  draw_ticks(f, p, ym, scale);
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", LEFT, y0 + 20, LEFT, ym);
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", LEFT, ym, W - RIGHT, ym);
  if (p->budget) {
    char b[OT_SIZE_FORMAT_LEN];
    double yb = ym - (double)p->budget * scale;
    fprintf(f, "<line class=\"budget\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
               "stroke-dasharray=\"6,4\"/>\n", LEFT, yb, W - RIGHT, yb);
    fprintf(f, "<text class=\"budget\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#d62728\">budget %s</text>\n",
            W - RIGHT, yb - 3, ot_size_format(p->budget, b, sizeof b));
  }
  draw_memory(f, p, d, ym, scale);
  draw_lanes(f, p, d, ym);
  draw_phases(f, p, y0 + 28, lanes_end);
  draw_time_ticks(f, p, lanes_end + 12);
}

/* The picture as SVG text in *svg (malloc'd, *len bytes) and its size in px. */
ot_status ot_trace_svg_text(const ot_trace *t, uint64_t budget, const char *path, char **svg, size_t *len, int *w_px,
                            int *h_px) {
  *svg = NULL;
  plot p = {t, ot_trace_count(t), budget == UINT64_MAX ? 0 : budget, 0, UINT64_MAX, 0, NULL, 0, NULL, {0}, {0}, 0};
  if (p.n == 0) return ot_set_error(OT_ERR_INVALID_ARG, "trace plot: the trace has no events");
  /* every device the trace holds gets its block, however many (marks
   * belong to none); sorted by device number */
  p.devs = malloc(p.n * sizeof *p.devs);
  p.s = malloc(p.n * sizeof *p.s);
  if (!p.devs || !p.s) {
    free(p.devs);
    free(p.s);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory to draw the picture", path);
  }
  for (size_t i = 0; i < p.n; i++) {
    const ot_trace_event *e = ot_trace_event_at(t, i);
    if (e->start_ns < p.t0) p.t0 = e->start_ns;
    if (e->end_ns > p.t_end) p.t_end = e->end_ns;
    if (e->issued_ns > p.t_end) p.t_end = e->issued_ns;
    if (e->issued_ns < p.t0) p.t0 = e->issued_ns;
    if (e->kind == OT_TRACE_MARK) continue;
    if (e->device_bytes > p.peak) p.peak = e->device_bytes;
    p.devs[p.ndev++] = e->device;
  }
  qsort(p.devs, (size_t)p.ndev, sizeof *p.devs, cmp_int);
  int nd = 0;
  for (int i = 0; i < p.ndev; i++)
    if (!nd || p.devs[nd - 1] != p.devs[i]) p.devs[nd++] = p.devs[i];
  p.ndev = nd;
  /* the length drawn: t_end from here on is relative to t0, at least 1 ns */
  p.t_end = p.t_end > p.t0 ? p.t_end - p.t0 : 1;
  p.ya = mem_axis(p.budget > p.peak ? p.budget : p.peak);
  p.xa = time_axis(p.t_end);
  p.sx = (W - LEFT - RIGHT) / (double)p.t_end;
  /* Drawn in memory, then written whole (the caller): the old picture or
   * the whole new one. */
  FILE *f = open_memstream(svg, len);
  if (!f) {
    free(p.devs);
    free(p.s);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory to draw the picture: %s", path, strerror(errno));
  }
  double block_h = MEM_H + N_LANES * LANE_H + 56;
  double H = 44 + (p.ndev ? p.ndev : 1) * block_h;
  char pk[OT_SIZE_FORMAT_LEN], bu[OT_SIZE_FORMAT_LEN];
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
             "font-size=\"11\">\n", W, H);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text class=\"title\" x=\"%.0f\" y=\"20\" font-size=\"14\">omptensor trace: %.3f s, %d device%s, peak %s, "
             "budget %s</text>\n", LEFT, (double)p.t_end / 1e9, p.ndev, p.ndev == 1 ? "" : "s",
          ot_size_format(p.peak, pk, sizeof pk), p.budget ? ot_size_format(p.budget, bu, sizeof bu) : "none (no limit)");
  for (int d = 0; d < p.ndev; d++) draw_device(f, &p, d, 44 + d * block_h);
  fputs("</svg>\n", f);
  int bad = ferror(f);
  free(p.devs);
  free(p.s);
  if (fclose(f) != 0 || bad) {
    free(*svg);
    *svg = NULL;
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory to draw the picture", path);
  }
  *w_px = (int)W;
  *h_px = (int)H;
  return OT_OK;
}

/* ".svg" / ".png" at the end of path, in any case. */
static int has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), k = strlen(ext);
  return n > k && !strcasecmp(path + n - k, ext);
}

ot_status ot_trace_plot_check_path(const char *path) {
  if (has_ext(path, ".png") || has_ext(path, ".svg")) return OT_OK;
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  int ext = dot && (!slash || dot > slash) && dot[1];
  return ot_set_error(OT_ERR_INVALID_ARG,
                      "%s: trace plot writes SVG or PNG by the file's extension (%s%s%s): name the output FILE.svg "
                      "or FILE.png",
                      path, ext ? "not '" : "this name has none", ext ? dot : "", ext ? "'" : "");
}

ot_status ot_trace_plot(const ot_trace *t, uint64_t budget, const char *path) {
  OT_TRY(ot_trace_plot_check_path(path));
  int png = has_ext(path, ".png");
  char *svg;
  size_t len;
  int w, h;
  OT_TRY(ot_trace_svg_text(t, budget, path, &svg, &len, &w, &h));
  ot_status st = png ? ot_svg_write_png(svg, len, w, h, path) : ot_file_write(path, svg, len);
  free(svg);
  return st;
}
