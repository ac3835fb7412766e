// OpProblem (bench_cpu_common.h): the op's tensors made from its tensor list, inputs filled,
// a backward's statistics made by running the forward op on the same inputs.
#include "bench_cpu_common.h"

#include <stdexcept>

namespace opreg::bench {
namespace {

struct Base {
  virtual ~Base() = default;
  virtual std::string run() = 0;
  virtual bool run_variant(const std::string& variant) = 0;
  std::uint64_t bytes = 0;
};

// The forward that makes a backward's statistics (rstd, mean).
void make_stats(RmsNormBwdArgs& a) {
  rms_norm_fwd({.x = a.x, .weight = a.weight, .y = Tensor::empty(a.x.shape(), a.x.dtype()), .rstd = a.rstd});
}
void make_stats(FusedAddRmsNormBwdArgs& a) {
  rms_norm_fwd({.x = a.s, .weight = a.weight, .y = Tensor::empty(a.s.shape(), a.s.dtype()), .rstd = a.rstd});
}
void make_stats(LayerNormBwdArgs& a) {
  layer_norm_fwd({.x = a.x, .weight = a.weight, .y = Tensor::empty(a.x.shape(), a.x.dtype()), .mean = a.mean,
                  .rstd = a.rstd});
}
void make_stats(GroupNormBwdArgs& a) {
  group_norm_fwd({.x = a.x, .weight = a.weight, .y = Tensor::empty(a.x.shape(), a.x.dtype()), .mean = a.mean,
                  .rstd = a.rstd, .num_groups = a.num_groups});
}
template <class Args>
void make_stats(Args&) {}

template <class Args>
struct Typed final : Base {
  const Op<Args>& op;
  Args args{};

  Typed(const Op<Args>& o, const Shape& shape, DType dtype) : op(o) {
    const bool grouped = op.name().starts_with("group_norm");
    if constexpr (requires { args.num_groups; }) args.num_groups = kGroups;
    const std::int64_t params = grouped ? shape[1] : shape[shape.ndim() - 1];
    const Shape stats = grouped ? Shape{shape[0], kGroups} : Shape{rows_hidden(shape).rows};
    TensorList list;
    op.def().tensors(op.def(), &args, list);
    std::uint64_t seed = 1;
    for (int i = 0; i < list.size(); ++i) {
      const std::string_view name = list[i].name;
      const bool stat = name == "mean" || name == "rstd";
      const bool param = name == "weight" || name == "bias" || name == "dweight" || name == "dbias";
      Tensor& t = *list[i].tensor;
      t = Tensor::empty(stat ? stats : param ? Shape{params} : shape, stat ? DType::f32 : dtype);
      if (list[i].role == Role::in && !stat) fill_pattern(t, seed++);
    }
    make_stats(args);
    const std::string base(op.name().substr(0, op.name().find('.')));
    bytes = bytes_moved(base, op.name().ends_with(".fwd") ? Direction::fwd : Direction::bwd, shape, dtype, dtype,
                        kGroups);
  }
  std::string run() override {
    const DispatchResult r = default_registry().call(op, args);
    return r.variant != nullptr ? r.variant->name : "?";
  }
  bool run_variant(const std::string& variant) override {
    return default_registry().call_variant(op, variant, args).ok;
  }
};

template <class Args>
std::unique_ptr<Base> make(const Op<Args>& op, const Shape& shape, DType dtype) {
  return std::make_unique<Typed<Args>>(op, shape, dtype);
}

std::unique_ptr<Base> make(const std::string& op, const Shape& s, DType d) {
  if (op == "rms_norm.fwd") return make(rms_norm_fwd_op(), s, d);
  if (op == "rms_norm.bwd") return make(rms_norm_bwd_op(), s, d);
  if (op == "fused_add_rms_norm.fwd") return make(fused_add_rms_norm_fwd_op(), s, d);
  if (op == "fused_add_rms_norm.bwd") return make(fused_add_rms_norm_bwd_op(), s, d);
  if (op == "layer_norm.fwd") return make(layer_norm_fwd_op(), s, d);
  if (op == "layer_norm.bwd") return make(layer_norm_bwd_op(), s, d);
  if (op == "group_norm.fwd") return make(group_norm_fwd_op(), s, d);
  if (op == "group_norm.bwd") return make(group_norm_bwd_op(), s, d);
  if (op == "geglu.fwd") return make(geglu_fwd_op(), s, d);
  if (op == "geglu.bwd") return make(geglu_bwd_op(), s, d);
  if (op == "swiglu.fwd") return make(swiglu_fwd_op(), s, d);
  if (op == "swiglu.bwd") return make(swiglu_bwd_op(), s, d);
  throw std::invalid_argument("bench: unknown op " + op);
}

}  // namespace

struct OpProblem::Impl {
  std::unique_ptr<Base> typed;
};

OpProblem::OpProblem(const std::string& op, const Shape& shape, DType dtype)
    : impl_(std::make_unique<Impl>(Impl{make(op, shape, dtype)})) {}
OpProblem::~OpProblem() = default;
std::string OpProblem::run() { return impl_->typed->run(); }
bool OpProblem::run_variant(const std::string& variant) { return impl_->typed->run_variant(variant); }
std::uint64_t OpProblem::bytes() const { return impl_->typed->bytes; }

}  // namespace opreg::bench
