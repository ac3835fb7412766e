// The npu's rms_norm lists: single_pass, then chunked (rows of any length), then gpu_port,
// forced-only. supports() plans on the device's model (plan.cpp) and says what it planned
// (OPREG_VERBOSE=2 prints it) or why it refuses; the kernel runs that plan. A forced variant runs
// the plan it was refused for and fails the way the device would (a row too long for
// single_pass: "ub overflow").
#include "backends/npu/lists.h"
#include "backends/npu/rms_norm/plan.h"

namespace opreg::npu::rms_norm {
namespace {

std::vector<Tunable> tunables(Impl impl, bool backward) {
  std::vector<Tunable> own;
  if (impl == Impl::chunked) own.push_back({"mode", "split_row"});
  if (backward) own.push_back({"dw", impl == Impl::atomic ? "atomic_add" : "workspace+SyncAll"});
  return tiled_tunables(own);
}
// Liger-Kernel's GPU kernels' launch (gpu_port.h; docs/backends/npu_gpu_port.md).
const std::vector<Tunable> kPortTunables{{"grid", "Liger's: a program per row (fwd), num_vectorcore (bwd)"},
                                         {"block_size", "next_power_of_2(n_cols), at most 65536"},
                                         {"multibuffer", "OPREG_NPU_TRITON_MULTIBUFFER (double)"}};

// One family, two ops: the same ordered lists for rms_norm and fused_add_rms_norm.
template <class Fwd, class Bwd>
void register_ops(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  using FwdDesc = family::Descriptor<Fwd>;
  using BwdDesc = family::Descriptor<Bwd>;
  register_list(r, fwd, "npu",
                {family_entry<Fwd, &supports<Impl::single_pass, FwdDesc, FwdPlan>, &run_fwd>(
                     "single_pass", tunables(Impl::single_pass, false)),
                 family_entry<Fwd, &supports<Impl::chunked, FwdDesc, FwdPlan>, &run_fwd>("chunked", tunables(Impl::chunked, false)),
                 family_entry<Fwd, &port_supports<FwdDesc>, &port_run<FwdDesc>>("gpu_port", kPortTunables)});
  register_list(r, bwd, "npu",
                {family_entry<Bwd, &supports<Impl::single_pass, BwdDesc, BwdPlan>, &run_bwd>(
                     "single_pass", tunables(Impl::single_pass, true)),
                 family_entry<Bwd, &supports<Impl::chunked, BwdDesc, BwdPlan>, &run_bwd>("chunked", tunables(Impl::chunked, true)),
                 family_entry<Bwd, &supports<Impl::atomic, BwdDesc, BwdPlan>, &run_bwd>("atomic", tunables(Impl::atomic, true)),
                 family_entry<Bwd, &port_supports<BwdDesc>, &port_run<BwdDesc>>("gpu_port", kPortTunables)});
}

}  // namespace
}  // namespace opreg::npu::rms_norm

void opreg::npu::register_rms_norm(Registry& r) {
  rms_norm::register_ops(r, rms_norm_fwd_op(), rms_norm_bwd_op());
  rms_norm::register_ops(r, fused_add_rms_norm_fwd_op(), fused_add_rms_norm_bwd_op());
}
