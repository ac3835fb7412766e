// The cpu's affine and grouped norm lists: layer_norm and group_norm, forward and backward, one
// kernel over normalisation sets for both (families.h's NormSets).
#include "backends/cpu/list.h"

namespace opreg::cpu {

void register_norm(Registry& r, Isa level) {
  register_list(r, layer_norm_fwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<LayerNormFwdArgs, &avx2::affine_norm_fwd>(Isa::avx2, level))
                     isa_entry<LayerNormFwdArgs, &generic::affine_norm_fwd>(Isa::generic, level)});
  register_list(r, layer_norm_bwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<LayerNormBwdArgs, &avx2::affine_norm_bwd>(Isa::avx2, level))
                     isa_entry<LayerNormBwdArgs, &generic::affine_norm_bwd>(Isa::generic, level)});
  register_list(r, group_norm_fwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<GroupNormFwdArgs, &avx2::affine_norm_fwd>(Isa::avx2, level))
                     isa_entry<GroupNormFwdArgs, &generic::affine_norm_fwd>(Isa::generic, level)});
  register_list(r, group_norm_bwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<GroupNormBwdArgs, &avx2::affine_norm_bwd>(Isa::avx2, level))
                     isa_entry<GroupNormBwdArgs, &generic::affine_norm_bwd>(Isa::generic, level)});
}

}  // namespace opreg::cpu
