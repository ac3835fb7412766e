// The cuda layer_norm and group_norm lists. layer_norm: `rows` (norm/rows.cu), the row held in
// registers, where one block holds it; then `split` (norm/split.cu), a row over several blocks;
// `sets` for what split refuses (empty rows). group_norm: `split`, each (n, group) set over
// several blocks, then `sets` (channels under 32 elements, empty sets).
// sets (norm/kernels.cu): a block per set with the grid walking the sets. Its plan: the grid from
// the device's multiprocessors and, backward, where dweight and dbias are summed before the
// finisher.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "backends/cuda_like/device_guard.h"
#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/norm/launch.h"
#include "backends/cuda_like/norm/norm.h"
#include "backends/cuda_like/rms_norm/rms_norm.h"
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

// A launch of a sets-shaped variant (sets, split) that the runtime refused.
template <class D>
[[noreturn]] void launch_failed(const char* variant, const KernelContext& ctx, const D& d, gpuError_t err) {
  gpu_clear_error();
  fail(ErrorKind::device, "{} on cuda:{}: launching failed ({} sets of {} x {}, x {}): {}", variant, ctx.device.index,
       d.shape.sets, d.shape.channels, d.shape.spread, family::elem_name(d.x_type), gpuGetErrorString(err));
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
  if (err != gpuSuccess) launch_failed(variant, ctx, d, err);
}

std::vector<Tunable> tunables(bool backward) {
  std::vector<Tunable> t{{"threads", std::to_string(kNormThreads)},
                         {"grid", "a block per set, up to 8 a multiprocessor"}};
  if (backward) t.push_back({"dw_db", "per-block or per-(n, channel) double sums, added in order"});
  return t;
}

// ---- layer_norm's rows variant.

bool aligned16(const Tensor& t) { return !t.defined() || reinterpret_cast<std::uintptr_t>(t.data()) % 16 == 0; }

// 16-byte accesses where every row (every channel: `run` = spread) of every tensor the kernel
// reads or writes run by run, and the parameters, start on 16 bytes (dweight and dbias are the
// finisher's, which takes any address).
template <class Args>
bool rows_aligned(const Args& a, family::Elem xt, std::int64_t run) {
  if (run % vec_of(xt) != 0 || !aligned16(a.x) || !aligned16(a.weight)) return false;
  if constexpr (kBackward<Args>) {
    return aligned16(a.dy) && aligned16(a.dx);
  } else {
    return aligned16(a.y) && aligned16(a.bias);
  }
}

// Accesses per thread: the first choice whose row takes at most `prefer` threads, else the one
// with the fewest threads a row (as the rms_norm rows kernels choose: the forward with 4, 8 for
// rows past 512 threads; the backward with the fewest that keep a row within 256 threads).
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
    const int limit = ln_max_threads(backward, nv, vec, elem_bytes(xt));
    capacity = std::max<std::int64_t>(capacity, static_cast<std::int64_t>(limit) * nv * vec);
    const std::int64_t want = (nvec + nv - 1) / nv;
    if (want > limit) continue;
    LnRowsShape s;
    s.vec = vec;
    s.nv = nv;
    s.tpr = round_threads(want);
    s.slots = s.tpr >= 256 ? 1 : 256 / s.tpr;
    if (s.tpr <= prefer) return s;
    if (!fallback || s.tpr < fallback->tpr) fallback = s;
  }
  return fallback;
}

struct LnRowsPlan {
  bool ok = false;  // false: refused (a forced variant runs the plan and says why)
  LnRowsLaunch launch;
};

// The shape of a problem, or why the variant does not take it.
template <class Args>
std::optional<LnRowsShape> ln_rows_choice(const Args& a, std::string& why) {
  const auto d = family::describe(a);
  const std::int64_t hidden = d.shape.channels;
  if (hidden == 0) {
    why = "rows of 0 elements (the sets variant writes their statistics)";
    return std::nullopt;
  }
  const bool aligned = rows_aligned(a, d.x_type, hidden);
  std::int64_t capacity = 0;
  std::optional<LnRowsShape> shape = ln_rows_shape(hidden, d.x_type, aligned, kBackward<Args>, capacity);
  if (!shape) {
    why = fmt::format("hidden {} is over the {} elements one block holds ({} accesses)", hidden, capacity,
                      aligned ? "16-byte" : "rows not 16-byte aligned: 1-element");
  }
  return shape;
}

