// The xpu layer_norm and group_norm lists (the variants: plan.h), one family: the ops differ only
// in their sets. Priority order: rows (OpenCL CPU devices only), split (on a GPU, few large sets),
// set (every problem).
#include <string>
#include <type_traits>
#include <vector>

#include "backends/family_entry.h"
#include "backends/xpu/norm/plan.h"
#include "backends/xpu/xpu_backend.h"

namespace opreg::xpu {
namespace {

using namespace norm;

std::vector<Tunable> tunables(Layout layout, bool backward) {
  if (layout == Layout::rows) return {{"work_group", "device work_group_size"}, {"max_groups", "compute_units*4"}};
  if (layout == Layout::split) {
    return {{"work_group", "device work_group_size"},
            {"max_groups", "compute_units*4"},
            {"parts", "min(ceil(max_groups/sets), size/(8*work_group))"}};
  }
  std::vector<Tunable> out{
      {"work_group", "device work_group_size"}, {"elements_per_item", "4"}, {"max_groups", "compute_units*4"}};
  if (backward) out.push_back({"min_elements_per_partial", "8"});
  return out;
}

template <class Args, auto Run>
void register_direction(Registry& r, const Op<Args>& op) {
  using D = family::Descriptor<Args>;
  constexpr bool kBwd = std::is_same_v<D, NormBwd>;
  register_list(r, op, "xpu",
                {family_entry<Args, &supports<Layout::rows, D>, Run>("rows", tunables(Layout::rows, kBwd)),
                 family_entry<Args, &supports<Layout::split, D>, Run>("split", tunables(Layout::split, kBwd)),
                 family_entry<Args, &set_planner<D>, Run>("set", tunables(Layout::set, kBwd))});
}

}  // namespace

void register_norm(Registry& r) {
  register_direction<LayerNormFwdArgs, &fwd_run>(r, layer_norm_fwd_op());
  register_direction<LayerNormBwdArgs, &bwd_run>(r, layer_norm_bwd_op());
  register_direction<GroupNormFwdArgs, &fwd_run>(r, group_norm_fwd_op());
  register_direction<GroupNormBwdArgs, &bwd_run>(r, group_norm_bwd_op());
}

}  // namespace opreg::xpu
