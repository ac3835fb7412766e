// The xpu gated-unit lists: geglu and swiglu, forward and backward (the variants: plan.h).
// Order = priority: chunk (OpenCL CPU devices only) first, stream for every device.
#include <string>
#include <vector>

#include "backends/family_entry.h"
#include "backends/xpu/glu/plan.h"
#include "backends/xpu/xpu_backend.h"

namespace opreg::xpu {
namespace {

using namespace glu;

std::vector<Tunable> tunables(Shape shape) {
  return {{"work_group", "device work_group_size"},
          {"elements_per_item", shape == Shape::chunk ? "256" : "16"},
          {"max_groups", "compute_units*4"}};
}

template <class Fwd, class Bwd, Act A>
void register_op(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  register_list(r, fwd, "xpu",
                {family_entry<Fwd, &chunk_supports<A, GluFwd>, &fwd_run>("chunk", tunables(Shape::chunk)),
                 family_entry<Fwd, &stream_planner<A, GluFwd>, &fwd_run>("stream", tunables(Shape::stream))});
  register_list(r, bwd, "xpu",
                {family_entry<Bwd, &chunk_supports<A, GluBwd>, &bwd_run>("chunk", tunables(Shape::chunk)),
                 family_entry<Bwd, &stream_planner<A, GluBwd>, &bwd_run>("stream", tunables(Shape::stream))});
}

}  // namespace

void register_glu(Registry& r) {
  register_op<GegluFwdArgs, GegluBwdArgs, Act::gelu>(r, geglu_fwd_op(), geglu_bwd_op());
  register_op<SwigluFwdArgs, SwigluBwdArgs, Act::silu>(r, swiglu_fwd_op(), swiglu_bwd_op());
}

}  // namespace opreg::xpu
