// One op problem end to end: inputs, outputs, run, check. See problem.h.
#include "ops/problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/check.h"
#include "ops/reference/reference.h"
#include "registry/admission.h"
#include "registry/fail.h"

namespace opreg {
namespace {

// ---- Names: what a tensor is, by its name in the op's tensor list.

OutputKind output_kind(std::string_view name) {
  if (name == "dweight" || name == "dbias") return OutputKind::dw;
  if (name == "mean" || name == "rstd") return OutputKind::stat;
  if (name == "dx" || name == "da" || name == "db") return OutputKind::dx;
  return OutputKind::y;  // y, s, c
}
bool is_param(std::string_view name) {
  return name == "weight" || name == "bias" || name == "dweight" || name == "dbias";
}
bool is_stat(std::string_view name) { return name == "mean" || name == "rstd"; }
// Whether the spec leaves this tensor out (an absent weight takes its dweight along, and an
// absent bias its dbias).
bool left_out(std::string_view name, const ProblemSpec& s) {
  if (name == "weight" || name == "dweight") return !s.has_weight;
  if (name == "bias" || name == "dbias") return !s.has_bias;
  return false;
}

// ---- Inputs: a seeded stream per tensor (see Values).

struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

// `set` is the length of a normalisation set (a row; group_norm's (n, group)), for `equal`.
void fill_random(Tensor& host, std::uint64_t seed, int stream, Values values, std::int64_t set) {
  SplitMix rng{seed * 0x2545F4914F6CDD1DULL + static_cast<std::uint64_t>(stream) * 0x9E3779B97F4A7C15ULL};
  // Dyadic values: a set's sum, and its mean, are exact in any float format.
  constexpr double kEqual[] = {0.5, -1.25, 2.0, -0.75, 1.5, -0.375, 1.0, -1.75};
  const bool f16 = host.dtype() == DType::f16;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    double v = 4.0 * rng.uniform() - 2.0;
    if (std::fabs(v) < 1.0 / 64) v = std::copysign(1.0 / 64, v);
    switch (values) {
      case Values::random:
        break;
      case Values::large:
        v = std::copysign(std::ldexp(1.0 + 3.5 * std::fabs(v), f16 ? 12 : 57), v);  // 2^12..2^15 / 2^57..2^60
        break;
      case Values::equal:
        v = kEqual[static_cast<std::size_t>((set == 0 ? 0 : i / set) % 8)];
        break;
      case Values::special:
        if (i == 0) v = std::numeric_limits<double>::quiet_NaN();
        if (i == set + 1) v = std::numeric_limits<double>::infinity();
        if (i == 2 * set + 2) v = -std::numeric_limits<double>::infinity();
        break;
    }
    store_from_double(host.data(), host.dtype(), static_cast<std::size_t>(i), v);
  }
}

std::string index_str(const Shape& shape, std::int64_t flat) {
  std::string out;
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    const std::int64_t e = shape[d] == 0 ? 1 : shape[d];
    out = fmt::format("{}{}", flat % e, out.empty() ? "" : "," + out);
    flat /= e;
  }
  return out;
}

// ---- The typed part: which op, which reference, which scalars, how backward inputs are made.

// The spec's scalars that the op's struct has fields for.
template <class Args>
void set_scalars(Args& a, const ProblemSpec& s) {
  if constexpr (requires { a.eps; }) a.eps = s.eps;
  if constexpr (requires { a.offset; }) a.offset = s.offset;
  if constexpr (requires { a.casting; }) a.casting = s.casting;
  if constexpr (requires { a.num_groups; }) a.num_groups = s.groups;
}

// Statistics a backward consumes come from the reference forward on the same inputs.
Tensor host_like(const Tensor& t, Registry& reg) { return Tensor::empty(t.shape(), t.dtype(), Device{}, reg); }

template <class Args>
void prepare(Args&, const ProblemSpec&, Registry&) {}
void prepare(RmsNormBwdArgs& a, const ProblemSpec& s, Registry& reg) {
  reference::rms_norm_fwd({a.x, a.weight, host_like(a.x, reg), a.rstd, s.eps, a.offset, a.casting});
}
void prepare(FusedAddRmsNormBwdArgs& a, const ProblemSpec& s, Registry& reg) {
  reference::rms_norm_fwd({a.s, a.weight, host_like(a.s, reg), a.rstd, s.eps, a.offset, a.casting});
}
// The statistics do not depend on the bias, so the forward that makes them takes none.
void prepare(LayerNormBwdArgs& a, const ProblemSpec& s, Registry& reg) {
  reference::layer_norm_fwd({a.x, a.weight, Tensor{}, host_like(a.x, reg), a.mean, a.rstd, s.eps});
}
void prepare(GroupNormBwdArgs& a, const ProblemSpec& s, Registry& reg) {
  reference::group_norm_fwd({a.x, a.weight, Tensor{}, host_like(a.x, reg), a.mean, a.rstd, a.num_groups, s.eps});
}

