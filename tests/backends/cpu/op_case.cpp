// OpCase (op_case.h): the twelve op directions behind one interface, as src/ops/problem.cpp
// does for the conformance harness, with inputs from the test's fill function.
#include "op_case.h"

#include <limits>

#include "ops/reference/reference.h"
#include "registry/fail.h"

namespace opreg::cpu_test {
namespace {

bool is_param(std::string_view n) { return n == "weight" || n == "bias" || n == "dweight" || n == "dbias"; }
bool is_stat(std::string_view n) { return n == "mean" || n == "rstd"; }
bool left_out(std::string_view n, const CaseSpec& s) {
  if (n == "weight" || n == "dweight") return !s.weight;
  if (n == "bias" || n == "dbias") return !s.bias;
  return false;
}

template <class Args>
void set_scalars(Args& a, const CaseSpec& s) {
  if constexpr (requires { a.eps; }) a.eps = s.eps;
  if constexpr (requires { a.offset; }) a.offset = s.offset;
  if constexpr (requires { a.casting; }) a.casting = s.casting;
  if constexpr (requires { a.num_groups; }) a.num_groups = s.groups;
}

Tensor scratch_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype()); }

// A backward's statistics: the reference forward on the same inputs.
template <class Args>
void prepare(Args&, const CaseSpec&) {}
void prepare(RmsNormBwdArgs& a, const CaseSpec& s) {
  reference::rms_norm_fwd({a.x, a.weight, scratch_like(a.x), a.rstd, s.eps, a.offset, a.casting});
}
void prepare(FusedAddRmsNormBwdArgs& a, const CaseSpec& s) {
  reference::rms_norm_fwd({a.s, a.weight, scratch_like(a.s), a.rstd, s.eps, a.offset, a.casting});
}
void prepare(LayerNormBwdArgs& a, const CaseSpec& s) {
  reference::layer_norm_fwd({a.x, a.weight, Tensor{}, scratch_like(a.x), a.mean, a.rstd, s.eps});
}
void prepare(GroupNormBwdArgs& a, const CaseSpec& s) {
  reference::group_norm_fwd({a.x, a.weight, Tensor{}, scratch_like(a.x), a.mean, a.rstd, a.num_groups, s.eps});
}

// The input an in-place output takes over.
std::string_view source_of(std::string_view output) {
  if (output == "dx") return "dy";
  if (output == "da") return "a";
  if (output == "db") return "b";
  return "";
}

}  // namespace

struct OpCase::Impl {
  virtual ~Impl() = default;
  virtual std::vector<Output> run(std::string_view variant, bool* ok) = 0;
};

namespace {

template <class Args>
struct Typed final : OpCase::Impl {
  const Op<Args>& op;
  CaseSpec spec;
  Args host{};

  Typed(const Op<Args>& o, const CaseSpec& s, const Fill& fill) : op(o), spec(s) {
    set_scalars(host, s);
    const bool grouped = op.name().starts_with("group_norm");
    const Shape& shape = s.shape;
    const std::int64_t params = grouped ? shape[1] : shape[shape.ndim() - 1];
    const Shape stats = grouped ? Shape{shape[0], s.groups} : Shape{rows_hidden(shape).rows};
    TensorList list;
    op.def().tensors(op.def(), &host, list);
    for (int i = 0; i < list.size(); ++i) {
      const std::string_view name = list[i].name;
      if (left_out(name, s)) continue;
      const bool stat = is_stat(name);
      const bool param = is_param(name);
      Tensor& t = *list[i].tensor;
      t = Tensor::empty(stat ? stats : param ? Shape{params} : shape, stat ? DType::f32 : param ? s.wdtype : s.dtype);
      if (list[i].role == Role::in && !stat) {
        for (std::int64_t j = 0; j < t.numel(); ++j) store_from_double(t.data(), t.dtype(), static_cast<std::size_t>(j), fill(name, j));
      }
    }
    prepare(host, s);
  }

