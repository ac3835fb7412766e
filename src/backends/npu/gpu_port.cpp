#include "backends/npu/gpu_port.h"

#include <fmt/format.h>

#include "backends/npu/ascend/kernel_operator.h"
#include "backends/npu/ascend/runtime.h"
#include "registry/fail.h"

namespace opreg::npu::gpu_port {

namespace {

std::int64_t next_pow2(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

Port plan(std::int64_t programs, std::int64_t row, std::initializer_list<Tile> tiles, std::int64_t ub_bytes) {
  Port p;
  p.programs = programs;
  p.block_size = next_pow2(row < 1 ? 1 : row);
  for (const Tile& t : tiles) p.live_bits += p.block_size * t.bits * (kMultibuffer ? 2 : 1);
  p.ub_bits = ub_bytes * 8;
  return p;
}

Verdict refuse(const Port& port, std::string_view op_dir) {
  return Verdict::reject(fmt::format(
      "never chosen: the GPU kernel's shape on Ascend ({} programs, BLOCK_SIZE {}, live tiles {} bits of UB's {}{}); "
      "forced, it fails where the device does; npu.{}'s other variants tile for UB",
      port.programs, port.block_size, port.live_bits, port.ub_bits,
      port.programs > 65535 ? ", a grid past 65535" : "", op_dir));
}

namespace {

// ascend-c: begin
// The port's program as far as the device gets with it: the compiler plans every live tile of
// the program at once, one reservation of the set.
using namespace AscendC;
__global__ __aicore__ void gpu_port_program(uint32_t live_bytes) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
  AscendC::TPipe pipe;
  AscendC::TBuf<AscendC::TPosition::VECCALC> live;
  pipe.InitBuffer(live, live_bytes);
}
// ascend-c: end

}  // namespace

void launch(Emulator& emulator, const std::string& kernel, const Port& port, std::span<const GmArg> args) {
  if (port.live_bits > port.ub_bits) {
    // triton-ascend's compiler (BiShengIR) plans the program's UB and refuses, once, before
    // anything runs; its text [T1][T3].
    fail(ErrorKind::unsupported,
         "ub overflow, requires {} bits while {} bits available! (possible reason: tiling basic block is too large or "
         "block number is more than what user expect due to multi-buffer feature is enabled and some ops need extra "
         "local buffer.) [triton-ascend compiling {} (emulated): BLOCK_SIZE {}, before the launch of {} programs]",
         port.live_bits, port.ub_bits, kernel, port.block_size, port.programs);
  }
  const auto live_bytes = static_cast<std::uint32_t>(std::min<std::int64_t>((port.live_bits + 7) / 8, 0xFFFFFFFF));
  emulator.launch(kernel, port.programs, args, [&] { gpu_port_program(live_bytes); });
}

}  // namespace opreg::npu::gpu_port
