// The one place that knows which backends this build contains.
#include "backends/builtin.h"

#include "opreg/ops.h"
#include "opreg/registry.h"

namespace opreg {

void register_builtin_backends(Registry& registry) {
  define_builtin_ops();  // so that `opreg ops` lists every op, also those no backend implements
  register_cpu(registry);  // first: it takes backend id 0
#ifdef OPREG_HAVE_CUDA
  register_cuda_like(registry);
#else
  registry.declare_absent_backend("cuda", "built without a CUDA toolkit, or with OPREG_WITH_CUDA=OFF");
#endif
#ifdef OPREG_HAVE_NPU
  register_npu(registry);
#else
  registry.declare_absent_backend("npu", "built with OPREG_WITH_NPU=OFF");
#endif
#ifdef OPREG_HAVE_XPU
  register_xpu(registry);
#else
  registry.declare_absent_backend("xpu", "the xpu (OpenCL) backend is not built in this version");
#endif
}

}  // namespace opreg
