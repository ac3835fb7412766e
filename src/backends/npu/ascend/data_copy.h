// Moving data between GM and the Unified Buffer: DataCopy (32-byte blocks: a length that is not
// a multiple of 32 is rounded down as the hardware does, counted and logged), DataCopyPad (exact
// bytes, each block landing 32-byte aligned in UB, within the A2 DMA's limits), and MTE3's
// atomic-add mode.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/npu/ascend/tensor.h"

namespace opreg::npu::AscendC {

namespace detail_ {

// One DMA: `count` blocks of `len` bytes; consecutive blocks `gm_gap` bytes apart in GM and
// `ub_gap` bytes apart in UB, each UB block occupying `ub_pitch_len` bytes (len, or len rounded
// up to 32 for DataCopyPad).
struct Blocks {
  std::uint64_t count = 1;
  std::uint64_t len = 0;
  std::uint64_t ub_len = 0;
  std::uint64_t gm_gap = 0;
  std::uint64_t ub_gap = 0;
  std::uint64_t gm_span() const { return count == 0 ? 0 : (count - 1) * (len + gm_gap) + len; }
  std::uint64_t ub_span() const { return count == 0 ? 0 : (count - 1) * (ub_len + ub_gap) + ub_len; }
};

void copy_in(npu::detail::Core& core, std::byte* ub, npu::detail::Buffer* buffer, const std::byte* gm, const Blocks& b,
             const void* pad_value, std::size_t elem_bytes, std::uint32_t right_pad);
void copy_out(npu::detail::Core& core, std::byte* gm, const std::byte* ub, npu::detail::Buffer* buffer, const Blocks& b,
              bool atomic_f32);
void check_pad_params(npu::detail::Core& core, const char* api, const DataCopyExtParams& p);
void check_pad_params(npu::detail::Core& core, const char* api, const DataCopyParams& p);
void check_params(npu::detail::Core& core, const char* api, const DataCopyParams& p);
// The byte count DataCopy moves for `count` elements (rounded down to 32), counting and
// logging a truncation.
std::uint64_t block_bytes(npu::detail::Core& core, const char* api, std::uint64_t count, std::size_t elem_bytes);

// DataCopy's strided blocks: lengths and strides in 32-byte blocks; `in` (GM -> UB): srcStride is
// the GM side's, else dstStride.
inline Blocks strided_blocks(const DataCopyParams& p, bool in) {
  check_params(npu::detail::current(), "DataCopy", p);
  const std::uint64_t len = std::uint64_t{p.blockLen} * ONE_BLK_SIZE;
  const std::uint64_t src = std::uint64_t{p.srcStride} * ONE_BLK_SIZE;
  const std::uint64_t dst = std::uint64_t{p.dstStride} * ONE_BLK_SIZE;
  return {p.blockCount, len, len, in ? src : dst, in ? dst : src};
}

// DataCopyPad's blocks: blockLen bytes, each UB block rounded up to 32 bytes; the GM side's stride
// in bytes, the UB side's in 32-byte blocks (`in`, GM -> UB: srcStride is the GM side's).
inline Blocks pad_blocks(const DataCopyExtParams& p, bool in) {
  const std::uint64_t ub_len = (std::uint64_t{p.blockLen} + 31) / 32 * 32;
  const std::uint64_t gm_gap = in ? p.srcStride : p.dstStride;
  const std::uint64_t ub_gap = std::uint64_t{in ? p.dstStride : p.srcStride} * ONE_BLK_SIZE;
  return {p.blockCount, p.blockLen, ub_len, gm_gap, ub_gap};
}

template <class T>
void copy_in_checked(const char* api, const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Blocks& b,
                     const void* pad_value, std::uint32_t right_pad) {
  npu::detail::Core& core = npu::detail::current();
  src.check_range(api, 0, (b.gm_span() + sizeof(T) - 1) / sizeof(T));
  if (core.strict && core.pipes.gm_count != 0) check_gm_read(core, api, src.GetPhyAddr(), b.gm_span(), npu::detail::kPipeMte2);
  npu::detail::Buffer* buffer =
      Access::use(core, dst, (b.ub_span() + sizeof(T) - 1) / sizeof(T), Use::dma_in, api, "dst");
  copy_in(core, reinterpret_cast<std::byte*>(dst.GetPhyAddr()), buffer,
          reinterpret_cast<const std::byte*>(src.GetPhyAddr()), b, pad_value, sizeof(T), right_pad);
}

template <class T>
void copy_out_checked(const char* api, const GlobalTensor<T>& dst, const LocalTensor<T>& src, const Blocks& b) {
  npu::detail::Core& core = npu::detail::current();
  dst.check_range(api, 0, (b.gm_span() + sizeof(T) - 1) / sizeof(T));
  npu::detail::Buffer* buffer =
      Access::use(core, src, (b.ub_span() + sizeof(T) - 1) / sizeof(T), Use::dma_out, api, "src");
  if (core.atomic_add && !std::is_same_v<T, float>) [[unlikely]] {
    npu::detail::kernel_fail(core,
                             std::string(api) + ": atomic-add mode is set for float, the copy moves another type");
  }
  copy_out(core, reinterpret_cast<std::byte*>(dst.GetPhyAddr()), reinterpret_cast<const std::byte*>(src.GetPhyAddr()),
           buffer, b, core.atomic_add);
}

}  // namespace detail_

// `count` elements, GM -> UB; the byte length is rounded down to a multiple of 32.
template <class T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const std::uint32_t count) {
  const std::uint64_t bytes = detail_::block_bytes(npu::detail::current(), "DataCopy", count, sizeof(T));
  detail_::copy_in_checked("DataCopy", dst, src, {1, bytes, bytes, 0, 0}, nullptr, 0);
}

