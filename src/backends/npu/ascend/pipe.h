// TPipe (the owner of a kernel's UB allocations), TQue (queues of depth 1 or 2 between the copy
// pipes and the vector unit) and TBuf (scratch). The queue state machine is the emulator's
// stand-in for the pipe synchronisation EnQue/DeQue insert on the device: a buffer goes
// free -> allocated -> enqueued -> dequeued -> free, and every instruction checks its operands'
// state, so a missing DeQue or a use after FreeTensor fails here instead of racing there.
#pragma once

#include <cstdint>

#include "backends/npu/ascend/tensor.h"

namespace opreg::npu::AscendC {

namespace detail_ {

// The untyped part of a queue: its buffers and the FIFO of enqueued ones.
struct QueueState {
  npu::detail::Buffer* buffers[2] = {nullptr, nullptr};
  int num = 0;
  int depth = 1;
  TPosition position = TPosition::VECIN;
  npu::detail::Buffer* fifo[2] = {nullptr, nullptr};
  int queued = 0;

  npu::detail::Buffer& alloc();
  void enque(npu::detail::Buffer* buffer, std::uint32_t generation);
  npu::detail::Buffer& deque();
  void free(npu::detail::Buffer* buffer, std::uint32_t generation);
};

}  // namespace detail_

class TPipe;

template <TPosition pos, std::int32_t depth>
class TQue {
  static_assert(depth == 1 || depth == 2, "a TQue of the emulated vector core has depth 1 or 2");
  static_assert(pos == TPosition::VECIN || pos == TPosition::VECOUT || pos == TPosition::VECCALC,
                "a vector core's queues sit at VECIN, VECOUT or VECCALC");

 public:
  TQue() {
    state_.depth = depth;
    state_.position = pos;
  }
  template <class T>
  LocalTensor<T> AllocTensor() {
    npu::detail::Buffer& b = state_.alloc();
    return tensor<T>(b);
  }
  template <class T>
  bool EnQue(const LocalTensor<T>& t) {
    state_.enque(detail_::Access::buffer(t), detail_::Access::generation(t));
    return true;
  }
  template <class T>
  LocalTensor<T> DeQue() {
    return tensor<T>(state_.deque());
  }
  template <class T>
  void FreeTensor(const LocalTensor<T>& t) {
    state_.free(detail_::Access::buffer(t), detail_::Access::generation(t));
  }
  bool VacantInQue() const { return state_.queued < depth; }

 private:
  friend class TPipe;
  template <class T>
  LocalTensor<T> tensor(npu::detail::Buffer& b) {
    T* addr = reinterpret_cast<T*>(npu::detail::current().ub + b.offset);
    return detail_::Access::make<T>(addr, static_cast<std::uint32_t>(b.bytes / sizeof(T)), &b, pos);
  }
  detail_::QueueState state_;
};

template <TPosition pos = TPosition::VECCALC>
class TBuf {
 public:
  template <class T>
  LocalTensor<T> Get() {
    return Get<T>(static_cast<std::uint32_t>(buffer_bytes() / sizeof(T)));
  }
  template <class T>
  LocalTensor<T> Get(std::uint32_t count);

 private:
  friend class TPipe;
  std::uint32_t buffer_bytes() const;
  npu::detail::Buffer* buffer_ = nullptr;
  std::uint32_t generation_ = 0;
};

class TPipe {
 public:
  // Takes the current core's Unified Buffer, empty (one TPipe per kernel at a time).
  TPipe();
  ~TPipe();
  TPipe(const TPipe&) = delete;
  TPipe& operator=(const TPipe&) = delete;

  // `num` buffers (1: single, 2: double buffering) of `len` bytes, each rounded up to 32.
  template <TPosition pos, std::int32_t depth>
  void InitBuffer(TQue<pos, depth>& que, std::uint8_t num, std::uint32_t len) {
    if (num < 1 || num > 2 || que.state_.num != 0) init_queue_error(num, que.state_.num);
    que.state_.num = num;
    for (int i = 0; i < num; ++i) {
      npu::detail::Buffer& b = allocate(len, pos, true, &que);
      b.state = npu::detail::BufState::free;
      que.state_.buffers[i] = &b;
    }
  }
  template <TPosition pos>
  void InitBuffer(TBuf<pos>& buf, std::uint32_t len) {
    buf.buffer_ = &allocate(len, pos, false, &buf);
    buf.generation_ = buf.buffer_->generation;
  }
  // Releases every buffer (kernels with stages re-plan their UB); tensors of the old buffers
  // become unusable.
  void Reset();
  // Bytes of UB in use (the high-water mark is the launch's ub_peak).
  std::uint32_t used_bytes() const;
  // An eventID for SetFlag/WaitFlag<event> that is not raised now (Ascend C's FetchEventID) [S25].
  TEventID FetchEventID(HardEvent event) const;

 private:
  npu::detail::Buffer& allocate(std::uint32_t len, TPosition pos, bool queued, const void* owner);
  [[noreturn]] void init_queue_error(int num, int already);
  npu::detail::Core* core_;
  int count_ = 0;
  int queued_per_position_[4] = {0, 0, 0, 0};
};

template <TPosition pos>
template <class T>
LocalTensor<T> TBuf<pos>::Get(std::uint32_t count) {
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* b = buffer_;
  if (b == nullptr || b->generation != generation_ || std::uint64_t{count} * sizeof(T) > b->bytes) [[unlikely]] {
    detail_::bad_use(core, b == nullptr ? nullptr : core.ub + b->offset, std::uint64_t{count} * sizeof(T), b,
                     generation_, b == nullptr ? 0 : b->bytes, detail_::Use::scalar_read, "TBuf::Get", "buffer");
  }
  return detail_::Access::make<T>(reinterpret_cast<T*>(core.ub + b->offset), count, b, pos);
}

template <TPosition pos>
std::uint32_t TBuf<pos>::buffer_bytes() const {
  return buffer_ == nullptr ? 0 : buffer_->bytes;
}

}  // namespace opreg::npu::AscendC
