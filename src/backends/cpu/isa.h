// The instruction-set levels of the cpu kernels and OPREG_CPU_ISA, which caps them.
#pragma once

#include <cstdint>
#include <string_view>

namespace opreg::cpu {

// generic: the target's baseline (x86-64's SSE2, aarch64's NEON), compiler-vectorised; avx2: AVX2 +
// FMA + F16C (x86-64 builds only).
enum class Isa : std::uint8_t { generic, avx2 };

std::string_view isa_name(Isa isa);
// The best level this CPU and its operating system support (cpuid, and XCR0 for the AVX state).
Isa host_isa();
// A value of OPREG_CPU_ISA; anything but generic or avx2 is an opreg::Error (invalid argument)
// naming the variable, the value and the accepted ones.
Isa parse_isa_cap(std::string_view value);
// The level the cpu variants run at: host_isa() capped by OPREG_CPU_ISA (read now, through
// opreg::env_value: trimmed, blank = unset). A cap above the host's level changes nothing.
Isa effective_isa();

}  // namespace opreg::cpu
