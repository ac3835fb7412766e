// The cuda rope variant, cuda.rope.{fwd,bwd}.heads: its plan (the access width, the block's shape
// and the grid), its run, and the launcher of its kernel (kernels.cu), over the rope family's
// descriptor. Plain C++, so that kernels.cu includes it too: the registry's types are only
// declared.
#pragma once

#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/gpu_vendor.h"
#include "ops/families.h"

namespace opreg {
struct Verdict;
struct KernelContext;
}  // namespace opreg

namespace opreg::cuda_like {

// A thread takes one group of `width` elements of one head's pairs, the groups of a head and the
// heads of a position neighbouring threads, kRopeThreads a block, a thread for each group.
// Measured on an H200 (bf16, HF's layout, 4 x 4096 positions of 32 + 8 heads of 128), against a
// device-to-device memcpy of q and k: a thread holding one group's angles for 8 heads (128
// registers, a quarter of the threads resident) 0.76; one group a thread 0.92, where 420
// instructions per warp and group (three 64-bit divisions among them) kept the issue slots 82%
// busy; with the divisions by multiply and shift (FastDiv), one rounding for 16-bit inputs and q's
// or k's fields chosen by value (32 registers) 0.99.
inline constexpr int kRopeThreads = 256;

// Division of n < 2^31 by d (1 <= d < 2^31) as (umulhi(n, mul) + n) >> shift, shift = ceil(log2
// d), mul = floor(2^32 (2^shift - d) / d) + 1 (Granlund and Montgomery's round-up method).
struct FastDiv {
  std::uint32_t d = 1;
  std::uint32_t mul = 0;
  std::uint32_t shift = 0;
};
FastDiv fast_div(std::int64_t d);  // d outside [1, 2^31): the division by 1

// What the kernel walks: items = batch * seq * per_position groups, per_position = (q heads + k
// heads) * groups; narrow when items < 2^31 (32-bit indices, the FastDivs), else 64-bit divisions
// by the .d fields.
struct RopeGrid {
  std::int64_t items = 0;
  FastDiv per_position;
  FastDiv groups;
  FastDiv seq;
  bool narrow = false;
  bool table16 = false;  // a group's angles can be read as 16-byte vectors
};
struct RopeLaunch {
  int width = 1;  // elements a thread loads at once from each side of a pair: 16 bytes, or 1
  unsigned blocks = 0;
  RopeGrid grid;
};

// 16-byte accesses when every head, output and table row starts on 16 bytes and a pair group
// fills them; a thread for each group (a grid that strides past 2^31 - 1 blocks). Takes every problem.
void rope_plan(const family::Rope& d, const GpuInfo& gpu, RopeLaunch& plan);
void rope_run(const family::Rope& d, const RopeLaunch& plan, const KernelContext& ctx);

// The kernel's launcher (kernels.cu).
gpuError_t launch_rope(const family::Rope& d, const RopeLaunch& l, gpuStream_t stream);

}  // namespace opreg::cuda_like
