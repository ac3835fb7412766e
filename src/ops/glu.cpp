// The gated activations geglu (gelu_tanh(a) * b) and swiglu (silu(a) * b), fwd and bwd: one
// argument struct pair, one check per direction, two ops each.
#include "ops/check.h"
#include "ops/common.h"

namespace opreg {
namespace {

namespace c = op_check;

// The op name is the only difference between geglu and swiglu as far as checks go.
template <const char* Name>
[[gnu::always_inline]] inline CallFacts check_fwd(const GluFwdArgs& a) {
  c::activation(Name, "a", a.a);
  c::like(Name, "b", a.b, "a", a.a);
  c::like(Name, "c", a.c, "a", a.a);
  return c::outputs_apart(Name, 2, [&] { return c::items({{"a", &a.a}, {"b", &a.b}, {"c", &a.c}}); });
}
void tensors_fwd(GluFwdArgs& a, TensorList& l) {
  l.add("a", a.a, Role::in);
  l.add("b", a.b, Role::in);
  l.add("c", a.c, Role::out);
}

template <const char* Name>
[[gnu::always_inline]] inline CallFacts check_bwd(const GluBwdArgs& a) {
  c::activation(Name, "a", a.a);
  c::like(Name, "dc", a.dc, "a", a.a);
  c::like(Name, "b", a.b, "a", a.a);
  c::like(Name, "da", a.da, "a", a.a);
  c::like(Name, "db", a.db, "a", a.a);
  return c::outputs_apart(Name, 3, [&] {
    return c::items({{"dc", &a.dc}, {"a", &a.a}, {"b", &a.b}, {"da", &a.da, 1}, {"db", &a.db, 2}});
  });
}
void tensors_bwd(GluBwdArgs& a, TensorList& l) {
  l.add("dc", a.dc, Role::in);
  l.add("a", a.a, Role::in);
  l.add("b", a.b, Role::in);
  l.add("da", a.da, Role::out);
  l.add("db", a.db, Role::out);
}

constexpr char kGegluFwd[] = "geglu.fwd";
constexpr char kGegluBwd[] = "geglu.bwd";
constexpr char kSwigluFwd[] = "swiglu.fwd";
constexpr char kSwigluBwd[] = "swiglu.bwd";

Tensor glu_fwd(const char* op, const Tensor& a, const Tensor& b, const ExecContext* ctx,
               DispatchResult (*entry)(const GluFwdArgs&, const ExecContext*)) {
  ops_detail::input(op, "a", a, 1);
  Tensor out = ops_detail::like(a);
  entry({a, b, out}, ctx);
  return out;
}

GluGrads glu_bwd(const char* op, const Tensor& dc, const Tensor& a, const Tensor& b, const ExecContext* ctx,
                 DispatchResult (*entry)(const GluBwdArgs&, const ExecContext*)) {
  ops_detail::input(op, "a", a, 1);
  GluGrads g{ops_detail::like(a), ops_detail::like(a)};
  entry({dc, a, b, g.da, g.db}, ctx);
  return g;
}

}  // namespace

const Op<GegluFwdArgs>& geglu_fwd_op() {
  static const Op<GegluFwdArgs> op = ops_detail::make_op<GegluFwdArgs>(kGegluFwd, &check_fwd<kGegluFwd>, &tensors_fwd);
  return op;
}
const Op<GegluBwdArgs>& geglu_bwd_op() {
  static const Op<GegluBwdArgs> op = ops_detail::make_op<GegluBwdArgs>(kGegluBwd, &check_bwd<kGegluBwd>, &tensors_bwd);
  return op;
}
const Op<SwigluFwdArgs>& swiglu_fwd_op() {
  static const Op<SwigluFwdArgs> op =
      ops_detail::make_op<SwigluFwdArgs>(kSwigluFwd, &check_fwd<kSwigluFwd>, &tensors_fwd);
  return op;
}
const Op<SwigluBwdArgs>& swiglu_bwd_op() {
  static const Op<SwigluBwdArgs> op =
      ops_detail::make_op<SwigluBwdArgs>(kSwigluBwd, &check_bwd<kSwigluBwd>, &tensors_bwd);
  return op;
}

DispatchResult geglu_fwd(const GegluFwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_fwd<kGegluFwd>>(&geglu_fwd_op, args, ctx);
}
DispatchResult geglu_bwd(const GegluBwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_bwd<kGegluBwd>>(&geglu_bwd_op, args, ctx);
}
DispatchResult swiglu_fwd(const SwigluFwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_fwd<kSwigluFwd>>(&swiglu_fwd_op, args, ctx);
}
DispatchResult swiglu_bwd(const SwigluBwdArgs& args, const ExecContext* ctx) {
  return ops_detail::call<&check_bwd<kSwigluBwd>>(&swiglu_bwd_op, args, ctx);
}

Tensor geglu(const Tensor& a, const Tensor& b, const ExecContext* ctx) {
  return glu_fwd(kGegluFwd, a, b, ctx, &geglu_fwd);
}
GluGrads geglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, const ExecContext* ctx) {
  return glu_bwd(kGegluBwd, dc, a, b, ctx, &geglu_bwd);
}
Tensor swiglu(const Tensor& a, const Tensor& b, const ExecContext* ctx) {
  return glu_fwd(kSwigluFwd, a, b, ctx, &swiglu_fwd);
}
GluGrads swiglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, const ExecContext* ctx) {
  return glu_bwd(kSwigluBwd, dc, a, b, ctx, &swiglu_bwd);
}

}  // namespace opreg
