// The cpu variants: each turns the op's argument struct into a plain descriptor (abi.h), sizes
// the team, provides the scratch, and calls the kernel of its instruction set.
#include "backends/cpu/variants.h"

#include <string>
#include <vector>

#include "backends/cpu/abi.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/rms_norm.h"
#include "opreg/ops.h"
#include "registry/fail.h"

namespace opreg::cpu {

namespace {

std::string_view elem_name(Elem e) {
  switch (e) {
    case Elem::f32:
      return "f32";
    case Elem::f16:
      return "f16";
    case Elem::bf16:
      return "bf16";
  }
  return "?";
}

}  // namespace

void no_kernel(const char* op, Elem x, Elem w) {
  fail(ErrorKind::internal, "cpu {}: no kernel for x {} with parameters {}", op, elem_name(x), elem_name(w));
}

namespace {

using i64 = std::int64_t;

Elem elem(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f32:
      return Elem::f32;
    case DType::f16:
      return Elem::f16;
    case DType::bf16:
      return Elem::bf16;
    default:
      break;
  }
  fail(ErrorKind::internal, "cpu kernels: dtype {} reached a kernel (the op's check refuses it)", to_string(t.dtype()));
}

Mode mode(Casting c) {
  switch (c) {
    case Casting::gemma:
      return Mode::gemma;
    case Casting::none:
      return Mode::none;
    case Casting::llama:
      break;
  }
  return Mode::llama;
}

const void* in(const Tensor& t) { return t.defined() ? t.data() : nullptr; }
void* out(const Tensor& t) { return t.defined() ? t.data() : nullptr; }
// The parameters' dtype: the first defined of `params`, f32 when none is.
Elem param_type(std::initializer_list<const Tensor*> params) {
  for (const Tensor* p : params) {
    if (p->defined()) return elem(*p);
  }
  return Elem::f32;
}

// ---- Descriptors

RmsFwd describe(const RmsNormFwdArgs& a) {
  const RowsHidden s = rows_hidden(a.x.shape());
  return {.x = a.x.data(), .weight = in(a.weight), .y = a.y.data(), .rstd = a.rstd.data_as<float>(),
          .rows = s.rows, .hidden = s.hidden, .eps = a.eps, .offset = a.offset, .mode = mode(a.casting),
          .x_type = elem(a.x), .w_type = param_type({&a.weight})};
}
RmsFwd describe(const FusedAddRmsNormFwdArgs& a) {
  const RowsHidden s = rows_hidden(a.x.shape());
  return {.x = a.x.data(), .residual = a.residual.data(), .weight = in(a.weight), .y = a.y.data(), .s = a.s.data(),
          .rstd = a.rstd.data_as<float>(), .rows = s.rows, .hidden = s.hidden, .eps = a.eps, .offset = a.offset,
          .mode = mode(a.casting), .x_type = elem(a.x), .w_type = param_type({&a.weight})};
}
RmsBwd describe(const RmsNormBwdArgs& a) {
  const RowsHidden s = rows_hidden(a.x.shape());
  return {.dy = a.dy.data(), .x = a.x.data(), .weight = in(a.weight), .rstd = a.rstd.data_as<const float>(),
          .dx = a.dx.data(), .dweight = out(a.dweight), .rows = s.rows, .hidden = s.hidden, .offset = a.offset,
          .mode = mode(a.casting), .x_type = elem(a.x), .w_type = param_type({&a.weight})};
}
RmsBwd describe(const FusedAddRmsNormBwdArgs& a) {
  const RowsHidden s = rows_hidden(a.s.shape());
  return {.dy = a.dy.data(), .ds_out = a.ds_out.data(), .x = a.s.data(), .weight = in(a.weight),
          .rstd = a.rstd.data_as<const float>(), .dx = a.dx.data(), .dweight = out(a.dweight), .rows = s.rows,
          .hidden = s.hidden, .offset = a.offset, .mode = mode(a.casting), .x_type = elem(a.s),
          .w_type = param_type({&a.weight})};
}

NormShape layer_shape(const Shape& x) {
  const RowsHidden s = rows_hidden(x);
  return {.sets = s.rows, .groups = 1, .channels = s.hidden, .spread = 1};
}
NormShape group_shape(const Shape& x, i64 groups) {
  i64 spread = 1;
  for (int d = 2; d < x.ndim(); ++d) spread *= x[d];
  return {.sets = x[0] * groups, .groups = groups, .channels = x[1] / groups, .spread = spread};
}

template <class Args>
NormFwd describe_norm_fwd(const Args& a, const NormShape& shape) {
  return {.x = a.x.data(), .weight = in(a.weight), .bias = in(a.bias), .y = a.y.data(),
          .mean = a.mean.template data_as<float>(), .rstd = a.rstd.template data_as<float>(), .shape = shape,
          .eps = a.eps, .x_type = elem(a.x), .p_type = param_type({&a.weight, &a.bias})};
}
template <class Args>
NormBwd describe_norm_bwd(const Args& a, const NormShape& shape) {
  return {.dy = a.dy.data(), .x = a.x.data(), .weight = in(a.weight), .mean = a.mean.template data_as<const float>(),
          .rstd = a.rstd.template data_as<const float>(), .dx = a.dx.data(), .dweight = out(a.dweight),
          .dbias = out(a.dbias), .shape = shape, .x_type = elem(a.x),
          .p_type = param_type({&a.weight, &a.dweight, &a.dbias})};
}
NormFwd describe(const LayerNormFwdArgs& a) { return describe_norm_fwd(a, layer_shape(a.x.shape())); }
NormFwd describe(const GroupNormFwdArgs& a) { return describe_norm_fwd(a, group_shape(a.x.shape(), a.num_groups)); }
NormBwd describe(const LayerNormBwdArgs& a) { return describe_norm_bwd(a, layer_shape(a.x.shape())); }
NormBwd describe(const GroupNormBwdArgs& a) { return describe_norm_bwd(a, group_shape(a.x.shape(), a.num_groups)); }

GluFwd describe(const GluFwdArgs& a) {
  return {.a = a.a.data(), .b = a.b.data(), .c = a.c.data(), .n = a.a.numel(), .type = elem(a.a)};
}
GluBwd describe(const GluBwdArgs& a) {
  return {.dc = a.dc.data(), .a = a.a.data(), .b = a.b.data(), .da = a.da.data(), .db = a.db.data(),
          .n = a.a.numel(), .type = elem(a.a)};
}

i64 work(const RmsFwd& d) { return d.rows * d.hidden; }
i64 work(const RmsBwd& d) { return d.rows * d.hidden; }
i64 work(const NormFwd& d) { return d.shape.sets * d.shape.channels * d.shape.spread; }
i64 work(const NormBwd& d) { return d.shape.sets * d.shape.channels * d.shape.spread; }
i64 work(const GluFwd& d) { return d.n; }
i64 work(const GluBwd& d) { return d.n; }

// ---- One call: its team (by the problem's size and OPREG_NUM_THREADS) and its scratch, a lease
// on the backend's cached workspace (nothing is allocated once the workspace is warm). A context
// without a backend (a kernel called directly) gets a buffer of its own.
class Call {
 public:
  Call(const KernelContext& ctx, i64 elements) : ctx_(ctx) {
    exec_.team = team_size(ctx.threads, elements);
    exec_.run = &run_items;
    exec_.scratch = &Call::scratch;
    exec_.owner = this;
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  const Exec& exec() const { return exec_; }

 private:
  static void* scratch(void* owner, std::size_t bytes) {
    auto& self = *static_cast<Call*>(owner);
    if (self.taken_) fail(ErrorKind::internal, "cpu kernels: scratch asked for twice in one call");
    self.taken_ = true;
    if (self.ctx_.backend != nullptr) {
      self.lease_ = self.ctx_.backend->workspace(self.ctx_.device.index).acquire(bytes, self.ctx_.stream);
      return self.lease_.data();
    }
    self.own_.resize((bytes + sizeof(double) - 1) / sizeof(double) + 8);
    const auto address = reinterpret_cast<std::uintptr_t>(self.own_.data());
    return reinterpret_cast<void*>((address + 63) / 64 * 64);
  }

  const KernelContext& ctx_;
  Exec exec_;
  Workspace::Lease lease_;
  std::vector<double> own_;
  bool taken_ = false;
};

// ---- The variants' run functions: one template per (instruction set, op direction).

enum class Kernel { rms_fwd, rms_bwd, norm_fwd, norm_bwd, geglu_fwd, geglu_bwd, swiglu_fwd, swiglu_bwd };

template <Isa I, Kernel K, class Args>
void run(const Args& args, const KernelContext& ctx) {
  const auto d = describe(args);
  Call call(ctx, work(d));
  const Exec& e = call.exec();
  constexpr bool kAvx2 = I == Isa::avx2;
  if constexpr (K == Kernel::rms_fwd) (kAvx2 ? avx2::rms_norm_fwd : generic::rms_norm_fwd)(d, e);
  if constexpr (K == Kernel::rms_bwd) (kAvx2 ? avx2::rms_norm_bwd : generic::rms_norm_bwd)(d, e);
  if constexpr (K == Kernel::norm_fwd) (kAvx2 ? avx2::affine_norm_fwd : generic::affine_norm_fwd)(d, e);
  if constexpr (K == Kernel::norm_bwd) (kAvx2 ? avx2::affine_norm_bwd : generic::affine_norm_bwd)(d, e);
  if constexpr (K == Kernel::geglu_fwd) (kAvx2 ? avx2::geglu_fwd : generic::geglu_fwd)(d, e);
  if constexpr (K == Kernel::geglu_bwd) (kAvx2 ? avx2::geglu_bwd : generic::geglu_bwd)(d, e);
  if constexpr (K == Kernel::swiglu_fwd) (kAvx2 ? avx2::swiglu_fwd : generic::swiglu_fwd)(d, e);
  if constexpr (K == Kernel::swiglu_bwd) (kAvx2 ? avx2::swiglu_bwd : generic::swiglu_bwd)(d, e);
}

std::vector<Tunable> tunables(Isa isa) {
  return {{"threads", "OPREG_NUM_THREADS"},
          {"serial_below", std::to_string(kSerialBelow)},
          {"min_per_thread", std::to_string(kMinPerThread)},
          {"item_work", std::to_string(kItemWork)},
          {"chunk", std::to_string(kChunk)},
          {"lanes", std::to_string(kLanes)},
          {"row_block", std::to_string(kRowBlock)},
          {"isa", std::string(isa_name(isa))}};
}

template <Isa I, Kernel K, class Args>
void add(Registry& registry, const Op<Args>& op, Isa level, const char* file = __builtin_FILE(),
         int line = __builtin_LINE()) {
  VariantSpec<Args> spec;
  spec.backend = "cpu";
  spec.impl = std::string(isa_name(I));
  spec.priority = I == Isa::avx2 ? 110 : 100;
  spec.run = &run<I, K, Args>;
  spec.tunables = tunables(I);
  if (static_cast<int>(I) > static_cast<int>(level)) {
    std::string why = host_isa() < I ? "this CPU lacks AVX2, FMA or F16C"
                                     : "OPREG_CPU_ISA=generic caps the cpu kernels at the x86-64 baseline";
    spec.supports = [why](const Args&, const DeviceProps&) { return Verdict::reject(why); };
    // Forcing skips supports(): the kernel itself refuses, rather than run instructions the CPU
    // may lack (SIGILL) or that OPREG_CPU_ISA ruled out.
    spec.run = [why = std::move(why)](const Args&, const KernelContext& ctx) {
      fail(ErrorKind::unsupported, "{} cannot run: {}", ctx.variant->name, why);
    };
  }
  registry.add_variant(op, std::move(spec), {}, file, line).release();
}

template <Isa I>
void add_all(Registry& r, Isa level) {
  add<I, Kernel::rms_fwd>(r, rms_norm_fwd_op(), level);
  add<I, Kernel::rms_bwd>(r, rms_norm_bwd_op(), level);
  add<I, Kernel::rms_fwd>(r, fused_add_rms_norm_fwd_op(), level);
  add<I, Kernel::rms_bwd>(r, fused_add_rms_norm_bwd_op(), level);
  add<I, Kernel::norm_fwd>(r, layer_norm_fwd_op(), level);
  add<I, Kernel::norm_bwd>(r, layer_norm_bwd_op(), level);
  add<I, Kernel::norm_fwd>(r, group_norm_fwd_op(), level);
  add<I, Kernel::norm_bwd>(r, group_norm_bwd_op(), level);
  add<I, Kernel::geglu_fwd>(r, geglu_fwd_op(), level);
  add<I, Kernel::geglu_bwd>(r, geglu_bwd_op(), level);
  add<I, Kernel::swiglu_fwd>(r, swiglu_fwd_op(), level);
  add<I, Kernel::swiglu_bwd>(r, swiglu_bwd_op(), level);
}

}  // namespace

void rms_norm_fwd_generic(const RmsNormFwdArgs& a, const KernelContext& c) { run<Isa::generic, Kernel::rms_fwd>(a, c); }
void rms_norm_bwd_generic(const RmsNormBwdArgs& a, const KernelContext& c) { run<Isa::generic, Kernel::rms_bwd>(a, c); }
void rms_norm_fwd_avx2(const RmsNormFwdArgs& a, const KernelContext& c) { run<Isa::avx2, Kernel::rms_fwd>(a, c); }
void rms_norm_bwd_avx2(const RmsNormBwdArgs& a, const KernelContext& c) { run<Isa::avx2, Kernel::rms_bwd>(a, c); }

void register_kernels(Registry& registry, Isa level) {
  add_all<Isa::generic>(registry, level);
  add_all<Isa::avx2>(registry, level);
}

}  // namespace opreg::cpu
