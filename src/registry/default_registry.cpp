// The process-wide registry: the built-in backends, then the environment.
#include <memory>

#include "backends/builtin.h"
#include "opreg/registry.h"

namespace opreg {

Registry& default_registry() {
  static Registry* registry = [] {
    auto r = std::make_unique<Registry>();
    register_builtin_backends(*r);
    r->reload_config();
    return r.release();  // lives until exit: kernels may run from static destructors of users
  }();
  return *registry;
}


}  // namespace opreg
