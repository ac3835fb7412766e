// The xpu rms_norm and fused_add_rms_norm lists (the variants: plan.h). Priority order:
//   rows    OpenCL CPU devices only (a work-item per row)
//   packed  several short rows per work-group (hidden <= 2 L)
//   group   one row per work-group at a time; backward: while dweight fits, ceil(hidden / L) <= F
//   split   backward, any hidden: dweight by a column-parallel kernel, then dx
// The fused op has the same variants on the same kernels (`fused_op`: s stored and normalised,
// ds_out added to dx), xpu.fused_add_rms_norm.<dir>.<impl>.
#include <string>
#include <vector>

#include "backends/family_entry.h"
#include "backends/xpu/rms_norm/plan.h"
#include "backends/xpu/xpu_backend.h"

namespace opreg::xpu {
namespace {

using namespace rms_norm;

std::vector<Tunable> tunables(Layout layout) {
  std::vector<Tunable> out{{"work_group", "device work_group_size"}};
  if (layout == Layout::packed) out.push_back({"elements_per_item", "4"});
  out.push_back({"max_groups", "compute_units*4"});
  return out;
}

// The forward and backward lists of one op of the family (rms_norm or fused_add_rms_norm).
template <class Fwd, class Bwd, bool F>
void register_op(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  register_list(r, fwd, "xpu",
                {family_entry<Fwd, &fwd_supports<Layout::rows, F>, &fwd_run>("rows", tunables(Layout::rows)),
                 family_entry<Fwd, &fwd_supports<Layout::packed, F>, &fwd_run>("packed", tunables(Layout::packed)),
                 family_entry<Fwd, &fwd_planner<Layout::group, F>, &fwd_run>("group", tunables(Layout::group))});
  register_list(r, bwd, "xpu",
                {family_entry<Bwd, &bwd_supports<Layout::rows, F>, &bwd_run>("rows", tunables(Layout::rows)),
                 family_entry<Bwd, &bwd_supports<Layout::packed, F>, &bwd_run>("packed", tunables(Layout::packed)),
                 family_entry<Bwd, &bwd_supports<Layout::group, F>, &bwd_run>("group", tunables(Layout::group)),
                 family_entry<Bwd, &bwd_planner<Layout::split, F>, &bwd_run>("split", tunables(Layout::split))});
}

}  // namespace

void register_rms_norm(Registry& r) {
  register_op<RmsNormFwdArgs, RmsNormBwdArgs, false>(r, rms_norm_fwd_op(), rms_norm_bwd_op());
  register_op<FusedAddRmsNormFwdArgs, FusedAddRmsNormBwdArgs, true>(r, fused_add_rms_norm_fwd_op(),
                                                                    fused_add_rms_norm_bwd_op());
}

}  // namespace opreg::xpu
