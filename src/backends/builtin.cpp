// The one place that knows which backends this build contains.
#include "backends/builtin.h"

namespace opreg {

void register_builtin_backends(Registry& registry) {
  register_cpu(registry);  // first: it takes backend id 0
#ifdef OPREG_HAVE_CUDA
  register_cuda_like(registry);
#endif
#ifdef OPREG_HAVE_NPU
  register_npu(registry);
#endif
#ifdef OPREG_HAVE_XPU
  register_xpu(registry);
#endif
}

}  // namespace opreg
