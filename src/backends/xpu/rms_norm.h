// The xpu rms_norm variants (kernels in kernels/rms_norm.cl):
//   xpu.rms_norm.fwd.packed  several short rows per work-group (hidden <= 2 L)
//   xpu.rms_norm.fwd.row     one row per work-group at a time, groups striding over the rows
//   xpu.rms_norm.bwd.packed  as fwd.packed, dweight per team in private memory (fused)
//   xpu.rms_norm.bwd.row     as fwd.row, dweight fused while a row fits ceil(hidden / L) <= F
//   xpu.rms_norm.bwd.split   any hidden: dweight by a column-parallel kernel, then dx
// L (work-group size) and F (fused dweight columns per work-item) are device properties
// (work_group_size, fused_dw_columns). dweight is always per-slot partials from the backend's
// workspace, summed by a second kernel in a fixed order: no atomics, the same bits every run.
#pragma once

#include "opreg/ops.h"
#include "opreg/registry.h"

namespace opreg::xpu {

inline constexpr const char* kWorkGroupSizeKey = "work_group_size";
inline constexpr const char* kFusedColumnsKey = "fused_dw_columns";

void register_rms_norm(Registry& registry);

}  // namespace opreg::xpu
