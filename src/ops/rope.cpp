// rope's allocating wrappers and its pairing names. Its check, handles and entry points come from
// the manifest (ops.cpp).
#include "ops/common.h"
#include "ops/manifest.h"
#include "registry/fail.h"
#include "registry/spellings.h"

namespace opreg {
namespace {

constexpr auto kStyleNames = spellings<RopeStyle>("half", "interleaved");

template <class Args>
RopeOut rope_call(const char* op, const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
                  const Tensor& position_ids, RopeStyle style, const ExecContext* ctx,
                  DispatchResult (*entry)(const Args&, const ExecContext*)) {
  if (!q.defined()) op_check::missing(op, manifest::Spec<Args>::fields[0].name.data());
  if (!k.defined()) op_check::missing(op, manifest::Spec<Args>::fields[1].name.data());
  RopeOut out{ops_detail::like(q), ops_detail::like(k)};
  entry({q, k, cos, sin, position_ids, out.q, out.k, style}, ctx);
  return out;
}

}  // namespace

std::string_view to_string(RopeStyle style) { return kStyleNames(style); }

RopeStyle parse_rope_style(std::string_view text, std::string_view op) {
  if (const auto s = kStyleNames.parse(text)) return *s;
  fail(ErrorKind::invalid_argument, "{}rope style '{}' is not accepted; accepted: {}",
       op.empty() ? std::string() : fmt::format("{}: ", op), text, kStyleNames.accepted());
}

RopeOut rope(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin, const Tensor& position_ids,
             RopeStyle style, const ExecContext* ctx) {
  return rope_call(manifest::OpEntry<manifest::OpId::rope_fwd>::name, q, k, cos, sin, position_ids, style, ctx,
                   &rope_fwd);
}

RopeOut rope_backward(const Tensor& dq_out, const Tensor& dk_out, const Tensor& cos, const Tensor& sin,
                      const Tensor& position_ids, RopeStyle style, const ExecContext* ctx) {
  return rope_call(manifest::OpEntry<manifest::OpId::rope_bwd>::name, dq_out, dk_out, cos, sin, position_ids, style,
                   ctx, &rope_bwd);
}

}  // namespace opreg
