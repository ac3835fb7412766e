#include "backends/cpu/isa.h"

#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "registry/env.h"
#include "registry/fail.h"
#include "registry/quote.h"

namespace opreg::cpu {

std::string_view isa_name(Isa isa) { return isa == Isa::avx2 ? "avx2" : "generic"; }

namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// cpuid for the instructions, and XCR0 for whether the operating system saves the YMM state (AVX
// registers are unusable otherwise). __builtin_cpu_supports would do, but clang 14 does not know
// "f16c".
bool cpu_has_avx2_fma_f16c() {
  unsigned a = 0;
  unsigned b = 0;
  unsigned c = 0;
  unsigned d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const bool osxsave = (c & (1U << 27)) != 0;
  const bool avx = (c & (1U << 28)) != 0;
  const bool fma = (c & (1U << 12)) != 0;
  const bool f16c = (c & (1U << 29)) != 0;
  if (!osxsave || !avx || !fma || !f16c) return false;
  unsigned xcr0_lo = 0;
  unsigned xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6U) != 0x6U) return false;  // SSE and AVX state
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & (1U << 5)) != 0;  // AVX2
}
#endif

}  // namespace

Isa host_isa() {
  static const Isa isa = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (cpu_has_avx2_fma_f16c()) return Isa::avx2;
#endif
    return Isa::generic;
  }();
  return isa;
}

Isa parse_isa_cap(std::string_view value) {
  if (value == "generic") return Isa::generic;
  if (value == "avx2") return Isa::avx2;
  fail(ErrorKind::invalid_argument,
       "OPREG_CPU_ISA={}: unknown instruction set level; accepted: generic (the baseline), avx2 "
       "(AVX2 + FMA + F16C)",
       quote(value));
}

Isa effective_isa() {
  const Isa host = host_isa();
  const auto cap = env_value("OPREG_CPU_ISA");
  if (!cap) return host;
  const Isa limit = parse_isa_cap(*cap);
  return static_cast<std::uint8_t>(limit) < static_cast<std::uint8_t>(host) ? limit : host;
}

}  // namespace opreg::cpu