// `count` elements, UB -> GM; the byte length is rounded down to a multiple of 32.
template <class T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const std::uint32_t count) {
  const std::uint64_t bytes = detail_::block_bytes(npu::detail::current(), "DataCopy", count, sizeof(T));
  detail_::copy_out_checked("DataCopy", dst, src, {1, bytes, bytes, 0, 0});
}

// Strided blocks, GM -> UB; lengths and strides in 32-byte blocks.
template <class T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p) {
  detail_::copy_in_checked("DataCopy", dst, src, detail_::strided_blocks(p, true), nullptr, 0);
}

// Strided blocks, UB -> GM; lengths and strides in 32-byte blocks.
template <class T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
  detail_::copy_out_checked("DataCopy", dst, src, detail_::strided_blocks(p, false));
}

// Exact bytes, GM -> UB: block i lands at dst + i * (blockLen rounded up to 32 + dstStride * 32);
// GM blocks are srcStride bytes apart. With isPad, rightPadding elements after each block take
// paddingValue.
template <class T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                 const DataCopyPadExtParams<T>& pad) {
  npu::detail::Core& core = npu::detail::current();
  detail_::check_pad_params(core, "DataCopyPad", p);
  if (pad.leftPadding != 0 || (pad.isPad && p.blockLen + std::uint64_t{pad.rightPadding} * sizeof(T) >
                                                (std::uint64_t{p.blockLen} + 31) / 32 * 32)) [[unlikely]] {
    npu::detail::kernel_fail(core,
                             "DataCopyPad: padding must stay within each block's last 32-byte granule (and "
                             "left padding is not emulated)");
  }
  detail_::copy_in_checked("DataCopyPad", dst, src, detail_::pad_blocks(p, true), pad.isPad ? &pad.paddingValue : nullptr,
                           pad.isPad ? pad.rightPadding : 0);
}

// Exact bytes, UB -> GM: block i is read at src + i * (blockLen rounded up to 32 + srcStride * 32)
// and written blockLen bytes plus dstStride bytes apart in GM.
template <class T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
  detail_::check_pad_params(npu::detail::current(), "DataCopyPad", p);
  detail_::copy_out_checked("DataCopyPad", dst, src, detail_::pad_blocks(p, false));
}

// DataCopyPad's older form: DataCopyParams (blockLen in bytes here, strides uint16: GM in bytes,
// UB in 32-byte blocks) with DataCopyPadParams; the narrower limits of that struct [S9].
template <class T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p,
                 const DataCopyPadParams& pad) {
  detail_::check_pad_params(npu::detail::current(), "DataCopyPad", p);
  DataCopyPadExtParams<T> ext{pad.isPad, pad.leftPadding, pad.rightPadding, T{}};
  std::memcpy(&ext.paddingValue, &pad.paddingValue, sizeof(T) < 8 ? sizeof(T) : 8);
  DataCopyPad(dst, src, DataCopyExtParams{p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0}, ext);
}

template <class T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
  detail_::check_pad_params(npu::detail::current(), "DataCopyPad", p);
  DataCopyPad(dst, src, DataCopyExtParams{p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0});
}

// MTE3 copies add into GM (L2 atomics) until SetAtomicNone: CANN's default reduction of dgamma.
template <class T>
void SetAtomicAdd() {
  static_assert(std::is_same_v<T, float>, "the emulator models MTE3 atomic add for float only");
  npu::detail::current().atomic_add = true;
}
inline void SetAtomicNone() { npu::detail::current().atomic_add = false; }

}  // namespace opreg::npu::AscendC