template <class Args>
Verdict ln_rows_supports(const Args& a, const GpuInfo& gpu, LnRowsPlan& plan) {
  constexpr bool kBwd = kBackward<Args>;
  plan = LnRowsPlan{};
  std::string why;
  const std::optional<LnRowsShape> shape = ln_rows_choice(a, why);
  if (!shape) return Verdict::reject(why);
  const auto d = family::describe(a);
  bool partial_sums = false;
  if constexpr (kBwd) partial_sums = d.dweight != nullptr || d.dbias != nullptr;
  const DeviceGuard guard(gpu.device, "cuda.layer_norm.rows");
  const gpuError_t err = plan_ln_rows(d.shape, d.x_type, d.p_type, kBwd, partial_sums, *shape, gpu, plan.launch);
  if (err != gpuSuccess) {
    gpu_clear_error();
    fail(ErrorKind::device, "cuda.layer_norm.rows on cuda:{}: planning failed ({} rows of {}, x {}): {}", gpu.device,
         d.shape.sets, d.shape.channels, family::elem_name(d.x_type), gpuGetErrorString(err));
  }
  plan.ok = true;
  const LnRowsShape& s = plan.launch.shape;
  return {true, fmt::format("{} threads a row, {} access(es) of {}, {} row(s) a block, grid {} of {} threads{}", s.tpr,
                            s.nv, s.vec, s.slots, plan.launch.grid, plan.launch.threads,
                            kBwd ? fmt::format(", {} rows of parameter sums", plan.launch.partials) : std::string())};
}

template <class Args>
void ln_rows_run(const Args& a, const LnRowsPlan& plan, const KernelContext& ctx) {
  const char* variant = ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda.layer_norm.rows";
  const auto d = family::describe(a);
  if (!plan.ok) {
    std::string why;
    ln_rows_choice(a, why);
    fail(ErrorKind::unsupported, "{} on cuda:{}: cannot run {} rows of {}: {}", variant, ctx.device.index, d.shape.sets,
         d.shape.channels, why);
  }
  const DeviceGuard guard(ctx.device.index, variant);
  const auto stream = static_cast<gpuStream_t>(ctx.stream);
  gpuError_t err = gpuSuccess;
  if constexpr (kBackward<Args>) {
    Workspace::Lease ws;
    if (plan.launch.workspace > 0) ws = acquire_scratch(ctx, plan.launch.workspace);
    err = launch_ln_rows_bwd(d, plan.launch, ws.data(), stream);
  } else {
    err = launch_ln_rows_fwd(d, plan.launch, stream);
  }
  if (err != gpuSuccess) {
    gpu_clear_error();
    fail(ErrorKind::device, "{} on cuda:{}: launching failed ({} rows of {}, x {}): {}", variant, ctx.device.index,
         d.shape.sets, d.shape.channels, family::elem_name(d.x_type), gpuGetErrorString(err));
  }
}

std::vector<Tunable> rows_tunables(bool backward) {
  std::vector<Tunable> t{
      {"threads", "a row over up to 1024 (backward: 512 past 8 columns a thread)"},
      {"accesses", backward ? "1, 2 or 4 of 16 bytes; 8 of 1 element" : "4 or 8 of 16 bytes; 8 of 1 element"}};
  if (backward) t.push_back({"dw_db", "per-block partial rows (f64 for f32 inputs), added in order"});
  return t;
}

// ---- The split variant (both ops).

struct SplitPlan {
  bool ok = false;  // false: refused (a forced variant runs the plan and says why)
  NormSplitLaunch launch;
};

// Channels shorter than this go to `sets`: a channel chunk walks its channels one at a time.
constexpr std::int64_t kSplitMinSpread = 32;

