// The op manifest (include/opreg/op_manifest.h) as C++ tables: what each argument struct holds
// and what each op direction is, for everything inside opreg that works on any op: the checks'
// tensor lists and overlap items, the choice key's scalars, the byte model, the problem factory,
// the plugin conversions, the reference variants and the fuzzers. Nothing here is written per op.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "opreg/ops.h"

namespace opreg::manifest {

// What a tensor member is (op_manifest.h's `kind`).
enum class Kind : std::uint8_t {
  act,    // x's shape and dtype (x, residual, dy, s, a, b, ...)
  param,  // weight-sized, in the weight's dtype (weight, bias, dweight, dbias)
  stat,   // f32 statistics, per row or per (n, group)
  act2,   // a second activation: x's dtype, a shape of its own (rope's k: [B, Hk, T, D])
  table,  // per-position rows in the weight's dtype (rope's cos and sin)
  index,  // int64 positions (rope's position_ids)
};
// When a tensor is present (op_manifest.h's `when`).
enum class When : std::uint8_t {
  always,
  weight,  // exactly when the weight is (weight, dweight)
  bias,    // optional on its own (bias, dbias)
  positions,  // optional on its own (rope's position_ids)
};
// The op's family (op_manifest.h's OPREG_FAMILIES; src/ops/families.h for the kernels' view).
#define OPREG_M_FAMILY_(name) name,
enum class Family : std::uint8_t { OPREG_FAMILIES(OPREG_M_FAMILY_) };
#undef OPREG_M_FAMILY_

struct Field {
  std::string_view name;
  Role role = Role::in;
  Kind kind = Kind::act;
  When when = When::always;
  int partner = -1;  // the input this output may be exactly (in place); -1: none
};

namespace detail {
struct RawField {
  std::string_view name;
  Role role;
  Kind kind;
  When when;
  std::string_view partner;
};
// Partners by name become indices, checked: a partner is an earlier input of the same struct.
template <std::size_t N>
constexpr std::array<Field, N> resolve(const std::array<RawField, N>& raw) {
  std::array<Field, N> out{};
  bool outputs = false;
  for (std::size_t i = 0; i < N; ++i) {
    out[i] = {raw[i].name, raw[i].role, raw[i].kind, raw[i].when, -1};
    if (raw[i].role == Role::out) outputs = true;
    if (raw[i].role == Role::in && outputs) throw "op_manifest.h: every input comes before the outputs";
    if (raw[i].partner == "none") continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (raw[j].name == raw[i].partner && raw[j].role == Role::in) out[i].partner = static_cast<int>(j);
    }
    if (out[i].partner < 0) throw "op_manifest.h: a partner must name an earlier input";
  }
  return out;
}
// rope's key words beyond the first tensor's shape (the check leaves them free): k's head count,
// the tables' row width and their batch extent (or rank).
[[gnu::always_inline]] inline void rope_shape_key(const Tensor& k, const Tensor& table, ProblemKey& key) {
  const int n = table.ndim();
  key.add(static_cast<std::uint64_t>(k.ndim() >= 2 ? k.size(1) : 0));
  key.add(static_cast<std::uint64_t>(n >= 1 ? table.size(n - 1) : 0));
  key.add(static_cast<std::uint64_t>(n == 3 ? table.size(0) : n));
}

template <std::size_t N>
constexpr std::size_t count_inputs(const std::array<Field, N>& fields) {
  std::size_t n = 0;
  for (const Field& f : fields) n += f.role == Role::in ? 1 : 0;
  return n;
}
}  // namespace detail

// Spec<Args>: the manifest's entry of an argument struct.
//   family, c_name
//   fields           the tensor members, in order (Field)
//   members          pointers to them, in the same order
//   first_output     the index of the first output (the inputs come first)
//   key(args, key)   appends the scalars the choice may depend on (op_manifest.h's `key`); the
//                    key always has room for them (static_assert)
//   key_words        how many words key() adds
template <class Args>
struct Spec;

