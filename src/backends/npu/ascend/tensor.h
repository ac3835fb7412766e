// GlobalTensor (a bounds-checked view of GM) and LocalTensor (memory in the current vector core's
// Unified Buffer). They are different types, so a vector instruction or a GM copy given the wrong
// kind of tensor does not compile; where a kernel erases the type (LocalTensor::SetAddr), the
// instruction checks at run time that its operands lie in the core's UB.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/npu/ascend/runtime.h"

namespace opreg::npu::AscendC {

template <class T>
class LocalTensor;

namespace detail_ {
struct Access;
}

template <class T>
class GlobalTensor {
 public:
  GlobalTensor() = default;

  // `bufferSize` elements from `buffer`, which must lie inside one of the kernel's GM arguments.
  void SetGlobalBuffer(__gm__ T* buffer, std::uint64_t bufferSize);
  __gm__ T* GetPhyAddr() const { return base_; }
  std::uint64_t GetSize() const { return size_; }
  // The tensor from element `offset` on (Ascend C's `xGm[offset]`).
  GlobalTensor operator[](std::uint64_t offset) const;
  T GetValue(std::uint64_t index) const;
  void SetValue(std::uint64_t index, const T& value) const;

  // The emulator's check of a GM access: elements [first, first + count) of this tensor.
  void check_range(const char* api, std::uint64_t first, std::uint64_t count) const {
    if (first <= size_ && count <= size_ - first) return;
    out_of_bounds(api, first, count);
  }

 private:
  friend struct detail_::Access;
  [[noreturn]] void out_of_bounds(const char* api, std::uint64_t first, std::uint64_t count) const;
  T* base_ = nullptr;
  std::uint64_t size_ = 0;
  const GmArg* arg_ = nullptr;  // the kernel argument the tensor lies in
};

template <class T>
class LocalTensor {
 public:
  LocalTensor() = default;

  std::uint32_t GetSize() const { return size_; }
  T* GetPhyAddr() const { return addr_; }
  TPosition GetPosition() const { return position_; }
  // The tensor from element `offset` on (Ascend C's `xLocal[offset]`).
  LocalTensor operator[](std::uint32_t offset) const;
  // Scalar access through the scalar unit: waits for the vector pipe to finish writing.
  T GetValue(std::uint32_t index) const;
  void SetValue(std::uint32_t index, const T& value) const;
  template <class U>
  LocalTensor<U> ReinterpretCast() const;
  // Points the tensor at a raw UB address (type erased: the emulator checks each use).
  void SetAddr(const TBuffAddr& address);

