// The rms_norm variants of the npu backend. supports() asks the planner with the problem and the
// device's profile, and says what it planned (OPREG_VERBOSE=2 prints it) or why it refuses; the
// kernel plans the same way, so a forced variant runs the plan it would have been refused for and
// fails the way the device would (a row too long for single_pass: "ub overflow").
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

}  // namespace

void register_rms_norm(Registry& registry) {
  using rms::Impl;
  const std::pair<Impl, int> fwd[] = {{Impl::single_pass, 200}, {Impl::chunked, 100}};
  for (const auto& entry : fwd) {
    const Impl impl = entry.first;  // (not a structured binding: lambdas capture it)
    VariantSpec<RmsNormFwdArgs> spec;
    spec.backend = "npu";
    spec.impl = std::string(rms::to_string(impl));
    spec.priority = entry.second;
    spec.supports = [impl](const RmsNormFwdArgs& a, const DeviceProps& props) {
      return verdict(rms::plan_fwd(impl, rms::shape_of(a), model_of(props)),
                     impl == Impl::single_pass ? "; npu.rms_norm.fwd.chunked takes rows of any length" : "");
    };
    spec.run = [impl](const RmsNormFwdArgs& a, const KernelContext& ctx) { rms::run_fwd(impl, a, emulator_in(ctx)); };
    spec.tunables = tunables(impl, false);
    registry.add_variant(rms_norm_fwd_op(), std::move(spec)).release();
  }
  const std::pair<Impl, int> bwd[] = {{Impl::single_pass, 200}, {Impl::chunked, 100}, {Impl::atomic, 10}};
  for (const auto& entry : bwd) {
    const Impl impl = entry.first;
    VariantSpec<RmsNormBwdArgs> spec;
    spec.backend = "npu";
    spec.impl = std::string(rms::to_string(impl));
    spec.priority = entry.second;
    spec.supports = [impl](const RmsNormBwdArgs& a, const DeviceProps& props) {
      return verdict(rms::plan_bwd(impl, rms::shape_of(a), model_of(props)),
                     impl == Impl::single_pass ? "; npu.rms_norm.bwd.chunked takes rows of any length" : "");
    };
    spec.run = [impl](const RmsNormBwdArgs& a, const KernelContext& ctx) {
      rms::run_bwd(impl, a, emulator_in(ctx), ctx);
    };
    spec.tunables = tunables(impl, true);
    registry.add_variant(rms_norm_bwd_op(), std::move(spec)).release();
  }
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
