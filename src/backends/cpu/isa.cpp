#include "backends/cpu/isa.h"

#include <string>

#include "registry/env.h"
#include "registry/fail.h"

namespace opreg::cpu {

std::string_view isa_name(Isa isa) { return isa == Isa::avx2 ? "avx2" : "generic"; }

Isa host_isa() {
  static const Isa isa = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    // __builtin_cpu_supports also checks that the OS saves the YMM registers.
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
      return Isa::avx2;
    }
#endif
    return Isa::generic;
  }();
  return isa;
}

Isa parse_isa_cap(std::string_view value) {
  if (value == "generic") return Isa::generic;
  if (value == "avx2") return Isa::avx2;
  fail(ErrorKind::invalid_argument,
       "OPREG_CPU_ISA='{}': unknown instruction set level; accepted: generic (the x86-64 baseline), avx2 "
       "(AVX2 + FMA + F16C)",
       value);
}

Isa effective_isa() {
  const Isa host = host_isa();
  const auto cap = env_value("OPREG_CPU_ISA");
  if (!cap) return host;
  const Isa limit = parse_isa_cap(*cap);
  return static_cast<std::uint8_t>(limit) < static_cast<std::uint8_t>(host) ? limit : host;
}

}  // namespace opreg::cpu
