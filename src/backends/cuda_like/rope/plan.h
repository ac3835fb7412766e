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

// A block holds `per_block` (b, t) positions at a time (grid-stride over the positions); each
// position's threads are `lanes` x `slots`: lane j takes the j-th group of `width` elements of
// every head's pairs (its angles read once, into registers) and slot s the heads s, s + slots,
// ... of q, then of k, loading kRopeBatch of them before it stores any (more bytes in flight).
inline constexpr int kRopeMaxThreads = 512;
inline constexpr int kRopeBatch = 8;
struct RopeLaunch {
  int width = 1;   // elements a lane loads at once from each side of a pair: 16 bytes, or 1
  int lanes = 1;   // per position, at most kRopeMaxThreads (a head of more groups loops)
  int slots = 1;
  int per_block = 1;
  int blocks = 0;
  bool table16 = false;  // a group's angles are read as 16-byte vectors
};

// 16-byte accesses when every head, output and table row starts on 16 bytes and a pair group
// fills them; enough blocks to fill every multiprocessor. Takes every problem.
void rope_plan(const family::Rope& d, const GpuInfo& gpu, RopeLaunch& plan);
void rope_run(const family::Rope& d, const RopeLaunch& plan, const KernelContext& ctx);

// The kernel's launcher (kernels.cu).
gpuError_t launch_rope(const family::Rope& d, const RopeLaunch& l, gpuStream_t stream);

}  // namespace opreg::cuda_like
