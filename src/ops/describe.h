// The ops' argument structs as their families' descriptors (src/ops/families.h): what every
// backend's kernels take. The arguments must have passed the op's check.
#pragma once

#include <utility>

#include "opreg/ops.h"
#include "ops/families.h"

namespace opreg::family {

// x's (or a parameter's) dtype as an Elem; an opreg::Error (internal) for any other dtype, which
// the op's check refuses first.
Elem elem_of(DType dtype);
DType dtype_of(Elem elem);
const char* elem_name(Elem elem);
Mode mode_of(Casting casting);
// What a gated unit of `elem` runs: torch only where it rounds something (a 16-bit dtype).
GluRounding rounding_of(Rounding rounding, Elem elem);

RowNormFwd describe(const RmsNormFwdArgs& args);
RowNormFwd describe(const FusedAddRmsNormFwdArgs& args);
RowNormBwd describe(const RmsNormBwdArgs& args);
RowNormBwd describe(const FusedAddRmsNormBwdArgs& args);
NormFwd describe(const LayerNormFwdArgs& args);
NormFwd describe(const GroupNormFwdArgs& args);
NormBwd describe(const LayerNormBwdArgs& args);
NormBwd describe(const GroupNormBwdArgs& args);
GluFwd describe(const GluFwdArgs& args);
GluBwd describe(const GluBwdArgs& args);

// The descriptor type of an argument struct.
template <class Args>
using Descriptor = decltype(describe(std::declval<const Args&>()));

}  // namespace opreg::family
