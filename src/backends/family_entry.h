// A family variant's list entry: what every backend registers. A variant of family F is written
// once for all of F's op directions over F's descriptor (src/ops/families.h):
//
//   Verdict supports(const Desc&, const Facts&, Plan&);      decides and plans (may refuse)
//   void run(const Desc&, const Plan&, const KernelContext&); runs what supports() planned
//
// (a void supports() plans without refusing), or, for a variant that takes every problem the op's check accepts, run(const Desc&, const
// KernelContext&) alone. The entry builds the descriptor from the op's argument struct (describe.h)
// once for the planning and once per call; nothing in a backend reads an argument struct. A
// family whose descriptor carries strides (`Desc::strided`) lists variants that take views.
//
//   register_list(r, layer_norm_fwd_op(), "npu",
//                 {family_entry<LayerNormFwdArgs, &fwd_supports<Impl::rows>, &fwd_run>("rows", tunables)});
//
// Ops that share a descriptor but not a formula (geglu and swiglu, layer_norm and group_norm) pass
// theirs as a template argument of supports/run (e.g. fwd_supports<Act::gelu_tanh>).
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "opreg/variants.h"
#include "ops/describe.h"

namespace opreg {
namespace family_detail {

template <class F>
struct Signature;
template <class R, class D, class Facts_, class Plan_>
struct Signature<R (*)(const D&, const Facts_&, Plan_&)> {
  using Result = R;  // Verdict, or void for a planner that takes every problem
  using Desc = D;
  using Facts = Facts_;
  using Plan = Plan_;
};

template <class Args, auto Supports, auto Run>
struct Planned {
  using S = Signature<decltype(Supports)>;
  static_assert(std::is_same_v<typename S::Desc, family::Descriptor<Args>>,
                "supports() takes the descriptor of the op's arguments (describe.h)");
  static typename S::Result supports(const Args& args, const typename S::Facts& facts, typename S::Plan& plan) {
    return Supports(family::describe(args), facts, plan);
  }
  static void run(const Args& args, const typename S::Plan& plan, const KernelContext& ctx) {
    Run(family::describe(args), plan, ctx);
  }
};

template <class Args, auto Run>
struct Unplanned {
  static void run(const Args& args, const KernelContext& ctx) { Run(family::describe(args), ctx); }
};

}  // namespace family_detail

// A variant that plans: supports(desc, facts, plan) and run(desc, plan, ctx). A supports() that
// returns void is a planner: the variant takes every problem (`opreg ops` shows it accepting all).
template <class Args, auto Supports, auto Run>
ListedVariant<Args> family_entry(std::string impl, std::vector<Tunable> tunables = {},
                                 const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using E = family_detail::Planned<Args, Supports, Run>;
  ListedVariant<Args> entry{std::move(impl), &E::supports, &E::run, std::move(tunables), file, line};
  if constexpr (requires { family::Descriptor<Args>::strided; }) entry.take_strides();
  return entry;
}

// A variant that takes every problem the op's check accepts: run(desc, ctx). The registry then
// resolves the choice once, not per problem.
template <class Args, auto Run>
ListedVariant<Args> family_entry(std::string impl, std::vector<Tunable> tunables = {},
                                 const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ListedVariant<Args> entry{std::move(impl), &family_detail::Unplanned<Args, Run>::run, std::move(tunables), file, line};
  if constexpr (requires { family::Descriptor<Args>::strided; }) entry.take_strides();
  return entry;
}

}  // namespace opreg
