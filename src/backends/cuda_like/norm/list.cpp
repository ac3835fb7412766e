// The cuda layer_norm and group_norm lists: one variant per op direction (norm/kernels.cu), a
// block per set with the grid walking the sets. Its plan: the grid from the device's
// multiprocessors and, backward, where dweight and dbias are summed before the finisher.
#include "backends/cuda_like/norm/norm.h"

#include <type_traits>

#include "backends/cuda_like/device_guard.h"
#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/norm/launch.h"
#include "opreg/variants.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::cuda_like {
namespace {

template <class Args>
constexpr bool kBackward = std::is_same_v<Args, LayerNormBwdArgs> || std::is_same_v<Args, GroupNormBwdArgs>;

template <class Args>
Verdict norm_supports(const Args& a, const GpuInfo& gpu, NormLaunch& plan) {
  const auto d = family::describe(a);
  plan = plan_norm(d.shape, gpu.sm_count, kBackward<Args>);
  return {true, fmt::format("{} sets of {} x {}: {} blocks of {} threads{}", d.shape.sets, d.shape.channels,
                            d.shape.spread, plan.grid, kNormThreads,
                            kBackward<Args> ? fmt::format(", {} rows of parameter sums ({})", plan.partials,
                                                          plan.per_channel ? "per (n, channel)" : "per block")
                                            : std::string())};
}

template <class Args>
void norm_run(const Args& a, const NormLaunch& plan, const KernelContext& ctx) {
  const char* variant = ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda norm";
  const DeviceGuard guard(ctx.device.index, variant);
  const auto d = family::describe(a);
  const auto stream = static_cast<gpuStream_t>(ctx.stream);
  gpuError_t err = gpuSuccess;
  if constexpr (kBackward<Args>) {
    Workspace::Lease ws;
    if (plan.workspace > 0 && (d.dweight != nullptr || d.dbias != nullptr)) {
      ws = acquire_scratch(ctx, plan.workspace);
    }
    err = launch_norm_bwd(d, plan, ws.data(), stream);
  } else {
    err = launch_norm_fwd(d, plan, stream);
  }
  if (err != gpuSuccess) {
    gpu_clear_error();
    fail(ErrorKind::device, "{} on cuda:{}: launching failed ({} sets of {} x {}, x {}): {}", variant,
         ctx.device.index, d.shape.sets, d.shape.channels, d.shape.spread, family::elem_name(d.x_type),
         gpuGetErrorString(err));
  }
}

std::vector<Tunable> tunables(bool backward) {
  std::vector<Tunable> t{{"threads", std::to_string(kNormThreads)}, {"grid", "a block per set, up to 8 a multiprocessor"}};
  if (backward) t.push_back({"dw_db", "per-block or per-(n, channel) double sums, added in order"});
  return t;
}

}  // namespace

void register_norm(Registry& r) {
  register_list(r, layer_norm_fwd_op(), "cuda",
                {{"sets", &norm_supports<LayerNormFwdArgs>, &norm_run<LayerNormFwdArgs>, tunables(false)}});
  register_list(r, layer_norm_bwd_op(), "cuda",
                {{"sets", &norm_supports<LayerNormBwdArgs>, &norm_run<LayerNormBwdArgs>, tunables(true)}});
  register_list(r, group_norm_fwd_op(), "cuda",
                {{"sets", &norm_supports<GroupNormFwdArgs>, &norm_run<GroupNormFwdArgs>, tunables(false)}});
  register_list(r, group_norm_bwd_op(), "cuda",
                {{"sets", &norm_supports<GroupNormBwdArgs>, &norm_run<GroupNormBwdArgs>, tunables(true)}});
}

}  // namespace opreg::cuda_like
