// The npu's rope lists, forward and backward (one kernel: the backward negates sin): rows first,
// whole heads with several positions' angles a group, then chunked, heads in BLOCK_SIZE_SUB
// chunks of pairs for a D that does not fit whole (rope/plan.h).
#include "backends/npu/lists.h"
#include "backends/npu/rope/plan.h"

namespace opreg::npu::rope {
namespace {

std::vector<Tunable> tunables(Impl impl) {
  if (impl == Impl::rows) return tiled_tunables({{"group", "positions a table tile, planner"}, {"heads", "a tile, planner"}});
  return tiled_tunables({{"mode", "split_row"}, {"chunk", "BLOCK_SIZE_SUB pairs, planner"}});
}

template <class Args, Impl... I>
void register_impls(Registry& r, const Op<Args>& op) {
  register_list(r, op, "npu", {family_entry<Args, &supports<I>, &run>(std::string(to_string(I)), tunables(I))...});
}

}  // namespace
}  // namespace opreg::npu::rope

void opreg::npu::register_rope(Registry& r) {
  using rope::Impl;
  rope::register_impls<RopeFwdArgs, Impl::rows, Impl::chunked>(r, rope_fwd_op());
  rope::register_impls<RopeBwdArgs, Impl::rows, Impl::chunked>(r, rope_bwd_op());
}
