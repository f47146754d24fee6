/* ot_testio.h — temp directories, raw files and error assertions for the
 * I/O and configuration tests. Include after <cmocka.h>. */
#ifndef OT_TESTIO_H
#define OT_TESTIO_H

#include <stddef.h>

#include "omptensor/status.h"

/* A fresh directory under $TMPDIR (or /tmp); its path is returned in a
 * static-free malloc'd string. ot_tmpdir_remove deletes it and everything
 * in it, and frees the string. */
char *ot_tmpdir_create(void);
void ot_tmpdir_remove(char *dir);

/* dir/name into buf (cap bytes); returns buf. */
char *ot_tmp_path(char *buf, size_t cap, const char *dir, const char *name);

/* All of the file at path, NUL-terminated (malloc'd; *len, may be NULL,
 * gets its size); fails the test if it cannot be read. */
char *ot_read_file(const char *path, size_t *len);

/* Writes len bytes to dir/name (fails the test on error). */
void ot_write_bytes(const char *dir, const char *name, const void *data, size_t len);
void ot_write_text(const char *dir, const char *name, const char *text);

/* Writes a safetensors file whose header is `json` (given verbatim) and
 * whose data section is data_bytes bytes of a counting pattern. */
void ot_write_st_raw(const char *dir, const char *name, const char *json, size_t data_bytes);

/* Fails the test unless got == want and the last error message contains
 * every one of the NULL-terminated substrings; prints the message. */
void ot_check_error(const char *file, int line, ot_status got, ot_status want, const char *where, ...);
#define OT_ASSERT_ERR(expr, want, ...) \
  ot_check_error(__FILE__, __LINE__, (expr), (want), #expr, __VA_ARGS__, (const char *)0)

/* Fails the test (printing the message) unless s == OT_OK. */
void ot_check_ok(const char *file, int line, ot_status s, const char *where);
#ifndef OT_ASSERT_OK /* ot_test.h has one that does the same */
#define OT_ASSERT_OK(expr) ot_check_ok(__FILE__, __LINE__, (expr), #expr)
#endif

#endif