template <class Args>
bool split_refuses(const Args& a, std::string& why) {
  const family::NormSets sh = family::describe(a).shape;
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

template <class Args>
Verdict split_supports(const Args& a, const GpuInfo& gpu, SplitPlan& plan) {
  constexpr bool kBwd = kBackward<Args>;
  plan = SplitPlan{};
  std::string why;
  if (split_refuses(a, why)) return Verdict::reject(why);
  const auto d = family::describe(a);
  const std::int64_t run = norm_split_channel_chunks(d.shape) ? d.shape.spread : d.shape.channels;
  const int vec = rows_aligned(a, d.x_type, run) ? vec_of(d.x_type) : 1;
  bool partial_sums = false;
  if constexpr (kBwd) partial_sums = d.dweight != nullptr || d.dbias != nullptr;
  const DeviceGuard guard(gpu.device, "cuda norm split");
  const gpuError_t err = plan_norm_split(d.shape, d.x_type, d.p_type, vec, kBwd, partial_sums, gpu, plan.launch);
  if (err != gpuSuccess) {
    gpu_clear_error();
    fail(ErrorKind::device, "cuda norm split on cuda:{}: planning failed ({} sets of {} x {}, x {}): {}", gpu.device,
         d.shape.sets, d.shape.channels, d.shape.spread, family::elem_name(d.x_type), gpuGetErrorString(err));
  }
  plan.ok = true;
  const NormSplitLaunch& l = plan.launch;
  return {true, fmt::format("{} sets of {} x {}: {} chunks of {} {}, {} set groups, accesses of {}, grid {}{}",
                            d.shape.sets, d.shape.channels, d.shape.spread, l.chunks, l.chunk,
                            l.channel_chunks ? "channels" : "columns", l.walkers, l.vec, l.grid,
                            kBwd && partial_sums ? fmt::format(", {} rows of parameter sums", l.partials)
                                                 : std::string())};
}

template <class Args>
void split_run(const Args& a, const SplitPlan& plan, const KernelContext& ctx) {
  const char* variant = ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda norm split";
  const auto d = family::describe(a);
  if (!plan.ok) {
    std::string why;
    split_refuses(a, why);
    fail(ErrorKind::unsupported, "{} on cuda:{}: cannot run {} sets of {} x {}: {}", variant, ctx.device.index,
         d.shape.sets, d.shape.channels, d.shape.spread, why);
  }
  const DeviceGuard guard(ctx.device.index, variant);
  const auto stream = static_cast<gpuStream_t>(ctx.stream);
  const Workspace::Lease ws = acquire_scratch(ctx, plan.launch.workspace);
  gpuError_t err = gpuSuccess;
  if constexpr (kBackward<Args>) {
    err = launch_norm_split_bwd(d, plan.launch, ws.data(), stream);
  } else {
    err = launch_norm_split_fwd(d, plan.launch, ws.data(), stream);
  }
  if (err != gpuSuccess) launch_failed(variant, ctx, d, err);
}

std::vector<Tunable> split_tunables(bool backward) {
  std::vector<Tunable> t{{"threads", std::to_string(kNormSplitThreads)},
                         {"chunk", backward ? "2 accesses a thread (columns, or whole channels)"
                                            : "4 accesses a thread (columns, or whole channels)"},
                         {"grid", "chunks x set groups, twice the resident blocks"}};
  if (backward) t.push_back({"dw_db", "f64 partial rows per set group (columns) or per n (channels), added in order"});
  return t;
}

}  // namespace

void register_norm(Registry& r) {
  register_list(r, layer_norm_fwd_op(), "cuda",
                {{"rows", &ln_rows_supports<LayerNormFwdArgs>, &ln_rows_run<LayerNormFwdArgs>, rows_tunables(false)},
                 {"split", &split_supports<LayerNormFwdArgs>, &split_run<LayerNormFwdArgs>, split_tunables(false)},
                 {"sets", &norm_supports<LayerNormFwdArgs>, &norm_run<LayerNormFwdArgs>, tunables(false)}});
  register_list(r, layer_norm_bwd_op(), "cuda",
                {{"rows", &ln_rows_supports<LayerNormBwdArgs>, &ln_rows_run<LayerNormBwdArgs>, rows_tunables(true)},
                 {"split", &split_supports<LayerNormBwdArgs>, &split_run<LayerNormBwdArgs>, split_tunables(true)},
                 {"sets", &norm_supports<LayerNormBwdArgs>, &norm_run<LayerNormBwdArgs>, tunables(true)}});
  register_list(r, group_norm_fwd_op(), "cuda",
                {{"split", &split_supports<GroupNormFwdArgs>, &split_run<GroupNormFwdArgs>, split_tunables(false)},
                 {"sets", &norm_supports<GroupNormFwdArgs>, &norm_run<GroupNormFwdArgs>, tunables(false)}});
  register_list(r, group_norm_bwd_op(), "cuda",
                {{"split", &split_supports<GroupNormBwdArgs>, &split_run<GroupNormBwdArgs>, split_tunables(true)},
                 {"sets", &norm_supports<GroupNormBwdArgs>, &norm_run<GroupNormBwdArgs>, tunables(true)}});
}

}  // namespace opreg::cuda_like
