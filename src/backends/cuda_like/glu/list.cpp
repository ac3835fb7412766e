// The cuda geglu and swiglu lists: one streaming variant per op direction (glu/kernels.cu). Its
// plan is the access width (16-byte packs when every tensor starts on 16 bytes) and the grid
// (enough blocks to fill every multiprocessor, each thread walking the tensor grid-stride).
#include "backends/cuda_like/glu/glu.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cuda_like/device_guard.h"
#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/glu/launch.h"
#include "opreg/variants.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::cuda_like {
namespace {

// Resident blocks of kGluThreads a multiprocessor is given (2048 threads on sm_80 and later).
constexpr int kBlocksPerSm = 8;

bool aligned16(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data()) % 16 == 0; }

template <class Args>
constexpr bool kBackward = std::is_same_v<Args, GluBwdArgs> || std::is_base_of_v<GluBwdArgs, Args>;

template <class Args>
Verdict glu_supports(const Args& a, const GpuInfo& gpu, GluLaunch& plan) {
  const auto d = family::describe(a);
  bool vec = aligned16(a.a) && aligned16(a.b);
  if constexpr (kBackward<Args>) {
    vec = vec && aligned16(a.dc) && aligned16(a.da) && aligned16(a.db);
  } else {
    vec = vec && aligned16(a.c);
  }
  plan.vec16 = vec;
  const std::int64_t per = vec ? 16 / element_size(a.a.dtype()) : 1;
  const std::int64_t packs = (d.n + per - 1) / per;
  const std::int64_t fill = static_cast<std::int64_t>(gpu.sm_count) * kBlocksPerSm;
  plan.blocks = static_cast<int>(std::clamp<std::int64_t>((packs + kGluThreads - 1) / kGluThreads, 1, fill));
  return {true, fmt::format("{} blocks of {} threads, {} accesses", plan.blocks, kGluThreads,
                            vec ? "16-byte" : "element")};
}

template <class Args, GluAct Act>
void glu_run(const Args& a, const GluLaunch& plan, const KernelContext& ctx) {
  const char* variant = ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda glu";
  const DeviceGuard guard(ctx.device.index, variant);
  const auto d = family::describe(a);
  const auto stream = static_cast<gpuStream_t>(ctx.stream);
  gpuError_t err = gpuSuccess;
  if constexpr (kBackward<Args>) {
    err = launch_glu_bwd(d, Act, plan, stream);
  } else {
    err = launch_glu_fwd(d, Act, plan, stream);
  }
  if (err != gpuSuccess) {
    gpu_clear_error();
    fail(ErrorKind::device, "{} on cuda:{}: launching failed ({} elements, {}): {}", variant, ctx.device.index, d.n,
         family::elem_name(d.type), gpuGetErrorString(err));
  }
}

std::vector<Tunable> tunables() {
  return {{"threads", std::to_string(kGluThreads)},
          {"blocks_per_sm", std::to_string(kBlocksPerSm)},
          {"access_bytes", "16 or 1 element"}};
}

}  // namespace

void register_glu(Registry& r) {
  register_list(r, geglu_fwd_op(), "cuda",
                {{"stream", &glu_supports<GegluFwdArgs>, &glu_run<GegluFwdArgs, GluAct::gelu_tanh>, tunables()}});
  register_list(r, geglu_bwd_op(), "cuda",
                {{"stream", &glu_supports<GegluBwdArgs>, &glu_run<GegluBwdArgs, GluAct::gelu_tanh>, tunables()}});
  register_list(r, swiglu_fwd_op(), "cuda",
                {{"stream", &glu_supports<SwigluFwdArgs>, &glu_run<SwigluFwdArgs, GluAct::silu>, tunables()}});
  register_list(r, swiglu_bwd_op(), "cuda",
                {{"stream", &glu_supports<SwigluBwdArgs>, &glu_run<SwigluBwdArgs, GluAct::silu>, tunables()}});
}

}  // namespace opreg::cuda_like
