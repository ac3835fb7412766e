#include "backends/xpu/cl_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "opreg/error.h"

namespace opreg::xpu {
namespace {

struct Loaded {
  ClApi api;
  bool ok = false;
  std::string why;
};

// The soname first (what the ICD loader package installs at run time), then the development
// link name. Never closed: kernels and allocations outlive any one user.
Loaded load() {
  Loaded out;
  void* lib = nullptr;
  std::string errors;
  for (const char* name : {"libOpenCL.so.1", "libOpenCL.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* e = dlerror();
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e != nullptr ? e : name);
  }
  if (lib == nullptr) {
    out.why = fmt::format("the OpenCL ICD loader could not be loaded ({}; Debian: ocl-icd-libopencl1)", errors);
    return out;
  }
#define OPREG_CL_LOAD_(name)                                                                          \
  out.api.name = reinterpret_cast<decltype(out.api.name)>(dlsym(lib, #name));                         \
  if (out.api.name == nullptr) {                                                                      \
    out.why = fmt::format("the OpenCL ICD loader lacks {} (an OpenCL 2.0+ loader is needed)", #name); \
    return out;                                                                                       \
  }
  OPREG_CL_FUNCTIONS(OPREG_CL_LOAD_)
#undef OPREG_CL_LOAD_
  out.ok = true;
  return out;
}

const Loaded& loaded() {
  static const Loaded table = load();
  return table;
}

}  // namespace

const ClApi* load_cl_api(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why != nullptr) *why = l.why;
  return l.ok ? &l.api : nullptr;
}

const ClApi& cl_api() {
  const Loaded& l = loaded();
  if (!l.ok) throw Error(ErrorKind::device, fmt::format("xpu: {}", l.why));
  return l.api;
}

}  // namespace opreg::xpu
