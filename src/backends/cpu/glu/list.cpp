// The cpu's gated-unit lists: geglu and swiglu, forward and backward.
#include "backends/cpu/list.h"

namespace opreg::cpu {

void register_glu(Registry& r, Isa level) {
  OPREG_CPU_LIST(r, level, geglu_fwd_op(), GegluFwdArgs, geglu_fwd);
  OPREG_CPU_LIST(r, level, geglu_bwd_op(), GegluBwdArgs, geglu_bwd);
  OPREG_CPU_LIST(r, level, swiglu_fwd_op(), SwigluFwdArgs, swiglu_fwd);
  OPREG_CPU_LIST(r, level, swiglu_bwd_op(), SwigluBwdArgs, swiglu_bwd);
}

}  // namespace opreg::cpu
