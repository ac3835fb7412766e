// The rms_norm variants of the npu backend. supports() asks the planner with the problem and the
// device's profile, and says what it planned (OPREG_VERBOSE=2 prints it) or why it refuses; the
// kernel plans the same way, so a forced variant runs the plan it would have been refused for and
// fails the way the device would (a row too long for single_pass: "ub overflow").
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "backends/npu/npu_backend.h"
#include "backends/npu/rms_norm/kernels.h"
#include "registry/fail.h"

namespace opreg::npu {
namespace {

Emulator& emulator_in(const KernelContext& ctx) {
  auto* backend = dynamic_cast<NpuBackend*>(ctx.backend);
  if (backend == nullptr) {
    fail(ErrorKind::internal, "{}: runs on the npu backend's emulator, not on {}",
         ctx.variant != nullptr ? ctx.variant->name : std::string("npu kernel"), ctx.backend->name());
  }
  return backend->emulator();
}

Verdict verdict(const Plan& plan, const char* otherwise) {
  if (plan.fits) return {true, plan.why};
  return Verdict::reject(plan.why + otherwise);
}

std::vector<Tunable> tunables(rms::Impl impl, bool backward) {
  std::vector<Tunable> t{{"partition", "contiguous"}, {"ub_reserve", std::to_string(kUbReserve)}, {"depth", "auto"}};
  if (impl == rms::Impl::chunked) t.push_back({"mode", "split_row"});
  if (backward) t.push_back({"dw", impl == rms::Impl::atomic ? "atomic_add" : "workspace+SyncAll"});
  return t;
}

// The variants of one op direction: supports() plans on the device's profile, run() plans the
// same on the emulator's and launches.
template <class Args, class PlanFn, class RunFn>
void add_variants(Registry& registry, const Op<Args>& op, std::initializer_list<std::pair<rms::Impl, int>> impls,
                  bool backward, PlanFn plan, RunFn run) {
  for (const auto& entry : impls) {
    const rms::Impl impl = entry.first;  // (not a structured binding: lambdas capture it)
    VariantSpec<Args> spec;
    spec.backend = "npu";
    spec.impl = std::string(rms::to_string(impl));
    spec.priority = entry.second;
    const std::string otherwise =
        impl == rms::Impl::single_pass
            ? fmt::format("; npu.rms_norm.{}.chunked takes rows of any length", backward ? "bwd" : "fwd")
            : std::string();
    spec.supports = [impl, plan, otherwise](const Args& a, const DeviceProps& props) {
      return verdict(plan(impl, rms::shape_of(a), model_of(props)), otherwise.c_str());
    };
    spec.run = [impl, run](const Args& a, const KernelContext& ctx) { run(impl, a, ctx); };
    spec.tunables = tunables(impl, backward);
    registry.add_variant(op, std::move(spec)).release();
  }
}

}  // namespace

void register_rms_norm(Registry& registry) {
  using rms::Impl;
  add_variants(
      registry, rms_norm_fwd_op(), {{Impl::single_pass, 200}, {Impl::chunked, 100}}, false, rms::plan_fwd,
      [](Impl impl, const RmsNormFwdArgs& a, const KernelContext& ctx) { rms::run_fwd(impl, a, emulator_in(ctx)); });
  add_variants(registry, rms_norm_bwd_op(), {{Impl::single_pass, 200}, {Impl::chunked, 100}, {Impl::atomic, 10}}, true,
               rms::plan_bwd, [](Impl impl, const RmsNormBwdArgs& a, const KernelContext& ctx) {
                 rms::run_bwd(impl, a, emulator_in(ctx), ctx);
               });
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
