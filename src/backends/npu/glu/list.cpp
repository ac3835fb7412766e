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

// geglu and swiglu: one descriptor, the gate a template argument of supports and run.
template <Act A>
void register_ops(Registry& r, const Op<GluFwdArgs>& fwd, const Op<GluBwdArgs>& bwd) {
  using F = family::GluFwd;
  using B = family::GluBwd;
  register_list(r, fwd, "npu",
                {family_entry<GluFwdArgs, &supports<A, Impl::flat, F>, &run_fwd<A>>("flat", tunables(Impl::flat)),
                 family_entry<GluFwdArgs, &supports<A, Impl::sub_block, F>, &run_fwd<A>>("sub_block",
                                                                                        tunables(Impl::sub_block)),
                 family_entry<GluFwdArgs, &supports<A, Impl::gpu_port, F>, &run_fwd<A>>("gpu_port",
                                                                                       tunables(Impl::gpu_port))});
  register_list(r, bwd, "npu",
                {family_entry<GluBwdArgs, &supports<A, Impl::flat, B>, &run_bwd<A>>("flat", tunables(Impl::flat)),
                 family_entry<GluBwdArgs, &supports<A, Impl::sub_block, B>, &run_bwd<A>>("sub_block",
                                                                                        tunables(Impl::sub_block)),
                 family_entry<GluBwdArgs, &supports<A, Impl::gpu_port, B>, &run_bwd<A>>("gpu_port",
                                                                                       tunables(Impl::gpu_port))});
}

}  // namespace
}  // namespace opreg::npu::glu

void opreg::npu::register_glu(Registry& r) {
  glu::register_ops<glu::Act::gelu>(r, geglu_fwd_op(), geglu_bwd_op());
  glu::register_ops<glu::Act::silu>(r, swiglu_fwd_op(), swiglu_bwd_op());
}
