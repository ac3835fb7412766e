// The cpu backend's fast kernel variants: cpu.<op>.<fwd|bwd>.generic and .avx2 for all twelve op
// directions (internal to the cpu backend).
#pragma once

#include "backends/cpu/isa.h"
#include "opreg/registry.h"

namespace opreg::cpu {

// Registers the 24 variants for the registry's lifetime: generic (priority 100) and avx2
// (priority 110). `level` is the level the cpu runs at (effective_isa()): a variant above it is
// registered with a supports() that refuses every problem with the reason (this CPU lacks the
// instructions, or OPREG_CPU_ISA caps them), so it stays listed and forcing it says why; one the
// cpu can run needs no predicate, and the registry resolves the choice once instead of per problem.
void register_kernels(Registry& registry, Isa level);

}  // namespace opreg::cpu
