// The cpu's affine and grouped norm lists: layer_norm and group_norm, forward and backward, one
// kernel over normalisation sets for both (families.h's NormSets).
#include "backends/cpu/list.h"

namespace opreg::cpu {

OPREG_CPU_KERNELS(affine_norm, NormFwd, NormBwd)

void register_norm(Registry& r, Isa level) {
  OPREG_CPU_LISTS(r, level, layer_norm, LayerNorm, affine_norm);
  OPREG_CPU_LISTS(r, level, group_norm, GroupNorm, affine_norm);
}

}  // namespace opreg::cpu
