// The reference kernels: straightforward loops on the host that accumulate in double, for every
// op direction of the manifest and the three activation dtypes. They are the oracle of every test and
// the lowest-priority cpu variants (cpu.<op>.<dir>.ref). Semantics: docs/ops.md.
//
// Each function takes arguments that passed the op's check, with every tensor in host memory
// and contiguous. Outputs may alias inputs where the op allows it (dx = dy, da = a, db = b):
// every function reads what it needs of a row (or element) before writing it.
#pragma once

#include "ops/manifest.h"
#include "opreg/ops.h"

namespace opreg::reference {

// One function per op direction of the manifest, named as its entry point:
// reference::rms_norm_fwd(const RmsNormFwdArgs&), ... (reference::kernel<Id>::run names it by id).
#define OPREG_REFERENCE_DECLARE_(ident, base, direction, Args, c_args) void ident(const Args& args);
OPREG_OPS(OPREG_REFERENCE_DECLARE_)
#undef OPREG_REFERENCE_DECLARE_

template <manifest::OpId Id>
struct kernel;
#define OPREG_REFERENCE_KERNEL_(ident, base, direction, Args, c_args) \
  template <>                                                         \
  struct kernel<manifest::OpId::ident> {                              \
    static constexpr void (*run)(const Args&) = &ident;               \
  };
OPREG_OPS(OPREG_REFERENCE_KERNEL_)
#undef OPREG_REFERENCE_KERNEL_

// A backward's statistics as its forward computes them on the same inputs (what a framework
// passes a backward): rstd (and mean) of `args`, on the host, for forward epsilon `eps`. One per
// backward struct that takes statistics (the problem factory calls it for each).
void statistics(const RmsNormBwdArgs& args, double eps);
void statistics(const FusedAddRmsNormBwdArgs& args, double eps);
void statistics(const LayerNormBwdArgs& args, double eps);
void statistics(const GroupNormBwdArgs& args, double eps);

// Registers the cpu.<op>.<dir>.ref variant of every op of the manifest (priority kPriority) on `registry`'s cpu
// backend, released for the registry's lifetime.
inline constexpr int kPriority = -1000;
void register_variants(Registry& registry);

}  // namespace opreg::reference
