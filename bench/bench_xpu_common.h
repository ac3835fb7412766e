// What the xpu benchmarks share: the device they time.
#pragma once

#include <cstdint>
#include <string>

#include "opreg/registry.h"

namespace opreg::bench {

// The first OpenCL CPU device of the xpu backend (emulated), and its label when asked.
inline bool xpu_cpu_device(Device* out, std::string* label = nullptr) {
  for (const auto& b : default_registry().backends()) {
    if (b.name != "xpu") continue;
    for (std::size_t i = 0; i < b.devices.size(); ++i) {
      if (b.devices[i].emulated) {
        *out = Device{b.id, static_cast<std::int16_t>(i)};
        if (label != nullptr) *label = default_registry().device_label(*out);
        return true;
      }
    }
  }
  return false;
}

}  // namespace opreg::bench
