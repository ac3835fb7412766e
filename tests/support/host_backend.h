// A configurable backend on host memory for tests: any name, priority, availability,
// emulated flag, device count and fallback policy.
#pragma once

#include <string>
#include <utility>

#include "opreg/device.h"

namespace opreg::testing {

struct HostBackendSpec {
  std::string name{};
  int priority = 100;
  bool available = true;
  int device_count = 1;
  bool emulated = false;
  FallbackPolicy fallback = FallbackPolicy::error;
  std::string reason = "test backend";
};

class HostBackend : public HostMemoryBackend {
 public:
  explicit HostBackend(HostBackendSpec spec) : spec_(std::move(spec)) {}
  std::string name() const override { return spec_.name; }
  int inference_priority() const override { return spec_.priority; }
  FallbackPolicy default_fallback() const override { return spec_.fallback; }
  Availability probe() override { return {spec_.available, spec_.device_count, spec_.reason}; }
  DeviceProps properties(int index) const override {
    DeviceProps props;
    props.name = spec_.name + " test device " + std::to_string(index);
    props.compute_units = 4;
    props.memory_bytes = 1ULL << 30;
    props.emulated = spec_.emulated;
    props.host_memory = true;
    props.extra = {{"index", std::to_string(index)}};
    return props;
  }

 private:
  HostBackendSpec spec_;
};

}  // namespace opreg::testing
