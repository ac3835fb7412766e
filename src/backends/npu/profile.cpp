#include "backends/npu/profile.h"

#include <charconv>
#include <string_view>

#include "registry/fail.h"
#include "registry/quote.h"

namespace opreg::npu {
namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kGiB = 1ULL << 30;

// Sources: [S1] CANN platform ini files (hicann/runtime platform_config); [C7] ops-nn's
// cross-platform migration guide (Atlas A2 = 910B2; Ascend 950PR); [C8] the 910B2C ini's
// [AICoreMemoryRates]; [T1] triton-ascend's driver (vector cores = 2 x AI cores, UB per SoC);
// [P5] a third-party copy of the Ascend910_93 ini. Full references: docs/backends/npu.md.
constexpr Profile kProfiles[] = {
    {"Ascend910B4", 20, 40, 196608, 96 * kMiB, 32 * kGiB, 1.5,
     // No primary source gives the 910B4's HBM bandwidth: 20 AI cores x 32 B/cycle (the ini's
     // ddr_read_rate) x 1.5 GHz = 960 GB/s is a derived, marked parameter.
     960.0, false, 32, 110, 64, 86, 16, 0.7, true, false,
     "cores, UB, L2, HBM size, 1.5 GHz: [S1] Ascend910B4.ini; DMA rates: [C8] (910B ini); "
     "HBM 960 GB/s: derived from [C8] x 20 x 1.5 GHz, unverified; UB banks: [S30]; GM alignment: [S31]; "
     "instruction costs: [S33]"},
    {"Ascend910B2", 24, 48, 196608, 192 * kMiB, 64 * kGiB, 1.8, 1600.0, true, 32, 110, 64, 86, 16, 0.7, true, false,
     "24/48 cores, 1.8 GHz, 64 GB, 1.6 TB/s: [C7] (vendor); UB, L2, DMA rates: [C8] Ascend910B2C.ini; "
     "UB banks: [S30]; GM alignment: [S31]; instruction costs: [S33]"},
    {"Ascend910_93", 24, 48, 196608, 192 * kMiB, 64 * kGiB, 1.8, 1600.0, false, 32, 110, 64, 86, 16, 1.0, true, false,
     "24/48 cores, UB 196608: [P5] (secondary), [T1]; L2, HBM, clock, DMA rates: assumed equal to 910B2; "
     "UB banks: [S30] (A3); GM alignment: [S31] is A2 only; instruction costs: [S33] (A2/A3)"},
    {"Ascend950PR", 32, 64, 253952, 112 * kMiB, 128 * kGiB, 1.65, 1600.0, true, 32, 110, 64, 86, 0, 1.0, false, true,
     "32/64 cores, 1.65 GHz, 128 GB, 1.6 TB/s, UB 253952 B usable: [C7]; L2 112 MiB: [S1] "
     "Ascend950PR_957bx.ini (another 950 SKU); DMA rates: assumed equal to 910B; UB banks, GM alignment, "
     "instruction throughputs: no source; bf16 and int64 vector arithmetic: [S33] (A5)"},
};

const Profile* find_profile(std::string_view name) {
  for (const auto& p : kProfiles) {
    const std::string_view full = p.name;
    if (name == full || (full.starts_with("Ascend") && name == full.substr(6))) return &p;
  }
  return nullptr;
}

}  // namespace

std::span<const Profile> profiles() { return kProfiles; }
const Profile& default_profile() { return kProfiles[0]; }

const CostConstants& cost_constants() {
  static const CostConstants constants{};
  return constants;
}

DeviceModel select_device_model(const std::optional<std::string>& profile_name,
                                const std::optional<std::string>& ub_bytes) {
  DeviceModel model{&default_profile(), 0};
  if (profile_name) {
    model.profile = find_profile(*profile_name);
    if (model.profile == nullptr) {
      std::string accepted;
      for (const auto& p : kProfiles) accepted += fmt::format("{}{}", accepted.empty() ? "" : ", ", p.name);
      fail(ErrorKind::invalid_argument,
           "OPREG_NPU_PROFILE={}: not an Ascend model the npu emulator knows; accepted: {} (the 'Ascend' prefix "
           "may be left out)",
           quote(*profile_name), accepted);
    }
  }
  model.ub_bytes = model.profile->ub_bytes;
  if (ub_bytes) {
    const std::string& text = *ub_bytes;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < kMinUbBytes || v > kMaxUbBytes || v % 32 != 0) {
      fail(ErrorKind::invalid_argument,
           "OPREG_NPU_UB_BYTES={}: expected a byte count from {} to {} that is a multiple of 32 (the Unified "
           "Buffer is allocated in 32-byte blocks); unset, the profile's {} bytes apply",
           quote(text), kMinUbBytes, kMaxUbBytes, model.profile->ub_bytes);
    }
    model.ub_bytes = v;
  }
  return model;
}

}  // namespace opreg::npu
