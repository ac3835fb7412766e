// The OPREG_* variables' parsers: an input sets some of them (NUL-separated "index=value"
// entries; the index picks the variable), then the configuration is read and applied to a
// registry holding the built-in backends whose registration reads variables too (the npu
// profile and Unified Buffer size, the cpu ISA cap). OPREG_PLUGINS is left out: it would load
// arbitrary files (the plugin loader has a target of its own).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/builtin.h"
#include "fuzz_support.h"
#include "opreg/registry.h"

namespace {
const char* const kVariables[] = {"OPREG_DEVICE",      "OPREG_BACKEND_ORDER", "OPREG_DISABLE",
                                  "OPREG_FORCE_VARIANT", "OPREG_FALLBACK",    "OPREG_VERBOSE",
                                  "OPREG_NUM_THREADS", "OPREG_NPU_PROFILE",   "OPREG_NPU_UB_BYTES",
                                  "OPREG_CPU_ISA",     "OPREG_BOGUS"};
constexpr std::size_t kCount = sizeof(kVariables) / sizeof(kVariables[0]);
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace opreg;
  for (const char* v : kVariables) unsetenv(v);
  for (const std::string& entry : fuzz::split(data, size)) {
    if (entry.empty()) continue;
    const auto which = static_cast<unsigned char>(entry[0]) % kCount;
    setenv(kVariables[which], entry.c_str() + 1, 1);
  }
  fuzz::expect_only_opreg_errors([] {
    std::vector<std::string> unknown;
    (void)Config::from_env(&unknown);
  });
  fuzz::expect_only_opreg_errors([] {
    Registry reg;
    register_cpu(reg);
    register_npu(reg);
    reg.set_log_sink([](std::string_view) {});
    reg.reload_config();
    (void)reg.infer_device();
  });
  return 0;
}
