// The npu backend: Ascend devices as modelled by the host emulator. Global memory (GM) is host
// memory; the profile gives the numbers the kernels tile for (vector cores, Unified Buffer).
// Every device here is emulated and says so: inference never picks it, OPREG_DEVICE=npu does.
#include "backends/npu/npu_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "backends/builtin.h"
#include "backends/npu/tiling.h"
#include "opreg/registry.h"
#include "registry/env.h"
#include "registry/fail.h"
#include "registry/quote.h"

namespace opreg::npu {

namespace {

// An emulator mode from the environment: unset gives the first of `accepted`, anything else
// accepted is returned, the rest is an error naming the variable, the value and what is accepted.
std::string env_mode(const char* var, std::initializer_list<std::string_view> accepted, std::string_view what) {
  const std::optional<std::string> value = env_value(var);
  if (!value) return std::string(*accepted.begin());
  for (std::string_view a : accepted) {
    if (*value == a) return *value;
  }
  fail(ErrorKind::invalid_argument, "{}={}: not a {} of the npu emulator; accepted: {}", var, quote(*value), what,
       fmt::join(accepted, ", "));
}

}  // namespace

Availability NpuBackend::probe() {
  const DeviceModel model =
      fixed_ ? *fixed_ : select_device_model(env_value("OPREG_NPU_PROFILE"), env_value("OPREG_NPU_UB_BYTES"));
  emulator_ = std::make_unique<Emulator>(model);
  // OPREG_NPU_MATH: exact (the default) or approx (Emulator::set_approx_math). OPREG_NPU_SYNC: auto
  // (the default: the compiler orders dependent vector instructions) or manual (PipeBarrier<PIPE_V>
  // required between them; Emulator::set_auto_sync).
  emulator_->set_approx_math(env_mode("OPREG_NPU_MATH", {"exact", "approx"}, "math mode") == "approx");
  emulator_->set_auto_sync(env_mode("OPREG_NPU_SYNC", {"auto", "manual"}, "sync mode") == "auto");
  std::string how = fmt::format("host emulator of {} ({} vector cores, Unified Buffer {} B{}{}{})", model.profile->name,
                                model.profile->vector_cores, model.ub_bytes,
                                model.ub_bytes != model.profile->ub_bytes ? " from OPREG_NPU_UB_BYTES" : "",
                                emulator_->approx_math() ? ", approximate math" : "",
                                emulator_->auto_sync() ? "" : ", no auto-sync");
  return {true, 1, std::move(how)};
}

DeviceProps NpuBackend::properties(int) const {
  const Profile& p = emulator_->profile();
  DeviceProps props;
  props.name = fmt::format("{} (emulated)", p.name);
  props.memory_bytes = p.hbm_bytes;
  props.compute_units = p.vector_cores;
  props.emulated = true;
  props.host_memory = true;  // the emulator's GM is host memory
  props.extra = {{"profile", p.name},
                 {"ai_cores", std::to_string(p.ai_cores)},
                 {"vector_cores", std::to_string(p.vector_cores)},
                 {"ub_bytes", std::to_string(emulator_->ub_bytes())},
                 {"l2_bytes", std::to_string(p.l2_bytes)},
                 {"hbm_gbps", fmt::format("{}{}", p.hbm_gbps, p.hbm_gbps_verified ? "" : " (unverified)")},
                 {"max_block_dim", "65535"}};
  props.facts = &emulator_->model();  // what the variants plan on
  return props;
}

std::string NpuBackend::last_run_note(int) const {
  if (!emulator_) return {};
  const auto last = emulator_->last_launch();
  return last ? last->note() : std::string();
}

namespace {

class EstimateTimer final : public KernelTimer {
 public:
  explicit EstimateTimer(const Emulator& emulator) : emulator_(emulator) {}
  void start() override { start_us_ = emulator_.est_us_total(); }
  double stop_us() override { return emulator_.est_us_total() - start_us_; }
  std::string method() const override { return "emulator est_us"; }
  bool estimate() const override { return true; }

 private:
  const Emulator& emulator_;
  double start_us_ = 0;
};

}  // namespace

std::unique_ptr<KernelTimer> NpuBackend::make_timer(int, void*) { return std::make_unique<EstimateTimer>(*emulator_); }

BandwidthCeiling NpuBackend::bandwidth_ceiling(int) {
  const Profile& p = emulator_->profile();
  return {p.hbm_gbps,
          fmt::format("{} profile HBM bandwidth{}", p.name, p.hbm_gbps_verified ? "" : " (unverified parameter)"),
          true};
}

Emulator* emulator_of(Registry& registry) {
  const auto id = registry.find_backend("npu");
  if (!id) return nullptr;
  auto* backend = dynamic_cast<NpuBackend*>(&registry.backend(*id));
  return backend != nullptr ? &backend->emulator() : nullptr;
}

Emulator& emulator_in(const KernelContext& ctx) {
  auto* backend = dynamic_cast<NpuBackend*>(ctx.backend);
  if (backend == nullptr) {
    fail(ErrorKind::internal, "{}: runs on the npu backend's emulator, not on {}",
         ctx.variant != nullptr ? ctx.variant->name : std::string("npu kernel"), ctx.backend->name());
  }
  return backend->emulator();
}

std::vector<Tunable> tiled_tunables(std::vector<Tunable> own) {
  std::vector<Tunable> t{{"partition", "contiguous"}, {"ub_reserve", std::to_string(kUbReserve)}, {"depth", "auto"}};
  t.insert(t.end(), own.begin(), own.end());
  return t;
}

LaunchCounters empty_launch(const std::string& kernel, const Emulator& emulator) {
  LaunchCounters c;
  c.kernel = kernel;
  c.profile = emulator.profile().name;
  c.cores = emulator.vector_cores();
  c.ub_size = emulator.ub_bytes();
  return c;
}

void register_lists(Registry& registry) {
#define OPREG_FAMILY(family) register_##family(registry);
#include "families/npu.inc"
#undef OPREG_FAMILY
}

}  // namespace opreg::npu

namespace opreg {

void register_npu(Registry& registry) {
  registry.add_backend(std::make_shared<npu::NpuBackend>()).release();
  npu::register_lists(registry);
}

}  // namespace opreg
