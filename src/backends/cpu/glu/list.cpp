// The cpu's gated-unit lists: geglu and swiglu, forward and backward.
#include "backends/cpu/list.h"

namespace opreg::cpu {

void register_glu(Registry& r, Isa level) {
  OPREG_CPU_LISTS(r, level, geglu, Geglu, geglu);
  OPREG_CPU_LISTS(r, level, swiglu, Swiglu, swiglu);
}

}  // namespace opreg::cpu
