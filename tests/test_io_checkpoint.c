/* test_io_checkpoint.c — Hugging Face checkpoints: a single
 * model.safetensors, shards behind model.safetensors.index.json, both (the
 * single file, as transformers), and broken indexes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "omptensor/safetensors.h"
#include "omptensor/status.h"
#include "ot_testio.h"

static int setup(void **state) {
  *state = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  ot_tmpdir_remove(*state);
  return 0;
}

/* Tensor i of the fake model: n floats with value 100*i + j. */
static void fill(float *x, int i, int n) {
  for (int j = 0; j < n; j++) x[j] = (float)(100 * i + j);
}

static void write_shard(const char *dir, const char *name, const char *const *tensors, const int *ids, int n) {
  float data[8][6];
  ot_st_tensor ts[8];
  for (int i = 0; i < n; i++) {
    fill(data[i], ids[i], 6);
    ts[i] = (ot_st_tensor){tensors[i], OT_F32, 2, {2, 3}, data[i]};
  }
  char path[4096];
  OT_ASSERT_OK(ot_st_write(ot_tmp_path(path, sizeof path, dir, name), ts, n, NULL, 0));
}

static const char *const names[] = {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight",
                                    "model.layers.1.mlp.up_proj.weight", "lm_head.weight"};
static const int ids[] = {0, 1, 2, 3};

static void write_sharded(const char *dir) {
  write_shard(dir, "model-00001-of-00002.safetensors", names, ids, 2);
  write_shard(dir, "model-00002-of-00002.safetensors", names + 2, ids + 2, 2);
  ot_write_text(dir, "model.safetensors.index.json",
                "{\"metadata\": {\"total_size\": 96}, \"weight_map\": {"
                "\"lm_head.weight\": \"model-00002-of-00002.safetensors\","
                "\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
                "\"model.layers.0.mlp.up_proj.weight\": \"model-00001-of-00002.safetensors\","
                "\"model.layers.1.mlp.up_proj.weight\": \"model-00002-of-00002.safetensors\"}}");
}

static void check_all(const ot_ckpt *c) {
  assert_int_equal(ot_ckpt_count(c), 4);
  for (int i = 0; i < 4; i++) {
    const ot_st_info *info;
    OT_ASSERT_OK(ot_ckpt_find(c, names[i], &info));
    assert_int_equal(info->ndim, 2);
    float got[6], want[6];
    fill(want, ids[i], 6);
    OT_ASSERT_OK(ot_ckpt_read(c, info, got, sizeof got));
    assert_memory_equal(got, want, sizeof got);
  }
  for (int i = 1; i < ot_ckpt_count(c); i++)
    assert_true(strcmp(ot_ckpt_at(c, i - 1)->name, ot_ckpt_at(c, i)->name) < 0);
  const ot_st_info *none;
  OT_ASSERT_ERR(ot_ckpt_find(c, "model.norm.weight", &none), OT_ERR_NOT_FOUND, "model.norm.weight");
}

static void test_sharded_dir(void **state) {
  const char *dir = *state;
  write_sharded(dir);
  ot_ckpt *c;
  OT_ASSERT_OK(ot_ckpt_open(dir, &c));
  assert_int_equal(ot_ckpt_num_shards(c), 2);
  assert_string_equal(ot_ckpt_dir(c), dir);
  check_all(c);
  const ot_st_info *lm;
  OT_ASSERT_OK(ot_ckpt_find(c, "lm_head.weight", &lm));
  assert_non_null(strstr(ot_st_path(ot_ckpt_shard(c, lm->shard)), "model-00002-of-00002"));
  ot_ckpt_close(c);
  /* the index file itself works too */
  char path[4096];
  OT_ASSERT_OK(ot_ckpt_open(ot_tmp_path(path, sizeof path, dir, "model.safetensors.index.json"), &c));
  check_all(c);
  ot_ckpt_close(c);
  ot_ckpt_close(NULL);
}

static void test_single_file(void **state) {
  const char *dir = *state;
  write_shard(dir, "model.safetensors", names, ids, 4);
  ot_ckpt *c;
  OT_ASSERT_OK(ot_ckpt_open(dir, &c));
  assert_int_equal(ot_ckpt_num_shards(c), 1);
  check_all(c);
  ot_ckpt_close(c);
  char path[4096];
  OT_ASSERT_OK(ot_ckpt_open(ot_tmp_path(path, sizeof path, dir, "model.safetensors"), &c));
  check_all(c);
  ot_ckpt_close(c);
}

static char notice[512];
static void take_notice(void *user, const char *m) {
  (void)user;
  snprintf(notice, sizeof notice, "%s", m);
}

/* Issue 43: with both model.safetensors and an index, the shards were
 * loaded; transformers loads the single file (SAFE_WEIGHTS_NAME before
 * SAFE_WEIGHTS_INDEX_NAME), and the unused index is named in a notice. A
 * directory at the single file's name is no file: the index then. */