// The in-place forms: the output that takes over an input's memory.
template <class Args>
void alias(Args&) {
  fail(ErrorKind::invalid_argument, "in-place runs apply to backward ops only");
}
template <class Args>
  requires requires(Args a) { a.dx = a.dy; }
void alias(Args& a) {
  a.dx = a.dy;
}
void alias(GluBwdArgs& a) {
  a.da = a.a;
  a.db = a.b;
}
// The input whose memory an output takes over in the in-place form ("" for none).
std::string_view in_place_source(std::string_view output) {
  if (output == "dx") return "dy";
  if (output == "da") return "a";
  if (output == "db") return "b";
  return "";
}

struct Slot {
  const char* name;
  Role role;
  Tensor* host;
  Tensor* dev;
  const Tensor* restore = nullptr;  // in place: the host input the output's memory starts as
};

class ImplBase {
 public:
  virtual ~ImplBase() = default;
  virtual DispatchResult run(const ExecContext* ctx) = 0;
  virtual Verdict run_variant(std::string_view variant, const ExecContext* ctx) = 0;
  virtual void reference() = 0;
  Registry* reg = nullptr;
  ProblemSpec spec;
  Device device;
  std::vector<Slot> slots;
  bool reference_done = false;
};

template <class Args>
class TypedProblem final : public ImplBase {
 public:
  TypedProblem(const Op<Args>& op, void (*ref)(const Args&)) : op_(op), ref_(ref) {}

  void build(Registry& registry, const ProblemSpec& s, Device d) {
    reg = &registry;
    spec = s;
    device = d;
    set_scalars(host_, s);
    const Shape& shape = s.shape;
    const bool grouped = op_.name().starts_with("group_norm");
    if (shape.ndim() < (grouped ? 2 : 1)) {
      fail(ErrorKind::invalid_argument, "{}: shape [{}] has {} dims; accepted: {}", op_.name(), shape.str(),
           shape.ndim(), grouped ? "(N, C, spatial...) with at least 2 dims" : "at least 1 dim");
    }
    // The group count first: it sizes the statistics (an absurd one must not allocate).
    if (grouped) op_check::groups(std::string(op_.name()).c_str(), s.groups, shape[1]);
    const std::int64_t params = grouped ? shape[1] : shape[shape.ndim() - 1];
    // A normalisation set: a row; group_norm's (n, group) is C / groups channels of S positions.
    std::int64_t set = shape[shape.ndim() - 1];
    if (grouped) {
      set = shape[1] / s.groups;
      for (int d = 2; d < shape.ndim(); ++d) set *= shape[d];
    }
    const Shape stats = grouped ? Shape{shape[0], s.groups} : Shape{rows_hidden(shape).rows};
    TensorList hl;
    op_.def().tensors(op_.def(), &host_, hl);
    auto shape_of = [&](std::string_view name) { return is_stat(name) ? stats : is_param(name) ? Shape{params} : shape; };
    auto dtype_of = [&](std::string_view name) {
      return is_stat(name) ? DType::f32 : is_param(name) ? s.wdtype : s.dtype;
    };
    admit_problem(registry, hl, shape_of, dtype_of);
    for (int i = 0; i < hl.size(); ++i) {
      const std::string_view name = hl[i].name;
      if (left_out(name, s)) continue;
      *hl[i].tensor = Tensor::empty(shape_of(name), dtype_of(name), Device{}, registry);
      if (hl[i].role == Role::in && !is_stat(name)) {
        fill_random(*hl[i].tensor, s.seed, i, is_param(name) ? Values::random : s.values, set);
      }
    }
    prepare(host_, s, registry);
    dev_ = host_;
    TensorList dl;
    op_.def().tensors(op_.def(), &dev_, dl);
    for (int i = 0; i < dl.size(); ++i) {
      if (!hl[i].tensor->defined()) continue;  // left out
      Tensor& t = *dl[i].tensor;
      // Always a copy, also on the cpu: the run must not be able to touch the reference's inputs.
      t = Tensor::empty(hl[i].tensor->shape(), hl[i].tensor->dtype(), d, registry);
      if (dl[i].role == Role::in) t.copy_from(*hl[i].tensor, registry);
      slots.push_back({dl[i].name, dl[i].role, hl[i].tensor, &t});
    }
    if (s.in_place) {
      alias(dev_);
      for (auto& out : slots) {
        const std::string_view source = in_place_source(out.name);
        for (const auto& in : slots) {
          if (out.role != Role::in && in.role == Role::in && in.name == source) out.restore = in.host;
        }
      }
    }
    op_.def().check(op_.def(), &dev_);
  }

