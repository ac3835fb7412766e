// The cuda geglu and swiglu lists: one streaming variant per op direction (glu/plan.h).
#include <string>
#include <vector>

#include "backends/cuda_like/glu/plan.h"
#include "backends/family_entry.h"

namespace opreg::cuda_like {
namespace {

std::vector<Tunable> tunables() {
  return {{"threads", std::to_string(kGluThreads)}, {"blocks_per_sm", "8"}, {"access_bytes", "16 or 1 element"}};
}

template <class Fwd, class Bwd, GluAct Act>
void register_gate(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  register_list(r, fwd, "cuda", {family_entry<Fwd, &fwd_supports, &fwd_run<Act>>("stream", tunables())});
  register_list(r, bwd, "cuda", {family_entry<Bwd, &bwd_supports, &bwd_run<Act>>("stream", tunables())});
}

}  // namespace

void register_glu(Registry& r) {
  register_gate<GegluFwdArgs, GegluBwdArgs, GluAct::gelu_tanh>(r, geglu_fwd_op(), geglu_bwd_op());
  register_gate<SwigluFwdArgs, SwigluBwdArgs, GluAct::silu>(r, swiglu_fwd_op(), swiglu_bwd_op());
}

}  // namespace opreg::cuda_like
