// Plugins that get something wrong, one shared library per BAD_* macro (tests/plugins/CMakeLists.txt
// builds each): opreg must refuse each with a clear error and leave nothing registered. Written in
// C++ (the good example plugin is C), so the interface is exercised from both languages.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "opreg/plugin.h"

#ifdef BAD_NO_ENTRY
extern "C" OPREG_PLUGIN_EXPORT int opreg_plugin_start() { return 0; }  // not the entry's name
#else
namespace {

std::int32_t copy(void*, std::int32_t, void*, const void*, std::size_t, void*, char*, std::size_t) { return OPREG_OK; }
std::int32_t allocate(void*, std::int32_t, std::size_t, void** out, char*, std::size_t) {
  *out = nullptr;
  return OPREG_OK;
}
void deallocate(void*, std::int32_t, void*, std::size_t) {}
std::int32_t fill(void*, std::int32_t, void*, std::size_t, const void*, std::size_t, void*, char*, std::size_t) {
  return OPREG_OK;
}
std::int32_t synchronize(void*, std::int32_t, void*, char*, std::size_t) { return OPREG_OK; }
std::int32_t run(void*, const void*, const opreg_kernel_context*, char*, std::size_t) { return OPREG_OK; }

const char* const kNoKeys[] = {nullptr};

// A descriptor as this header describes it: zeroed, sized and of this API version.
template <class Desc>
Desc versioned() {
  Desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.api_version = OPREG_PLUGIN_API_VERSION;
  return d;
}

opreg_device_props device() {
  opreg_device_props d = versioned<opreg_device_props>();
  d.name = "bad device";
  d.extra_keys = kNoKeys;
  d.extra_values = kNoKeys;
#ifdef BAD_DEVICE_STRUCT_SIZE
  d.struct_size = sizeof d + 16;
#endif
  return d;
}

opreg_backend_desc backend(const char* name, const opreg_device_props* const* devices) {
  opreg_backend_desc b = versioned<opreg_backend_desc>();
  b.name = name;
  b.fallback = OPREG_FALLBACK_ERROR;
  b.available = 1;
  b.device_count = 1;
  b.devices = devices;
  b.dlpack_device_type = kDLExtDev;
  b.allocate = allocate;
  b.deallocate = deallocate;
  b.copy_to_host = copy;
  b.copy_from_host = copy;
  b.copy_on_device = copy;
  b.fill = fill;
  b.synchronize = synchronize;
#ifdef BAD_OLD_VERSION
  b.api_version = 0;
#endif
#ifdef BAD_NEW_VERSION
  b.api_version = OPREG_PLUGIN_API_VERSION + 1;
#endif
#ifdef BAD_STRUCT_SIZE
  b.struct_size = sizeof b - 8;
#endif
#ifdef BAD_MISSING_SERVICE
  b.copy_on_device = nullptr;
  b.synchronize = nullptr;
#endif
  return b;
}

opreg_variant_desc variant(const char* backend_name, const char* op, const char* impl) {
  opreg_variant_desc v = versioned<opreg_variant_desc>();
  v.backend = backend_name;
  v.op = op;
  v.impl = impl;
  v.run = run;
  return v;
}

}  // namespace

extern "C" OPREG_PLUGIN_EXPORT std::int32_t opreg_plugin_init(const opreg_host* host, char* message,
                                                               std::size_t size) {
  const opreg_device_props d = device();
  const opreg_device_props* const devices[] = {&d};
#ifdef BAD_BACKEND_TAKEN
  const char* name = "cpu";  // the registry has one already
#else
  const char* name = "badtoy";
#endif
  const opreg_backend_desc b = backend(name, devices);
  std::int32_t status = host->register_backend(host->host, &b, message, size);
  if (status != OPREG_OK) return status;
  const opreg_variant_desc v = variant("badtoy", "rms_norm.fwd", "a");
  status = host->register_variant(host->host, &v, message, size);
  if (status != OPREG_OK) return status;
#ifdef BAD_VARIANT_TAKEN
  // The same name again, after a backend and a variant went in: the load must undo both.
  status = host->register_variant(host->host, &v, message, size);
  if (status != OPREG_OK) return status;
#endif
#ifdef BAD_IGNORES_ERROR
  // A refused registration whose status the plugin ignores still fails the load.
  const opreg_variant_desc unknown_op = variant("badtoy", "nosuch.fwd", "a");
  (void)host->register_variant(host->host, &unknown_op, message, size);
#endif
#ifdef BAD_ENTRY_FAILS
  std::snprintf(message, size, "no badtoy device answered\non the bus");
  return OPREG_DEVICE_ERROR;
#endif
  return OPREG_OK;
}
#endif
