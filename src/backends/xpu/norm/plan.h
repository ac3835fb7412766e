// The xpu norm family's variants (layer_norm and group_norm, list.cpp): the plan supports() makes
// once per problem (plan.cpp) and the run that launches it (launch.cpp; kernels in kernels.cl,
// the CPU-shaped ones in rows.cl). The ops' sets as src/ops/families.h describes them (layer_norm:
// a row is a set of H channels of spread 1; group_norm: an (n, group) is a set of C / G channels
// of spread S). Parameter gradients always come from partials summed in a fixed order.
#pragma once

#include <cstdint>

#include "backends/xpu/plan.h"

namespace opreg::xpu::norm {

using family::NormBwd;
using family::NormFwd;

//   rows   OpenCL CPU devices only: a work-item per set, eight elements a step; the backward
//          fuses dx with per-group dweight/dbias slots
//   split  few large sets: each set cut into parts, a work-group per part; per-part statistics
//          merged per set in part order (backward: c1 and c2 the same way, with per-part
//          dweight/dbias partials)
//   set    teams of work-items per set (several short sets per work-group), two-pass
//          statistics; backward: dweight and dbias first, by a column kernel's per-chunk partials
enum class Layout : std::uint8_t { rows, split, set };

// rows, layer_norm backward: rows summed in f32 between two updates of a slot entry, and the
// columns of a tile, whose block sums and slot entries stay in L1 while the block's rows pass
// (rows.cl's layer_block).
inline constexpr std::uint64_t kRowBlock = 16;
inline constexpr std::uint64_t kTile = 512;

// The parameter gradients by the column kernel (set, and split where its own slots would not fit
// the workspace budget): slots == 0 where there are none.
struct Columns {
  std::uint64_t tiles = 0;
  std::uint64_t slots = 0;
  std::uint64_t per_chunk = 0;  // batch items a slot sums
  std::uint64_t groups = 0;
  std::uint64_t bytes = 0;  // scratch: dweight's slots, then dbias's
};

struct Plan {
  Layout layout = Layout::set;  // set by supports(), kept by a re-plan
  bool too_large = false;       // a set or the parameters past the kernels' 32-bit indices
  bool has_weight = false;
  bool has_bias = false;  // forward
  bool want_w = false;    // backward: dweight, dbias
  bool want_b = false;
  bool fused = false;            // backward rows and split: the main kernel writes parameter-gradient slots
  std::uint64_t group = 0;       // L the plan was made for
  std::uint64_t team = 0;        // rows and set: work-items per set
  std::uint64_t groups = 0;      // work-groups of the main kernel (split: phases 0 and 2)
  std::uint64_t set_groups = 0;  // split: phase 1, a work-item per set
  std::uint64_t parts = 1;       // split: parts per set, and elements per part
  std::uint64_t span = 0;
  std::uint64_t slots = 0;          // fused: the slots the reduction sums
  std::uint64_t scratch_bytes = 0;  // rows and split: statistics, slots, coefficients
  std::uint64_t pw_offset = 0;      // in that scratch: dweight's slots, dbias's, rows' coefficients
  std::uint64_t pb_offset = 0;
  std::uint64_t coef_offset = 0;
  Columns columns;
  std::uint64_t reduce_cols = 0;
  std::uint64_t reduce_groups = 0;
  const char* kernel = nullptr;  // kernel_name(): static storage
  const char* columns_kernel = nullptr;
  const char* reduce_kernel = nullptr;
};

// The sizing of a plan whose layout is set, on `g` (also a run's re-plan).
void make_plan(const NormFwd& d, const Geometry& g, Plan& plan);
void make_plan(const NormBwd& d, const Geometry& g, Plan& plan);

// supports(): the plan, and the layout's rule on the device.
template <class Desc>
Verdict plan_norm(const Desc& d, const DeviceInfo& device, Layout layout, Plan& plan);

template <Layout L, class Desc>
Verdict supports(const Desc& d, const DeviceInfo& device, Plan& plan) {
  return plan_norm(d, device, L, plan);
}
// set takes every problem.
template <class Desc>
void set_planner(const Desc& d, const DeviceInfo& device, Plan& plan) {
  plan_norm(d, device, Layout::set, plan);
}

void fwd_run(const NormFwd& d, const Plan& plan, const KernelContext& ctx);
void bwd_run(const NormBwd& d, const Plan& plan, const KernelContext& ctx);

}  // namespace opreg::xpu::norm
