// Ordered variant lists: how a backend registers the variants of one (backend, op direction),
// as oneDNN's implementation lists do. The list's order is the priority (the first entry is
// tried first); an entry may plan: its supports() reads the device through the backend's own
// typed facts (DeviceProps::facts), decides, and fills a plan that the choice cache keeps and
// its kernel receives, so a problem is planned once. docs/adding-a-backend.md shows a list.
//
//   register_list(registry, rms_norm_fwd_op(), "npu",
//                 {{"single_pass", &fwd_supports<Impl::single_pass>, &fwd_run, tunables},
//                  {"chunked", &fwd_supports<Impl::chunked>, &fwd_run, tunables}});
#pragma once

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "opreg/registry.h"

namespace opreg {

// The priority of the i-th of n entries of a list: 100 * (n - i), so a list of three is 300, 200,
// 100, and a variant registered with a numeric priority (a custom or plugin one) can sit between
// two entries; the cpu reference variants stay last at -1000.
inline constexpr int list_priority(std::size_t index, std::size_t count) {
  return 100 * static_cast<int>(count - index);
}

template <class Args>
class ListedVariant {
 public:
  // An entry that takes every problem the op's check accepts (and needs no plan):
  // run(args, ctx). The registry can then resolve the choice once, not per problem.
  ListedVariant(std::string impl, void (*run)(const Args&, const KernelContext&), std::vector<Tunable> tunables = {},
                const char* file = __builtin_FILE(), int line = __builtin_LINE())
      : impl_(std::move(impl)), tunables_(std::move(tunables)), file_(file), line_(line) {
    run_ = std::make_shared<const decltype(run)>(run);
    invoke_ = [](const void* f, const void* a, const KernelContext& c, const void*) {
      (*static_cast<const decltype(run)*>(f))(*static_cast<const Args*>(a), c);
    };
  }

  // An entry that decides but needs no plan: supports(args, facts) accepts or refuses (Facts:
  // the backend's type behind DeviceProps::facts, or DeviceProps); run(args, ctx).
  template <class Facts>
  ListedVariant(std::string impl, Verdict (*supports)(const Args&, const Facts&),
                void (*run)(const Args&, const KernelContext&), std::vector<Tunable> tunables = {},
                const char* file = __builtin_FILE(), int line = __builtin_LINE())
      : ListedVariant(std::move(impl), run, std::move(tunables), file, line) {
    supports_ = [supports](const void* a, const DeviceProps& props) {
      if constexpr (std::is_same_v<Facts, DeviceProps>) {
        return supports(*static_cast<const Args*>(a), props);
      } else {
        if (props.facts == nullptr) return Verdict::reject("the device has no facts of this variant's backend");
        return supports(*static_cast<const Args*>(a), *static_cast<const Facts*>(props.facts));
      }
    };
  }

  // An entry that plans: supports(args, facts, plan) accepts or refuses the problem and fills
  // `plan` either way (a refusal fills the plan it refused: a forced variant runs it, and so fails
  // the way the device would); run(args, plan, ctx) receives the plan. Facts is the backend's
  // type behind DeviceProps::facts, or DeviceProps itself. Plan: trivially copyable, at most
  // kPlanBytes.
  template <class Facts, class Plan>
  ListedVariant(std::string impl, Verdict (*supports)(const Args&, const Facts&, Plan&),
                void (*run)(const Args&, const Plan&, const KernelContext&), std::vector<Tunable> tunables = {},
                const char* file = __builtin_FILE(), int line = __builtin_LINE())
      : impl_(std::move(impl)), tunables_(std::move(tunables)), file_(file), line_(line) {
    static_assert(std::is_trivially_copyable_v<Plan> && sizeof(Plan) <= kPlanBytes && alignof(Plan) <= 8,
                  "a plan is trivially copyable and at most kPlanBytes");
    supports_ = [supports](const void* a, const DeviceProps& props) {
      Plan plan{};
      Verdict verdict;
      if constexpr (std::is_same_v<Facts, DeviceProps>) {
        verdict = supports(*static_cast<const Args*>(a), props, plan);
      } else if (props.facts == nullptr) {
        return Verdict::reject("the device has no facts of this variant's backend");
      } else {
        verdict = supports(*static_cast<const Args*>(a), *static_cast<const Facts*>(props.facts), plan);
      }
      std::memcpy(verdict.plan.bytes.data(), &plan, sizeof(Plan));
      verdict.plan.size = static_cast<std::uint16_t>(sizeof(Plan));
      return verdict;
    };
    run_ = std::make_shared<const decltype(run)>(run);
    invoke_ = [](const void* f, const void* a, const KernelContext& c, const void* plan) {
      // A planned variant always runs after its supports() (chosen, forced or called by name);
      // the default plan only covers a caller that bypassed it.
      const Plan fallback{};
      (*static_cast<const decltype(run)*>(f))(*static_cast<const Args*>(a),
                                               plan != nullptr ? *static_cast<const Plan*>(plan) : fallback, c);
    };
  }

