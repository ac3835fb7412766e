// The cuda gated-unit variant's plan and run (glu/plan.h); the kernels are glu/kernels.cu.
#include "backends/cuda_like/glu/plan.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cuda_like/device_guard.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::cuda_like {
namespace {

// Resident blocks of kGluThreads a multiprocessor is given (2048 threads on sm_80 and later).
constexpr int kBlocksPerSm = 8;

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

Verdict plan_grid(std::int64_t n, family::Elem type, bool vec, const GpuInfo& gpu, GluLaunch& plan) {
  plan.vec16 = vec;
  const std::int64_t per = vec ? 16 / (type == family::Elem::f32 ? 4 : 2) : 1;
  const std::int64_t packs = (n + per - 1) / per;
  const std::int64_t fill = static_cast<std::int64_t>(gpu.sm_count) * kBlocksPerSm;
  plan.blocks = static_cast<int>(std::clamp<std::int64_t>((packs + kGluThreads - 1) / kGluThreads, 1, fill));
  return {true, fmt::format("{} blocks of {} threads, {} accesses", plan.blocks, kGluThreads,
                            vec ? "16-byte" : "element")};
}

[[noreturn]] void launch_failed(const KernelContext& ctx, const char* variant, std::int64_t n, family::Elem type,
                                gpuError_t err) {
  gpu_clear_error();
  fail(ErrorKind::device, "{} on cuda:{}: launching failed ({} elements, {}): {}", variant, ctx.device.index, n,
       family::elem_name(type), gpuGetErrorString(err));
}

const char* variant_of(const KernelContext& ctx) {
  return ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda glu";
}

}  // namespace

Verdict fwd_supports(const family::GluFwd& d, const GpuInfo& gpu, GluLaunch& plan) {
  return plan_grid(d.n, d.type, aligned16(d.a) && aligned16(d.b) && aligned16(d.c), gpu, plan);
}
Verdict bwd_supports(const family::GluBwd& d, const GpuInfo& gpu, GluLaunch& plan) {
  const bool vec = aligned16(d.a) && aligned16(d.b) && aligned16(d.dc) && aligned16(d.da) && aligned16(d.db);
  return plan_grid(d.n, d.type, vec, gpu, plan);
}

template <GluAct Act>
void fwd_run(const family::GluFwd& d, const GluLaunch& plan, const KernelContext& ctx) {
  const DeviceGuard guard(ctx.device.index, variant_of(ctx));
  const gpuError_t err = launch_glu_fwd(d, Act, plan, static_cast<gpuStream_t>(ctx.stream));
  if (err != gpuSuccess) launch_failed(ctx, variant_of(ctx), d.n, d.type, err);
}
template <GluAct Act>
void bwd_run(const family::GluBwd& d, const GluLaunch& plan, const KernelContext& ctx) {
  const DeviceGuard guard(ctx.device.index, variant_of(ctx));
  const gpuError_t err = launch_glu_bwd(d, Act, plan, static_cast<gpuStream_t>(ctx.stream));
  if (err != gpuSuccess) launch_failed(ctx, variant_of(ctx), d.n, d.type, err);
}

template void fwd_run<GluAct::gelu_tanh>(const family::GluFwd&, const GluLaunch&, const KernelContext&);
template void fwd_run<GluAct::silu>(const family::GluFwd&, const GluLaunch&, const KernelContext&);
template void bwd_run<GluAct::gelu_tanh>(const family::GluBwd&, const GluLaunch&, const KernelContext&);
template void bwd_run<GluAct::silu>(const family::GluBwd&, const GluLaunch&, const KernelContext&);

}  // namespace opreg::cuda_like
