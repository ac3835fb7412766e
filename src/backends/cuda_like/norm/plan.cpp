// The cuda layer_norm and group_norm variants' plans and runs (plan.h; the lists are list.cpp),
// over the norm family's descriptors (NormFwd, NormBwd). sets (norm/kernels.cu): a block per set
// with the grid walking the sets; its plan is the grid from the device's multiprocessors and,
// backward, where dweight and dbias are summed before the finisher. rows (norm/rows.cu, layer_norm
// only): the row held in registers where one block holds it. split (norm/split.cu): a row or a
// set over several blocks.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "backends/cuda_like/device_guard.h"
#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/norm/plan.h"
#include "backends/cuda_like/rms_norm/plan.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::cuda_like {

template <class Desc>
constexpr bool kBackward = std::is_same_v<Desc, family::NormBwd>;

template <class Desc>
Verdict sets_supports(const Desc& d, const GpuInfo& gpu, NormLaunch& plan) {
  plan = plan_norm(d.shape, gpu.sm_count, kBackward<Desc>);
  return {true, fmt::format("{} sets of {} x {}: {} blocks of {} threads{}", d.shape.sets, d.shape.channels,
                            d.shape.spread, plan.grid, kNormThreads,
                            kBackward<Desc> ? fmt::format(", {} rows of parameter sums ({})", plan.partials,
                                                          plan.per_channel ? "per (n, channel)" : "per block")
                                            : std::string())};
}

namespace {

// What a message names of the problem: its sets, or (layer_norm's rows variant) its rows.
template <class D>
std::string problem_of(const D& d, bool rows) {
  return rows ? fmt::format("{} rows of {}", d.shape.sets, d.shape.channels)
              : fmt::format("{} sets of {} x {}", d.shape.sets, d.shape.channels, d.shape.spread);
}

// A runtime call (`doing`: planning, launching) that failed for a variant; the runtime's last
// error is cleared, or the next launch's check would report this one.
template <class D>
[[noreturn]] void device_failed(const char* variant, int device, const char* doing, const D& d, bool rows,
                                gpuError_t err) {
  gpu_clear_error();
  fail(ErrorKind::device, "{} on cuda:{}: {} failed ({}, x {}): {}", variant, device, doing, problem_of(d, rows),
       family::elem_name(d.x_type), gpuGetErrorString(err));
}

// The name of the variant a call runs (`fallback` where the context names none).
const char* variant_of(const KernelContext& ctx, const char* fallback) {
  return ctx.variant != nullptr ? ctx.variant->name.c_str() : fallback;
}

// The variant a run is of, once a problem its supports() refused (a forced variant's: `planned`
// false) has failed with the reason why(d, reason) gives.
template <class D, class Why>
const char* run_variant(const KernelContext& ctx, const char* fallback, bool planned, const D& d, bool rows, Why why) {
  const char* variant = variant_of(ctx, fallback);
  if (!planned) {
    std::string reason;
    why(d, reason);
    fail(ErrorKind::unsupported, "{} on cuda:{}: cannot run {}: {}", variant, ctx.device.index, problem_of(d, rows),
         reason);
  }
  return variant;
}

// Whether a backward wants dweight or dbias (their partial sums).
template <class Desc>
bool wants_param_sums(const Desc& d) {
  if constexpr (kBackward<Desc>) {
    return d.dweight != nullptr || d.dbias != nullptr;
  } else {
    return false;
  }
}

}  // namespace

template <class Desc>
void sets_run(const Desc& d, const NormLaunch& plan, const KernelContext& ctx) {
  const char* variant = variant_of(ctx, "cuda norm");
  const DeviceGuard guard(ctx.device.index, variant);
  const auto stream = static_cast<gpuStream_t>(ctx.stream);
  gpuError_t err = gpuSuccess;
  if constexpr (kBackward<Desc>) {
    Workspace::Lease ws;
    if (plan.workspace > 0 && wants_param_sums(d)) ws = acquire_scratch(ctx, plan.workspace);
    err = launch_norm_bwd(d, plan, ws.data(), stream);
  } else {
    err = launch_norm_fwd(d, plan, stream);
  }
  if (err != gpuSuccess) device_failed(variant, ctx.device.index, "launching", d, false, err);
}

// ---- layer_norm's rows variant.

namespace {
bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
}  // namespace