#define OPREG_M_ROLE_in ::opreg::Role::in
#define OPREG_M_ROLE_out ::opreg::Role::out
#define OPREG_M_FIELD_(name, role, kind, when, partner) \
  detail::RawField{#name, OPREG_M_ROLE_##role, Kind::kind, When::when, #partner},
#define OPREG_M_MEMBER_(name, role, kind, when, partner) &Args::name,
#define OPREG_M_NONE_(...)
// add(): a strided call's key may already be full of strides (it is then marked overflowed and
// not cached), so the scalars are appended with the bounds check.
#define OPREG_M_KEY_key(name) key.add(static_cast<std::uint64_t>(args.name));
#define OPREG_M_KEY_nokey(name)
#define OPREG_M_KEY_(type, name, value, keyed) OPREG_M_KEY_##keyed(name)
#define OPREG_M_GROUPS_(type, name, value, keyed) || std::string_view(#name) == "num_groups"
#define OPREG_M_KEYS_key +1
#define OPREG_M_KEYS_nokey +0
#define OPREG_M_KEYS_(type, name, value, keyed) OPREG_M_KEYS_##keyed
#define OPREG_M_SPEC_(Name, c_name_, family_, FIELDS)                                                             \
  template <>                                                                                                     \
  struct Spec<Name> {                                                                                             \
    using Args = Name;                                                                                            \
    static constexpr Family family = Family::family_;                                                             \
    /* Statistics per (n, group) over (N, C, spatial...): the struct has num_groups. */                           \
    static constexpr bool grouped = (false FIELDS(OPREG_M_NONE_, OPREG_M_GROUPS_));                               \
    static constexpr std::string_view c_name = #c_name_;                                                          \
    /* Its kernels read strides (the family's descriptor carries them): its variants take views. */               \
    static constexpr bool strided = family == Family::rope;                                                       \
    static constexpr auto fields = detail::resolve(std::array{FIELDS(OPREG_M_FIELD_, OPREG_M_NONE_)});            \
    static constexpr std::array<Tensor Args::*, fields.size()> members{FIELDS(OPREG_M_MEMBER_, OPREG_M_NONE_)};   \
    static constexpr std::size_t first_output = detail::count_inputs(fields);                                     \
    /* rope's k and tables have shapes of their own, which the first tensor's does not fix. */                   \
    static constexpr int shape_words = family == Family::rope ? 3 : 0;                                            \
    static constexpr int key_words = 0 FIELDS(OPREG_M_NONE_, OPREG_M_KEYS_) + shape_words;                        \
    /* The key's words: the call's (at most 3 + kMaxDims, dispatch's TensorBits) and these. */                    \
    static_assert(3 + kMaxDims + key_words <= kKeyWords);                                                         \
    [[gnu::always_inline]] static void key([[maybe_unused]] const Args& args, [[maybe_unused]] ProblemKey& key) { \
      FIELDS(OPREG_M_NONE_, OPREG_M_KEY_)                                                                         \
      if constexpr (shape_words > 0) detail::rope_shape_key(args.*members[1], args.*members[2], key);             \
    }                                                                                                             \
  };
OPREG_ARG_STRUCTS(OPREG_M_SPEC_)
#undef OPREG_M_SPEC_
#undef OPREG_M_KEYS_
#undef OPREG_M_GROUPS_
#undef OPREG_M_KEYS_key
#undef OPREG_M_KEYS_nokey
#undef OPREG_M_KEY_
#undef OPREG_M_KEY_key
#undef OPREG_M_KEY_nokey
#undef OPREG_M_NONE_
#undef OPREG_M_MEMBER_
#undef OPREG_M_FIELD_
#undef OPREG_M_ROLE_in
#undef OPREG_M_ROLE_out

// The largest tensor count of any struct: what fixed-capacity lists of an op's tensors hold.
#define OPREG_M_COUNT_(Name, c_name, family, FIELDS) Spec<Name>::fields.size(),
inline constexpr std::size_t kMaxTensors = std::max({OPREG_ARG_STRUCTS(OPREG_M_COUNT_) std::size_t{0}});
#undef OPREG_M_COUNT_
static_assert(kMaxTensors <= static_cast<std::size_t>(kMaxOpTensors), "an op has more tensors than a TensorList holds");
static_assert(kMaxTensors <= 32, "CallFacts::strided holds 32 tensors");

// The index of a tensor member by name (-1: none), for code that needs one member by role.
template <class Args>
constexpr int field_index(std::string_view name) {
  for (std::size_t i = 0; i < Spec<Args>::fields.size(); ++i) {
    if (Spec<Args>::fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// ---- The op directions.

enum class OpId : int {
#define OPREG_M_ID_(ident, base, direction, Args, c_args) ident,
  OPREG_OPS(OPREG_M_ID_)
#undef OPREG_M_ID_
};
#define OPREG_M_ONE_(...) +1
inline constexpr int kOpCount = 0 OPREG_OPS(OPREG_M_ONE_);
#undef OPREG_M_ONE_

// One op direction: its name, parts, argument struct's entry and reference.
template <OpId Id>
struct OpEntry;
#define OPREG_M_OP_(ident, base_, direction_, Args_, c_args_)     \
  template <>                                                     \
  struct OpEntry<OpId::ident> {                                   \
    using Args = Args_;                                           \
    using S = Spec<Args_>;                                        \
    static constexpr OpId id = OpId::ident;                       \
    static constexpr char name[] = #base_ "." #direction_;        \
    static constexpr std::string_view base = #base_;              \
    static constexpr Direction direction = Direction::direction_; \
    static constexpr std::string_view c_args = #c_args_;          \
    static const Op<Args_>& op() { return ident##_op(); }         \
  };
OPREG_OPS(OPREG_M_OP_)
#undef OPREG_M_OP_

// Calls f(OpEntry<Id>{}) for every op direction, in manifest order.
template <class F>
void for_each_op(F&& f) {
#define OPREG_M_VISIT_(ident, base, direction, Args, c_args) f(OpEntry<OpId::ident>{});
  OPREG_OPS(OPREG_M_VISIT_)
#undef OPREG_M_VISIT_
}

// Calls f(OpEntry<Id>{}) for the op direction at `index` (0 .. kOpCount - 1) and returns true, or
// returns false for any other index.
template <class F>
bool visit_op(int index, F&& f) {
  int i = 0;
  bool found = false;
  for_each_op([&](auto entry) {
    if (i++ == index) {
      found = true;
      f(entry);
    }
  });
  return found;
}

// What any op direction is, at run time, by name.
struct OpInfo {
  std::string_view name;  // "rms_norm.fwd"
  std::string_view base;  // "rms_norm"
  Direction direction = Direction::fwd;
  Family family = Family::rms_norm;
  bool grouped = false;  // Spec::grouped
  const Field* fields = nullptr;
  int field_count = 0;
  int first_output = 0;
};
// Every op direction, in manifest order.
const std::array<OpInfo, kOpCount>& ops();
// The op of that full name, or nullptr.
const OpInfo* find_op(std::string_view name);

// ---- Per-call helpers on a typed argument struct.

// The tensors of `args` as the overlap rule's items (op_check::Item), in manifest order.
template <class Args, class Item, std::size_t... I>
[[gnu::always_inline]] inline std::array<Item, sizeof...(I)> items_of(const Args& args, std::index_sequence<I...>) {
  using S = Spec<Args>;
  return {Item{S::fields[I].name.data(), &(args.*S::members[I]), S::fields[I].partner}...};
}
template <class Item, class Args>
[[gnu::always_inline]] inline auto items(const Args& args) {
  return items_of<Args, Item>(args, std::make_index_sequence<Spec<Args>::fields.size()>{});
}

// The op's `tensors` function: every member with its role.
template <class Args>
void tensors(Args& args, TensorList& list) {
  using S = Spec<Args>;
  for (std::size_t i = 0; i < S::fields.size(); ++i)
    list.add(S::fields[i].name.data(), args.*S::members[i], S::fields[i].role);
}

}  // namespace opreg::manifest
