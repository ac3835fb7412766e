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

// Every family folder's lists, registered on `registry` for the npu backend registered there
// (register_npu's, or a test's of its own device model): register_<family> of each folder's
// list.cpp, in the folders' order.
#define OPREG_FAMILY(family) void register_##family(Registry& registry);
#include "families/npu.inc"  // the family folders (cmake/OpregFamilies.cmake)
#undef OPREG_FAMILY
void register_lists(Registry& registry);

}  // namespace opreg::npu
