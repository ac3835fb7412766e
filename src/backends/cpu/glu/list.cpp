// The cpu's gated-unit lists: geglu and swiglu, forward and backward.
#include "backends/cpu/list.h"

namespace opreg::cpu {

void register_glu(Registry& r, Isa level) {
  register_list(r, geglu_fwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<GegluFwdArgs, &avx2::geglu_fwd>(Isa::avx2, level))
                     isa_entry<GegluFwdArgs, &generic::geglu_fwd>(Isa::generic, level)});
  register_list(r, geglu_bwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<GegluBwdArgs, &avx2::geglu_bwd>(Isa::avx2, level))
                     isa_entry<GegluBwdArgs, &generic::geglu_bwd>(Isa::generic, level)});
  register_list(r, swiglu_fwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<SwigluFwdArgs, &avx2::swiglu_fwd>(Isa::avx2, level))
                     isa_entry<SwigluFwdArgs, &generic::swiglu_fwd>(Isa::generic, level)});
  register_list(r, swiglu_bwd_op(), "cpu",
                {OPREG_CPU_AVX2_ENTRY(isa_entry<SwigluBwdArgs, &avx2::swiglu_bwd>(Isa::avx2, level))
                     isa_entry<SwigluBwdArgs, &generic::swiglu_bwd>(Isa::generic, level)});
}

}  // namespace opreg::cpu
