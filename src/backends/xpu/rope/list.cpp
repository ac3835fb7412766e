// The xpu rope lists, forward and backward (the variant: plan.h; one kernel, the backward
// negating sin).
#include <vector>

#include "backends/family_entry.h"
#include "backends/xpu/rope/plan.h"
#include "backends/xpu/xpu_backend.h"

namespace opreg::xpu {

void register_rope(Registry& r) {
  using namespace rope;
  const std::vector<Tunable> tunables{{"work_group", "device work_group_size"},
                                      {"team", "min(work_group,ceil_pow2(dim/2))"},
                                      {"max_groups", "compute_units*4"}};
  register_list(r, rope_fwd_op(), "xpu", {family_entry<RopeFwdArgs, &teams_planner, &teams_run>("teams", tunables)});
  register_list(r, rope_bwd_op(), "xpu", {family_entry<RopeBwdArgs, &teams_planner, &teams_run>("teams", tunables)});
}

}  // namespace opreg::xpu