  DispatchResult run(const ExecContext* ctx) override { return reg->call(op_, dev_, ctx); }

  // Everything the problem will hold, summed before any of it is allocated: every tensor on the
  // host (the reference's inputs and outputs), again on the device (on the cpu that is the host
  // too), and the outputs copied back for the check. More than the host or the device has is an
  // error naming both numbers.
  template <class ShapeOf, class DTypeOf>
  void admit_problem(Registry& registry, const TensorList& list, ShapeOf shape_of, DTypeOf dtype_of) const {
    std::uint64_t all = 0;
    std::uint64_t outputs = 0;
    bool overflow = false;
    for (int i = 0; i < list.size(); ++i) {
      if (left_out(list[i].name, spec)) continue;
      std::uint64_t bytes = 0;
      overflow |= __builtin_mul_overflow(static_cast<std::uint64_t>(shape_of(list[i].name).numel()),
                                         element_size(dtype_of(list[i].name)), &bytes);
      overflow |= __builtin_add_overflow(all, bytes, &all);
      if (list[i].role != Role::in) outputs += bytes;
    }
    const bool on_host = device.backend == kCpuBackendId;
    std::uint64_t host = 0;
    overflow |= __builtin_add_overflow(all, on_host ? all : outputs, &host);
    const std::string what = fmt::format("{} of [{}] (inputs, outputs and the reference's copies)", op_.name(),
                                         spec.shape.str());
    if (overflow) fail(ErrorKind::device, "{} needs more than 2^64 bytes", what);
    admit(registry.backend(kCpuBackendId), 0, registry.device_props(Device{}).memory_bytes, host, "the host", what);
    if (!on_host) {
      admit(registry.backend(device.backend), device.index, registry.device_props(device).memory_bytes, all,
            registry.device_name(device), what);
    }
  }
  Verdict run_variant(std::string_view variant, const ExecContext* ctx) override {
    return reg->call_variant(op_, variant, dev_, ctx);
  }
  void reference() override { ref_(host_); }

 private:
  const Op<Args>& op_;
  void (*ref_)(const Args&);
  Args host_{};
  Args dev_{};
};

struct OpEntry {
  const char* name;
  std::unique_ptr<ImplBase> (*make)(Registry&, const ProblemSpec&, Device);
};

template <class Args, const Op<Args>& (*OpFn)(), void (*Ref)(const Args&)>
std::unique_ptr<ImplBase> make(Registry& registry, const ProblemSpec& spec, Device device) {
  auto p = std::make_unique<TypedProblem<Args>>(OpFn(), Ref);
  p->build(registry, spec, device);
  return p;
}

// Tour order.
const std::vector<OpEntry>& entries() {
  static const std::vector<OpEntry> table{
      {"rms_norm.fwd", &make<RmsNormFwdArgs, &rms_norm_fwd_op, &reference::rms_norm_fwd>},
      {"rms_norm.bwd", &make<RmsNormBwdArgs, &rms_norm_bwd_op, &reference::rms_norm_bwd>},
      {"fused_add_rms_norm.fwd",
       &make<FusedAddRmsNormFwdArgs, &fused_add_rms_norm_fwd_op, &reference::fused_add_rms_norm_fwd>},
      {"fused_add_rms_norm.bwd",
       &make<FusedAddRmsNormBwdArgs, &fused_add_rms_norm_bwd_op, &reference::fused_add_rms_norm_bwd>},
      {"layer_norm.fwd", &make<LayerNormFwdArgs, &layer_norm_fwd_op, &reference::layer_norm_fwd>},
      {"layer_norm.bwd", &make<LayerNormBwdArgs, &layer_norm_bwd_op, &reference::layer_norm_bwd>},
      {"group_norm.fwd", &make<GroupNormFwdArgs, &group_norm_fwd_op, &reference::group_norm_fwd>},
      {"group_norm.bwd", &make<GroupNormBwdArgs, &group_norm_bwd_op, &reference::group_norm_bwd>},
      {"geglu.fwd", &make<GluFwdArgs, &geglu_fwd_op, &reference::geglu_fwd>},
      {"geglu.bwd", &make<GluBwdArgs, &geglu_bwd_op, &reference::geglu_bwd>},
      {"swiglu.fwd", &make<GluFwdArgs, &swiglu_fwd_op, &reference::swiglu_fwd>},
      {"swiglu.bwd", &make<GluBwdArgs, &swiglu_bwd_op, &reference::swiglu_bwd>},
  };
  return table;
}

