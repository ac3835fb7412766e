// Memory admission: a request larger than what the device can give is refused with an error
// naming both numbers, before anything is allocated (instead of the OOM killer, minutes later).
#pragma once

#include <cstdint>
#include <string_view>

#include "opreg/device.h"

namespace opreg {

// Requests below this are never refused here (they cannot matter, and asking the device what
// is available costs a system call).
inline constexpr std::uint64_t kAdmissionThreshold = std::uint64_t{64} << 20;

// Throws opreg::Error (device) when `bytes` exceed what `backend`'s device `index` has available
// (Backend::memory_available, or `capacity` = its memory_bytes where that is unknown; both bound
// the answer when known). `what` names the request ("a bf16 tensor of [4096x4096]"), `device` the
// device ("cuda:0").
void admit(Backend& backend, int index, std::uint64_t capacity, std::uint64_t bytes, std::string_view device,
           std::string_view what);

}  // namespace opreg
