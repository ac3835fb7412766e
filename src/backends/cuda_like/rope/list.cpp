// The cuda rope lists: one variant per direction (rope/plan.h), the backward the same kernel with
// sin negated.
#include <string>
#include <vector>

#include "backends/cuda_like/rope/plan.h"
#include "backends/family_entry.h"

namespace opreg::cuda_like {

void register_rope(Registry& r) {
  const std::vector<Tunable> tunables{{"threads", std::to_string(kRopeThreads) + ", a group of pairs each"},
                                      {"access_bytes", "16 or 1 element"}};
  register_list(r, rope_fwd_op(), "cuda", {family_entry<RopeFwdArgs, &rope_plan, &rope_run>("heads", tunables)});
  register_list(r, rope_bwd_op(), "cuda", {family_entry<RopeBwdArgs, &rope_plan, &rope_run>("heads", tunables)});
}

}  // namespace opreg::cuda_like
