// The copy engines: MTE2 (GM -> UB) and MTE3 (UB -> GM), two pipes, with the counters
// and the cost model's timing of each transfer.
#include "backends/npu/ascend/data_copy.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <mutex>

#include "registry/fail.h"

namespace opreg::npu::AscendC::detail_ {

namespace {

// A DMA moves whole 32-byte granules of GM: the bytes of one burst.
double granule_bytes(const Blocks& b) { return static_cast<double>((b.len + 31) / 32 * 32); }

// The bytes a DMA is charged as: its granules, and on A2 a row whose GM address is not 512-byte
// aligned at 1 / gm_unaligned_rate of them [S31]. Alignment is counted from the start of the
// row's kernel argument (GM allocations assumed 512-byte aligned).
double burst_bytes(const npu::detail::Core& core, const std::byte* gm, const Blocks& b) {
  const double granules = granule_bytes(b);
  if (core.gm_unaligned_rate >= 1.0) return static_cast<double>(b.count) * granules;
  const npu::GmArg* arg = npu::detail::find_arg(core, gm, b.gm_span());
  const auto base = reinterpret_cast<std::uintptr_t>(arg != nullptr ? arg->data : gm);
  const std::uint64_t first = reinterpret_cast<std::uintptr_t>(gm) - base;
  double bytes = 0;
  for (std::uint64_t i = 0; i < b.count; ++i) {
    const bool aligned = (first + i * (b.len + b.gm_gap)) % 512 == 0;
    bytes += aligned ? granules : granules / core.gm_unaligned_rate;
  }
  return bytes;
}

// A DMA of bursts b on MTE2 (in) or MTE3: it starts when it is issued, its engine is free and
// its UB buffer is ready (a copy in waits for the buffer's last reader and writer); the engine
// spends the set-up, then moves the bytes (burst_bytes); it ends when the engine has, and, from
// HBM, when the core's share of the memory has too. The set-up and the unaligned rows' extra time
// are counted as dma_overhead.
double transfer(npu::detail::Core& core, double start, const std::byte* gm, const Blocks& b, bool in) {
  double& engine = in ? core.time.mte2 : core.time.mte3;
  if (core.time.issue > start) start = core.time.issue;
  if (engine > start) start = engine;
  const double bytes = burst_bytes(core, gm, b);
  const double plain = static_cast<double>(b.count) * granule_bytes(b);
  const double ns_per_byte = in ? core.in_ns_per_byte : core.out_ns_per_byte;
  const double setup = cost_constants().dma_setup_cycles * core.cycle_ns;
  const double ns = setup + bytes * ns_per_byte;
  double end = start + ns;
  if (core.mem_ns_per_byte > 0) {
    core.time.mem = std::max(core.time.mem, start + setup) + bytes * core.mem_ns_per_byte;
    end = std::max(end, core.time.mem);
  }
  engine = end;
  core.time.port_busy += ns;
  core.counters.dma_overhead +=
      static_cast<std::uint64_t>((setup + (bytes - plain) * ns_per_byte) / core.cycle_ns + 0.5);
  return end;
}

}  // namespace

namespace {

struct Limit {
  const char* field;
  std::uint64_t value;
  std::uint64_t lo;
  std::uint64_t hi;
};

void check_limits(npu::detail::Core& core, const char* api, const char* params, std::span<const Limit> limits,
                  const char* ranges) {
  for (const Limit& l : limits) {
    if (l.value >= l.lo && l.value <= l.hi) continue;
    npu::detail::kernel_fail(
        core, fmt::format("{}: {}.{} = {} is outside {}..{} on {} ({}: {}); split the copy", api, params, l.field,
                          l.value, l.lo, l.hi, core.launch_profile, params, ranges));
  }
}

}  // namespace

void check_pad_params(npu::detail::Core& core, const char* api, const DataCopyExtParams& p) {
  // The MTE's own fields: nBurst 12 bits on A2/A3 (21 on the 950, capped by the uint16 field),
  // lenBurst 21 bits, gaps 32 bits [S7][S9].
  const Limit limits[] = {{"blockCount", p.blockCount, 1, core.max_ext_block_count},
                          {"blockLen", p.blockLen, 1, (1u << 21) - 1}};
  check_limits(core, api, "DataCopyExtParams", limits,
               "blockCount 1..4095 (1..65535 on the 950PR), blockLen 1..2097151 bytes, strides uint32 (GM in "
               "bytes, UB in 32-byte blocks)");
}

void check_pad_params(npu::detail::Core& core, const char* api, const DataCopyParams& p) {
  const Limit limits[] = {{"blockCount", p.blockCount, 1, 4095}, {"blockLen", p.blockLen, 1, 65535}};
  check_limits(core, api, "DataCopyParams", limits,
               "blockCount 1..4095, blockLen 1..65535 bytes, strides uint16 (GM in bytes, UB in 32-byte blocks)");
}

void check_params(npu::detail::Core& core, const char* api, const DataCopyParams& p) {
  const Limit limits[] = {{"blockCount", p.blockCount, 1, 4095}, {"blockLen", p.blockLen, 1, 65535}};
  check_limits(core, api, "DataCopyParams", limits,
               "blockCount 1..4095, blockLen and strides in 32-byte blocks, blockLen 1..65535, strides uint16");
}

std::uint64_t block_bytes(npu::detail::Core& core, const char* api, std::uint64_t count, std::size_t elem_bytes) {
  const std::uint64_t bytes = count * elem_bytes;
  const std::uint64_t moved = bytes / 32 * 32;
  if (moved != bytes) {
    ++core.counters.truncated_copies;
    core.counters.truncated_bytes += bytes - moved;
    npu::detail::warn_once(core, api,
                           fmt::format("{} of {} elements of {} bytes ({} bytes) is not a multiple of 32 bytes: the "
                                       "device moves {} bytes, dropping the last {} (DataCopyPad copies exact "
                                       "lengths); further truncations of this launch are only counted",
                                       api, count, elem_bytes, bytes, moved, bytes - moved));
  }
  return moved;
}

namespace {

// Strict mode: GM that this core's MTE3 wrote and MTE2 reads back needs MTE3_MTE2 (or a barrier)
// in between. Written ranges are kept merged per core (a tile walk writes one growing range per
// output); the oldest range gives way when eight are not enough.
void note_gm_write(npu::detail::Core& core, const std::byte* gm, std::uint64_t span) {
  npu::detail::PipeState& ps = core.pipes;
  const auto lo = reinterpret_cast<std::uintptr_t>(gm);
  const std::uintptr_t hi = lo + span;
  const std::uint32_t synced = ps.synced[npu::detail::kPipeMte3][npu::detail::kPipeMte2];
  int oldest = 0;
  for (int i = 0; i < ps.gm_count; ++i) {
    npu::detail::PipeState::GmWrite& w = ps.gm[i];
    if (w.seq < synced) {  // already synchronised: reuse the slot
      w = {lo, hi, ps.seq};
      return;
    }
    if (lo <= w.hi && w.lo <= hi) {
      w = {std::min(w.lo, lo), std::max(w.hi, hi), ps.seq};
      return;
    }
    if (w.seq < ps.gm[oldest].seq) oldest = i;
  }
  if (ps.gm_count < npu::detail::PipeState::kGmWrites) {
    ps.gm[ps.gm_count++] = {lo, hi, ps.seq};
  } else {
    ps.gm[oldest] = {lo, hi, ps.seq};
  }
}

}  // namespace

void check_gm_read(npu::detail::Core& core, const char* api, const void* gm, std::uint64_t span, std::uint8_t pipe) {
  const npu::detail::PipeState& ps = core.pipes;
  const auto lo = reinterpret_cast<std::uintptr_t>(gm);
  const std::uintptr_t hi = lo + span;
  const std::uint32_t synced = ps.synced[npu::detail::kPipeMte3][pipe];
  for (int i = 0; i < ps.gm_count; ++i) {
    const npu::detail::PipeState::GmWrite& w = ps.gm[i];
    if (w.seq >= synced && lo < w.hi && w.lo < hi) {
      const char* to = pipe == npu::detail::kPipeS ? "S" : "MTE2";
      npu::detail::kernel_fail(
          core, fmt::format("{}: reads GM that this core's MTE3 wrote (bytes {} to {} of that write) with no "
                            "synchronisation between them: the missing event is MTE3_{}: insert "
                            "SetFlag<HardEvent::MTE3_{}>(id); WaitFlag<HardEvent::MTE3_{}>(id); before it (or "
                            "PipeBarrier<PIPE_ALL>())",
                            api, std::max(lo, w.lo) - w.lo, std::min(hi, w.hi) - w.lo, to, to, to));
    }
  }
}

void copy_in(npu::detail::Core& core, std::byte* ub, npu::detail::Buffer* buffer, const std::byte* gm, const Blocks& b,
             const void* pad_value, std::size_t elem_bytes, std::uint32_t right_pad) {
  for (std::uint64_t i = 0; i < b.count; ++i) {
    std::byte* row = ub + i * (b.ub_len + b.ub_gap);
    std::memcpy(row, gm + i * (b.len + b.gm_gap), b.len);
    for (std::uint32_t k = 0; k < right_pad; ++k) std::memcpy(row + b.len + k * elem_bytes, pad_value, elem_bytes);
  }
  ++core.counters.dma_in;
  core.counters.dma_blocks += b.count;
  core.counters.gm_read += b.count * b.len;
  double ready = buffer->read_done > buffer->write_done ? buffer->read_done : buffer->write_done;
  buffer->write_done = transfer(core, ready, gm, b, true);
}

void copy_out(npu::detail::Core& core, std::byte* gm, const std::byte* ub, npu::detail::Buffer* buffer, const Blocks& b,
              bool atomic_f32) {
  if (core.strict) note_gm_write(core, gm, b.gm_span());
  if (atomic_f32) {
    // L2 atomics serialise the cores' adds; their order is whatever order the cores arrive in.
    std::lock_guard lock(npu::detail::atomic_mutex(core));
    for (std::uint64_t i = 0; i < b.count; ++i) {
      auto* dst = reinterpret_cast<float*>(gm + i * (b.len + b.gm_gap));
      const auto* src = reinterpret_cast<const float*>(ub + i * (b.ub_len + b.ub_gap));
      for (std::uint64_t k = 0; k < b.len / sizeof(float); ++k) dst[k] += src[k];
    }
    ++core.counters.atomic_adds;
    core.counters.atomic_bytes += b.count * b.len;
  } else {
    for (std::uint64_t i = 0; i < b.count; ++i) {
      std::memcpy(gm + i * (b.len + b.gm_gap), ub + i * (b.ub_len + b.ub_gap), b.len);
    }
  }
  ++core.counters.dma_out;
  core.counters.dma_blocks += b.count;
  core.counters.gm_write += b.count * b.len;
  const double end = transfer(core, buffer->write_done, gm, b, false);
  if (buffer->read_done < end) buffer->read_done = end;
}

}  // namespace opreg::npu::AscendC::detail_