const OpEntry& entry(std::string_view op) {
  for (const auto& e : entries()) {
    if (op == e.name) return e;
  }
  std::string known;
  for (const auto& e : entries()) known += (known.empty() ? "" : ", ") + std::string(e.name);
  fail(ErrorKind::unsupported, "op '{}' is not defined; defined ops: {}", op, known);
}

std::string_view base_name(std::string_view op) { return op.substr(0, op.find('.')); }

}  // namespace

std::string_view to_string(OutputKind kind) {
  switch (kind) {
    case OutputKind::y: return "y";
    case OutputKind::dx: return "dx";
    case OutputKind::dw: return "dw";
    case OutputKind::stat: return "stat";
  }
  return "?";
}

std::string_view to_string(Values values) {
  switch (values) {
    case Values::random: return "random";
    case Values::large: return "large";
    case Values::equal: return "equal";
    case Values::special: return "special";
  }
  return "?";
}

Values parse_values(std::string_view text) {
  for (Values v : {Values::random, Values::large, Values::equal, Values::special}) {
    if (text == to_string(v)) return v;
  }
  fail(ErrorKind::invalid_argument, "input values '{}' are not accepted; accepted: random, large, equal, special",
       text);
}

Tolerance tolerance(OutputKind kind, DType dtype) {
  // Statistics are f32 whatever the input; the rest scale with the output's precision (f16 has
  // 11 significant bits, bf16 8). Backward outputs sum more terms, so they get twice the room.
  if (kind == OutputKind::stat) return {1e-5, 1e-4};
  const int widen = kind == OutputKind::y ? 1 : 2;
  switch (dtype) {
    case DType::f16: return {(kind == OutputKind::dw ? 5e-3 : 2e-3) * widen, 4e-3 * widen};
    case DType::bf16: return {(kind == OutputKind::dw ? 2.5e-2 : 1e-2) * widen, 1.6e-2 * widen};
    default: return {1e-5 * (kind == OutputKind::y ? 1 : 10), 1e-5 * (kind == OutputKind::y ? 1 : 10)};
  }
}

std::string CheckReport::summary() const {
  std::string out;
  for (const auto& o : outputs) out += fmt::format("{}{} err={:.3g}", out.empty() ? "" : " ", o.name, o.err);
  for (const auto& o : outputs) {
    if (o.err <= 1.0 || o.worst < 0) continue;
    out += fmt::format("; {}[{}] got={} want={} (atol={} rtol={})", o.name, o.at, o.got, o.want, o.tol.atol,
                       o.tol.rtol);
  }
  return out;
}

ProblemOptions problem_options(std::string_view op) {
  entry(op);  // known?
  const std::string_view base = base_name(op);
  const bool norm = base != "geglu" && base != "swiglu";
  const bool rms = base == "rms_norm" || base == "fused_add_rms_norm";
  ProblemOptions o;
  o.wdtype = norm;
  o.weight = norm;
  o.bias = base == "layer_norm" || base == "group_norm";
  o.eps = norm;
  o.groups = base == "group_norm";
  o.offset = rms;
  o.casting = rms;
  o.in_place = op.ends_with(".bwd");
  if (base == "layer_norm") o.eps_default = LayerNormFwdArgs{}.eps;
  if (base == "group_norm") o.eps_default = GroupNormFwdArgs{}.eps;
  if (rms) o.eps_default = RmsNormFwdArgs{}.eps;
  return o;
}

std::vector<std::string> problem_ops() {
  std::vector<std::string> out;
  for (const auto& e : entries()) out.emplace_back(e.name);
  return out;
}

