// The cuda rms_norm and fused_add_rms_norm variants (plan.h; their lists are list.cpp): which
// problems each takes (supports), how it lays them out on the device (its plan: the launch shape
// and the launch geometry, made once per problem and kept by the choice cache), and the host side
// of a call: device selection, workspace, launches, the dW finisher, and errors that name the call
// and the kernel. All over the row-norm family's descriptors (RowNormFwd, RowNormBwd).
#include "backends/cuda_like/rms_norm/plan.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cuda_like/device_guard.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::cuda_like {
namespace {

constexpr int kMaxCluster = 8;  // the portable cluster size

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <class Desc>
RowProblem make_problem(const Desc& d, const GpuInfo& gpu, std::initializer_list<const void*> rowwise) {
  RowProblem p;
  p.rows = d.rows;
  p.hidden = d.hidden;
  p.x_type = d.x_type;
  p.w_type = d.weight != nullptr ? d.w_type : d.x_type;
  p.aligned = p.hidden % vec_of(p.x_type) == 0 && aligned16(d.weight);
  for (const void* t : rowwise) p.aligned = p.aligned && aligned16(t);
  p.gpu = gpu;
  return p;
}

int max_threads(bool backward, int nv, int vec) {
  return backward ? max_threads_bwd(nv, vec) : max_threads_fwd(nv, vec);
}

}  // namespace

int round_threads(std::int64_t want) {
  if (want <= 1) return 1;
  if (want <= kWarpSize) {
    int t = 1;
    while (t < want) t *= 2;
    return t;
  }
  return static_cast<int>((want + kWarpSize - 1) / kWarpSize * kWarpSize);
}

// Every tensor read or written row by row (the fused op's residual, s and ds_out are null for
// rms_norm, and aligned).
RowProblem row_problem(const RowNormFwd& d, const GpuInfo& gpu) {
  return make_problem(d, gpu, {d.x, d.y, d.residual, d.s});
}
RowProblem row_problem(const RowNormBwd& d, const GpuInfo& gpu) {
  return make_problem(d, gpu, {d.dy, d.x, d.dx, d.ds_out});
}

namespace {

// How many rows the 16-byte path stages: `want` (two: one in use, one arriving) where they fit
// in the shared memory a block may take (`room`), else fewer. Only the backward and the cluster
// forward stage (the rows forward keeps its row in registers); measured on the H200, more stages
// only lower the blocks a multiprocessor holds, and a 16-bit cluster forward is fastest with one.
int stages_for(std::size_t per_stage, std::size_t room, int want) {
  const std::size_t fit = per_stage == 0 ? static_cast<std::size_t>(want) : room / per_stage;
  return static_cast<int>(std::min<std::size_t>(fit, static_cast<std::size_t>(want)));
}

// The backward holds its scales in shared memory when they take no more than this a block.
constexpr std::size_t kHoldBytes = 32 * 1024;

// Stages a 16-byte launch shape asks for.
int stages_wanted(const RowProblem& p, bool backward) { return !backward && p.x_type != Elem::f32 ? 1 : 2; }

// Stages and held scales of a 16-byte launch shape; false if not even one stage fits.
bool fit_smem(const RowProblem& p, bool backward, RowShape& s) {
  const int threads = s.tpr * s.slots;
  std::size_t reserved = 1024;  // the static reduction buffers, and slack
  if (backward && s.slots > 1) reserved += static_cast<std::size_t>(p.hidden) * partial_bytes(p.x_type);
  const std::size_t hold = backward ? held_scale_bytes(s.nv, s.vec, threads) : 0;
  s.hold = backward && hold <= kHoldBytes;
  if (s.hold) reserved += hold;
  const std::size_t room = p.gpu.smem_optin > reserved ? p.gpu.smem_optin - reserved : 0;
  s.stages = stages_for(stage_bytes(backward, s.nv, threads), room, stages_wanted(p, backward));
  return s.stages > 0;
}

// The backward keeps the row in registers instead of staging it where the staged block would take
// more than half a multiprocessor's shared memory (one block each: measured on the H100 at 4096 x
// 16384 bf16, 84% of the copy in registers against 78% with one stage), unless the registers
// spill (f32 with 4 accesses a thread: 624 bytes).
void prefer_registers(const RowProblem& p, RowShape& s) {
  if (s.vec == 1 || (p.x_type == Elem::f32 && s.nv == 4)) return;
  const int threads = s.tpr * s.slots;
  const std::size_t staged = static_cast<std::size_t>(s.stages) * stage_bytes(true, s.nv, threads) +
                             (s.hold ? held_scale_bytes(s.nv, s.vec, threads) : 0);
  if (2 * staged > p.gpu.smem_optin) {
    s.stages = 0;
    s.hold = false;
  }
}

}  // namespace

