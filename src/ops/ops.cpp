// What the six ops share: casting modes, directions, names, and the byte model.
#include <fmt/format.h>

#include <array>

#include "opreg/ops.h"
#include "registry/fail.h"

namespace opreg {

std::string_view to_string(Casting casting) {
  switch (casting) {
    case Casting::llama: return "llama";
    case Casting::gemma: return "gemma";
    case Casting::none: return "none";
  }
  return "?";
}

Casting parse_casting(std::string_view text) {
  for (Casting c : {Casting::llama, Casting::gemma, Casting::none}) {
    if (text == to_string(c)) return c;
  }
  fail(ErrorKind::invalid_argument, "casting mode '{}' is not accepted; accepted: llama, gemma, none", text);
}

void rows_overflow(const Shape& shape) {
  fail(ErrorKind::invalid_argument, "shape [{}]: its rows (the product of the leading extents) exceed {}", shape.str(),
       INT64_MAX);
}

std::string_view to_string(Direction direction) { return direction == Direction::fwd ? "fwd" : "bwd"; }

std::span<const std::string_view> op_names() {
  static constexpr std::array<std::string_view, 6> names{"rms_norm", "fused_add_rms_norm", "layer_norm",
                                                         "group_norm", "geglu", "swiglu"};
  return names;
}

void define_builtin_ops() {
  rms_norm_fwd_op();
  rms_norm_bwd_op();
  fused_add_rms_norm_fwd_op();
  fused_add_rms_norm_bwd_op();
  layer_norm_fwd_op();
  layer_norm_bwd_op();
  group_norm_fwd_op();
  group_norm_bwd_op();
  geglu_fwd_op();
  geglu_bwd_op();
  swiglu_fwd_op();
  swiglu_bwd_op();
}

std::uint64_t bytes_moved(std::string_view op, Direction direction, const Shape& shape, DType dtype, DType wdtype,
                          std::int64_t num_groups, bool has_weight, bool has_bias) {
  const bool fwd = direction == Direction::fwd;
  const auto n = static_cast<std::uint64_t>(shape.numel());
  const auto sx = static_cast<std::uint64_t>(element_size(dtype));
  const auto sw = static_cast<std::uint64_t>(element_size(wdtype));
  constexpr std::uint64_t kStat = 4;  // statistics are f32
  // Weight-sized tensors: the weight (read) and, backward, dweight (written); the bias likewise
  // (forward read, backward dbias written).
  const std::uint64_t w = has_weight ? (fwd ? 1 : 2) : 0;
  const std::uint64_t b = has_bias ? 1 : 0;
  // Per-row ops: `act` activation-sized tensors, `par` weight-sized ones, `stats` row statistics.
  auto per_row = [&](std::uint64_t act, std::uint64_t par, std::uint64_t stats) {
    if (shape.ndim() < 1) fail(ErrorKind::invalid_argument, "bytes_moved({}): shape has no dims", op);
    const auto [rows, h] = rows_hidden(shape);
    return act * n * sx + par * static_cast<std::uint64_t>(h) * sw + stats * static_cast<std::uint64_t>(rows) * kStat;
  };
  if (op == "rms_norm") return fwd ? per_row(2, w, 1) : per_row(3, w, 1);
  if (op == "fused_add_rms_norm") return fwd ? per_row(4, w, 1) : per_row(4, w, 1);
  if (op == "layer_norm") return fwd ? per_row(2, w + b, 2) : per_row(3, w + b, 2);
  if (op == "group_norm") {
    if (shape.ndim() < 2) fail(ErrorKind::invalid_argument, "bytes_moved(group_norm): shape needs (N, C, ...)");
    const auto c = static_cast<std::uint64_t>(shape[1]);
    const auto stats = static_cast<std::uint64_t>(shape[0]) * static_cast<std::uint64_t>(num_groups) * kStat;
    return (fwd ? 2 : 3) * n * sx + (w + b) * c * sw + 2 * stats;
  }
  if (op == "geglu" || op == "swiglu") return (fwd ? 3 : 5) * n * sx;
  fail(ErrorKind::invalid_argument, "bytes_moved: unknown op '{}'; accepted: rms_norm, fused_add_rms_norm, "
       "layer_norm, group_norm, geglu, swiglu", op);
}

}  // namespace opreg
