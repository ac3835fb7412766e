// TPipe's UB allocation (with the real "ub overflow" text), the queue state machine, and the
// messages of a misused tensor.
#include "backends/npu/ascend/pipe.h"

#include <cstring>
#include <string>

#include "registry/fail.h"

namespace opreg::npu::AscendC {

namespace {

const char* position_name(TPosition p) {
  switch (p) {
    case TPosition::GM:
      return "GM";
    case TPosition::VECIN:
      return "VECIN";
    case TPosition::VECOUT:
      return "VECOUT";
    case TPosition::VECCALC:
      return "VECCALC";
  }
  return "?";
}

const char* use_name(detail_::Use use) {
  switch (use) {
    case detail_::Use::vector_read:
      return "read by a vector instruction";
    case detail_::Use::vector_write:
      return "written by a vector instruction";
    case detail_::Use::dma_in:
      return "filled by a copy from GM";
    case detail_::Use::dma_out:
      return "copied to GM";
    case detail_::Use::scalar:
      return "accessed by the scalar unit";
  }
  return "used";
}

}  // namespace

namespace detail_ {

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
    const char* pos = position_name(buffer->position);
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
}

TPipe::~TPipe() {
  Reset();
  core_->pipe_alive = false;
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
    // The message triton-ascend's compiler prints [T1][T3], then where it happened.
    fail(ErrorKind::unsupported,
         "ub overflow, requires {} bits while {} bits available! (possible reason: tiling basic block is too large or "
         "block number is more than what user expect due to multi-buffer feature is enabled and some ops need extra "
         "local buffer.) [npu kernel {} (emulated), block {} on vector core {}: InitBuffer of {} bytes at UB offset {} "
         "of a {}-byte Unified Buffer]",
         (offset + bytes) * 8, std::uint64_t{core.ub_size} * 8, npu::detail::kernel_name(core), core.block, core.index,
         bytes, offset, core.ub_size);
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
  // Fresh UB holds garbage on the device; here it holds NaN (all bits set), so a kernel that
  // reads what it never wrote produces NaN rather than a plausible value.
  std::memset(core.ub + offset, 0xFF, bytes);
  core.ub_top = static_cast<std::uint32_t>(offset + bytes);
  if (core.ub_top > core.ub_peak) core.ub_peak = core.ub_top;
  return b;
}

}  // namespace opreg::npu::AscendC