  std::vector<Output> run(std::string_view variant, bool* ok) override {
    Args dev = host;
    TensorList hl;
    TensorList dl;
    op.def().tensors(op.def(), &host, hl);
    op.def().tensors(op.def(), &dev, dl);
    for (int i = 0; i < dl.size(); ++i) {
      if (!hl[i].tensor->defined()) continue;
      Tensor& t = *dl[i].tensor;
      t = scratch_like(*hl[i].tensor);
      if (dl[i].role == Role::in) {
        t.copy_from(*hl[i].tensor);
      } else {
        t.fill(std::numeric_limits<double>::quiet_NaN());
      }
    }
    if (spec.in_place) {
      for (int i = 0; i < dl.size(); ++i) {
        const std::string_view source = source_of(dl[i].name);
        for (int j = 0; j < dl.size() && !source.empty(); ++j) {
          if (dl[j].name == source) *dl[i].tensor = *dl[j].tensor;
        }
      }
    }
    const Verdict v = default_registry().call_variant(op, variant, dev);
    if (ok != nullptr) *ok = v.ok;
    std::vector<Output> outputs;
    if (!v.ok) return outputs;
    for (int i = 0; i < dl.size(); ++i) {
      if (dl[i].role == Role::in || !dl[i].tensor->defined()) continue;
      outputs.push_back({dl[i].name, dl[i].tensor->to(Device{})});
    }
    return outputs;
  }
};

template <class Args>
OpCase::Impl* make(const Op<Args>& op, const CaseSpec& s, const Fill& fill) {
  return new Typed<Args>(op, s, fill);
}

}  // namespace

const Tensor& output(const std::vector<Output>& outputs, std::string_view name) {
  for (const auto& o : outputs) {
    if (o.name == name) return o.value;
  }
  fail(ErrorKind::invalid_argument, "op_case: no output named {}", name);
}

std::string op_of(std::string_view variant) {
  const auto first = variant.find('.');
  const auto last = variant.rfind('.');
  return std::string(variant.substr(first + 1, last - first - 1));
}

std::vector<std::string> variants(std::string_view impl) {
  std::vector<std::string> out;
  for (std::string_view base : op_names()) {
    for (std::string_view dir : {"fwd", "bwd"}) out.push_back("cpu." + std::string(base) + "." + std::string(dir) + "." + std::string(impl));
  }
  return out;
}

OpCase::OpCase(const CaseSpec& s, const Fill& fill) {
  const std::string& n = s.op;
  if (n == "rms_norm.fwd") impl_ = make(rms_norm_fwd_op(), s, fill);
  else if (n == "rms_norm.bwd") impl_ = make(rms_norm_bwd_op(), s, fill);
  else if (n == "fused_add_rms_norm.fwd") impl_ = make(fused_add_rms_norm_fwd_op(), s, fill);
  else if (n == "fused_add_rms_norm.bwd") impl_ = make(fused_add_rms_norm_bwd_op(), s, fill);
  else if (n == "layer_norm.fwd") impl_ = make(layer_norm_fwd_op(), s, fill);
  else if (n == "layer_norm.bwd") impl_ = make(layer_norm_bwd_op(), s, fill);
  else if (n == "group_norm.fwd") impl_ = make(group_norm_fwd_op(), s, fill);
  else if (n == "group_norm.bwd") impl_ = make(group_norm_bwd_op(), s, fill);
  else if (n == "geglu.fwd") impl_ = make(geglu_fwd_op(), s, fill);
  else if (n == "geglu.bwd") impl_ = make(geglu_bwd_op(), s, fill);
  else if (n == "swiglu.fwd") impl_ = make(swiglu_fwd_op(), s, fill);
  else if (n == "swiglu.bwd") impl_ = make(swiglu_bwd_op(), s, fill);
  else fail(ErrorKind::invalid_argument, "op_case: unknown op {}", n);
}

OpCase::~OpCase() { delete impl_; }

std::vector<Output> OpCase::run(std::string_view variant, bool* ok) const { return impl_->run(variant, ok); }

}  // namespace opreg::cpu_test
