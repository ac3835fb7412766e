// A small program the xpu tests run in a child process, under an environment of their choosing
// (a fresh POCL_CACHE_DIR, say), since the OpenCL runtimes read theirs once per process.
//
//   xpu_child first-call   makes the xpu device's context (building and warming every kernel),
//                          counts the kernel binaries PoCL compiled into POCL_CACHE_DIR, runs
//                          every xpu variant of every op on every (x, weight) pair on small and
//                          large problems, and counts again: "warmed=N after=M".
//   xpu_child libraries    runs one rms_norm and prints the shared libraries the process loaded
//                          that belong to Level Zero ("level_zero=none" when there are none).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "backends/xpu/xpu_backend.h"
#include "opreg/ops.h"
#include "ops/problem.h"

namespace {

using namespace opreg;

std::size_t compiled_kernels(const std::string& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".so") ++n;
  }
  return n;
}

Device xpu_cpu_device(Registry& registry) {
  for (const auto& b : registry.backends()) {
    if (b.name != "xpu") continue;
    for (std::size_t i = 0; i < b.devices.size(); ++i) {
      if (b.devices[i].emulated) return Device{b.id, static_cast<std::int16_t>(i)};
    }
  }
  std::fprintf(stderr, "xpu_child: no xpu OpenCL CPU device\n");
  std::exit(3);
}

int first_call(Registry& registry, Device device) {
  const char* cache = std::getenv("POCL_CACHE_DIR");
  if (cache == nullptr) {
    std::fprintf(stderr, "xpu_child: POCL_CACHE_DIR is not set\n");
    return 2;
  }
  auto& backend = dynamic_cast<xpu::XpuBackend&>(registry.backend(device.backend));
  const xpu::DeviceRuntime& rt = backend.runtime(device.index);
  const std::size_t warmed = compiled_kernels(cache);
  const std::pair<DType, DType> pairs[] = {{DType::f32, DType::f32},
                                           {DType::f16, DType::f16},
                                           {DType::f16, DType::f32},
                                           {DType::bf16, DType::bf16},
                                           {DType::bf16, DType::f32}};
  // Short rows (packed), rows a group takes alone (group), and rows too long for the fused dweight
  // (split), whose column kernels launch grids over 65536 work-items. rope takes q's 4-D shape
  // instead (its launches size by positions, not rows), once per dtype pair.
  const Shape shapes[] = {Shape{3, 5}, Shape{20, 1000}, Shape{3, 100003}};
  const Shape rope_shape{2, 4, 9, 130};
  int failures = 0;
  for (const auto& [dtype, wdtype] : pairs) {
    for (const Shape& shape : shapes) {
      for (const std::string& op : problem_ops()) {
        const ProblemOptions o = problem_options(op);
        if (!o.wdtype && wdtype != dtype) continue;  // no parameters: one pair per x
        if (o.rope && &shape != &shapes[0]) continue;
        for (const auto& v : registry.variants(op)) {
          if (v.backend != "xpu") continue;
          ProblemSpec spec;
          spec.op = op;
          spec.dtype = dtype;
          spec.wdtype = wdtype;
          spec.shape = o.rope ? rope_shape : shape;
          Problem p(registry, spec, device);
          if (!p.run_variant(v.name).ok) continue;
          p.synchronize();
          if (!p.check().pass()) {
            std::fprintf(stderr, "xpu_child: %s failed on %s\n", v.name.c_str(), spec.cli_args("xpu").c_str());
            ++failures;
          }
        }
      }
    }
  }
  std::printf("warmed=%zu after=%zu build_s=%.3f warm_s=%.3f\n", warmed, compiled_kernels(cache), rt.build_seconds(),
              rt.warm_seconds());
  return failures == 0 ? 0 : 1;
}

int libraries(Registry& registry, Device device) {
  ProblemSpec spec;
  Problem p(registry, spec, device);
  if (!p.run_variant("xpu.rms_norm.fwd.group").ok) return 1;
  p.synchronize();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string found;
  while (std::getline(maps, line)) {
    const std::string path = line.substr(line.rfind(' ') + 1);
    if (line.find("libze_") != std::string::npos && found.find(path) == std::string::npos) {
      found += ' ';  // appended apart: g++ 12 -O3 flags " " + path (-Wrestrict, a false positive)
      found += path;
    }
  }
  std::printf("level_zero=%s\n", found.empty() ? "none" : found.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    Registry& registry = default_registry();
    const Device device = xpu_cpu_device(registry);
    if (mode == "first-call") return first_call(registry, device);
    if (mode == "libraries") return libraries(registry, device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xpu_child: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: xpu_child first-call|libraries\n");
  return 2;
}
