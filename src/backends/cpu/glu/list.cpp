// The cpu's gated-unit lists: geglu and swiglu, forward and backward.
#include "backends/cpu/list.h"

namespace opreg::cpu {

OPREG_CPU_KERNELS(geglu, GluFwd, GluBwd)
OPREG_CPU_KERNELS(swiglu, GluFwd, GluBwd)

void register_glu(Registry& r, Isa level) {
  OPREG_CPU_LISTS(r, level, geglu, Geglu, geglu);
  OPREG_CPU_LISTS(r, level, swiglu, Swiglu, swiglu);
}

}  // namespace opreg::cpu