 private:
  friend struct detail_::Access;
  template <class U>
  friend class LocalTensor;
  T* addr_ = nullptr;
  std::uint32_t size_ = 0;  // elements
  npu::detail::Buffer* buffer_ = nullptr;
  std::uint32_t generation_ = 0;
  TPosition position_ = TPosition::VECCALC;
};

namespace detail_ {

enum class Use : std::uint8_t { vector_read, vector_write, dma_in, dma_out, scalar_read, scalar_write };

// The pipe a use runs on, and whether it writes.
constexpr std::uint8_t pipe_of(Use how) {
  switch (how) {
    case Use::vector_read:
    case Use::vector_write:
      return npu::detail::kPipeV;
    case Use::dma_in:
      return npu::detail::kPipeMte2;
    case Use::dma_out:
      return npu::detail::kPipeMte3;
    default:
      return npu::detail::kPipeS;
  }
}
constexpr bool writes(Use how) {
  return how == Use::vector_write || how == Use::dma_in || how == Use::scalar_write;
}

// Strict mode: a read of GM by `pipe` (MTE2, or S for GlobalTensor::GetValue) that overlaps what
// this core's MTE3 wrote since the last MTE3 -> pipe synchronisation is an error.
void check_gm_read(npu::detail::Core& core, const char* api, const void* gm, std::uint64_t span, std::uint8_t pipe);

[[noreturn]] void misaligned(const npu::detail::Core& core, const void* addr, std::uint32_t align, Use use,
                             const char* api, const char* role);
// Strict mode's error: `pipe` uses the buffer without the synchronisation after `other`'s
// access (its last write, or for a write, a read by `other` numbered `seq`).
[[noreturn]] void unsynchronised(const npu::detail::Core& core, const npu::detail::Buffer& b, std::uint8_t pipe,
                                 bool write, std::uint8_t other, bool other_wrote, const char* api, const char* role);
// No auto-sync: a vector instruction reads what an earlier one wrote with no PipeBarrier<PIPE_V>.
[[noreturn]] void no_v_barrier(const npu::detail::Core& core, const npu::detail::Buffer& b, std::uint32_t lo,
                               const char* api, const char* role);

// No auto-sync: a vector instruction reading UB bytes [lo, hi) that a vector instruction wrote
// since the last PipeBarrier<PIPE_V> (or PIPE_ALL) is an error; a write is remembered.
void v_order(npu::detail::Core& core, const npu::detail::Buffer& b, std::uint32_t lo, std::uint32_t hi, bool write,
             const char* api, const char* role);

// Strict mode: `pipe` reads (or writes) buffer b now. A write by another pipe must have been
// synchronised to this pipe since (a queue, a flag, a barrier); so must, for a write, every read
// by V or MTE3 since that write. Then the record takes this access.
inline void hazard(npu::detail::Core& core, npu::detail::Buffer& b, std::uint8_t pipe, bool write, const char* api,
                   const char* role) {
  using namespace npu::detail;
  PipeState& ps = core.pipes;
  const std::uint32_t seq = ++ps.seq;
  if (b.w_pipe != pipe && b.w_pipe != kNoPipe && (b.w_synced & (1u << pipe)) == 0 &&
      b.w_seq >= ps.synced[b.w_pipe][pipe]) [[unlikely]] {
    unsynchronised(core, b, pipe, write, b.w_pipe, true, api, role);
  }
  if (write) {
    if (pipe != kPipeV && b.r_seq_v != 0 && b.r_seq_v >= ps.synced[kPipeV][pipe]) [[unlikely]] {
      unsynchronised(core, b, pipe, write, kPipeV, false, api, role);
    }
    if (pipe != kPipeMte3 && b.r_seq_mte3 != 0 && b.r_seq_mte3 >= ps.synced[kPipeMte3][pipe]) [[unlikely]] {
      unsynchronised(core, b, pipe, write, kPipeMte3, false, api, role);
    }
    b.w_pipe = pipe;
    b.w_seq = seq;
    b.w_synced = 0;
    b.w_api = api;
    b.r_seq_v = 0;
    b.r_seq_mte3 = 0;
  } else if (pipe == kPipeV) {
    b.r_seq_v = seq;
  } else if (pipe == kPipeMte3) {
    b.r_seq_mte3 = seq;
  }
}

[[noreturn]] void bad_use(const npu::detail::Core& core, const void* addr, std::uint64_t bytes,
                          const npu::detail::Buffer* buffer, std::uint32_t generation, std::uint64_t tensor_bytes,
                          Use use, const char* api, const char* role);

// The emulator's view of tensors: raw addresses, buffer records, and the checks every
// instruction makes on its operands.
struct Access {
  template <class T>
  static LocalTensor<T> make(T* addr, std::uint32_t size, npu::detail::Buffer* buffer, TPosition position) {
    LocalTensor<T> t;
    t.addr_ = addr;
    t.size_ = size;
    t.buffer_ = buffer;
    t.generation_ = buffer != nullptr ? buffer->generation : 0;
    t.position_ = position;
    return t;
  }
  template <class T>
  static npu::detail::Buffer* buffer(const LocalTensor<T>& t) {
    return t.buffer_;
  }
  template <class T>
  static std::uint32_t generation(const LocalTensor<T>& t) {
    return t.generation_;
  }
  template <class T>
  static const GmArg* arg(const GlobalTensor<T>& t) {
    return t.arg_;
  }

