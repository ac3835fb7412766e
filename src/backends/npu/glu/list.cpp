// The npu's geglu and swiglu lists. flat first: it takes every shape, with tiles of whole
// 512-byte lines filling UB and every core busy; sub_block next, the seeds' row-chunked design,
// kept so the counters can compare the two; gpu_port last and never chosen (supports() refuses it
// with what it would do): forced, it runs the GPU kernel's launch and fails as the device does
// where that launch cannot run.
#include "backends/npu/glu/plan.h"
#include "backends/npu/lists.h"

namespace opreg::npu::glu {
namespace {

std::vector<Tunable> tunables(Impl impl) {
  switch (impl) {
    case Impl::flat:
      return {{"partition", "grid_stride"}, {"tile", "whole 512 B lines, planner"}, {"depth", "auto"}};
    case Impl::sub_block:
      return {{"partition", "contiguous"}, {"mode", "split_row"}, {"depth", "auto"}};
    case Impl::gpu_port:
      return {{"grid", "rows"}, {"BLOCK_SIZE", "next_pow2(hidden)"}, {"multibuffer", "on"}};
  }
  return {};
}

// One direction's list: the impls I in priority order; geglu and swiglu share the descriptor, the
// gate a template argument of supports and run.
template <Act A, class Args, auto Run, Impl... I>
void register_impls(Registry& r, const Op<Args>& op) {
  using D = family::Descriptor<Args>;
  register_list(r, op, "npu", {family_entry<Args, &supports<A, I, D>, Run>(std::string(to_string(I)), tunables(I))...});
}

template <Act A>
void register_ops(Registry& r, const Op<GluFwdArgs>& fwd, const Op<GluBwdArgs>& bwd) {
  register_impls<A, GluFwdArgs, &run_fwd<A>, Impl::flat, Impl::sub_block, Impl::gpu_port>(r, fwd);
  register_impls<A, GluBwdArgs, &run_bwd<A>, Impl::flat, Impl::sub_block, Impl::gpu_port>(r, bwd);
}

}  // namespace
}  // namespace opreg::npu::glu

void opreg::npu::register_glu(Registry& r) {
  glu::register_ops<glu::Act::gelu>(r, geglu_fwd_op(), geglu_bwd_op());
  glu::register_ops<glu::Act::silu>(r, swiglu_fwd_op(), swiglu_bwd_op());
}
