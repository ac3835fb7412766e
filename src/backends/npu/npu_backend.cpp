// The npu backend: Ascend devices as modelled by the host emulator. Global memory (GM) is host
// memory; the profile gives the numbers the kernels tile for (vector cores, Unified Buffer).
// Every device here is emulated and says so: inference never picks it, OPREG_DEVICE=npu does.
#include <charconv>
#include <cstdlib>
#include <string>

#include "backends/builtin.h"
#include "opreg/registry.h"
#include "registry/fail.h"

namespace opreg {
namespace {

struct NpuProfile {
  const char* name;
  int vector_cores;
  std::uint64_t ub_bytes;
  std::uint64_t hbm_bytes;
};

// 910B4: 20 AI cores of 1 cube + 2 vector units each, 192 KiB Unified Buffer per vector core.
constexpr NpuProfile kProfiles[] = {
    {"910B4", 40, 192 * 1024, 32ULL << 30},
};

class NpuBackend final : public HostMemoryBackend {
 public:
  std::string name() const override { return "npu"; }
  int inference_priority() const override { return 300; }
  FallbackPolicy default_fallback() const override { return FallbackPolicy::warn; }
  std::vector<std::string> env_vars() const override { return {"OPREG_NPU_PROFILE", "OPREG_NPU_UB_BYTES"}; }

  Availability probe() override {
    profile_ = &kProfiles[0];
    if (const char* p = std::getenv("OPREG_NPU_PROFILE"); p != nullptr && *p != '\0') {
      profile_ = nullptr;
      std::string accepted;
      for (const auto& candidate : kProfiles) {
        if (std::string_view(p) == candidate.name) profile_ = &candidate;
        accepted += accepted.empty() ? candidate.name : std::string(", ") + candidate.name;
      }
      if (profile_ == nullptr) {
        fail(ErrorKind::invalid_argument, "OPREG_NPU_PROFILE='{}': unknown Ascend profile; accepted: {}", p, accepted);
      }
    }
    ub_bytes_ = profile_->ub_bytes;
    if (const char* u = std::getenv("OPREG_NPU_UB_BYTES"); u != nullptr && *u != '\0') {
      std::string_view text(u);
      std::uint64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || v < 1024 || v > (1U << 20) || v % 32 != 0) {
        fail(ErrorKind::invalid_argument, "OPREG_NPU_UB_BYTES='{}': expected a byte count from 1024 to 1048576, a "
             "multiple of 32 (GM<->UB copies move 32-byte blocks)", text);
      }
      ub_bytes_ = v;
    }
    return {true, 1, fmt::format("host emulator of Ascend {}", profile_->name)};
  }

  DeviceProps properties(int) const override {
    DeviceProps props;
    props.name = fmt::format("Ascend {} (emulated)", profile_->name);
    props.memory_bytes = profile_->hbm_bytes;
    props.compute_units = profile_->vector_cores;
    props.emulated = true;
    props.extra = {{"profile", profile_->name},
                   {"vector_cores", std::to_string(profile_->vector_cores)},
                   {"ub_bytes", std::to_string(ub_bytes_)},
                   {"max_block_dim", "65535"}};
    return props;
  }

 private:
  const NpuProfile* profile_ = &kProfiles[0];
  std::uint64_t ub_bytes_ = 0;
};

}  // namespace

void register_npu(Registry& registry) { registry.add_backend(std::make_shared<NpuBackend>()).release(); }

}  // namespace opreg