  // Checks that `count` elements from t are usable for `use` now, and returns the buffer
  // record whose timing the instruction updates.
  // `align`: the byte boundary the operand's UB address must start on (32 for DMA and vector
  // operands [S6]; the element size for a reduction's dst [S23]); scalar accesses take any.
  template <class T>
  static npu::detail::Buffer* use(npu::detail::Core& core, const LocalTensor<T>& t, std::uint64_t count, Use how,
                                  const char* api, const char* role, std::uint32_t align = ONE_BLK_SIZE) {
    npu::detail::Buffer* b = t.buffer_;
    const std::uint64_t bytes = count * sizeof(T);
    bool ok = count <= t.size_;
    if (b != nullptr) {
      ok = ok && b->generation == t.generation_ && state_allows(*b, how);
    } else {
      // Type-erased (SetAddr): the address itself must be in this core's UB.
      const auto lo = reinterpret_cast<std::uintptr_t>(t.addr_);
      const auto ub = reinterpret_cast<std::uintptr_t>(core.ub);
      ok = ok && t.addr_ != nullptr && lo >= ub && lo - ub <= core.ub_size && bytes <= core.ub_size - (lo - ub);
      b = &core.loose;
    }
    if (!ok) [[unlikely]] {
      bad_use(core, t.addr_, bytes, t.buffer_, t.generation_, std::uint64_t{t.size_} * sizeof(T), how, api, role);
    }
    if (how != Use::scalar_read && how != Use::scalar_write) {
      const auto offset = reinterpret_cast<std::uintptr_t>(t.addr_) - reinterpret_cast<std::uintptr_t>(core.ub);
      if (offset % align != 0) [[unlikely]] {
        misaligned(core, t.addr_, align, how, api, role);
      }
    }
    if (core.strict && b != &core.loose) {
      hazard(core, *b, pipe_of(how), writes(how), api, role);
      // Without auto-sync the vector pipe does not order itself (an instruction's sources are
      // checked before its dst is recorded, so an in-place instruction reads the previous write).
      if (core.manual_sync && pipe_of(how) == npu::detail::kPipeV) {
        const auto lo = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(t.addr_) -
                                                   reinterpret_cast<std::uintptr_t>(core.ub));
        v_order(core, *b, lo, lo + static_cast<std::uint32_t>(bytes), writes(how), api, role);
      }
    }
    return b;
  }

  // Queue buffers follow their state machine: an input is computed on after DeQue, an output is
  // written before EnQue and copied out after DeQue. TBuf scratch has no states.
  static bool state_allows(const npu::detail::Buffer& b, Use how) {
    using npu::detail::BufState;
    switch (b.state) {
      case BufState::none:
        return true;
      case BufState::free:
      case BufState::enqueued:
        return false;
      case BufState::allocated:
        // Freshly allocated: filled by a copy in, or (an output) written by the vector unit.
        return how == Use::dma_in || (b.position != TPosition::VECIN && how != Use::dma_out);
      case BufState::dequeued:
        // An input after DeQue is the vector unit's (it may compute in place); an output after
        // DeQue belongs to MTE3.
        return b.position == TPosition::VECOUT ? how == Use::dma_out : how != Use::dma_in;
    }
    return false;
  }
};

}  // namespace detail_

// ---- GlobalTensor

template <class T>
void GlobalTensor<T>::SetGlobalBuffer(__gm__ T* buffer, std::uint64_t bufferSize) {
  npu::detail::Core& core = npu::detail::current();
  arg_ = npu::detail::find_arg(core, buffer, bufferSize * sizeof(T));
  if (arg_ == nullptr) [[unlikely]] {
    npu::detail::kernel_fail(core, "SetGlobalBuffer: " + std::to_string(bufferSize) + " elements of " +
                                       std::to_string(sizeof(T)) +
                                       " bytes do not lie inside any GM argument of the kernel (a kernel sees only "
                                       "the GM it is given)");
  }
  base_ = buffer;
  size_ = bufferSize;
}

