// The reference kernels: straightforward loops on the host that accumulate in double, for all
// twelve op directions and the three activation dtypes. They are the oracle of every test and
// the lowest-priority cpu variants (cpu.<op>.<dir>.ref). Semantics: docs/ops.md.
//
// Each function takes arguments that passed the op's check, with every tensor in host memory
// and contiguous. Outputs may alias inputs where the op allows it (dx = dy, da = a, db = b):
// every function reads what it needs of a row (or element) before writing it.
#pragma once

#include "opreg/ops.h"

namespace opreg::reference {

void rms_norm_fwd(const RmsNormFwdArgs& args);
void rms_norm_bwd(const RmsNormBwdArgs& args);
void fused_add_rms_norm_fwd(const FusedAddRmsNormFwdArgs& args);
void fused_add_rms_norm_bwd(const FusedAddRmsNormBwdArgs& args);
void layer_norm_fwd(const LayerNormFwdArgs& args);
void layer_norm_bwd(const LayerNormBwdArgs& args);
void group_norm_fwd(const GroupNormFwdArgs& args);
void group_norm_bwd(const GroupNormBwdArgs& args);
void geglu_fwd(const GegluFwdArgs& args);
void geglu_bwd(const GegluBwdArgs& args);
void swiglu_fwd(const SwigluFwdArgs& args);
void swiglu_bwd(const SwigluBwdArgs& args);

// Registers the twelve cpu.<op>.<dir>.ref variants (priority kPriority) on `registry`'s cpu
// backend, released for the registry's lifetime.
inline constexpr int kPriority = -1000;
void register_variants(Registry& registry);

}  // namespace opreg::reference
