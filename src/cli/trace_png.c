/* trace_png.c — `trace plot -o FILE.png`: the SVG picture rendered by
 * librsvg onto a cairo image and written as PNG.
 *
 * librsvg is loaded when a PNG is asked for (dlopen), not linked: the
 * command runs on GPU machines that carry only its own runtime (docs/gpu.md),
 * and librsvg pulls in glib, cairo, pango and more. The build takes
 * librsvg's headers (Debian librsvg2-dev, found by pkg-config) for the
 * types of the functions it looks up, so a changed signature fails the
 * build; without them the build still works and a PNG is refused with how
 * to get one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_svg.h"
#include "omptensor/file.h"

#ifdef OT_HAVE_RSVG
#include <dlfcn.h>
#include <librsvg/rsvg.h>

#define RSVG_SONAME "librsvg-2.so.2"
#define MAX_PNG_PX 32767 /* cairo's largest image side */

/* The functions used, looked up in librsvg (and, through it, cairo, gobject
 * and glib, which it depends on). */
typedef struct rsvg_api {
  __typeof__(rsvg_handle_new_from_data) *new_from_data;
  __typeof__(rsvg_handle_render_document) *render_document;
  __typeof__(g_object_unref) *object_unref;
  __typeof__(g_error_free) *error_free;
  __typeof__(cairo_image_surface_create) *surface_create;
  __typeof__(cairo_surface_status) *surface_status;
  __typeof__(cairo_surface_destroy) *surface_destroy;
  __typeof__(cairo_create) *create;
  __typeof__(cairo_status) *status;
  __typeof__(cairo_destroy) *destroy;
  __typeof__(cairo_surface_write_to_png_stream) *write_png_stream;
  __typeof__(cairo_status_to_string) *status_to_string;
} rsvg_api;

static ot_status load_api(rsvg_api *a, const char *path) {
  void *lib = dlopen(RSVG_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return ot_set_error(OT_ERR_UNSUPPORTED,
                        "%s: writing PNG needs librsvg at run time, which is not here (%s): install it (Debian: "
                        "apt-get install librsvg2-2) or write FILE.svg",
                        path, dlerror());
  /* kept loaded: the process writes one picture and exits */
  struct {
    const char *name;
    void **slot;
  } fn[] = {
      {"rsvg_handle_new_from_data", (void **)&a->new_from_data},
      {"rsvg_handle_render_document", (void **)&a->render_document},
      {"g_object_unref", (void **)&a->object_unref},
      {"g_error_free", (void **)&a->error_free},
      {"cairo_image_surface_create", (void **)&a->surface_create},
      {"cairo_surface_status", (void **)&a->surface_status},
      {"cairo_surface_destroy", (void **)&a->surface_destroy},
      {"cairo_create", (void **)&a->create},
      {"cairo_status", (void **)&a->status},
      {"cairo_destroy", (void **)&a->destroy},
      {"cairo_surface_write_to_png_stream", (void **)&a->write_png_stream},
      {"cairo_status_to_string", (void **)&a->status_to_string},
  };
  for (size_t i = 0; i < sizeof fn / sizeof fn[0]; i++) {
    *fn[i].slot = dlsym(lib, fn[i].name);
    if (!*fn[i].slot)
      return ot_set_error(OT_ERR_UNSUPPORTED, "%s: the librsvg here (%s) lacks %s (librsvg 2.46 or later has it)",
                          path, RSVG_SONAME, fn[i].name);
  }
  return OT_OK;
}

/* The PNG bytes, collected in memory for one atomic write. */
typedef struct buf {
  unsigned char *p;
  size_t n, cap;
  int oom;
} buf;

static cairo_status_t collect(void *user, const unsigned char *data, unsigned int len) {
  buf *b = user;
  if (b->n + len > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + len) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return CAIRO_STATUS_WRITE_ERROR;
    }
    b->p = q;
    b->cap = cap;
  }
  if (len) memcpy(b->p + b->n, data, len); /* len 0 before the first block: b->p is NULL */
  b->n += len;
  return CAIRO_STATUS_SUCCESS;
}

ot_status ot_svg_write_png(const char *svg, size_t len, int w, int h, const char *path) {
  if (w > MAX_PNG_PX || h > MAX_PNG_PX)
    return ot_set_error(OT_ERR_UNSUPPORTED,
                        "%s: the picture is %d x %d px (one block per device), past the %d px a PNG image can have "
                        "here; write FILE.svg",
                        path, w, h, MAX_PNG_PX);
  rsvg_api a;
  OT_TRY(load_api(&a, path));
  GError *err = NULL;
  RsvgHandle *svgh = a.new_from_data((const guint8 *)svg, len, &err);
  if (!svgh) {
    ot_status st = ot_set_error(OT_ERR_FORMAT, "%s: librsvg cannot read the picture drawn (a bug): %s", path,
                                err ? err->message : "no reason given");
    if (err) a.error_free(err);
    return st;
  }
  cairo_surface_t *surf = a.surface_create(CAIRO_FORMAT_ARGB32, w, h);
  cairo_t *cr = a.surface_status(surf) == CAIRO_STATUS_SUCCESS ? a.create(surf) : NULL;
  ot_status st = OT_OK;
  if (!cr || a.status(cr) != CAIRO_STATUS_SUCCESS) {
    st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory for a %d x %d px image", path, w, h);
  } else {
    RsvgRectangle vp = {0, 0, (double)w, (double)h};
    if (!a.render_document(svgh, cr, &vp, &err)) {
      st = ot_set_error(OT_ERR_FORMAT, "%s: librsvg cannot draw the picture (a bug): %s", path,
                        err ? err->message : "no reason given");
      if (err) a.error_free(err);
    }
  }
  buf out = {NULL, 0, 0, 0};
  if (st == OT_OK) {
    cairo_status_t cs = a.write_png_stream(surf, collect, &out);
    if (out.oom) st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory for the PNG", path);
    else if (cs != CAIRO_STATUS_SUCCESS)
      st = ot_set_error(OT_ERR_IO, "%s: cairo cannot encode the PNG: %s", path, a.status_to_string(cs));
  }
  if (cr) a.destroy(cr);
  a.surface_destroy(surf);
  a.object_unref(svgh);
  /* atomically (omptensor/file.h): the old picture or the whole new one */
  if (st == OT_OK) st = ot_file_write(path, out.p, out.n);
  free(out.p);
  return st;
}

#else /* built without librsvg's headers */

ot_status ot_svg_write_png(const char *svg, size_t len, int w, int h, const char *path) {
  (void)svg, (void)len, (void)w, (void)h;
  return ot_set_error(OT_ERR_UNSUPPORTED,
                      "%s: this build writes no PNG (it was built without librsvg's headers): write FILE.svg, or "
                      "install librsvg2-dev (scripts/setup.sh does) and build again",
                      path);
}

#endif
