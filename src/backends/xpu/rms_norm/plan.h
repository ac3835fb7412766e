// The xpu rms_norm family's variants (rms_norm and fused_add_rms_norm, list.cpp): the plan
// supports() makes once per problem (plan.cpp: which kernel, how many work-groups, how rows pack
// into them, where dweight's partials go) and the run that launches it (launch.cpp; kernels in
// kernels.cl). L (work-group size) and F (fused dweight columns per work-item) are the device's
// facts (DeviceInfo: work_group_size, fused_columns). dweight is always per-slot partials from the
// backend's workspace, summed by a second kernel in a fixed order: no atomics, the same bits every
// run.
#pragma once

#include <cstdint>

#include "backends/xpu/plan.h"

namespace opreg::xpu::rms_norm {

using family::RowNormBwd;
using family::RowNormFwd;

//   rows    OpenCL CPU devices only: a work-item per row (forward: eight columns a step;
//           backward: a block of rows per group, with dweight its first work-item walks them
//           into the group's partial slot)
//   packed  several short rows per work-group (hidden <= 2 L); backward: dweight per team in
//           private memory (fused)
//   group   one row per work-group at a time, groups striding over the rows; backward: dweight
//           fused while a row fits, ceil(hidden / L) <= F
//   split   backward, any hidden: dweight by a column-parallel kernel, then dx
enum class Layout : std::uint8_t { rows, packed, group, split };

// What a run must refuse (the device's message, made then): a plan that supports() refused and
// that was forced, or a problem past what the kernels index.
enum class Refusal : std::uint8_t { none, too_wide, fused_columns };

struct Plan {
  // What the variant is (set by supports(), kept by a re-plan).
  Layout layout = Layout::group;
  bool fused_op = false;  // fused_add_rms_norm: s stored (forward), ds_out added to dx (backward)
  // What the planning decided.
  Refusal refusal = Refusal::none;
  bool has_weight = false;
  bool dw_fused = false;    // backward: the main kernel writes dweight partials (then reduced)
  bool reduce = false;      // backward: dweight = the column sums of `slots` partial rows
  std::uint64_t group = 0;  // L the plan was made for
  std::uint64_t rows = 0;
  std::uint64_t hidden = 0;
  std::uint64_t team = 0;    // work-items per row
  std::uint64_t groups = 0;  // work-groups of the main kernel
  std::uint64_t slots = 0;
  std::uint64_t scratch_bytes = 0;
  std::uint64_t tiles = 0;           // split: column tiles of the dweight kernel
  std::uint64_t rows_per_chunk = 0;  // split
  std::uint64_t column_groups = 0;   // split: work-groups of the dweight kernel
  std::uint64_t reduce_cols = 0;
  std::uint64_t reduce_groups = 0;
  const char* kernel = nullptr;          // kernel_name(): static storage
  const char* columns_kernel = nullptr;  // split
  const char* reduce_kernel = nullptr;
};

// The sizing of a plan whose layout and fused_op are set, on `g` (also a run's re-plan).
void make_plan(const RowNormFwd& d, const Geometry& g, Plan& plan);
void make_plan(const RowNormBwd& d, const Geometry& g, Plan& plan);

// supports(): the plan, and the layout's rule on the device.
Verdict plan_fwd(const RowNormFwd& d, const DeviceInfo& device, Layout layout, bool fused_op, Plan& plan);
Verdict plan_bwd(const RowNormBwd& d, const DeviceInfo& device, Layout layout, bool fused_op, Plan& plan);

template <Layout L, bool FusedOp>
Verdict fwd_supports(const RowNormFwd& d, const DeviceInfo& device, Plan& plan) {
  return plan_fwd(d, device, L, FusedOp, plan);
}
template <Layout L, bool FusedOp>
Verdict bwd_supports(const RowNormBwd& d, const DeviceInfo& device, Plan& plan) {
  return plan_bwd(d, device, L, FusedOp, plan);
}
// The layouts that take every problem (forward group, backward split) plan without a rule.
template <Layout L, bool FusedOp>
void fwd_planner(const RowNormFwd& d, const DeviceInfo& device, Plan& plan) {
  plan_fwd(d, device, L, FusedOp, plan);
}
template <Layout L, bool FusedOp>
void bwd_planner(const RowNormBwd& d, const DeviceInfo& device, Plan& plan) {
  plan_bwd(d, device, L, FusedOp, plan);
}

void fwd_run(const RowNormFwd& d, const Plan& plan, const KernelContext& ctx);
void bwd_run(const RowNormBwd& d, const Plan& plan, const KernelContext& ctx);

}  // namespace opreg::xpu::rms_norm