static void test_single_file_over_index(void **state) {
  const char *dir = *state;
  write_sharded(dir);
  static const char *const one[] = {"model.embed_tokens.weight"};
  static const int id[] = {7};
  write_shard(dir, "model.safetensors", one, id, 1);
  ot_set_notice_handler(take_notice, NULL);
  ot_ckpt *c;
  OT_ASSERT_OK(ot_ckpt_open(dir, &c));
  ot_set_notice_handler(NULL, NULL);
  assert_int_equal(ot_ckpt_num_shards(c), 1);
  assert_int_equal(ot_ckpt_count(c), 1);
  assert_non_null(strstr(ot_st_path(ot_ckpt_shard(c, 0)), "/model.safetensors"));
  ot_ckpt_close(c);
  printf("%s\n", notice);
  assert_non_null(strstr(notice, dir));
  assert_non_null(strstr(notice, "both model.safetensors and model.safetensors.index.json"));
  assert_non_null(strstr(notice, "model.safetensors.index.json and its shards are not used"));
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "model.safetensors");
  assert_int_equal(remove(path), 0);
  assert_int_equal(mkdir(path, 0700), 0);
  OT_ASSERT_OK(ot_ckpt_open(dir, &c));
  assert_int_equal(ot_ckpt_num_shards(c), 2);
  check_all(c);
  ot_ckpt_close(c);
  assert_int_equal(rmdir(path), 0);
}

static void test_not_a_checkpoint(void **state) {
  const char *dir = *state;
  ot_ckpt *c = (ot_ckpt *)1;
  OT_ASSERT_ERR(ot_ckpt_open(dir, &c), OT_ERR_NOT_FOUND, dir, "model.safetensors.index.json", "model.safetensors");
  assert_null(c);
  char path[4096];
  OT_ASSERT_ERR(ot_ckpt_open(ot_tmp_path(path, sizeof path, dir, "missing/model.safetensors"), &c), OT_ERR_NOT_FOUND,
                "missing/model.safetensors");
}

static void test_bad_index(void **state) {
  const char *dir = *state;
  write_sharded(dir);
  ot_ckpt *c;
  struct {
    const char *json;
    ot_status want;
    const char *sub;
  } cases[] = {
      {"{\"weight_map\": ", OT_ERR_FORMAT, "invalid JSON index"},
      {"[]", OT_ERR_FORMAT, "the index is an array"},
      {"{\"metadata\": {}}", OT_ERR_FORMAT, "no \"weight_map\""},
      {"{\"weight_map\": []}", OT_ERR_FORMAT, "\"weight_map\" is an array"},
      {"{\"weight_map\": {}}", OT_ERR_FORMAT, "empty"},
      {"{\"weight_map\": {\"a\": 3}}", OT_ERR_FORMAT, "weight_map['a'] is an integer"},
      {"{\"weight_map\": {\"a\": \"../../etc/passwd\"}}", OT_ERR_FORMAT, "not a file name"},
      {"{\"weight_map\": {\"a\": \"/abs.safetensors\"}}", OT_ERR_FORMAT, "not a file name"},
      {"{\"weight_map\": {\"lm_head.weight\": \"model-00003-of-00003.safetensors\"}}", OT_ERR_NOT_FOUND,
       "model-00003-of-00003.safetensors"},
      /* the index says shard 1, but the tensor lives in shard 2 */
      {"{\"weight_map\": {\"lm_head.weight\": \"model-00001-of-00002.safetensors\"}}", OT_ERR_FORMAT,
       "weight_map puts tensor 'lm_head.weight' in model-00001-of-00002.safetensors, which does not hold it"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ot_write_text(dir, "model.safetensors.index.json", cases[i].json);
    c = (ot_ckpt *)1;
    OT_ASSERT_ERR(ot_ckpt_open(dir, &c), cases[i].want, cases[i].sub);
    assert_null(c);
  }
}

/* A corrupt shard is reported with the shard's own path. */
static void test_corrupt_shard(void **state) {
  const char *dir = *state;
  write_sharded(dir);
  ot_write_bytes(dir, "model-00002-of-00002.safetensors", "\x08\0\0\0\0\0\0\0{garbage", 16);
  ot_ckpt *c;
  OT_ASSERT_ERR(ot_ckpt_open(dir, &c), OT_ERR_FORMAT, "model-00002-of-00002.safetensors", "invalid JSON header");
}

static void test_tensor_in_two_shards(void **state) {
  const char *dir = *state;
  write_sharded(dir);
  /* shard 2 also holds the embedding */
  const char *const n2[] = {"model.layers.1.mlp.up_proj.weight", "lm_head.weight", "model.embed_tokens.weight"};
  const int i2[] = {2, 3, 0};
  write_shard(dir, "model-00002-of-00002.safetensors", n2, i2, 3);
  ot_ckpt *c;
  OT_ASSERT_ERR(ot_ckpt_open(dir, &c), OT_ERR_FORMAT, "tensor 'model.embed_tokens.weight' is in both",
                "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sharded_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_single_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_single_file_over_index, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_a_checkpoint, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_index, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_shard, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tensor_in_two_shards, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
