// The allocating wrappers of the gated activations geglu (gelu_tanh(a) * b) and swiglu
// (silu(a) * b), and their rounding modes. Their checks, handles and entry points come from the
// manifest (ops.cpp).
#include "ops/common.h"
#include "ops/manifest.h"
#include "registry/fail.h"
#include "registry/spellings.h"

namespace opreg {
namespace {

constexpr const char* kGegluFwd = manifest::OpEntry<manifest::OpId::geglu_fwd>::name;
constexpr const char* kGegluBwd = manifest::OpEntry<manifest::OpId::geglu_bwd>::name;
constexpr const char* kSwigluFwd = manifest::OpEntry<manifest::OpId::swiglu_fwd>::name;
constexpr const char* kSwigluBwd = manifest::OpEntry<manifest::OpId::swiglu_bwd>::name;

Tensor glu_fwd(const char* op, const Tensor& a, const Tensor& b, Rounding rounding, const ExecContext* ctx,
               DispatchResult (*entry)(const GluFwdArgs&, const ExecContext*)) {
  ops_detail::input(op, "a", a, 1);
  Tensor out = ops_detail::like(a);
  entry({.a = a, .b = b, .c = out, .rounding = rounding}, ctx);
  return out;
}

GluGrads glu_bwd(const char* op, const Tensor& dc, const Tensor& a, const Tensor& b, Rounding rounding,
                 const ExecContext* ctx, DispatchResult (*entry)(const GluBwdArgs&, const ExecContext*)) {
  ops_detail::input(op, "a", a, 1);
  GluGrads g{ops_detail::like(a), ops_detail::like(a)};
  entry({.dc = dc, .a = a, .b = b, .da = g.da, .db = g.db, .rounding = rounding}, ctx);
  return g;
}

}  // namespace

namespace {
constexpr auto kRoundingNames = spellings<Rounding>("once", "torch");
}  // namespace

std::string_view to_string(Rounding rounding) { return kRoundingNames(rounding); }

Rounding parse_rounding(std::string_view text, std::string_view op) {
  if (const auto r = kRoundingNames.parse(text)) return *r;
  fail(ErrorKind::invalid_argument, "{}rounding mode '{}' is not accepted; accepted: {}",
       op.empty() ? std::string() : fmt::format("{}: ", op), text, kRoundingNames.accepted());
}

Tensor geglu(const Tensor& a, const Tensor& b, Rounding rounding, const ExecContext* ctx) {
  return glu_fwd(kGegluFwd, a, b, rounding, ctx, &geglu_fwd);
}
GluGrads geglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, Rounding rounding,
                        const ExecContext* ctx) {
  return glu_bwd(kGegluBwd, dc, a, b, rounding, ctx, &geglu_bwd);
}
Tensor swiglu(const Tensor& a, const Tensor& b, Rounding rounding, const ExecContext* ctx) {
  return glu_fwd(kSwigluFwd, a, b, rounding, ctx, &swiglu_fwd);
}
GluGrads swiglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, Rounding rounding,
                         const ExecContext* ctx) {
  return glu_bwd(kSwigluBwd, dc, a, b, rounding, ctx, &swiglu_bwd);
}

}  // namespace opreg
