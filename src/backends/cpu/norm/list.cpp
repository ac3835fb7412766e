// The cpu's affine and grouped norm lists: layer_norm and group_norm, forward and backward, one
// kernel over normalisation sets for both (families.h's NormSets).
#include "backends/cpu/list.h"

namespace opreg::cpu {

void register_norm(Registry& r, Isa level) {
  OPREG_CPU_LIST(r, level, layer_norm_fwd_op(), LayerNormFwdArgs, affine_norm_fwd);
  OPREG_CPU_LIST(r, level, layer_norm_bwd_op(), LayerNormBwdArgs, affine_norm_bwd);
  OPREG_CPU_LIST(r, level, group_norm_fwd_op(), GroupNormFwdArgs, affine_norm_fwd);
  OPREG_CPU_LIST(r, level, group_norm_bwd_op(), GroupNormBwdArgs, affine_norm_bwd);
}

}  // namespace opreg::cpu
