// The npu's geglu and swiglu lists (issue 19): the kernels land here.
#include "backends/npu/npu_backend.h"

namespace opreg::npu {

void register_glu(Registry&) {}

}  // namespace opreg::npu
