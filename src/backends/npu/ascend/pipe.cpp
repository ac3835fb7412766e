// TPipe's UB allocation (past the UB: the runtime's vector core exception), the queue state machine, and the
// messages of a misused tensor.
#include "backends/npu/ascend/pipe.h"
#include "backends/npu/ascend/vector_repeat.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "registry/fail.h"
#include "registry/spellings.h"

namespace opreg::npu::AscendC {

namespace {

constexpr auto position_name = spellings<TPosition>("GM", "VECIN", "VECOUT", "VECCALC");

constexpr auto use_name =
    spellings<detail_::Use>("read by a vector instruction", "written by a vector instruction", "filled by a copy from GM",
                            "copied to GM", "read by the scalar unit", "written by the scalar unit");

}  // namespace

namespace detail_ {

const char* pipe_name(std::uint8_t pipe) {
  static const char* const names[] = {"S", "V", "MTE2", "MTE3", "none"};
  return names[pipe < 5 ? pipe : 4];
}

void misaligned(const npu::detail::Core& core, const void* addr, std::uint32_t align, Use use, const char* api,
                const char* role) {
  const auto offset = reinterpret_cast<std::uintptr_t>(addr) - reinterpret_cast<std::uintptr_t>(core.ub);
  npu::detail::kernel_fail(
      core, fmt::format("{}: {} starts at UB offset {} ({} mod {}), not {}-byte aligned ({}): {} (keep per-row "
                        "scalars in 32-byte slots, or read and write them with GetValue/SetValue)",
                        api, role, offset, offset % align, align, align, use_name(use),
                        align == ONE_BLK_SIZE ? "the UB operands of DataCopy/DataCopyPad and of vector instructions "
                                                "start on a 32-byte boundary"
                                              : "a reduction's dst starts on an element boundary"));
}

void unsynchronised(const npu::detail::Core& core, const npu::detail::Buffer& b, std::uint8_t pipe, bool write,
                    std::uint8_t other, bool other_wrote, const char* api, const char* role) {
  const char* from = pipe_name(other);
  const char* to = pipe_name(pipe);
  const std::string what =
      other_wrote ? fmt::format("was last written by {} ({}) and is {} by {}", b.w_api, from,
                                write ? "written" : "read", to)
                  : fmt::format("was read by {} since its last write and is now written by {}", from, to);
  npu::detail::kernel_fail(
      core, fmt::format("{}: {} (a {} buffer at UB offset {}) {} with no synchronisation between them: the missing "
                        "event is {}_{}: insert SetFlag<HardEvent::{}_{}>(id); WaitFlag<HardEvent::{}_{}>(id); "
                        "before it (or pass the tensor through a TQue's EnQue/DeQue, or PipeBarrier<PIPE_ALL>())",
                        api, role, position_name(b.position), b.offset, what, from, to, from, to, from, to));
}

void v_order(npu::detail::Core& core, const npu::detail::Buffer& b, std::uint32_t lo, std::uint32_t hi, bool write,
             const char* api, const char* role) {
  std::vector<std::uint64_t>& bits = core.v_written;
  if (bits.size() * 128 < core.ub_size) bits.assign((core.ub_size + 127) / 128, 0);
  if (core.v_epoch != core.pipes.v_barriers) {  // a barrier since: forget the writes before it
    for (std::size_t w = core.v_from; w < core.v_to; ++w) bits[w] = 0;
    core.v_from = bits.size();
    core.v_to = 0;
    core.v_epoch = core.pipes.v_barriers;
  }
  const std::size_t first = lo / 2;
  const std::size_t last = (hi + 1) / 2;  // a bit per 2 bytes, [first, last)
  for (std::size_t i = first; i < last;) {
    const std::size_t w = i / 64;
    const std::size_t n = std::min<std::size_t>(64 - i % 64, last - i);
    const std::uint64_t mask = (n == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1)) << (i % 64);
    if (write) {
      bits[w] |= mask;
    } else if ((bits[w] & mask) != 0) [[unlikely]] {
      no_v_barrier(core, b, lo, api, role);
    }
    i += n;
  }
  if (write && first < last) {
    core.v_from = std::min(core.v_from, first / 64);
    core.v_to = std::max(core.v_to, (last + 63) / 64);
    core.v_api = api;
  }
}

void no_v_barrier(const npu::detail::Core& core, const npu::detail::Buffer& b, std::uint32_t lo, const char* api,
                  const char* role) {
  npu::detail::kernel_fail(
      core, fmt::format("{}: {} (UB offset {}, in a {} buffer at {}) reads what a vector instruction ({} the last) "
                        "wrote with no PipeBarrier<PIPE_V>() between them; without auto-sync (OPREG_NPU_SYNC=manual) "
                        "the vector pipe does not order dependent instructions: insert PipeBarrier<PIPE_V>(); before it",
                        api, role, lo, position_name(b.position), b.offset, core.v_api));
}

void bad_use(const npu::detail::Core& core, const void* addr, std::uint64_t bytes, const npu::detail::Buffer* buffer,
             std::uint32_t generation, std::uint64_t tensor_bytes, Use use, const char* api, const char* role) {
  using npu::detail::BufState;
  std::string why;
  if (buffer == nullptr) {
    const auto lo = reinterpret_cast<std::uintptr_t>(addr);
    const auto ub = reinterpret_cast<std::uintptr_t>(core.ub);
    if (addr == nullptr || lo < ub || lo - ub > core.ub_size || bytes > core.ub_size - (lo - ub)) {
      why = fmt::format(
          "({} bytes at address {:#x}) is not in this core's Unified Buffer ({} bytes at {:#x}): vector "
          "instructions read and write UB only; GM data must be copied in with DataCopy first",
          bytes, lo, core.ub_size, ub);
    } else {
      why = fmt::format("covers {} bytes but the tensor has {}", bytes, tensor_bytes);
    }
  } else if (buffer->generation != generation) {
    why = "belongs to a buffer that was freed (FreeTensor) or whose TPipe was reset or destroyed since";
  } else if (bytes > tensor_bytes) {
    why = fmt::format("would cover {} bytes of a LocalTensor of {} bytes", bytes, tensor_bytes);
  } else {
    const std::string_view pos = position_name(buffer->position);
    switch (buffer->state) {
      case BufState::free:
        why = fmt::format("is a free {} queue buffer (after FreeTensor)", pos);
        break;
      case BufState::enqueued:
        why = fmt::format(
            "is enqueued in its {} queue: DeQue it before it is {} (EnQue/DeQue carry the pipe "
            "synchronisation)",
            pos, use_name(use));
        break;
      case BufState::allocated:
        why = buffer->position == TPosition::VECIN
                  ? std::string(
                        "is a VECIN tensor not yet through EnQue/DeQue: the MTE2 -> V synchronisation is "
                        "missing")
                  : fmt::format("is a {} tensor not yet through EnQue/DeQue: the V -> MTE3 synchronisation is missing",
                                pos);
        break;
      case BufState::dequeued:
        why = buffer->position == TPosition::VECOUT
                  ? std::string("is a dequeued VECOUT tensor: it belongs to MTE3 until FreeTensor")
                  : std::string("is a dequeued input: FreeTensor it and allocate again before copying into it");
        break;
      case BufState::none:
        why = "cannot be used this way";
        break;
    }
  }
  npu::detail::kernel_fail(core, fmt::format("{}: {} {} ({})", api, role, why, use_name(use)));
}

npu::detail::Buffer& QueueState::alloc() {
  for (int i = 0; i < num; ++i) {
    if (buffers[i]->state == npu::detail::BufState::free) {
      buffers[i]->state = npu::detail::BufState::allocated;
      // AllocTensor waits for the buffer's last users (the queue's own synchronisation).
      buffers[i]->w_pipe = npu::detail::kNoPipe;
      buffers[i]->r_seq_v = 0;
      buffers[i]->r_seq_mte3 = 0;
      return *buffers[i];
    }
  }
  npu::detail::kernel_fail(npu::detail::current(),
                           fmt::format("AllocTensor: all {} buffer(s) of this {} queue are in use (allocated, "
                                       "enqueued or dequeued and not freed): on the device AllocTensor waits forever",
                                       num, position_name(position)));
}

namespace {
bool owns(const QueueState& q, const npu::detail::Buffer* b) {
  for (int i = 0; i < q.num; ++i) {
    if (q.buffers[i] == b) return true;
  }
  return false;
}
}  // namespace

void QueueState::enque(npu::detail::Buffer* buffer, std::uint32_t generation) {
  auto& core = npu::detail::current();
  if (!owns(*this, buffer) || buffer->generation != generation || buffer->state != npu::detail::BufState::allocated) {
    npu::detail::kernel_fail(core, fmt::format("EnQue on a {} queue: the tensor is not one this queue allocated and "
                                               "has not enqueued yet",
                                               position_name(position)));
  }
  if (queued == depth) {
    npu::detail::kernel_fail(core, fmt::format("EnQue on a {} queue of depth {} that already holds {} tensor(s)",
                                               position_name(position), depth, queued));
  }
  fifo[queued++] = buffer;
  buffer->state = npu::detail::BufState::enqueued;
}

npu::detail::Buffer& QueueState::deque() {
  if (queued == 0) {
    npu::detail::kernel_fail(
        npu::detail::current(),
        fmt::format("DeQue from an empty {} queue: on the device it waits forever", position_name(position)));
  }
  npu::detail::Buffer* b = fifo[0];
  fifo[0] = fifo[1];
  fifo[1] = nullptr;
  --queued;
  b->state = npu::detail::BufState::dequeued;
  // EnQue/DeQue are SetFlag/WaitFlag: MTE2 -> V for an input, V -> MTE3 for an output.
  b->w_synced |= static_cast<std::uint8_t>(
      1u << (position == TPosition::VECOUT ? npu::detail::kPipeMte3 : npu::detail::kPipeV));
  return *b;
}

void QueueState::free(npu::detail::Buffer* buffer, std::uint32_t generation) {
  using npu::detail::BufState;
  if (!owns(*this, buffer) || buffer->generation != generation ||
      (buffer->state != BufState::allocated && buffer->state != BufState::dequeued)) {
    npu::detail::kernel_fail(npu::detail::current(),
                             fmt::format("FreeTensor on a {} queue: the tensor is not an allocated or dequeued buffer "
                                         "of this queue (freed twice, still enqueued, or another queue's)",
                                         position_name(position)));
  }
  buffer->state = BufState::free;
  ++buffer->generation;
}

}  // namespace detail_

