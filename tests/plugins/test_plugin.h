/* What the C test plugins (glu_plugin.c, wide_plugin.c) share: a reason or message written back,
 * the f32 check, a tensor's floats, supports() from the plugin's refusal(), and the registration of one variant on the cpu backend below its own variants
 * and the reference (priority -2000, so it runs only when named). Static: each plugin is its own
 * module, built against whichever plugin.h its target includes. */
#ifndef OPREG_TESTS_PLUGINS_TEST_PLUGIN_H
#define OPREG_TESTS_PLUGINS_TEST_PLUGIN_H

#include <stdio.h>
#include <string.h>

#include "opreg/plugin.h"

static int32_t report(char* message, size_t size, int32_t status, const char* text) {
  if (message != NULL && size > 0) snprintf(message, size, "%s", text);
  return status;
}

/* f32 (an absent optional tensor passes). */
static int is_f32(const DLTensor* t) {
  return t == NULL || (t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1);
}

/* An empty tensor may have no memory at all. */
static float* at(const DLTensor* t) {
  return t == NULL || t->data == NULL ? NULL : (float*)((char*)t->data + t->byte_offset);
}

/* Each plugin defines refusal(args): why its kernel refuses these arguments, or NULL. Its run()
 * asks again (a forced variant is never handed a refused problem, but a plugin cannot know). */
static const char* refusal(const void* args);
static int32_t supports_unless_refused(void* user, const void* args, const opreg_device_props* props, char* reason,
                                       size_t size) {
  (void)user, (void)props;
  const char* why = refusal(args);
  return why != NULL ? report(reason, size, 0, why) : 1;
}

static int32_t register_cpu_variant(const opreg_host* host, const char* op, const char* impl,
                                    int32_t (*supports)(void*, const void*, const opreg_device_props*, char*, size_t),
                                    int32_t (*run)(void*, const void*, const opreg_kernel_context*, char*, size_t),
                                    char* message, size_t size) {
  opreg_variant_desc variant;
  memset(&variant, 0, sizeof variant);
  variant.struct_size = sizeof variant;
  variant.api_version = OPREG_PLUGIN_API_VERSION;
  variant.backend = "cpu";
  variant.op = op;
  variant.impl = impl;
  variant.priority = -2000;
  variant.supports = supports;
  variant.run = run;
  return host->register_variant(host->host, &variant, message, size);
}

#endif
