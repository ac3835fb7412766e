// Every op of the manifest: its handle, its check (the struct's rules, then the overlap rule over
// the manifest's tensor list), its entry point, and what the ops share: casting modes,
// directions, names, the byte model.
#include <fmt/format.h>

#include <array>

#include "ops/checks.h"
#include "ops/common.h"
#include "ops/manifest.h"
#include "opreg/ops.h"
#include "registry/fail.h"
#include "registry/spellings.h"

namespace opreg {

namespace {

using manifest::OpEntry;
using manifest::OpId;

// The whole check of op `Id`: the argument struct's rules, then no output may overlap another
// tensor except its in-place partner, which also reports where the tensors are (CallFacts).
template <OpId Id>
[[gnu::always_inline]] inline CallFacts check(const typename OpEntry<Id>::Args& a) {
  using E = OpEntry<Id>;
  op_check::args(E::name, a);
  return op_check::outputs_apart(E::name, E::S::first_output, [&] { return manifest::items<op_check::Item>(a); });
}

template <class Args>
constexpr void (*key_of())(const Args&, ProblemKey&) {
  return manifest::Spec<Args>::key_words > 0 ? &manifest::Spec<Args>::key : nullptr;
}

}  // namespace

#define OPREG_OPS_DEFINE_(ident, base, direction, Args, c_args)                                                   \
  const Op<Args>& ident##_op() {                                                                                  \
    static const Op<Args> op = ops_detail::make_op<Args>(OpEntry<OpId::ident>::name, &check<OpId::ident>,         \
                                                         &manifest::tensors<Args>, key_of<Args>());               \
    return op;                                                                                                    \
  }                                                                                                               \
  DispatchResult ident(const Args& args, const ExecContext* ctx) {                                                \
    return ops_detail::call<&check<OpId::ident>>(&ident##_op, args, ctx);                                         \
  }
OPREG_OPS(OPREG_OPS_DEFINE_)
#undef OPREG_OPS_DEFINE_

void define_builtin_ops() {
  manifest::for_each_op([](auto entry) { entry.op(); });
}

namespace manifest {

const std::array<OpInfo, kOpCount>& ops() {
  static const std::array<OpInfo, kOpCount> table = [] {
    std::array<OpInfo, kOpCount> out{};
    std::size_t i = 0;
    for_each_op([&](auto entry) {
      using E = decltype(entry);
      out[i++] = {E::name,
                  E::base,
                  E::direction,
                  E::S::family,
                  E::S::grouped,
                  E::S::fields.data(),
                  static_cast<int>(E::S::fields.size()),
                  static_cast<int>(E::S::first_output)};
    });
    return out;
  }();
  return table;
}

const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& op : ops()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

}  // namespace manifest

namespace {
constexpr auto kCastingNames = spellings<Casting>("llama", "gemma", "none");
}  // namespace

std::string_view to_string(Casting casting) { return kCastingNames(casting); }

Casting parse_casting(std::string_view text) {
  if (const auto c = kCastingNames.parse(text)) return *c;
  fail(ErrorKind::invalid_argument, "casting mode '{}' is not accepted; accepted: {}", text, kCastingNames.accepted());
}

void rows_overflow(const Shape& shape) {
  fail(ErrorKind::invalid_argument, "shape [{}]: its rows (the product of the leading extents) exceed {}", shape.str(),
       INT64_MAX);
}

std::string_view to_string(Direction direction) { return direction == Direction::fwd ? "fwd" : "bwd"; }

std::span<const std::string_view> op_names() {
  // The bases in manifest order, each once (an op's directions are listed together).
  static const auto names = [] {
    std::array<std::string_view, manifest::kOpCount> out{};
    std::size_t n = 0;
    for (const auto& op : manifest::ops()) {
      if (n == 0 || out[n - 1] != op.base) out[n++] = op.base;
    }
    return std::pair{out, n};
  }();
  return {names.first.data(), names.second};
}

std::uint64_t bytes_moved(std::string_view op, Direction direction, const Shape& shape, DType dtype, DType wdtype,
                          std::int64_t num_groups, bool has_weight, bool has_bias) {
  const manifest::OpInfo* info = nullptr;
  for (const auto& o : manifest::ops()) {
    if (o.base == op && o.direction == direction) info = &o;
  }
  if (info == nullptr) {
    fail(ErrorKind::invalid_argument, "bytes_moved: unknown op '{}'; accepted: {}", op, fmt::join(op_names(), ", "));
  }
  using manifest::Family;
  using manifest::Kind;
  using manifest::When;
  // Every product and sum checked: a count of 2^64 bytes or more is refused, never wrapped.
  auto overflow = [&]() {
    fail(ErrorKind::invalid_argument,
         "bytes_moved({}.{}): shape [{}] ({}, weight {}) moves 2^64 bytes or more, past what a 64-bit count holds", op,
         to_string(direction), shape.str(), to_string(dtype), to_string(wdtype));
  };
  auto mul = [&](std::uint64_t a, std::uint64_t b) {
    std::uint64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
  };
  const auto n = static_cast<std::uint64_t>(shape.numel());
  const auto sx = static_cast<std::uint64_t>(element_size(dtype));
  const auto sw = static_cast<std::uint64_t>(element_size(wdtype));
  constexpr std::uint64_t kStat = 4;  // statistics are f32
  std::uint64_t params = 0;           // elements of a weight-sized tensor
  std::uint64_t stats = 0;            // elements of a statistic
  if (info->grouped) {
    if (shape.ndim() < 2) fail(ErrorKind::invalid_argument, "bytes_moved({}): shape needs (N, C, ...)", op);
    params = static_cast<std::uint64_t>(shape[1]);
    stats = mul(static_cast<std::uint64_t>(shape[0]), static_cast<std::uint64_t>(num_groups));
  } else if (info->family == Family::rope) {
    if (shape.ndim() != 4) fail(ErrorKind::invalid_argument, "bytes_moved({}): shape needs [B, heads, T, D]", op);
    // HF's call: one [1, T, D] table pair, of which half-style pairs read the first half.
    params = mul(static_cast<std::uint64_t>(shape[2]), static_cast<std::uint64_t>(shape[3] / 2));
  } else if (info->family != Family::glu) {
    if (shape.ndim() < 1) fail(ErrorKind::invalid_argument, "bytes_moved({}): shape has no dims", op);
    const auto [rows, h] = rows_hidden(shape);
    params = static_cast<std::uint64_t>(h);
    stats = static_cast<std::uint64_t>(rows);
  }
  // Each tensor of the call once: read if an input, written if an output.
  std::uint64_t bytes = 0;
  for (int i = 0; i < info->field_count; ++i) {
    const manifest::Field& f = info->fields[i];
    if ((f.when == When::weight && !has_weight) || (f.when == When::bias && !has_bias)) continue;
    std::uint64_t tensor = 0;
    switch (f.kind) {
      case Kind::act:
      case Kind::act2: tensor = mul(n, sx); break;  // rope by shape: k has q's head count
      case Kind::param:
      case Kind::table: tensor = mul(params, sw); break;
      case Kind::stat: tensor = mul(stats, kStat); break;
      case Kind::index: break;  // rope by shape: no position_ids
    }
    if (__builtin_add_overflow(bytes, tensor, &bytes)) overflow();
  }
  return bytes;
}

namespace {

// The elements of a rope table a call reads: the rows it uses (one per position: (1 or B) x T,
// or position_ids' count) at the width it reads (pair i's entry: D/2 of a row, but every other
// entry of an interleaved call's full-width row, which moves the whole row).
std::uint64_t rope_table_elements(const Tensor& q, const Tensor& table, const Tensor& positions, RopeStyle style) {
  const std::int64_t d = q.size(3);
  const std::int64_t width = style == RopeStyle::interleaved && table.size(table.ndim() - 1) == d ? d : d / 2;
  std::int64_t rows = positions.defined() ? positions.numel()
                                          : (table.ndim() == 3 && table.size(0) > 1 ? q.size(0) : 1) * q.size(2);
  std::int64_t out = 0;
  if (__builtin_mul_overflow(rows, width, &out)) {
    fail(ErrorKind::invalid_argument, "bytes_moved: a rope table of {} rows of {} moves 2^63 elements or more", rows,
         width);
  }
  return static_cast<std::uint64_t>(out);
}

template <class Args>
std::uint64_t bytes_of(const Args& a) {
  using S = manifest::Spec<Args>;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < S::fields.size(); ++i) {
    const Tensor& t = a.*S::members[i];
    if (!t.defined()) continue;
    auto elements = static_cast<std::uint64_t>(t.numel());
    if constexpr (requires { a.style; a.position_ids; }) {
      if (S::fields[i].kind == manifest::Kind::table) {
        elements = rope_table_elements(a.*S::members[0], t, a.position_ids, a.style);
      }
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements, element_size(t.dtype()), &bytes) ||
        __builtin_add_overflow(total, bytes, &total)) {
      fail(ErrorKind::invalid_argument, "bytes_moved({}): the call moves 2^64 bytes or more", S::c_name);
    }
  }
  return total;
}

}  // namespace

#define OPREG_OPS_BYTES_(Name, c_name, family, FIELDS) \
  std::uint64_t bytes_moved(const Name& args) { return bytes_of(args); }
OPREG_ARG_STRUCTS(OPREG_OPS_BYTES_)
#undef OPREG_OPS_BYTES_

}  // namespace opreg
