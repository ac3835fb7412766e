// The cuda rope variant's plan and run (rope/plan.h); the kernel is rope/kernels.cu.
#include "backends/cuda_like/rope/plan.h"

#include <algorithm>
#include <cstdint>

#include "backends/cuda_like/device_guard.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::cuda_like {
namespace {

std::size_t elem_bytes(family::Elem e) { return e == family::Elem::f32 ? 4 : 2; }

bool on16(const void* p, std::int64_t elements, std::size_t bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(elements) * bytes) % 16 == 0;
}

// Whether each side's heads, at every (b, h, t), start on 16 bytes, and so do their halves.
bool side16(const family::RopeSide& s, std::int64_t half, std::size_t bytes) {
  for (int i = 0; i < 3; ++i) {
    if (!on16(nullptr, s.in_stride[i], bytes) || !on16(nullptr, s.out_stride[i], bytes)) return false;
  }
  return on16(s.in, 0, bytes) && on16(s.out, 0, bytes) && on16(nullptr, half, bytes);
}

}  // namespace

FastDiv fast_div(std::int64_t d) {
  FastDiv f;
  if (d < 1 || d >= (std::int64_t{1} << 31)) return f;
  f.d = static_cast<std::uint32_t>(d);
  while ((std::uint64_t{1} << f.shift) < f.d) ++f.shift;
  f.mul = static_cast<std::uint32_t>(((std::uint64_t{1} << 32) * ((std::uint64_t{1} << f.shift) - f.d)) / f.d + 1);
  return f;
}

void rope_plan(const family::Rope& d, const GpuInfo& gpu, RopeLaunch& plan) {
  const std::size_t bytes = elem_bytes(d.type);
  const std::int64_t half = d.dim / 2;
  // A group of `width` elements: of each half (half pairing) or of the head (interleaved).
  const auto width = static_cast<std::int64_t>(16 / bytes);
  const bool interleaved = d.pairing == family::Pairing::interleaved;
  const std::int64_t span = interleaved ? d.dim : half;
  const bool vec = span % width == 0 && side16(d.q, half, bytes) && side16(d.k, half, bytes);
  // Else one element of each side of a pair (half), or one pair (interleaved), at a time.
  plan.width = vec ? static_cast<int>(width) : interleaved ? 2 : 1;
  const std::int64_t groups = span / plan.width;
  const std::int64_t per_position = (d.q.heads + d.k.heads) * groups;
  RopeGrid& g = plan.grid;
  g.items = d.batch * d.seq * per_position;
  g.per_position = fast_div(per_position);
  g.groups = fast_div(groups);
  g.seq = fast_div(d.seq);
  g.narrow = g.items < (std::int64_t{1} << 31);
  // A thread for each group, the blocks at most the 64 waves of 8 a multiprocessor (a larger
  // problem strides).
  const std::int64_t blocks = (g.items + kRopeThreads - 1) / kRopeThreads;
  plan.blocks = static_cast<unsigned>(
      std::clamp<std::int64_t>(blocks, 1, static_cast<std::int64_t>(gpu.sm_count) * 8 * 64));
  // Angles as vectors: a half-length or half-style row read from its start, every row on 16 bytes.
  const std::size_t tbytes = elem_bytes(d.table_type);
  const std::int64_t pairs = interleaved ? plan.width / 2 : plan.width;
  g.table16 = d.table_step == 1 && static_cast<std::size_t>(pairs) * tbytes % 16 == 0 &&
                 on16(d.cos, 0, tbytes) && on16(d.sin, 0, tbytes) && on16(nullptr, d.cos_stride[0], tbytes) &&
                 on16(nullptr, d.cos_stride[1], tbytes) && on16(nullptr, d.sin_stride[0], tbytes) &&
                 on16(nullptr, d.sin_stride[1], tbytes);
}

void rope_run(const family::Rope& d, const RopeLaunch& plan, const KernelContext& ctx) {
  const char* variant = ctx.variant != nullptr ? ctx.variant->name.c_str() : "cuda rope";
  const DeviceGuard guard(ctx.device.index, variant);
  const gpuError_t err = launch_rope(d, plan, static_cast<gpuStream_t>(ctx.stream));
  if (err == gpuSuccess) return;
  gpu_clear_error();
  fail(ErrorKind::device, "{} on cuda:{}: launching failed ({}x{}x{}x{} and {} kv heads, {}): {}", variant,
       ctx.device.index, d.batch, d.q.heads, d.seq, d.dim, d.k.heads, family::elem_name(d.type),
       gpuGetErrorString(err));
}

}  // namespace opreg::cuda_like
