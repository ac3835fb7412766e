// What the npu's op-family lists (each family folder's list.cpp) need to register: family_entry,
// the backend's device facts (its DeviceModel: profile and Unified Buffer, DeviceProps::facts),
// and the tunables every tiled variant shows. Nothing of the emulator or the kernels.
#pragma once

#include <vector>

#include "backends/family_entry.h"
#include "backends/npu/profile.h"

namespace opreg {
class Registry;
}

namespace opreg::npu {

// The planner's tunables (contiguous row ranges, CANN's UB reserve, the depth it picks), then
// the variant's own.
std::vector<Tunable> tiled_tunables(std::vector<Tunable> own = {});

// The op families' lists, registered on `registry` for the npu backend registered there.
void register_rms_norm(Registry& registry);  // rms_norm and fused_add_rms_norm (rms_norm/)
void register_norm(Registry& registry);      // layer_norm and group_norm (norm/)
void register_glu(Registry& registry);       // geglu and swiglu (glu/)

}  // namespace opreg::npu
