// The npu's layer_norm and group_norm lists: single_pass, chunked (sets of any size), gpu_port.
// supports() plans on the device's model (plan.cpp) and says what it planned (OPREG_VERBOSE=2
// prints it) or why it refuses; the kernel runs that plan. A forced single_pass on a set too large
// for UB runs the plan it was refused for and fails as the device does ("ub overflow"). gpu_port
// is forced-only: supports() always refuses it with the GPU kernel's numbers, and forced it
// launches what the GPU-oriented Triton kernel launches on Ascend (one block per row or
// (N, group), the whole set in UB at BLOCK_SIZE = next power of two, tiles double-buffered),
// failing with the device's text where that cannot run.
#include "backends/npu/lists.h"
#include "backends/npu/norm/plan.h"

namespace opreg::npu::norm {
namespace {

std::vector<Tunable> tunables(Impl impl, bool backward) {
  if (impl == Impl::gpu_port) {
    return {{"grid", "one block per set"}, {"BLOCK_SIZE", "next_power_of_2(set)"}, {"multibuffer", "2"}};
  }
  std::vector<Tunable> own;
  if (impl == Impl::chunked) own.push_back({"mode", "pieces"});
  if (backward) own.push_back({"dw_db", "workspace+SyncAll"});
  return tiled_tunables(own);
}

// The same impls, in priority order, for both directions of both ops.
template <NormOp N, class Fwd, class Bwd, Impl... I>
void register_impls(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  register_list(r, fwd, "npu",
                {family_entry<Fwd, &supports<N, I, family::NormFwd>, &run_fwd<N>>(std::string(to_string(I)), tunables(I, false))...});
  register_list(r, bwd, "npu",
                {family_entry<Bwd, &supports<N, I, family::NormBwd>, &run_bwd<N>>(std::string(to_string(I)), tunables(I, true))...});
}

template <NormOp N, class Fwd, class Bwd>
void register_ops(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  register_impls<N, Fwd, Bwd, Impl::single_pass, Impl::chunked, Impl::gpu_port>(r, fwd, bwd);
}

}  // namespace
}  // namespace opreg::npu::norm

void opreg::npu::register_norm(Registry& r) {
  norm::register_ops<norm::NormOp::layer_norm>(r, layer_norm_fwd_op(), layer_norm_bwd_op());
  norm::register_ops<norm::NormOp::group_norm>(r, group_norm_fwd_op(), group_norm_bwd_op());
}
