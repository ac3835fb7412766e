// The seeds' GPU kernels as they run on Ascend (issue 19): what a GPU-oriented Triton kernel
// (Liger-Kernel's) does when triton-ascend compiles it, one program per row (or per (N, group)),
// BLOCK_SIZE = the next power of two of the row, every tile of the row live in UB at once and
// each doubled by triton-ascend's multibuffer (on by default). Variants named
// npu.<op>.<dir>.gpu_port are never chosen (their supports() refuses, naming the numbers);
// forced, they launch that grid and reserve that live set in UB first, so they fail where the
// device does, with its texts: `grid should be less than 65536!` past 65535 programs, and
// `ub overflow, requires N bits while M bits available!` with N the live set in bits
// (../shared/research/npu-xpu-facts.md A4: BLOCK_SIZE 48000 f32 -> 48000 x 32 x 2 = 3,072,000).
// Where the device would take the launch, the arithmetic is the npu kernel's (the port's grid and
// UB use are what it reproduces, not Triton's code generation).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "opreg/variants.h"

namespace opreg::npu {
class Emulator;
struct GmArg;
}

namespace opreg::npu::gpu_port {

// One tensor's tile of a program: BLOCK_SIZE elements of `bits` each.
struct Tile {
  const char* name = "";
  std::uint32_t bits = 16;
};

// Plain data (a variant's plan).
struct Port {
  std::int64_t programs = 0;    // the grid: one program per row (or per (N, group))
  std::int64_t block_size = 0;  // BLOCK_SIZE: next power of two of the row
  std::int64_t live_bits = 0;   // the tiles' bits, each doubled by multibuffer
  std::int64_t ub_bits = 0;     // UB's bits
};

inline constexpr bool kMultibuffer = true;  // triton-ascend's default

Port plan(std::int64_t programs, std::int64_t row, std::initializer_list<Tile> tiles, std::int64_t ub_bytes);

// supports()'s refusal: why the port is never chosen, with its grid and UB numbers.
Verdict refuse(const Port& port, std::string_view op_dir);

// Launches the port's grid on `emulator`; each program first reserves the live set in UB (the
// compiler's check). Returns normally when the device would take the launch: the caller then
// computes the result with an npu kernel. `args`: the GM tensors the kernel would take (the cost
// model's working set).
void launch(Emulator& emulator, const std::string& kernel, const Port& port, std::span<const GmArg> args = {});

}  // namespace opreg::npu::gpu_port