void gm_out_of_bounds(const char* api, const GmArg* arg, const void* base, std::uint64_t size, std::size_t elem_bytes,
                      std::uint64_t first, std::uint64_t count) {
  std::string where = "a GlobalTensor";
  if (arg != nullptr) {
    const auto offset =
        (reinterpret_cast<std::uintptr_t>(base) - reinterpret_cast<std::uintptr_t>(arg->data)) / elem_bytes;
    where = fmt::format(
        "GM tensor {} (a GlobalTensor of {} elements from element {} of kernel argument {}, which has "
        "{} elements)",
        arg->name, size, offset, arg->name, arg->bytes / elem_bytes);
  }
  npu::detail::kernel_fail(npu::detail::current(),
                           fmt::format("{}: elements [{}, {}) of {}: out of bounds", api, first, first + count, where));
}

TPipe::TPipe() : core_(&npu::detail::current()) {
  if (core_->pipe_alive) {
    npu::detail::kernel_fail(*core_,
                             "a second TPipe while one is alive: a kernel owns the Unified Buffer through one "
                             "TPipe (use TPipe::Reset to re-plan it)");
  }
  core_->pipe_alive = true;
  core_->ub_top = 0;
  core_->tpipe = this;
}

TPipe::~TPipe() {
  Reset();
  core_->pipe_alive = false;
  core_->tpipe = nullptr;
}

