/* npy.h — NumPy .npy files (format 1.0 written; 1.0, 2.0, 3.0 read), for
 * logits and token ids exchanged with other implementations.
 *
 *     int64_t shape[2] = {prompt_len, vocab};
 *     ot_npy_write("logits.npy", OT_F32, 2, shape, logits);   // np.load works
 *
 *     ot_npy_array a;
 *     if (ot_npy_read("ref.npy", &a) == OT_OK) { ... a.data, a.shape ...; ot_npy_free(&a); }
 *
 * Only little-endian, C-order float32 ('<f4') and int32 ('<i4') arrays; integer
 * arrays of int64 ('<i8', NumPy's default) or uint16 ('<u2', token ids) are read
 * as int32 (an int64 value outside int32 is an error naming its index). */
#ifndef OMPTENSOR_NPY_H
#define OMPTENSOR_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/dtype.h"
#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OT_NPY_MAX_DIMS 8

typedef struct ot_npy_array {
  ot_dtype dtype;  /* OT_F32 or OT_I32 */
  int ndim;        /* 0 (a scalar) .. OT_NPY_MAX_DIMS */
  int64_t shape[OT_NPY_MAX_DIMS];
  int64_t numel;
  void *data;      /* malloc'd, numel elements (4 bytes each); freed by ot_npy_free */
  int item_bytes;  /* bytes per element in the file: 4, or 8 / 2 for '<i8' / '<u2' read as int32 */
} ot_npy_array;

/* Writes `data` (numel = product of shape, host memory) as a version 1.0
 * file whose header is padded to a multiple of 64 bytes. dtype is OT_F32 or
 * OT_I32. */
ot_status ot_npy_write(const char *path, ot_dtype dtype, int ndim, const int64_t *shape, const void *data);

/* Reads a whole file. OT_ERR_FORMAT for a malformed header, a size that does
 * not match the shape, Fortran order; OT_ERR_DTYPE for any descr other than
 * '<f4' / '<i4', naming it. */
ot_status ot_npy_read(const char *path, ot_npy_array *out);
void ot_npy_free(ot_npy_array *a); /* NULL or an empty array is fine */

#ifdef __cplusplus
}
#endif
#endif