// 16-byte accesses where every row (every channel: `run` = spread) of every tensor the kernel
// reads or writes run by run, and the parameters, start on 16 bytes (dweight and dbias are the
// finisher's, which takes any address).
template <class Desc>
bool rows_aligned(const Desc& d, family::Elem xt, std::int64_t run) {
  if (run % vec_of(xt) != 0 || !aligned16(d.x) || !aligned16(d.weight)) return false;
  if constexpr (kBackward<Desc>) {
    return aligned16(d.dy) && aligned16(d.dx);
  } else {
    return aligned16(d.y) && aligned16(d.bias);
  }
}

// Accesses per thread: the first choice whose row takes at most `prefer` threads, else the one
// with the fewest threads a row (as the rms_norm rows kernels choose: the forward with 4, 8 for
// rows past 512 threads; the backward with the fewest that keep a row within 256 threads).
namespace {
std::optional<LnRowsShape> ln_rows_shape(std::int64_t hidden, family::Elem xt, bool aligned, bool backward,
                                         std::int64_t& capacity) {
  const int vec = aligned ? vec_of(xt) : 1;
  const std::int64_t nvec = hidden / vec;
  static constexpr int kScalar[] = {kLnScalarNv};
  static constexpr int kFwd[] = {4, 8};
  static constexpr int kBwd[] = {1, 2, 4};
  const std::span<const int> order = vec == 1   ? std::span<const int>(kScalar)
                                     : backward ? std::span<const int>(kBwd)
                                                : std::span<const int>(kFwd);
  const std::int64_t prefer = backward ? 256 : 512;
  capacity = 0;
  std::optional<LnRowsShape> fallback;
  for (const int nv : order) {
    const std::optional<LnRowsShape> s =
        spread_row<LnRowsShape>(nvec, vec, nv, ln_max_threads(backward, nv, vec, elem_bytes(xt)), capacity);
    if (!s) continue;
    if (s->tpr <= prefer) return s;
    if (!fallback || s->tpr < fallback->tpr) fallback = s;
  }
  return fallback;
}
}  // namespace


// The shape of a problem, or why the variant does not take it.
template <class Desc>
std::optional<LnRowsShape> ln_rows_choice(const Desc& d, std::string& why) {
  const std::int64_t hidden = d.shape.channels;
  if (hidden == 0) {
    why = "rows of 0 elements (the sets variant writes their statistics)";
    return std::nullopt;
  }
  const bool aligned = rows_aligned(d, d.x_type, hidden);
  std::int64_t capacity = 0;
  std::optional<LnRowsShape> shape = ln_rows_shape(hidden, d.x_type, aligned, kBackward<Desc>, capacity);
  if (!shape) {
    why = fmt::format("hidden {} is over the {} elements one block holds ({} accesses)", hidden, capacity,
                      aligned ? "16-byte" : "rows not 16-byte aligned: 1-element");
  }
  return shape;
}

template <class Desc>
Verdict ln_rows_supports(const Desc& d, const GpuInfo& gpu, LnRowsPlan& plan) {
  constexpr bool kBwd = kBackward<Desc>;
  plan = LnRowsPlan{};
  std::string why;
  const std::optional<LnRowsShape> shape = ln_rows_choice(d, why);
  if (!shape) return Verdict::reject(why);
  const DeviceGuard guard(gpu.device, "cuda.layer_norm.rows");
  const gpuError_t err =
      plan_ln_rows(d.shape, d.x_type, d.p_type, kBwd, wants_param_sums(d), *shape, gpu, plan.launch);
  if (err != gpuSuccess) device_failed("cuda.layer_norm.rows", gpu.device, "planning", d, true, err);
  plan.ok = true;
  const LnRowsShape& s = plan.launch.shape;
  return {true, fmt::format("{} threads a row, {} access(es) of {}, {} row(s) a block, grid {} of {} threads{}", s.tpr,
                            s.nv, s.vec, s.slots, plan.launch.grid, plan.launch.threads,
                            kBwd ? fmt::format(", {} rows of parameter sums", plan.launch.partials) : std::string())};
}

template <class Desc>
void ln_rows_run(const Desc& d, const LnRowsPlan& plan, const KernelContext& ctx) {
  const char* variant = run_variant(ctx, "cuda.layer_norm.rows", plan.ok, d, true,
                                    [](const Desc& p, std::string& why) { ln_rows_choice(p, why); });
  const DeviceGuard guard(ctx.device.index, variant);
  const auto stream = static_cast<gpuStream_t>(ctx.stream);
  gpuError_t err = gpuSuccess;
  if constexpr (kBackward<Desc>) {
    Workspace::Lease ws;
    if (plan.launch.workspace > 0) ws = acquire_scratch(ctx, plan.launch.workspace);
    err = launch_ln_rows_bwd(d, plan.launch, ws.data(), stream);
  } else {
    err = launch_ln_rows_fwd(d, plan.launch, stream);
  }
  if (err != gpuSuccess) device_failed(variant, ctx.device.index, "launching", d, true, err);
}