// Accesses per thread: the first choice whose row takes at most `prefer` threads, else the one
// with the fewest threads a row. Measured on the H200 and again on the H100 (the sweep,
// docs/backends/cuda.md): the forward is fastest with 4 (8 for rows past 512 threads), the
// backward with the fewest that keep a row within 256 threads (1 for short rows, up to 4); an
// f32 backward with 4 spills, so it takes 4 only when nothing else fits.
ShapeOrWhy rows_shape(const RowProblem& p, bool backward) {
  const int vec = p.aligned ? vec_of(p.x_type) : 1;
  const std::int64_t nvec = p.hidden / vec;
  static constexpr int kScalar[] = {8};
  static constexpr int kFwd[] = {4, 8, 2};
  static constexpr int kBwd[] = {1, 2, 4};
  std::span<const int> order = vec == 1 ? std::span<const int>(kScalar) : backward ? kBwd : kFwd;
  const std::int64_t prefer = backward ? 256 : 512;
  std::int64_t capacity = 0;
  std::optional<RowShape> fallback;
  for (const int nv : order) {
    const std::optional<RowShape> spread =
        spread_row<RowShape>(nvec, vec, nv, max_threads(backward, nv, vec), capacity);
    if (!spread) continue;
    RowShape s = *spread;
    if (!backward) {
      // The forward holds the row in registers, a block (or a cluster) per row group: no
      // persistent grid, whose blocks would wait for their own rows' reductions with nothing in
      // flight; the hardware overlaps many short-lived blocks instead.
      s.stages = 0;
      s.per_sm = -1;
    } else if (vec > 1) {
      if (!fit_smem(p, backward, s)) continue;
      prefer_registers(p, s);
    }
    const bool spills = backward && p.x_type == Elem::f32 && nv == 4;
    if (vec == 1 || (s.tpr <= prefer && !spills)) return {s, {}};
    // Else the fewest threads a row, a spilling shape only if nothing else fits.
    const bool fallback_spills = fallback && backward && p.x_type == Elem::f32 && fallback->nv == 4;
    if (!fallback || (fallback_spills && !spills) || (!spills && s.tpr < fallback->tpr)) fallback = s;
  }
  if (fallback) return {fallback, {}};
  return {std::nullopt, fmt::format("hidden {} is over the {} elements one block holds ({} accesses)", p.hidden,
                                    capacity, vec == 1 ? "rows not 16-byte aligned: 1-element" : "16-byte")};
}

