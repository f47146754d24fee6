/* fuzz_yaml_settings.c — a --config YAML file through ot_settings_load_yaml. */
#include "fuzz_common.h"
#include "omptensor/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = ot_fuzz_copy(data, size);
  ot_settings s;
  ot_settings_init(&s);
  ot_settings_load_yaml(&s, buf, buf ? size : 0, "fuzz.yaml");
  ot_settings_release(&s);
  free(buf);
  return 0;
}
