// The bridge between the ops' C++ argument structs and their C mirrors in
// include/opreg/plugin.h: a C kernel registered by a plugin becomes an ordinary erased variant
// whose run and supports convert the arguments (tensors as non-owning DLTensor views) and call
// the plugin's functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "opreg/plugin.h"
#include "opreg/registry.h"

namespace opreg::detail {

// A DeviceProps seen through opreg_device_props; points into `props`, which must outlive it.
class CDeviceProps {
 public:
  explicit CDeviceProps(const DeviceProps& props);
  CDeviceProps(const CDeviceProps&) = delete;
  CDeviceProps& operator=(const CDeviceProps&) = delete;
  const opreg_device_props* get() const { return &c_; }

 private:
  std::vector<const char*> keys_;
  std::vector<const char*> values_;
  opreg_device_props c_{};
};

// Implemented by the loader: the C view of a plugin backend's device props (nullptr for any
// other backend, whose props are then converted per call).
const opreg_device_props* plugin_device_props(const Backend& backend, int index);

// The erased variant for `desc` (already checked: version, size, names), or an opreg::Error if
// its op has no C argument struct. `plugin` is the plugin's path, for messages.
ErasedVariant c_variant(const Registry& registry, const opreg_variant_desc& desc, const std::string& plugin);

// The ops a plugin can implement, for messages.
std::vector<std::string> c_ops();

// opreg status <-> ErrorKind.
ErrorKind error_kind(std::int32_t status);
std::int32_t status_of(ErrorKind kind);

}  // namespace opreg::detail
