// The npu's layer_norm and group_norm lists (issue 19). supports() plans on the device's model
// and says what it planned (OPREG_VERBOSE=2 prints it) or why it refuses; the kernel runs that
// plan. A forced single_pass on a set too large for UB runs the plan it was refused for and fails
// as the device does ("ub overflow"). gpu_port is forced-only: supports() always refuses it with
// the GPU kernel's numbers, and forced it launches what the GPU-oriented Triton kernel launches on
// Ascend (one block per row or (N, group), the whole set in UB at BLOCK_SIZE = next power of two,
// tiles double-buffered), failing with the device's text where that cannot run.
#include <string>
#include <vector>

#include "backends/npu/norm/kernels.h"
#include "backends/npu/gpu_port.h"
#include "backends/npu/npu_backend.h"
#include "opreg/variants.h"
#include "registry/fail.h"

namespace opreg::npu {
namespace {

using norm::Impl;

static_assert(sizeof(norm::Plan) <= kPlanBytes, "the norm plan must fit the registry's plan slot");

template <class Args>
constexpr bool kLayer = std::is_same_v<Args, LayerNormFwdArgs> || std::is_same_v<Args, LayerNormBwdArgs>;

template <class Args>
norm::Problem problem(const Args& a) {
  return norm::problem_of(family::describe(a), kLayer<Args>);
}

template <class Args, Impl I>
Verdict fwd_supports(const Args& a, const DeviceModel& device, norm::Plan& plan) {
  std::string why;
  plan = norm::plan_fwd(I, problem(a), device, &why);
  if (I != Impl::gpu_port && plan.tiles.fits) return {true, std::move(why)};
  return Verdict::reject(std::move(why));
}
template <class Args, Impl I>
Verdict bwd_supports(const Args& a, const DeviceModel& device, norm::Plan& plan) {
  std::string why;
  plan = norm::plan_bwd(I, problem(a), device, &why);
  if (I != Impl::gpu_port && plan.tiles.fits) return {true, std::move(why)};
  return Verdict::reject(std::move(why));
}

// The plan a gpu_port computes with once its launch shape could run: single_pass where the sets
// fit, else chunked.
template <class PlanFn>
norm::Plan real_plan(PlanFn plan_fn, const norm::Problem& s, const DeviceModel& device) {
  norm::Plan p = plan_fn(Impl::single_pass, s, device, nullptr);
  if (!p.tiles.fits) p = plan_fn(Impl::chunked, s, device, nullptr);
  return p;
}

template <class Args>
void fwd_run(const Args& a, const norm::Plan& plan, const KernelContext& ctx) {
  Emulator& em = emulator_in(ctx);
  const norm::FwdCall call{family::describe(a), problem(a)};
  if (plan.impl == Impl::gpu_port) {
    norm::probe_gpu_port(call.s, plan, false, em);
    norm::run_fwd(call, real_plan(&norm::plan_fwd, call.s, em.model()), em);
    return;
  }
  norm::run_fwd(call, plan, em);
}
template <class Args>
void bwd_run(const Args& a, const norm::Plan& plan, const KernelContext& ctx) {
  Emulator& em = emulator_in(ctx);
  const norm::BwdCall call{family::describe(a), problem(a)};
  if (plan.impl == Impl::gpu_port) {
    norm::probe_gpu_port(call.s, plan, true, em);
    norm::run_bwd(call, real_plan(&norm::plan_bwd, call.s, em.model()), em, ctx);
    return;
  }
  norm::run_bwd(call, plan, em, ctx);
}

std::vector<Tunable> tunables(Impl impl, bool backward) {
  if (impl == Impl::gpu_port) {
    return {{"grid", "one block per set"}, {"BLOCK_SIZE", "next_power_of_2(set)"}, {"multibuffer", "2"}};
  }
  std::vector<Tunable> t{{"partition", "contiguous"}, {"ub_reserve", std::to_string(kUbReserve)}, {"depth", "auto"}};
  if (impl == Impl::chunked) t.push_back({"mode", "pieces"});
  if (backward) t.push_back({"dw_db", "workspace+SyncAll"});
  return t;
}

template <class Fwd, class Bwd>
void register_op(Registry& r, const Op<Fwd>& fwd, const Op<Bwd>& bwd) {
  register_list(r, fwd, "npu",
                {{"single_pass", &fwd_supports<Fwd, Impl::single_pass>, &fwd_run<Fwd>, tunables(Impl::single_pass, false)},
                 {"chunked", &fwd_supports<Fwd, Impl::chunked>, &fwd_run<Fwd>, tunables(Impl::chunked, false)},
                 {"gpu_port", &fwd_supports<Fwd, Impl::gpu_port>, &fwd_run<Fwd>, tunables(Impl::gpu_port, false)}});
  register_list(r, bwd, "npu",
                {{"single_pass", &bwd_supports<Bwd, Impl::single_pass>, &bwd_run<Bwd>, tunables(Impl::single_pass, true)},
                 {"chunked", &bwd_supports<Bwd, Impl::chunked>, &bwd_run<Bwd>, tunables(Impl::chunked, true)},
                 {"gpu_port", &bwd_supports<Bwd, Impl::gpu_port>, &bwd_run<Bwd>, tunables(Impl::gpu_port, true)}});
}

}  // namespace

void register_norm(Registry& r) {
  register_op(r, layer_norm_fwd_op(), layer_norm_bwd_op());
  register_op(r, group_norm_fwd_op(), group_norm_bwd_op());
}

namespace norm {


void probe_gpu_port(const Problem& s, const Plan& plan, bool backward, Emulator& emulator) {
  if (s.sets == 0) return;
  const std::string name = std::string(s.layer ? "layer_norm" : "group_norm") + (backward ? "_bwd" : "_fwd") +
                           "_gpu_port";
  // One block per set (the launch refuses more than 65535); in each, the GPU kernel's live tiles.
  gpu_port::Port port;
  port.programs = s.sets;
  port.block_size = plan.tiles.block_size;
  port.live_bits = plan.live_bits();
  port.ub_bits = static_cast<std::int64_t>(emulator.ub_bytes()) * 8;
  gpu_port::launch(emulator, name, port, {});
}

}  // namespace norm
}  // namespace opreg::npu
