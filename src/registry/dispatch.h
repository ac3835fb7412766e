// The dispatch hot path, inline in each op's entry point (src/ops/common.h) right after the op's
// check: the check reported where the tensors are (CallFacts), and when all of them sit on one
// device, contiguous, and the backend's choice cannot depend on the problem (its table's `fast`
// entry), the call is a few loads inside a read section and the kernel's call. Everything else
// goes to dispatch_after_check (dispatch.cpp), the whole of Registry::call after the check.
#pragma once

#include "registry/state.h"

namespace opreg::detail {

struct CoreAccess {
  static RegistryCore& core(Registry& registry) { return *registry.core_; }
};

DispatchResult dispatch_after_check(Registry& registry, const OpDef& op, const void* args, CallFacts facts,
                                    const ExecContext* ctx);
// v's kernel with `ready`, on the caller's stream.
void run_on_stream(const VariantEntry& v, const void* args, const KernelContext& ready, void* stream);

[[gnu::always_inline]] inline DispatchResult dispatch_checked(Registry& registry, const OpDef& op, const void* args,
                                                              CallFacts facts, const ExecContext* ctx) {
  if (facts.first_defined && !facts.mixed_devices && facts.strided == 0) [[likely]] {
    const Device device = facts.device;
    const StateRef ref(CoreAccess::core(registry));
    const auto& ot = ref->ops[static_cast<std::size_t>(op.id)];
    const BackendTable* bt =
        ot != nullptr && device.backend < kMaxBackends ? ot->backends[device.backend].get() : nullptr;
    // No ready context: the device does not exist, or its backend is disabled or has no
    // problem-independent choice. dispatch_after_check sorts that out.
    if (bt != nullptr && static_cast<std::uint16_t>(device.index) < bt->fast_devices) [[likely]] {
      const VariantEntry& v = *bt->fast;
      const KernelContext& ready = bt->fast_contexts[static_cast<std::size_t>(device.index)];
      if (ctx == nullptr || ctx->stream == nullptr) [[likely]] {
        v.invoke(v.run.get(), args, ready, nullptr);
      } else {
        run_on_stream(v, args, ready, ctx->stream);
      }
      return {v.info, false};
    }
  }
  return dispatch_after_check(registry, op, args, facts, ctx);
}

}  // namespace opreg::detail
