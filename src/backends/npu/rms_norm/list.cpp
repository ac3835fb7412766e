// The npu's rms_norm lists. supports() plans on the device's model (the backend's facts: its
// profile and Unified Buffer) and says what it planned (OPREG_VERBOSE=2 prints it) or why it
// refuses; the kernel runs that plan. A forced variant runs the plan it was refused for and fails
// the way the device would (a row too long for single_pass: "ub overflow").
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/npu/gpu_port.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/rms_norm/kernels.h"
#include "opreg/variants.h"
#include "registry/fail.h"

namespace opreg::npu {
namespace {

using rms::Impl;

// Whether Args is a backward's (rms_norm's or fused_add_rms_norm's): one family, two directions.
template <class Args>
constexpr bool kBackward = std::is_same_v<Args, RmsNormBwdArgs> || std::is_same_v<Args, FusedAddRmsNormBwdArgs>;

Verdict verdict(bool fits, std::string why, Impl impl, const rms::Problem& s, const char* direction) {
  if (fits) return {true, std::move(why)};
  if (impl == Impl::single_pass) {
    why += fmt::format("; npu.{}.{}.chunked takes rows of any length", s.fused ? "fused_add_rms_norm" : "rms_norm",
                       direction);
  }
  return Verdict::reject(std::move(why));
}

// Args: rms_norm's or fused_add_rms_norm's (one family descriptor, one set of kernels).
template <Impl I, class Args>
Verdict fwd_supports(const Args& a, const DeviceModel& device, rms::FwdPlan& plan) {
  std::string why;
  const rms::Problem s = rms::problem_of(family::describe(a));
  plan = rms::plan_fwd(I, s, device, &why);
  return verdict(plan.tiles.fits, std::move(why), I, s, "fwd");
}
template <Impl I, class Args>
Verdict bwd_supports(const Args& a, const DeviceModel& device, rms::BwdPlan& plan) {
  std::string why;
  const rms::Problem s = rms::problem_of(family::describe(a));
  plan = rms::plan_bwd(I, s, device, &why);
  return verdict(plan.tiles.fits, std::move(why), I, s, "bwd");
}

template <class Args>
void fwd_run(const Args& a, const rms::FwdPlan& plan, const KernelContext& ctx) {
  rms::run_fwd(a, plan, emulator_in(ctx));
}
template <class Args>
void bwd_run(const Args& a, const rms::BwdPlan& plan, const KernelContext& ctx) {
  rms::run_bwd(a, plan, emulator_in(ctx), ctx);
}

// ---- gpu_port: the GPU kernel's shape on Ascend (backends/npu/gpu_port.h), forced-only. Its
// tiles: the row of every tensor the Triton program loads or stores (fwd: x, residual, weight, y,
// s; bwd: dy, ds_out, x, weight, dx and the float dW row it accumulates).
template <class Args>
gpu_port::Port port_of(const Args& a, const DeviceModel& device) {
  const rms::Problem s = rms::problem_of(family::describe(a));
  const auto xb = static_cast<std::uint32_t>(element_size(s.x) * 8);
  const auto wb = static_cast<std::uint32_t>(s.has_weight ? element_size(s.w) * 8 : 0);
  const std::uint32_t fb = s.fused ? xb : 0;
  const auto ub = static_cast<std::int64_t>(device.ub_bytes);
  if constexpr (kBackward<Args>) {
    return gpu_port::plan(s.rows, s.cols,
                          {{"dy", xb}, {"ds_out", fb}, {"x", xb}, {"weight", wb}, {"dx", xb}, {"dw_row", wb ? 32U : 0U}},
                          ub);
  } else {
    return gpu_port::plan(s.rows, s.cols, {{"x", xb}, {"residual", fb}, {"weight", wb}, {"y", xb}, {"s", fb}}, ub);
  }
}

template <class Args>
std::string op_dir_of(const Args& a) {
  const rms::Problem s = rms::problem_of(family::describe(a));
  return fmt::format("{}.{}", s.fused ? "fused_add_rms_norm" : "rms_norm", kBackward<Args> ? "bwd" : "fwd");
}

template <class Args>
Verdict port_supports(const Args& a, const DeviceModel& device, gpu_port::Port& port) {
  port = port_of(a, device);
  return gpu_port::refuse(port, op_dir_of(a));
}

// Forced: the port's launch (which fails where the device does), then, where the device took it,
// the result from the npu's own kernel (single_pass, or chunked for a row UB cannot hold).
template <class Args>
void port_run(const Args& a, const gpu_port::Port& port, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  const std::string op_dir = op_dir_of(a);
  std::string kernel = op_dir + "_gpu_port";
  std::replace(kernel.begin(), kernel.end(), '.', '_');
  gpu_port::launch(emulator, kernel, port, {});
  const rms::Problem s = rms::problem_of(family::describe(a));
  if constexpr (kBackward<Args>) {
    rms::BwdPlan plan = rms::plan_bwd(Impl::single_pass, s, emulator.model());
    if (!plan.tiles.fits) plan = rms::plan_bwd(Impl::chunked, s, emulator.model());
    rms::run_bwd(a, plan, emulator, ctx);
  } else {
    rms::FwdPlan plan = rms::plan_fwd(Impl::single_pass, s, emulator.model());
    if (!plan.tiles.fits) plan = rms::plan_fwd(Impl::chunked, s, emulator.model());
    rms::run_fwd(a, plan, emulator);
  }
}

std::vector<Tunable> tunables(Impl impl, bool backward) {
  std::vector<Tunable> t{{"partition", "contiguous"}, {"ub_reserve", std::to_string(kUbReserve)}, {"depth", "auto"}};
  if (impl == Impl::chunked) t.push_back({"mode", "split_row"});
  if (backward) t.push_back({"dw", impl == Impl::atomic ? "atomic_add" : "workspace+SyncAll"});
  return t;
}

}  // namespace

namespace {

std::vector<Tunable> port_tunables() {
  return {{"grid", "one program per row"}, {"block_size", "next power of two of the row"}, {"multibuffer", "on"}};
}

// One family, two ops: the same ordered lists for rms_norm and fused_add_rms_norm.
template <class FwdArgs, class BwdArgs>
void register_row_norm(Registry& r, const Op<FwdArgs>& fwd, const Op<BwdArgs>& bwd) {
  register_list(r, fwd, "npu",
                {{"single_pass", &fwd_supports<Impl::single_pass, FwdArgs>, &fwd_run<FwdArgs>,
                  tunables(Impl::single_pass, false)},
                 {"chunked", &fwd_supports<Impl::chunked, FwdArgs>, &fwd_run<FwdArgs>, tunables(Impl::chunked, false)},
                 {"gpu_port", &port_supports<FwdArgs>, &port_run<FwdArgs>, port_tunables()}});
  register_list(r, bwd, "npu",
                {{"single_pass", &bwd_supports<Impl::single_pass, BwdArgs>, &bwd_run<BwdArgs>,
                  tunables(Impl::single_pass, true)},
                 {"chunked", &bwd_supports<Impl::chunked, BwdArgs>, &bwd_run<BwdArgs>, tunables(Impl::chunked, true)},
                 {"atomic", &bwd_supports<Impl::atomic, BwdArgs>, &bwd_run<BwdArgs>, tunables(Impl::atomic, true)},
                 {"gpu_port", &port_supports<BwdArgs>, &port_run<BwdArgs>, port_tunables()}});
}

}  // namespace

void register_rms_norm(Registry& r) {
  register_row_norm(r, rms_norm_fwd_op(), rms_norm_bwd_op());
  register_row_norm(r, fused_add_rms_norm_fwd_op(), fused_add_rms_norm_bwd_op());
}

namespace rms {


}  // namespace rms
}  // namespace opreg::npu
