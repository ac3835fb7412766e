// The process-wide registry: the built-in backends, then the environment.
#include <memory>

#include "backends/builtin.h"
#include "opreg/registry.h"
#include "registry/state.h"

namespace opreg {

Registry& default_registry() {
  static Registry* registry = [] {
    auto r = std::make_unique<Registry>();
    // A backend OPREG_DISABLE names is registered unprobed (xpu then loads no OpenCL at all).
    detail::preset_disable(*r, Config::from_env().disable);
    register_builtin_backends(*r);
    // Plugins first, so that the configuration can name their backends and variants.
    for (const auto& path : Config::from_env().plugins) r->load_plugin(path);
    r->reload_config();
    return r.release();  // lives until exit: kernels may run from static destructors of users
  }();
  return *registry;
}


}  // namespace opreg
