// The plugin loader (src/registry/plugin.cpp) and OPREG_PLUGINS, without running code that
// nobody wrote: the first byte picks what the rest of the input is.
//  - 0: an OPREG_PLUGINS value. Its list is parsed (Config::from_env) and each path is loaded
//    below a directory that does not exist, so the loader's checks run and nothing is opened
//    (no component after a missing one resolves, `..` included).
//  - 1: the contents of a file, written to a private temporary directory and loaded. Its first
//    byte is never ELF's 0x7f, so dlopen refuses it before mapping anything.
//  - 2, 3: a script for the driver plugin (fuzz_plugin_driver.cpp, built with this target), which
//    the loader opens and whose entry function registers what the script describes: the
//    descriptor checks, the undo of a refused load, the status and message of a failing entry.
//    After a load that succeeds, every tensor service and a dispatch run on the plugin's devices
//    (the driver's services fail when the script says so).
// The contract: an opreg::Error, never a crash, a sanitizer report, a leak or another exception.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "backends/builtin.h"
#include "fuzz_support.h"
#include "opreg/ops.h"
#include "opreg/registry.h"

namespace {

using ScriptFn = void (*)(const std::uint8_t*, std::size_t);

ScriptFn driver_script() {
  static const ScriptFn fn = [] {
    // The loader's own dlopen of the same path returns this handle: one copy of the driver's state.
    void* handle = ::dlopen(OPREG_FUZZ_PLUGIN_DRIVER, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "fuzz_plugin: cannot open the driver %s: %s\n", OPREG_FUZZ_PLUGIN_DRIVER, ::dlerror());
      std::abort();
    }
    auto* f = reinterpret_cast<ScriptFn>(::dlsym(handle, "opreg_fuzz_plugin_script"));
    if (f == nullptr) std::abort();
    return f;
  }();
  return fn;
}

struct TempFile {
  std::string dir;
  std::string path;
  TempFile() {
    char pattern[] = "/tmp/opreg-fuzz-plugin-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) std::abort();
    dir = pattern;
    path = dir + "/not_a_plugin.so";
  }
  ~TempFile() {
    ::unlink(path.c_str());
    ::rmdir(dir.c_str());
  }
};

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) std::abort();
  if (size > 0) {
    const std::uint8_t first = data[0] == 0x7f ? 0x7e : data[0];
    if (::write(fd, &first, 1) != 1) std::abort();
    for (std::size_t done = 1; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
}

// What a framework does with a plugin's device: tensors, a copy each way, a dispatch.
void use_devices(opreg::Registry& reg) {
  using namespace opreg;
  for (const BackendInfo& b : reg.backends()) {
    if (b.name == "cpu" || !b.availability.available || b.devices.empty()) continue;
    fuzz::expect_only_opreg_errors([&] {
      const Device device = reg.parse_device(b.name);
      RmsNormFwdArgs a;
      a.x = Tensor::empty({2, 3}, DType::f32, device, reg);
      a.weight = Tensor::empty({3}, DType::f32, device, reg);
      a.y = Tensor::empty({2, 3}, DType::f32, device, reg);
      a.rstd = Tensor::empty({2}, DType::f32, device, reg);
      a.x.fill(1.5);
      a.weight.fill(1.0);
      (void)reg.call(rms_norm_fwd_op(), a);
      Tensor host = Tensor::empty({2, 3}, DType::f32);
      host.copy_from(a.y);
      a.y.copy_from(host);
      reg.backend(device.backend).synchronize(device.index, nullptr);
    });
  }
}

// A registry with the cpu backend. Building one costs about 80 ms in the sanitizer build, so it
// is kept while inputs leave it as they found it (a refused load registers nothing) and rebuilt
// after a load that succeeded, and every 256 inputs.
opreg::Registry& registry() {
  static std::unique_ptr<opreg::Registry> reg;
  static int uses = 0;
  if (!reg || !reg->plugins().empty() || ++uses % 256 == 0) {
    reg.reset();
    reg = std::make_unique<opreg::Registry>();
    opreg::register_cpu(*reg);
    reg->set_log_sink([](std::string_view) {});
  }
  return *reg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace opreg;
  if (size == 0) return 0;
  const std::uint8_t mode = data[0] % 4;
  ++data;
  --size;
  Registry& reg = registry();
  if (mode == 0) {
    const std::string value(reinterpret_cast<const char*>(data), size);
    ::setenv("OPREG_PLUGINS", value.c_str(), 1);
    fuzz::expect_only_opreg_errors([&] {
      for (const std::string& path : Config::from_env().plugins) {
        fuzz::expect_only_opreg_errors([&] { reg.load_plugin("/nonexistent-opreg-fuzz/" + path); });
      }
    });
    ::unsetenv("OPREG_PLUGINS");
  } else if (mode == 1) {
    static const TempFile file;
    write_file(file.path, data, size);
    fuzz::expect_only_opreg_errors([&] { reg.load_plugin(file.path); });
  } else {
    driver_script()(data, size);
    fuzz::expect_only_opreg_errors([&] { reg.load_plugin(OPREG_FUZZ_PLUGIN_DRIVER); });
    use_devices(reg);
    // A second load into the same registry: refused as already loaded if the first succeeded,
    // else the same script again against what the first left (nothing).
    fuzz::expect_only_opreg_errors([&] { reg.load_plugin(OPREG_FUZZ_PLUGIN_DRIVER); });
    (void)reg.variants("rms_norm.fwd");
    fuzz::expect_only_opreg_errors([&] { (void)reg.infer_device(); });
  }
  return 0;
}