void TPipe::Reset() {
  for (int i = 0; i < count_; ++i) {
    auto& b = core_->buffers[static_cast<std::size_t>(i)];
    ++b.generation;
    b.state = npu::detail::BufState::none;
    b.owner = nullptr;
  }
  count_ = 0;
  for (int& q : queued_per_position_) q = 0;
  core_->ub_top = 0;
}

std::uint32_t TPipe::used_bytes() const { return core_->ub_top; }

TEventID TPipe::FetchEventID(HardEvent event) const {
  const std::uint8_t from = detail_::event_pipe(event, false);
  const std::uint8_t to = detail_::event_pipe(event, true);
  if (from == npu::detail::kNoPipe) return 0;
  for (int id = 0; id < npu::detail::kEventIds; ++id) {
    if (core_->pipes.pending[from][to][id] == 0) return static_cast<TEventID>(id);
  }
  return 0;
}

namespace detail_ {
void bad_repeat(const char* api, std::int64_t value, const char* what) {
  npu::detail::kernel_fail(npu::detail::current(), fmt::format("{} (repeat form): {} is out of range: {}", api, value,
                                                              what));
}

void bad_field(const char* api, const char* field, std::int64_t value, std::int64_t max) {
  npu::detail::kernel_fail(npu::detail::current(),
                           fmt::format("{} (repeat form): {} = {} is out of range: the device's field holds 0..{} "
                                       "(a larger value would wrap silently)",
                                       api, field, value, max));
}

void bad_flag(const npu::detail::Core& core, const char* api, std::uint8_t from, std::uint8_t to, std::int32_t id,
              const char* why) {
  npu::detail::kernel_fail(core, fmt::format("{}<HardEvent::{}_{}>({}): {}", api, pipe_name(from), pipe_name(to), id,
                                             why));
}
}  // namespace detail_

