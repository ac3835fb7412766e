// The npu's rms_norm lists. supports() plans on the device's model (the backend's facts: its
// profile and Unified Buffer) and says what it planned (OPREG_VERBOSE=2 prints it) or why it
// refuses; the kernel runs that plan. A forced variant runs the plan it was refused for and fails
// the way the device would (a row too long for single_pass: "ub overflow").
#include <string>
#include <vector>

#include "backends/npu/npu_backend.h"
#include "backends/npu/rms_norm/kernels.h"
#include "opreg/variants.h"
#include "registry/fail.h"

namespace opreg::npu {
namespace {

using rms::Impl;

Emulator& emulator_in(const KernelContext& ctx) {
  auto* backend = dynamic_cast<NpuBackend*>(ctx.backend);
  if (backend == nullptr) {
    fail(ErrorKind::internal, "{}: runs on the npu backend's emulator, not on {}",
         ctx.variant != nullptr ? ctx.variant->name : std::string("npu kernel"), ctx.backend->name());
  }
  return backend->emulator();
}

Verdict verdict(bool fits, std::string why, Impl impl, const char* direction) {
  if (fits) return {true, std::move(why)};
  if (impl == Impl::single_pass) why += fmt::format("; npu.rms_norm.{}.chunked takes rows of any length", direction);
  return Verdict::reject(std::move(why));
}

template <Impl I>
Verdict fwd_supports(const RmsNormFwdArgs& a, const DeviceModel& device, rms::FwdPlan& plan) {
  std::string why;
  plan = rms::plan_fwd(I, rms::problem_of(family::describe(a)), device, &why);
  return verdict(plan.tiles.fits, std::move(why), I, "fwd");
}
template <Impl I>
Verdict bwd_supports(const RmsNormBwdArgs& a, const DeviceModel& device, rms::BwdPlan& plan) {
  std::string why;
  plan = rms::plan_bwd(I, rms::problem_of(family::describe(a)), device, &why);
  return verdict(plan.tiles.fits, std::move(why), I, "bwd");
}

void fwd_run(const RmsNormFwdArgs& a, const rms::FwdPlan& plan, const KernelContext& ctx) {
  rms::run_fwd(a, plan, emulator_in(ctx));
}
void bwd_run(const RmsNormBwdArgs& a, const rms::BwdPlan& plan, const KernelContext& ctx) {
  rms::run_bwd(a, plan, emulator_in(ctx), ctx);
}

std::vector<Tunable> tunables(Impl impl, bool backward) {
  std::vector<Tunable> t{{"partition", "contiguous"}, {"ub_reserve", std::to_string(kUbReserve)}, {"depth", "auto"}};
  if (impl == Impl::chunked) t.push_back({"mode", "split_row"});
  if (backward) t.push_back({"dw", impl == Impl::atomic ? "atomic_add" : "workspace+SyncAll"});
  return t;
}

}  // namespace

void register_rms_norm(Registry& r) {
  register_list(r, rms_norm_fwd_op(), "npu",
                {{"single_pass", &fwd_supports<Impl::single_pass>, &fwd_run, tunables(Impl::single_pass, false)},
                 {"chunked", &fwd_supports<Impl::chunked>, &fwd_run, tunables(Impl::chunked, false)}});
  register_list(r, rms_norm_bwd_op(), "npu",
                {{"single_pass", &bwd_supports<Impl::single_pass>, &bwd_run, tunables(Impl::single_pass, true)},
                 {"chunked", &bwd_supports<Impl::chunked>, &bwd_run, tunables(Impl::chunked, true)},
                 {"atomic", &bwd_supports<Impl::atomic>, &bwd_run, tunables(Impl::atomic, true)}});
}

namespace rms {

LaunchCounters empty_launch(const std::string& kernel, const Emulator& emulator) {
  LaunchCounters c;
  c.kernel = kernel;
  c.profile = emulator.profile().name;
  c.cores = emulator.vector_cores();
  c.ub_size = emulator.ub_bytes();
  return c;
}

}  // namespace rms
}  // namespace opreg::npu