ShapeOrWhy cluster_shape(const RowProblem& p, bool backward) {
  if (!cluster_kernels_built()) return {std::nullopt, "built without thread-block clusters (HIP)"};
  if (p.gpu.cc_major < 9) {
    return {std::nullopt, fmt::format("needs thread-block clusters (compute capability 9.0 or later); this device "
                                      "is {}.x",
                                      p.gpu.cc_major)};
  }
  if (!p.aligned) return {std::nullopt, "rows are not 16-byte aligned (hidden, or a tensor's address)"};
  const int vec = vec_of(p.x_type);
  const int nv = backward ? kClusterBwdNv : kClusterFwdNv;
  const int limit = max_threads(backward, nv, vec);
  const std::int64_t nvec = p.hidden / vec;
  const std::int64_t per_block = static_cast<std::int64_t>(limit) * nv;
  const std::int64_t least = (nvec + per_block - 1) / per_block;
  if (least > kMaxCluster) {
    return {std::nullopt, fmt::format("hidden {} needs {} blocks of {} elements; a cluster has at most {}", p.hidden,
                                      least, per_block * vec, kMaxCluster)};
  }
  // The rows variant is the better choice wherever it holds the row (measured on the H200 and the
  // H100, docs/backends/cuda.md), unless there are so few rows that a block each
  // would leave most multiprocessors idle: then each row may take up to 8 of them, as long as a
  // block keeps 256 threads' work.
  const bool rows_fit = rows_shape(p, backward).shape.has_value();
  const bool few_rows = p.rows * 2 <= p.gpu.sm_count;
  const std::int64_t min_block = 256LL * nv;
  if (rows_fit && !(few_rows && nvec >= 2 * min_block)) {
    return {std::nullopt, fmt::format("the rows variant holds the row and {} rows fill the device (cluster takes rows "
                                      "longer than one block holds, or at most {} rows of at least {} elements)",
                                      p.rows, p.gpu.sm_count / 2, 2 * min_block * vec)};
  }
  // Blocks of at most 256 threads (measured on the H100 at 4096 x 32768: 8 blocks of 256 threads
  // 75% of the copy, 2 of 1024 63%, bf16 backward), then more blocks where rows are few.
  std::int64_t c = least < 1 ? 1 : least;
  while (c < kMaxCluster && nvec > c * nv * 256) ++c;
  if (few_rows) {
    while (c < kMaxCluster && p.rows * (c + 1) <= p.gpu.sm_count && nvec >= (c + 1) * min_block) ++c;
  }
  if (c < 2) return {std::nullopt, "the row is too short to split over a cluster"};
  RowShape s;
  s.vec = vec;
  s.nv = nv;
  s.cluster = static_cast<int>(c);
  s.tpr = std::max(kWarpSize, round_threads((nvec + c * nv - 1) / (c * nv)));
  if (!fit_smem(p, backward, s)) return {std::nullopt, "a cluster block's stage does not fit in shared memory"};
  return {s, {}};
}

using ShapeFn = ShapeOrWhy (*)(const RowProblem&, bool);

