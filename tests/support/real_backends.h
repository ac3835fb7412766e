// A registry of the real backends a test program links: the cpu, and the npu emulator where the
// program is built with it (OPREG_TEST_NPU), quiet (their fallback warnings go nowhere).
#pragma once

#include <string_view>

#include "backends/builtin.h"
#include "opreg/registry.h"

namespace opreg::testing {

#ifdef OPREG_TEST_NPU
inline constexpr bool kWithNpu = true;
#else
inline constexpr bool kWithNpu = false;
#endif

inline void register_real_backends(Registry& reg) {
  register_cpu(reg);
  if constexpr (kWithNpu) register_npu(reg);
  reg.set_log_sink([](std::string_view) {});
}

}  // namespace opreg::testing