  // An entry that takes every problem the op's check accepts but plans it: plan(args, facts,
  // plan) cannot refuse (it may throw for a device error); `opreg ops` shows it accepting all.
  template <class Facts, class Plan>
  ListedVariant(std::string impl, void (*plan)(const Args&, const Facts&, Plan&),
                void (*run)(const Args&, const Plan&, const KernelContext&), std::vector<Tunable> tunables = {},
                const char* file = __builtin_FILE(), int line = __builtin_LINE())
      : ListedVariant(std::move(impl), &accepting<Facts, Plan>, run, std::move(tunables), file, line) {
    // The planner rides in the erased supports() beside the adapter: a capture, as for supports.
    supports_ = [plan](const void* a, const DeviceProps& props) {
      Plan made{};
      if constexpr (std::is_same_v<Facts, DeviceProps>) {
        plan(*static_cast<const Args*>(a), props, made);
      } else {
        if (props.facts == nullptr) return Verdict::reject("the device has no facts of this variant's backend");
        plan(*static_cast<const Args*>(a), *static_cast<const Facts*>(props.facts), made);
      }
      Verdict verdict;
      std::memcpy(verdict.plan.bytes.data(), &made, sizeof(Plan));
      verdict.plan.size = static_cast<std::uint16_t>(sizeof(Plan));
      return verdict;
    };
    accepts_all_ = true;
  }

  // The entry's kernel reads strides (VariantSpec::strided): it is given non-contiguous tensors.
  void take_strides() { strided_ = true; }

  // The registration of this entry at position `index` of a list of `count`.
  detail::ErasedVariant erased(const Op<Args>& op, std::string_view backend, std::size_t index,
                               std::size_t count) const {
    detail::ErasedVariant v;
    v.op = &op.def();
    v.backend = std::string(backend);
    v.impl = impl_;
    v.priority = list_priority(index, count);
    v.supports = supports_;
    v.run = run_;
    v.invoke = invoke_;
    v.tunables = tunables_;
    v.forcing = detail::Forcing::run_refused_plan;
    v.accepts_all = accepts_all_;
    v.strided = strided_;
    return v;
  }
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  template <class Facts, class Plan>
  static Verdict accepting(const Args&, const Facts&, Plan&) {
    return Verdict::accept();
  }
  std::string impl_;
  Function<Verdict(const void*, const DeviceProps&)> supports_;
  std::shared_ptr<const void> run_;
  void (*invoke_)(const void*, const void*, const KernelContext&, const void*) = nullptr;
  std::vector<Tunable> tunables_;
  const char* file_;
  int line_;
  bool accepts_all_ = false;
  bool strided_ = false;
};

// Registers the entries of `list` as the variants of (`backend`, `op`), in priority order, sited
// at the list (the line of the call, as the compilers place an entry's default arguments), for
// the registry's lifetime.
template <class Args>
void register_list(Registry& registry, const Op<Args>& op, std::string_view backend,
                   std::initializer_list<ListedVariant<std::type_identity_t<Args>>> list) {
  std::size_t i = 0;
  for (const auto& entry : list) {
    detail::ListAccess::add(registry, entry.erased(op, backend, i++, list.size()), entry.file(), entry.line());
  }
}

}  // namespace opreg