std::string ProblemSpec::cli_args(const std::string& device) const {
  const ProblemOptions o = problem_options(op);
  std::string out = fmt::format("{} --device {} --dtype {}", op, device, to_string(dtype));
  const bool params = (o.weight && has_weight) || (o.bias && has_bias);
  if (o.wdtype && params) out += fmt::format(" --wdtype {}", wdtype == dtype ? "same" : to_string(wdtype));
  if (o.weight && !has_weight) out += " --no-weight";
  if (o.bias && !has_bias) out += " --no-bias";
  out += fmt::format(" --shape {}", shape.str());
  if (o.groups) out += fmt::format(" --groups {}", groups);
  if (o.eps) out += fmt::format(" --eps {}", eps);
  if (o.offset) out += fmt::format(" --offset {}", offset);
  if (o.casting) out += fmt::format(" --casting {}", to_string(casting));
  if (o.in_place && in_place) out += " --inplace";
  if (values != Values::random) out += fmt::format(" --values {}", to_string(values));
  if (tol_scale != 1.0) out += fmt::format(" --tol-scale {}", tol_scale);
  out += fmt::format(" --seed {}", seed);
  return out;
}

struct Problem::Impl {
  std::unique_ptr<ImplBase> typed;
};

Problem::Problem(Registry& registry, const ProblemSpec& spec, Device device)
    : impl_(std::make_unique<Impl>(Impl{entry(spec.op).make(registry, spec, device)})) {}

Problem::~Problem() = default;

const ProblemSpec& Problem::spec() const { return impl_->typed->spec; }
Device Problem::device() const { return impl_->typed->device; }

void Problem::poison() {
  ImplBase& p = *impl_->typed;
  for (auto& slot : p.slots) {
    if (slot.role == Role::in) continue;
    if (slot.restore != nullptr) {
      slot.dev->copy_from(*slot.restore, *p.reg);  // in place: the output starts as its input
    } else {
      slot.dev->fill(std::numeric_limits<double>::quiet_NaN(), *p.reg);
    }
  }
}

DispatchResult Problem::run(const ExecContext* ctx) { return impl_->typed->run(ctx); }

Verdict Problem::run_variant(std::string_view variant, const ExecContext* ctx) {
  return impl_->typed->run_variant(variant, ctx);
}

void Problem::synchronize(const ExecContext* ctx) {
  ImplBase& p = *impl_->typed;
  void* stream = ctx != nullptr ? ctx->stream : nullptr;
  p.reg->backend(p.device.backend).synchronize(p.device.index, stream);
}

CheckReport Problem::check() {
  ImplBase& p = *impl_->typed;
  synchronize();
  if (!p.reference_done) {
    p.reference();
    p.reference_done = true;
  }
  CheckReport report;
  for (const auto& slot : p.slots) {
    if (slot.role == Role::in) continue;
    OutputCheck o;
    o.name = slot.name;
    o.kind = output_kind(slot.name);
    o.dtype = slot.dev->dtype();
    o.tol = tolerance(o.kind, p.spec.dtype);
    o.tol.atol *= p.spec.tol_scale;
    o.tol.rtol *= p.spec.tol_scale;
    const Tolerance tol = o.tol;
    const Tensor got = slot.dev->to(Device{}, *p.reg);
    const Tensor& want = *slot.host;
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      const double g = load_as_double(got.data(), got.dtype(), static_cast<std::size_t>(i));
      const double w = load_as_double(want.data(), want.dtype(), static_cast<std::size_t>(i));
      // Equal values (also equal infinities) are exact, and so is NaN where the reference is NaN
      // (NaN in, NaN out); any other NaN is unwritten (the poison) or broken, and an infinity
      // where the reference is finite (or the other infinity) is as far off as it gets.
      double err = g == w || (std::isnan(g) && std::isnan(w)) ? 0.0
                                                             : std::fabs(g - w) / (tol.atol + tol.rtol * std::fabs(w));
      if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
      if (o.worst < 0 || err > o.err) {
        o.err = err;
        o.worst = i;
        o.got = g;
        o.want = w;
      }
    }
    if (o.worst >= 0) o.at = index_str(got.shape(), o.worst);
    report.err = std::max(report.err, o.err);
    report.outputs.push_back(std::move(o));
  }
  return report;
}

std::uint64_t Problem::bytes() const {
  const ProblemSpec& s = impl_->typed->spec;
  const std::string_view op = s.op;
  const ProblemOptions o = problem_options(op);
  return bytes_moved(base_name(op), op.ends_with(".fwd") ? Direction::fwd : Direction::bwd, s.shape, s.dtype,
                     s.wdtype, s.groups, o.weight && s.has_weight, o.bias && s.has_bias);
}

}  // namespace opreg