namespace {

// What a call's messages name of its problem.
struct Named {
  std::int64_t rows;
  std::int64_t hidden;
  Elem x_type;
  Elem w_type;
  template <class Desc>
  explicit Named(const Desc& d)
      : rows(d.rows), hidden(d.hidden), x_type(d.x_type), w_type(d.weight != nullptr ? d.w_type : d.x_type) {}
};

// A failed runtime call, named with the variant, the kernel and the problem. A failed call also
// leaves the runtime's last error set: it is cleared, or the next launch's check (here or in the
// caller's code) would report this one.
void check(gpuError_t err, const char* variant, int device, const Named& problem, const char* call,
           const char* kernel) {
  if (err == gpuSuccess) return;
  gpu_clear_error();
  fail(ErrorKind::device, "{} on cuda:{}: {} failed for kernel {} ({}x{}, x {}, weight {}): {}", variant, device, call,
       kernel, problem.rows, problem.hidden, family::elem_name(problem.x_type), family::elem_name(problem.w_type),
       gpuGetErrorString(err));
}

// The host side of one call: its variant, device, stream and problem, for error messages.
struct Call {
  const KernelContext& ctx;
  Named problem;
  gpuStream_t stream() const { return static_cast<gpuStream_t>(ctx.stream); }
  const char* variant() const { return ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda.rms_norm"; }

  void check(gpuError_t err, const char* call, const char* kernel) const {
    cuda_like::check(err, variant(), ctx.device.index, problem, call, kernel);
  }

  [[noreturn]] void refuse(const std::string& why) const {
    fail(ErrorKind::unsupported, "{} on cuda:{}: cannot run {}x{}: {}", variant(), ctx.device.index, problem.rows,
         problem.hidden, why);
  }

  Workspace::Lease scratch(std::size_t bytes) const {
    if (bytes == 0) return {};
    return acquire_scratch(ctx, bytes);
  }

  // dweight from the partial rows every backward kernel leaves.
  void finish_dw(const RowNormBwd& p, const void* partial, std::int64_t partials) const {
    if (p.dweight == nullptr) return;
    Launch l;
    check(launch_dw_finish(partial, p.x_type, partials, p.hidden, p.dweight, p.w_type, stream(), l), "launching",
          l.kernel);
  }
};

const GpuInfo& facts_of(const KernelContext& ctx) { return *static_cast<const GpuInfo*>(ctx.props->facts); }

// Backward preamble shared by the variants: nothing to do without columns; without rows, dW is 0.
bool bwd_trivial(const Call& call, const RowNormBwd& p) {
  if (p.hidden == 0) return true;
  if (p.rows > 0) return false;
  if (p.dweight != nullptr) {
    const auto bytes = static_cast<std::size_t>(p.hidden) * static_cast<std::size_t>(elem_bytes(p.w_type));
    call.check(gpuMemsetAsync(p.dweight, 0, bytes, call.stream()), "cudaMemsetAsync", "dweight");
  }
  return true;
}

// The launch planners of launch.h, by direction.
gpuError_t plan_rows(const RowNormFwd& d, const RowShape& s, const GpuInfo& g, Launch& l) {
  return plan_fwd_rows(d, s, g, l);
}
gpuError_t plan_rows(const RowNormBwd& d, const RowShape& s, const GpuInfo& g, Launch& l) {
  return plan_bwd_rows(d, s, g, l);
}
gpuError_t plan_split(const RowNormFwd& d, int vec, const GpuInfo& g, Launch& l) { return plan_fwd_split(d, vec, g, l); }
gpuError_t plan_split(const RowNormBwd& d, int vec, const GpuInfo& g, Launch& l) { return plan_bwd_split(d, vec, g, l); }

template <class Desc>
constexpr bool kBackward = std::is_same_v<Desc, RowNormBwd>;

template <class Desc>
bool has_work(const Desc& d) {
  return kBackward<Desc> ? d.rows > 0 && d.hidden > 0 : d.rows > 0;
}

// The variant's name, for the messages of a planning that failed on the device.
template <class Desc, bool Fused>
std::string name_of(const char* impl) {
  return fmt::format("cuda.{}.{}.{}", Fused ? "fused_add_rms_norm" : "rms_norm", kBackward<Desc> ? "bwd" : "fwd", impl);
}

std::string shape_note(const RowShape& s, const Launch& l) {
  return fmt::format("{} x {} threads a row, {} access(es) of {}, {} row(s) a block, cluster {}, {} stage(s), "
                     "grid {} of {} threads",
                     s.tpr, s.cluster, s.nv, s.vec, s.slots, s.cluster, s.stages, l.grid, l.threads);
}

// ---- The variants. supports() makes the plan: the launch shape, then (for a problem with work)
// the launch geometry of the exact kernel on the device. A forced variant (OPREG_FORCE_VARIANT)
// that cannot hold the problem runs the plan it was refused for, and says why instead of running.

template <class Desc, ShapeFn Shape, bool Fused>
Verdict resident_supports(const Desc& d, const GpuInfo& gpu, ResidentPlan& plan, const char* impl) {
  const RowProblem rp = row_problem(d, gpu);
  const ShapeOrWhy sw = Shape(rp, kBackward<Desc>);
  if (!sw.shape) return Verdict::reject(sw.why);
  plan.ok = true;
  plan.shape = *sw.shape;
  if (!has_work(d)) return Verdict::accept();
  const std::string name = name_of<Desc, Fused>(impl);
  const DeviceGuard guard(gpu.device, name.c_str());
  check(plan_rows(d, plan.shape, gpu, plan.launch), name.c_str(), gpu.device, Named(d), plan.launch.call,
        plan.launch.kernel);
  return {true, shape_note(plan.shape, plan.launch)};
}

template <class Desc, ShapeFn Shape>
void resident_run(const Desc& d, const ResidentPlan& plan, const KernelContext& ctx) {
  if (!kBackward<Desc> && d.rows == 0) return;
  const Call call{ctx, Named(d)};
  DeviceGuard guard(ctx.device.index, call.variant());
  if constexpr (kBackward<Desc>) {
    if (bwd_trivial(call, d)) return;
  }
  if (!plan.ok) call.refuse(Shape(row_problem(d, facts_of(ctx)), kBackward<Desc>).why);  // forced past its refusal
  const Launch& l = plan.launch;
  if constexpr (kBackward<Desc>) {
    const Workspace::Lease ws = call.scratch(l.workspace);
    void* partial = ws.data();
    call.check(launch_bwd_rows(d, plan.shape, l, partial, call.stream()), "launching", l.kernel);
    call.finish_dw(d, partial, l.partials);
  } else {
    call.check(launch_fwd_rows(d, plan.shape, l, call.stream()), "launching", l.kernel);
  }
}

}  // namespace

template <class Desc, bool Fused>
Verdict RowNormPlans<Desc, Fused>::rows_supports(const Desc& d, const GpuInfo& gpu, ResidentPlan& plan) {
  return resident_supports<Desc, rows_shape, Fused>(d, gpu, plan, "rows");
}
template <class Desc, bool Fused>
Verdict RowNormPlans<Desc, Fused>::cluster_supports(const Desc& d, const GpuInfo& gpu, ResidentPlan& plan) {
  return resident_supports<Desc, cluster_shape, Fused>(d, gpu, plan, "cluster");
}
template <class Desc>
void RowNormRuns<Desc>::rows_run(const Desc& d, const ResidentPlan& plan, const KernelContext& ctx) {
  resident_run<Desc, rows_shape>(d, plan, ctx);
}
template <class Desc>
void RowNormRuns<Desc>::cluster_run(const Desc& d, const ResidentPlan& plan, const KernelContext& ctx) {
  resident_run<Desc, cluster_shape>(d, plan, ctx);
}

template <class Desc, bool Fused>
void RowNormPlans<Desc, Fused>::split_plan(const Desc& d, const GpuInfo& gpu, SplitPlan& plan) {
  const RowProblem rp = row_problem(d, gpu);
  plan.vec = rp.aligned ? vec_of(rp.x_type) : 1;
  if (!has_work(d)) return;
  const std::string name = name_of<Desc, Fused>("split");
  const DeviceGuard guard(gpu.device, name.c_str());
  check(plan_split(d, plan.vec, gpu, plan.launch), name.c_str(), gpu.device, Named(d), plan.launch.call,
        plan.launch.kernel);
}

template <class Desc>
void RowNormRuns<Desc>::split_run(const Desc& d, const SplitPlan& plan, const KernelContext& ctx) {
  if (!kBackward<Desc> && d.rows == 0) return;
  const Call call{ctx, Named(d)};
  DeviceGuard guard(ctx.device.index, call.variant());
  const Launch& l = plan.launch;
  if constexpr (kBackward<Desc>) {
    if (bwd_trivial(call, d)) return;
    const Workspace::Lease ws = call.scratch(l.workspace);
    void* partial = nullptr;
    call.check(launch_bwd_split(d, plan.vec, l, ws.data(), &partial, call.stream()), "launching", l.kernel);
    call.finish_dw(d, partial, l.partials);
  } else {
    const Workspace::Lease ws = call.scratch(l.workspace);
    call.check(launch_fwd_split(d, plan.vec, l, ws.data(), call.stream()), "launching", l.kernel);
  }
}

// The instantiations list.cpp registers: each direction's plans with rms_norm's and the fused
// op's names, and its runs.
template struct RowNormPlans<RowNormFwd, false>;
template struct RowNormPlans<RowNormFwd, true>;
template struct RowNormPlans<RowNormBwd, false>;
template struct RowNormPlans<RowNormBwd, true>;
template struct RowNormRuns<RowNormFwd>;
template struct RowNormRuns<RowNormBwd>;

}  // namespace opreg::cuda_like
