// The cuda rms_norm variants: which one takes a problem (supports), how it is laid out on the
// device (the plans), and the host side of a call: device selection, workspace, launches, the
// dW finisher, and errors that name the call and the kernel.
//
// Choice, in priority order (opreg ops and OPREG_VERBOSE=2 show it per shape):
//   cluster  rows longer than one block holds, or so few rows that one block per row would leave
//            most multiprocessors idle; sm_90 and later, 16-byte aligned rows
//   rows     the row in one block (forward: registers, a block per row group; backward: staged
//            in shared memory or in registers, persistent grid), several rows a block when short
//   split    anything: very long rows, long rows that are not 16-byte aligned
#include "backends/cuda_like/rms_norm.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cuda_like/device_guard.h"
#include "registry/fail.h"

namespace opreg::cuda_like {
namespace {

constexpr int kMaxCluster = 8;  // the portable cluster size

Elem elem_of(DType d) {
  switch (d) {
    case DType::f32:
      return Elem::f32;
    case DType::f16:
      return Elem::f16;
    case DType::bf16:
      return Elem::bf16;
    default:
      break;
  }
  fail(ErrorKind::internal, "cuda rms_norm: dtype {} passed the op's check", to_string(d));
}

Cast cast_of(Casting c) {
  switch (c) {
    case Casting::gemma:
      return Cast::gemma;
    case Casting::none:
      return Cast::none;
    case Casting::llama:
      break;
  }
  return Cast::llama;
}

bool aligned16(const Tensor& t) { return !t.defined() || reinterpret_cast<std::uintptr_t>(t.data()) % 16 == 0; }

GpuInfo gpu_info(const DeviceProps& props, int index) {
  GpuInfo g;
  g.device = index;
  g.sm_count = props.compute_units > 0 ? props.compute_units : 1;
  const std::string_view cc = props.get("compute_capability");
  std::from_chars(cc.data(), cc.data() + cc.size(), g.cc_major);
  const std::string_view smem = props.get("smem_per_block_optin");
  std::from_chars(smem.data(), smem.data() + smem.size(), g.smem_optin);
  return g;
}

template <class Args>
RowProblem make_problem(const Args& a, const DeviceProps& props, std::initializer_list<const Tensor*> rowwise) {
  RowProblem p;
  const RowsHidden rh = rows_hidden(a.x.shape());
  p.rows = rh.rows;
  p.hidden = rh.hidden;
  p.xt = elem_of(a.x.dtype());
  p.wt = a.weight.defined() ? elem_of(a.weight.dtype()) : p.xt;
  p.aligned = p.hidden % vec_of(p.xt) == 0 && aligned16(a.weight);
  for (const Tensor* t : rowwise) p.aligned = p.aligned && aligned16(*t);
  p.gpu = gpu_info(props, a.x.device().index);
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

RowProblem row_problem(const RmsNormFwdArgs& a, const DeviceProps& props) {
  return make_problem(a, props, {&a.x, &a.y});
}
RowProblem row_problem(const RmsNormBwdArgs& a, const DeviceProps& props) {
  return make_problem(a, props, {&a.dy, &a.x, &a.dx});
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
int stages_wanted(const RowProblem& p, bool backward) { return !backward && p.xt != Elem::f32 ? 1 : 2; }

// Stages and held scales of a 16-byte launch shape; false if not even one stage fits.
bool fit_smem(const RowProblem& p, bool backward, RowShape& s) {
  const int threads = s.tpr * s.slots;
  std::size_t reserved = 1024;  // the static reduction buffers, and slack
  if (backward && s.slots > 1) reserved += static_cast<std::size_t>(p.hidden) * sizeof(float);
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
  if (s.vec == 1 || (p.xt == Elem::f32 && s.nv == 4)) return;
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
  const int vec = p.aligned ? vec_of(p.xt) : 1;
  const std::int64_t nvec = p.hidden / vec;
  static constexpr int kScalar[] = {8};
  static constexpr int kFwd[] = {4, 8, 2};
  static constexpr int kBwd[] = {1, 2, 4};
  std::span<const int> order = vec == 1 ? std::span<const int>(kScalar) : backward ? kBwd : kFwd;
  const std::int64_t prefer = backward ? 256 : 512;
  std::int64_t capacity = 0;
  std::optional<RowShape> fallback;
  for (const int nv : order) {
    const int limit = max_threads(backward, nv, vec);
    capacity = std::max<std::int64_t>(capacity, static_cast<std::int64_t>(limit) * nv * vec);
    const std::int64_t want = (nvec + nv - 1) / nv;
    if (want > limit) continue;
    RowShape s;
    s.vec = vec;
    s.nv = nv;
    s.tpr = round_threads(want);
    s.slots = s.tpr >= 256 ? 1 : 256 / s.tpr;
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
    const bool spills = backward && p.xt == Elem::f32 && nv == 4;
    if (vec == 1 || (s.tpr <= prefer && !spills)) return {s, {}};
    // Else the fewest threads a row, a spilling shape only if nothing else fits.
    const bool fallback_spills = fallback && backward && p.xt == Elem::f32 && fallback->nv == 4;
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
  const int vec = vec_of(p.xt);
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

RmsFwdParams fwd_params(const RmsNormFwdArgs& a, const RowProblem& rp) {
  RmsFwdParams p;
  p.x = a.x.data();
  p.weight = a.weight.defined() ? a.weight.data() : nullptr;
  p.y = a.y.data();
  p.rstd = a.rstd.data_as<float>();
  p.rows = rp.rows;
  p.hidden = rp.hidden;
  p.eps = static_cast<float>(a.eps);
  p.offset = static_cast<float>(a.offset);
  p.xt = rp.xt;
  p.wt = rp.wt;
  p.casting = cast_of(a.casting);
  return p;
}

RmsBwdParams bwd_params(const RmsNormBwdArgs& a, const RowProblem& rp) {
  RmsBwdParams p;
  p.dy = a.dy.data();
  p.x = a.x.data();
  p.weight = a.weight.defined() ? a.weight.data() : nullptr;
  p.rstd = a.rstd.data_as<const float>();
  p.dx = a.dx.data();
  p.dweight = a.dweight.defined() ? a.dweight.data() : nullptr;
  p.rows = rp.rows;
  p.hidden = rp.hidden;
  p.offset = static_cast<float>(a.offset);
  p.xt = rp.xt;
  p.wt = rp.wt;
  p.casting = cast_of(a.casting);
  return p;
}

namespace {

// The call's device is current while it runs; the caller's is restored after.
class DeviceGuard {
 public:
  DeviceGuard(int index, const char* variant) : current_(index) {
    if (current_.error() != gpuSuccess) {
      fail(ErrorKind::device, "{} on cuda:{}: cudaSetDevice failed: {}", variant, index,
           gpuGetErrorString(current_.error()));
    }
  }

 private:
  CurrentDevice current_;
};

// The host side of one call: its variant, device, stream and problem, for error messages.
struct Call {
  const KernelContext& ctx;
  const RowProblem& problem;
  gpuStream_t stream() const { return static_cast<gpuStream_t>(ctx.stream); }
  const char* variant() const { return ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda.rms_norm"; }

  void check(gpuError_t err, const char* call, const char* kernel) const {
    if (err == gpuSuccess) return;
    // A failed call also leaves the runtime's last error set: clear it, or the next launch's
    // check (here or in the caller's code) would report this one.
    gpuGetLastError();
    fail(ErrorKind::device, "{} on cuda:{}: {} failed for kernel {} ({}x{}, x {}, weight {}): {}", variant(),
         ctx.device.index, call, kernel, problem.rows, problem.hidden, elem_name(problem.xt), elem_name(problem.wt),
         gpuGetErrorString(err));
  }
  static const char* elem_name(Elem e) { return e == Elem::f32 ? "f32" : e == Elem::f16 ? "f16" : "bf16"; }

  [[noreturn]] void refuse(const std::string& why) const {
    fail(ErrorKind::unsupported, "{} on cuda:{}: cannot run {}x{}: {}", variant(), ctx.device.index, problem.rows,
         problem.hidden, why);
  }

  Workspace::Lease scratch(std::size_t bytes) const {
    if (bytes == 0) return {};
    return ctx.backend->workspace(ctx.device.index).acquire(bytes, ctx.stream);
  }

  // dweight from the partial rows every backward kernel leaves.
  void finish_dw(const RmsBwdParams& p, const float* partial, std::int64_t partials) const {
    if (p.dweight == nullptr) return;
    Launch l;
    check(launch_dw_finish(partial, partials, p.hidden, p.dweight, p.wt, stream(), l), "launching", l.kernel);
  }
};

// ---- The variants. A forced variant (OPREG_FORCE_VARIANT skips supports()) that cannot hold the
// problem says why instead of running.

template <class Args, class Body>
void run_call(const Args& a, const KernelContext& ctx, Body&& body) {
  const RowProblem rp = row_problem(a, *ctx.props);
  if (rp.rows == 0 && std::is_same_v<Args, RmsNormFwdArgs>) return;
  DeviceGuard guard(ctx.device.index, ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda.rms_norm");
  body(Call{ctx, rp}, rp);
}

// Backward preamble shared by the variants: nothing to do without columns; without rows, dW is 0.
bool bwd_trivial(const Call& call, const RmsBwdParams& p) {
  if (p.hidden == 0) return true;
  if (p.rows > 0) return false;
  if (p.dweight != nullptr) {
    const auto bytes = static_cast<std::size_t>(p.hidden) * static_cast<std::size_t>(elem_bytes(p.wt));
    call.check(gpuMemsetAsync(p.dweight, 0, bytes, call.stream()), "cudaMemsetAsync", "dweight");
  }
  return true;
}

// The rows and cluster variants: the same kernels, with the launch shape of their own plan.
template <ShapeOrWhy (*Shape)(const RowProblem&, bool)>
void fwd_resident(const RmsNormFwdArgs& a, const KernelContext& ctx) {
  run_call(a, ctx, [&](const Call& call, const RowProblem& rp) {
    const ShapeOrWhy sw = Shape(rp, false);
    if (!sw.shape) call.refuse(sw.why);
    const RmsFwdParams p = fwd_params(a, rp);
    Launch l;
    call.check(plan_fwd_rows(p, *sw.shape, rp.gpu, l), l.call, l.kernel);
    call.check(launch_fwd_rows(p, *sw.shape, l, call.stream()), "launching", l.kernel);
  });
}

template <ShapeOrWhy (*Shape)(const RowProblem&, bool)>
void bwd_resident(const RmsNormBwdArgs& a, const KernelContext& ctx) {
  run_call(a, ctx, [&](const Call& call, const RowProblem& rp) {
    const RmsBwdParams p = bwd_params(a, rp);
    if (bwd_trivial(call, p)) return;
    const ShapeOrWhy sw = Shape(rp, true);
    if (!sw.shape) call.refuse(sw.why);
    Launch l;
    call.check(plan_bwd_rows(p, *sw.shape, rp.gpu, l), l.call, l.kernel);
    const Workspace::Lease ws = call.scratch(l.workspace);
    auto* partial = static_cast<float*>(ws.data());
    call.check(launch_bwd_rows(p, *sw.shape, l, partial, call.stream()), "launching", l.kernel);
    call.finish_dw(p, partial, l.partials);
  });
}

void fwd_split(const RmsNormFwdArgs& a, const KernelContext& ctx) {
  run_call(a, ctx, [&](const Call& call, const RowProblem& rp) {
    const RmsFwdParams p = fwd_params(a, rp);
    const int vec = rp.aligned ? vec_of(rp.xt) : 1;
    Launch l;
    call.check(plan_fwd_split(p, vec, rp.gpu, l), l.call, l.kernel);
    const Workspace::Lease ws = call.scratch(l.workspace);
    call.check(launch_fwd_split(p, vec, l, ws.data(), call.stream()), "launching", l.kernel);
  });
}

void bwd_split(const RmsNormBwdArgs& a, const KernelContext& ctx) {
  run_call(a, ctx, [&](const Call& call, const RowProblem& rp) {
    const RmsBwdParams p = bwd_params(a, rp);
    if (bwd_trivial(call, p)) return;
    const int vec = rp.aligned ? vec_of(rp.xt) : 1;
    Launch l;
    call.check(plan_bwd_split(p, vec, rp.gpu, l), l.call, l.kernel);
    const Workspace::Lease ws = call.scratch(l.workspace);
    float* partial = nullptr;
    call.check(launch_bwd_split(p, vec, l, ws.data(), &partial, call.stream()), "launching", l.kernel);
    call.finish_dw(p, partial, l.partials);
  });
}

// ---- supports(): the same plans, so a variant accepts exactly what it can run.

template <class Args>
Verdict verdict(const Args& a, const DeviceProps& props, bool backward, ShapeOrWhy (*shape)(const RowProblem&, bool)) {
  const ShapeOrWhy sw = shape(row_problem(a, props), backward);
  return sw.shape ? Verdict::accept() : Verdict::reject(sw.why);
}

template <class Args>
void add(Registry& registry, const Op<Args>& op, const char* impl, int priority,
         void (*run)(const Args&, const KernelContext&),
         std::type_identity_t<Function<Verdict(const Args&, const DeviceProps&)>> supports,
         std::vector<Tunable> tunables) {
  VariantSpec<Args> spec;
  spec.backend = "cuda";
  spec.impl = impl;
  spec.priority = priority;
  spec.run = run;
  spec.supports = std::move(supports);
  spec.tunables = std::move(tunables);
  registry.add_variant(op, std::move(spec)).release();
}

}  // namespace

void register_rms_norm(Registry& registry) {
  const auto& fwd = rms_norm_fwd_op();
  const auto& bwd = rms_norm_bwd_op();
  if (cluster_kernels_built()) {
    add(registry, fwd, "cluster", 30, fwd_resident<cluster_shape>,
        [](const RmsNormFwdArgs& a, const DeviceProps& p) { return verdict(a, p, false, cluster_shape); },
        {{"max_cluster", "8"}, {"accesses_per_thread", "4"}, {"access_bytes", "16"}});
    add(registry, bwd, "cluster", 30, bwd_resident<cluster_shape>,
        [](const RmsNormBwdArgs& a, const DeviceProps& p) { return verdict(a, p, true, cluster_shape); },
        {{"max_cluster", "8"}, {"accesses_per_thread", "2"}, {"access_bytes", "16"}});
  }
  add(registry, fwd, "rows", 20, fwd_resident<rows_shape>,
      [](const RmsNormFwdArgs& a, const DeviceProps& p) { return verdict(a, p, false, rows_shape); },
      {{"accesses_per_thread", "4,8,2"},
       {"access_bytes", "16 or 1 element"},
       {"block", "256 or one row"},
       {"grid", "a block per row group"}});
  add(registry, bwd, "rows", 20, bwd_resident<rows_shape>,
      [](const RmsNormBwdArgs& a, const DeviceProps& p) { return verdict(a, p, true, rows_shape); },
      {{"accesses_per_thread", "1,2,4"},
       {"access_bytes", "16 or 1 element"},
       {"block", "256 or one row"},
       {"stages", "2 in shared memory, or registers"},
       {"grid", "persistent"}});
  add(registry, fwd, "split", 10, fwd_split, {}, {{"threads", "256"}, {"accesses_per_thread", "4"}});
  add(registry, bwd, "split", 10, bwd_split, {}, {{"threads", "256"}, {"accesses_per_thread", "2"}});
}

}  // namespace opreg::cuda_like