// ---- The split variant (both ops).


// Channels shorter than this go to `sets`: a channel chunk walks its channels one at a time.
constexpr std::int64_t kSplitMinSpread = 32;

template <class Desc>
bool split_refuses(const Desc& d, std::string& why) {
  const family::NormSets& sh = d.shape;
  if (sh.sets == 0 || sh.channels == 0 || sh.spread == 0) {
    why = "empty sets (the sets variant writes their statistics)";
    return true;
  }
  if (norm_split_channel_chunks(sh) && sh.spread < kSplitMinSpread) {
    why = fmt::format("channels of {} elements, under {} (the sets variant takes them)", sh.spread, kSplitMinSpread);
    return true;
  }
  return false;
}

template <class Desc>
Verdict split_supports(const Desc& d, const GpuInfo& gpu, NormSplitPlan& plan) {
  constexpr bool kBwd = kBackward<Desc>;
  plan = NormSplitPlan{};
  std::string why;
  if (split_refuses(d, why)) return Verdict::reject(why);
  const std::int64_t run = norm_split_channel_chunks(d.shape) ? d.shape.spread : d.shape.channels;
  const int vec = rows_aligned(d, d.x_type, run) ? vec_of(d.x_type) : 1;
  const bool partial_sums = wants_param_sums(d);
  const DeviceGuard guard(gpu.device, "cuda norm split");
  const gpuError_t err = plan_norm_split(d.shape, d.x_type, d.p_type, vec, kBwd, partial_sums, gpu, plan.launch);
  if (err != gpuSuccess) device_failed("cuda norm split", gpu.device, "planning", d, false, err);
  plan.ok = true;
  const NormSplitLaunch& l = plan.launch;
  return {true, fmt::format("{} sets of {} x {}: {} chunks of {} {}, {} set groups, accesses of {}, grid {}{}",
                            d.shape.sets, d.shape.channels, d.shape.spread, l.chunks, l.chunk,
                            l.channel_chunks ? "channels" : "columns", l.walkers, l.vec, l.grid,
                            kBwd && partial_sums ? fmt::format(", {} rows of parameter sums", l.partials)
                                                 : std::string())};
}

template <class Desc>
void split_run(const Desc& d, const NormSplitPlan& plan, const KernelContext& ctx) {
  const char* variant = run_variant(ctx, "cuda norm split", plan.ok, d, false,
                                    [](const Desc& p, std::string& why) { split_refuses(p, why); });
  const DeviceGuard guard(ctx.device.index, variant);
  const auto stream = static_cast<gpuStream_t>(ctx.stream);
  const Workspace::Lease ws = acquire_scratch(ctx, plan.launch.workspace);
  gpuError_t err = gpuSuccess;
  if constexpr (kBackward<Desc>) {
    err = launch_norm_split_bwd(d, plan.launch, ws.data(), stream);
  } else {
    err = launch_norm_split_fwd(d, plan.launch, ws.data(), stream);
  }
  if (err != gpuSuccess) device_failed(variant, ctx.device.index, "launching", d, false, err);
}

template Verdict sets_supports(const family::NormFwd&, const GpuInfo&, NormLaunch&);
template Verdict sets_supports(const family::NormBwd&, const GpuInfo&, NormLaunch&);
template void sets_run(const family::NormFwd&, const NormLaunch&, const KernelContext&);
template void sets_run(const family::NormBwd&, const NormLaunch&, const KernelContext&);
template Verdict ln_rows_supports(const family::NormFwd&, const GpuInfo&, LnRowsPlan&);
template Verdict ln_rows_supports(const family::NormBwd&, const GpuInfo&, LnRowsPlan&);
template void ln_rows_run(const family::NormFwd&, const LnRowsPlan&, const KernelContext&);
template void ln_rows_run(const family::NormBwd&, const LnRowsPlan&, const KernelContext&);
template Verdict split_supports(const family::NormFwd&, const GpuInfo&, NormSplitPlan&);
template Verdict split_supports(const family::NormBwd&, const GpuInfo&, NormSplitPlan&);
template void split_run(const family::NormFwd&, const NormSplitPlan&, const KernelContext&);
template void split_run(const family::NormBwd&, const NormSplitPlan&, const KernelContext&);

}  // namespace opreg::cuda_like