template <class T>
GlobalTensor<T> GlobalTensor<T>::operator[](std::uint64_t offset) const {
  check_range("GlobalTensor[]", offset, 0);
  GlobalTensor out = *this;
  out.base_ += offset;
  out.size_ -= offset;
  return out;
}

template <class T>
T GlobalTensor<T>::GetValue(std::uint64_t index) const {
  check_range("GlobalTensor::GetValue", index, 1);
  npu::detail::Core& core = npu::detail::current();
  if (core.strict && core.pipes.gm_count != 0) {
    detail_::check_gm_read(core, "GlobalTensor::GetValue", base_ + index, sizeof(T), npu::detail::kPipeS);
  }
  ++core.counters.scalar_accesses;
  core.counters.gm_read += sizeof(T);
  return base_[index];
}

template <class T>
void GlobalTensor<T>::SetValue(std::uint64_t index, const T& value) const {
  check_range("GlobalTensor::SetValue", index, 1);
  npu::detail::Core& core = npu::detail::current();
  ++core.counters.scalar_accesses;
  core.counters.gm_write += sizeof(T);
  base_[index] = value;
}

[[noreturn]] void gm_out_of_bounds(const char* api, const GmArg* arg, const void* base, std::uint64_t size,
                                   std::size_t elem_bytes, std::uint64_t first, std::uint64_t count);

template <class T>
void GlobalTensor<T>::out_of_bounds(const char* api, std::uint64_t first, std::uint64_t count) const {
  gm_out_of_bounds(api, arg_, base_, size_, sizeof(T), first, count);
}

// ---- LocalTensor

template <class T>
LocalTensor<T> LocalTensor<T>::operator[](std::uint32_t offset) const {
  LocalTensor out = *this;
  if (offset > size_) [[unlikely]] {
    detail_::bad_use(npu::detail::current(), addr_ + offset, 0, buffer_, generation_, std::uint64_t{size_} * sizeof(T),
                     detail_::Use::scalar_read, "LocalTensor[]", "offset");
  }
  out.addr_ += offset;
  out.size_ -= offset;
  return out;
}

template <class T>
T LocalTensor<T>::GetValue(std::uint32_t index) const {
  npu::detail::Core& core = npu::detail::current();
  const npu::detail::Buffer* b =
      detail_::Access::use(core, (*this)[index], 1, detail_::Use::scalar_read, "LocalTensor::GetValue", "tensor");
  // The scalar unit waits for the vector pipe's write (a V -> S synchronisation).
  if (b->write_done > core.time.issue) core.time.issue = b->write_done;
  ++core.counters.scalar_accesses;
  return addr_[index];
}

template <class T>
void LocalTensor<T>::SetValue(std::uint32_t index, const T& value) const {
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* b =
      detail_::Access::use(core, (*this)[index], 1, detail_::Use::scalar_write, "LocalTensor::SetValue", "tensor");
  if (b->read_done > core.time.issue) core.time.issue = b->read_done;
  if (b->write_done < core.time.issue) b->write_done = core.time.issue;
  ++core.counters.scalar_accesses;
  addr_[index] = value;
}

template <class T>
template <class U>
LocalTensor<U> LocalTensor<T>::ReinterpretCast() const {
  LocalTensor<U> out;
  out.addr_ = reinterpret_cast<U*>(addr_);
  out.size_ = static_cast<std::uint32_t>(std::uint64_t{size_} * sizeof(T) / sizeof(U));
  out.buffer_ = buffer_;
  out.generation_ = generation_;
  out.position_ = position_;
  return out;
}

template <class T>
void LocalTensor<T>::SetAddr(const TBuffAddr& address) {
  addr_ = reinterpret_cast<T*>(static_cast<std::uintptr_t>(address.bufferAddr));
  size_ = static_cast<std::uint32_t>(address.dataLen / sizeof(T));
  buffer_ = nullptr;
  generation_ = 0;
  position_ = address.logicPos;
}

}  // namespace opreg::npu::AscendC
