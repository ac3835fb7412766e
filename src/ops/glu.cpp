// The allocating wrappers of the gated activations geglu (gelu_tanh(a) * b) and swiglu
// (silu(a) * b). Their checks, handles and entry points come from the manifest (ops.cpp).
#include "ops/common.h"
#include "ops/manifest.h"

namespace opreg {
namespace {

constexpr const char* kGegluFwd = manifest::OpEntry<manifest::OpId::geglu_fwd>::name;
constexpr const char* kGegluBwd = manifest::OpEntry<manifest::OpId::geglu_bwd>::name;
constexpr const char* kSwigluFwd = manifest::OpEntry<manifest::OpId::swiglu_fwd>::name;
constexpr const char* kSwigluBwd = manifest::OpEntry<manifest::OpId::swiglu_bwd>::name;

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