void TPipe::init_queue_error(int num, int already) {
  if (already != 0) npu::detail::kernel_fail(*core_, "InitBuffer on a queue that already has its buffers");
  npu::detail::kernel_fail(*core_, fmt::format("InitBuffer with {} buffers: a queue of the emulated vector core has 1 "
                                               "(single) or 2 (double buffering)",
                                               num));
}

npu::detail::Buffer& TPipe::allocate(std::uint32_t len, TPosition pos, bool queued, const void* owner) {
  npu::detail::Core& core = *core_;
  const std::uint64_t bytes = (std::uint64_t{len} + 31) / 32 * 32;
  if (count_ == npu::detail::kMaxBuffers) {
    npu::detail::kernel_fail(core,
                             fmt::format("InitBuffer: more than {} buffers in one TPipe", npu::detail::kMaxBuffers));
  }
  if (queued && ++queued_per_position_[static_cast<int>(pos)] > npu::detail::kMaxQueBuffersPerPosition) {
    npu::detail::kernel_fail(core, fmt::format("InitBuffer: more than {} queue buffers at {} (the A2 limit)",
                                               npu::detail::kMaxQueBuffersPerPosition, position_name(pos)));
  }
  const std::uint64_t offset = core.ub_top;
  if (offset + bytes > core.ub_size) {
    // Ascend C does not check UB at compile time: the kernel builds, and the device faults at the
    // first access past the UB (the runtime's error, once per launch). The emulator fails here,
    // where the allocation crosses the end, with the device's text.
    npu::detail::device_fault(core, "VEC instruction error: the ub address out of bounds.",
                              fmt::format("InitBuffer of {} bytes at UB offset {} ends {} bytes past the {}-byte "
                                          "Unified Buffer",
                                          bytes, offset, offset + bytes - core.ub_size, core.ub_size));
  }
  npu::detail::Buffer& b = core.buffers[static_cast<std::size_t>(count_++)];
  b.offset = static_cast<std::uint32_t>(offset);
  b.bytes = static_cast<std::uint32_t>(bytes);
  ++b.generation;
  b.state = npu::detail::BufState::none;
  b.position = pos;
  b.owner = owner;
  b.write_done = 0;
  b.read_done = 0;
  b.w_pipe = npu::detail::kNoPipe;
  b.w_synced = 0;
  b.r_seq_v = 0;
  b.r_seq_mte3 = 0;
  // Fresh UB holds garbage on the device; here it holds NaN (all bits set), so a kernel that
  // reads what it never wrote produces NaN rather than a plausible value.
  std::memset(core.ub + offset, 0xFF, bytes);
  core.ub_top = static_cast<std::uint32_t>(offset + bytes);
  if (core.ub_top > core.ub_peak) core.ub_peak = core.ub_top;
  return b;
}

}  // namespace opreg::npu::AscendC
