/* npy_internal.h (internal) — the .npy header parser, on a buffer so a
 * fuzz target can call it. */
#ifndef OT_IO_NPY_INTERNAL_H
#define OT_IO_NPY_INTERNAL_H

#include <stddef.h>

#include "omptensor/npy.h"

/* Magic, version, and header-length field: 10 bytes (v1) or 12 (v2, v3). */
#define OT_NPY_PREFIX 12
#define OT_NPY_MAX_HEADER ((size_t)1 << 20)

/* From the first min(len, OT_NPY_PREFIX) bytes: the size of magic + header,
 * i.e. the offset of the data. */
ot_status ot_npy_preamble_size(const unsigned char *buf, size_t len, const char *label, size_t *total);

/* Parses magic and header in buf[0..len) (len >= the preamble size) into
 * out's dtype, ndim, shape and numel (data stays NULL); *data_offset gets
 * where the array data starts. */
ot_status ot_npy_parse_header(const unsigned char *buf, size_t len, const char *label, ot_npy_array *out,
                              size_t *data_offset);

#endif
