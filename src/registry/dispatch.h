// The dispatch hot path, inline in each op's entry point (src/ops/common.h) right after the op's
// check: the check reported where the tensors are (CallFacts), and when all of them sit on one
// device, contiguous, and the backend's choice cannot depend on the problem (its table's `fast`
// entry), the call is a few loads inside a read section and the kernel's call; when it depends on
// the problem, the key made inline and a look into the cache. Everything else (a miss, another
// stream, strides, several devices, a fallback) goes to dispatch_after_check (dispatch.cpp), the
// whole of Registry::call after the check.
#pragma once

#include "registry/state.h"

namespace opreg::detail {

struct CoreAccess {
  static RegistryCore& core(Registry& registry) { return *registry.core_; }
};

DispatchResult dispatch_after_check(Registry& registry, const OpDef& op, const void* args, CallFacts facts,
                                    const ExecContext* ctx);
// v's kernel with `ready` as the caller's context has it: its stream (when it names one) and its
// scratch allocator.
void run_in_context(const VariantEntry& v, const void* args, const KernelContext& ready, const void* plan,
                    const ExecContext& ctx);

// `make_key(ProblemKey&, Device)` makes the key of the call (contiguous tensors on one device), as
// build_key would (TensorBits), and returns its key_hash, for the path by problem: an entry point
// knows its op's tensors and scalars, so its key is unrolled inline (and always fits).
template <class MakeKey>
[[gnu::always_inline]] inline DispatchResult dispatch_checked(Registry& registry, const OpDef& op, const void* args,
                                                              CallFacts facts, const ExecContext* ctx,
                                                              MakeKey&& make_key) {
  if (facts.first_defined && !facts.mixed_devices && facts.strided == 0) [[likely]] {
    const Device device = facts.device;
    const StateRef ref(CoreAccess::core(registry));
    const auto& ot = ref->ops[static_cast<std::size_t>(op.id)];
    const BackendTable* bt =
        ot != nullptr && device.backend < kMaxBackends ? ot->backends[device.backend].get() : nullptr;
    // No ready context: the device does not exist, or its backend is disabled or has no
    // problem-independent choice. The cache, then; dispatch_after_check sorts out the rest.
    if (bt != nullptr && static_cast<std::uint16_t>(device.index) < bt->fast_devices) [[likely]] {
      const VariantEntry& v = *bt->fast;
      const KernelContext& ready = bt->fast_contexts[static_cast<std::size_t>(device.index)];
      if (ctx == nullptr) [[likely]] {
        v.invoke(v.run.get(), args, ready, nullptr);
      } else {
        run_in_context(v, args, ready, nullptr, *ctx);
      }
      return {v.info, false};
    }
    // The choice by problem, from the cache this table made on its first miss (a cached choice
    // was made for a device that exists in this State).
    const ChoiceCache* cache = bt != nullptr ? bt->cache.load(std::memory_order_acquire) : nullptr;
    if (cache != nullptr) {
      ProblemKey key;
      const std::uint64_t hash = make_key(key, device);
      PlanCopy plan;
      const Lookup hit = cache->find(key, hash, plan);
      if (hit.hit && hit.choice != nullptr && hit.ready != nullptr) [[likely]] {
        if (ctx == nullptr) [[likely]] {
          hit.choice->invoke(hit.choice->run.get(), args, *hit.ready, hit.plan);
        } else {
          run_in_context(*hit.choice, args, *hit.ready, hit.plan, *ctx);
        }
        return {hit.choice->info, false};
      }
    }
  }
  return dispatch_after_check(registry, op, args, facts, ctx);
}

}  // namespace opreg::detail
