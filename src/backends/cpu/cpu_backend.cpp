// The cpu backend: host memory, one device, the fallback target of every other backend.
#include <unistd.h>

#include <string>

#include "backends/builtin.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/list.h"
#include "backends/cpu/parallel.h"
#include "opreg/registry.h"
#include "ops/reference/reference.h"

namespace opreg {
namespace cpu {
// Each family folder's lists (<family>/list.cpp), registered below.
#define OPREG_FAMILY(family) void register_##family(Registry& registry, Isa level);
#include "families/cpu.inc"  // the family folders (cmake/OpregFamilies.cmake)
#undef OPREG_FAMILY
}  // namespace cpu
namespace {

class CpuBackend final : public HostMemoryBackend {
 public:
  std::string name() const override { return std::string(kCpuBackendName); }
  int inference_priority() const override { return 0; }
  FallbackPolicy default_fallback() const override { return FallbackPolicy::error; }
  std::vector<std::string> env_vars() const override { return {"OPREG_CPU_ISA"}; }
  // OPREG_CPU_ISA is read here, once: a bad value fails the registry's set-up with its message.
  Availability probe() override {
    isa_ = cpu::effective_isa();
    facts_ = {isa_, cpu::host_isa()};
    return {true, 1, "the host"};
  }
  int dlpack_device_type() const override { return 1; }  // kDLCPU
  DeviceProps properties(int) const override {
    DeviceProps props;
    props.name = "host CPU";
    props.host_memory = true;
    props.compute_units = cpu::machine_threads();
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_bytes = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_bytes > 0) props.memory_bytes = static_cast<std::uint64_t>(pages) * page_bytes;
    props.extra = {{"isa", std::string(cpu::isa_name(isa_))},
                   {"host_isa", std::string(cpu::isa_name(cpu::host_isa()))}};
    props.facts = &facts_;
    return props;
  }
  cpu::Isa isa() const { return isa_; }

 private:
  cpu::Isa isa_ = cpu::Isa::generic;
  cpu::Facts facts_;
};

}  // namespace

void register_cpu(Registry& registry) {
  auto backend = std::make_shared<CpuBackend>();
  registry.add_backend(backend).release();
  reference::register_variants(registry);  // the lowest-priority cpu.<op>.<dir>.ref variants
  // The op families' lists (each family folder's list.cpp); the reference variants come last.
#define OPREG_FAMILY(family) cpu::register_##family(registry, backend->isa());
#include "families/cpu.inc"
#undef OPREG_FAMILY
}

}  // namespace opreg
