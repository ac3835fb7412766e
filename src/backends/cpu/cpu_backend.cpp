// The cpu backend: host memory, one device, the fallback target of every other backend.
#include <unistd.h>

#include <thread>

#include "backends/builtin.h"
#include "ops/reference/reference.h"
#include "backends/cpu/rms_norm.h"
#include "opreg/registry.h"

namespace opreg {
namespace {

class CpuBackend final : public HostMemoryBackend {
 public:
  std::string name() const override { return std::string(kCpuBackendName); }
  int inference_priority() const override { return 0; }
  FallbackPolicy default_fallback() const override { return FallbackPolicy::error; }
  Availability probe() override { return {true, 1, "the host"}; }
  int dlpack_device_type() const override { return 1; }  // kDLCPU
  DeviceProps properties(int) const override {
    DeviceProps props;
    props.name = "host CPU";
    props.compute_units = static_cast<int>(std::thread::hardware_concurrency());
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_bytes = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_bytes > 0) props.memory_bytes = static_cast<std::uint64_t>(pages) * page_bytes;
    return props;
  }
};

}  // namespace

void register_cpu(Registry& registry) {
  registry.add_backend(std::make_shared<CpuBackend>()).release();
  reference::register_variants(registry);  // the lowest-priority cpu.<op>.<dir>.ref variants
  cpu::register_rms_norm(registry);
}

}  // namespace opreg
