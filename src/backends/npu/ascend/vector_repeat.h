// The repeat forms of the vector instructions ("tensor high-dimension" API): `repeatTimes`
// repeats of up to 256 bytes (8 blocks of 32 bytes), the lanes of each repeat chosen by a mask,
// each operand's blocks placed by its block and repeat strides. One instruction, repeatTimes
// repeats. Rules (docs/backends/npu.md, "repeat form"): repeatTimes 0..255; the mask in either
// of its forms, continuous (a count of leading lanes) or bitwise (uint64_t mask[2], bit i of
// mask[i / 64] for lane i); each stride within its device field; the operands 32-byte aligned
// (WholeReduceSum's dst: element-aligned) and large enough for the lanes the repeats touch.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/npu/ascend/vector.h"

namespace opreg::npu::AscendC {

namespace detail_ {

[[noreturn]] void bad_repeat(const char* api, std::int64_t value, const char* what);
[[noreturn]] void bad_field(const char* api, const char* field, std::int64_t value, std::int64_t max);

// The mask argument, in either form [S28]: a count of leading lanes (continuous mode) or a
// pointer to uint64_t[2] (bitwise mode). A kernel passes either, as to the device's two overloads.
class Mask {
 public:
  Mask(std::uint64_t count) : bits_{count, 0}, continuous_(true) {}           // NOLINT: as the device's overload
  Mask(const std::uint64_t* bits) : bits_{bits[0], bits[1]}, continuous_(false) {}  // NOLINT

  // Refuses a mask the device does not take for T's lanes; returns the last lane it selects.
  template <class T>
  std::uint32_t check(const char* api) const {
    constexpr std::uint32_t lanes = ONE_REPEAT_BYTE_SIZE / sizeof(T);
    if (continuous_) {
      if (bits_[0] < 1 || bits_[0] > lanes) [[unlikely]] {
        bad_repeat(api, static_cast<std::int64_t>(bits_[0]),
                   sizeof(T) == 4 ? "mask (continuous mode) is 1..64 for 32-bit types"
                                  : "mask (continuous mode) is 1..128 for 16-bit types");
      }
      return static_cast<std::uint32_t>(bits_[0]) - 1;
    }
    if (sizeof(T) == 4 && bits_[1] != 0) [[unlikely]] {
      bad_repeat(api, static_cast<std::int64_t>(bits_[1]),
                 "mask[1] (bitwise mode) must be 0 for 32-bit types: a repeat has 64 lanes, mask[0]'s bits");
    }
    if (bits_[0] == 0 && bits_[1] == 0) [[unlikely]] {
      bad_repeat(api, 0, "mask (bitwise mode) selects no lane: mask[0] and mask[1] are both 0");
    }
    return bits_[1] != 0 ? 127 - static_cast<std::uint32_t>(std::countl_zero(bits_[1]))
                         : 63 - static_cast<std::uint32_t>(std::countl_zero(bits_[0]));
  }
  bool on(std::uint32_t lane) const {
    return continuous_ ? lane < bits_[0] : ((bits_[lane / 64] >> (lane % 64)) & 1U) != 0;
  }

 private:
  std::uint64_t bits_[2];
  bool continuous_;
};


inline void check_repeats(const char* api, std::int32_t repeatTimes) {
  if (repeatTimes < 0 || repeatTimes > static_cast<std::int32_t>(MAX_REPEAT_TIMES)) [[unlikely]] {
    bad_repeat(api, repeatTimes, "repeatTimes is 0..255 (a uint8 on the device): split the work into several calls");
  }
}

// Where an operand's blocks lie: block b of repeat r at (r * rep + b * blk) blocks.
struct Placement {
  std::uint64_t blk;
  std::uint64_t rep;
  template <class T>
  std::uint64_t at(std::int32_t r, std::uint32_t lane) const {
    constexpr std::uint32_t per_block = ONE_BLK_SIZE / sizeof(T);
    return (static_cast<std::uint64_t>(r) * rep + lane / per_block * blk) * per_block + lane % per_block;
  }
  // Elements the operand spans: up to the block of the last selected lane of the last repeat.
  template <class T>
  std::uint64_t span(std::int32_t repeats, std::uint32_t last_lane) const {
    constexpr std::uint32_t per_block = ONE_BLK_SIZE / sizeof(T);
    if (repeats == 0) return 0;
    return (static_cast<std::uint64_t>(repeats - 1) * rep + last_lane / per_block * blk + 1) * per_block;
  }
};

// Field `params`.`operand``stride` of a repeat-parameter struct, refused if the device's field
// cannot hold it.
template <class F>
void check_field(const char* api, const char* params, const char* operand, const char* stride,
                 const RepeatField<F>& f) {
  if (f.value() < 0 || f.value() > RepeatField<F>::kMax) [[unlikely]] {
    bad_field(api, (std::string(params) + "." + operand + stride).c_str(), f.value(), RepeatField<F>::kMax);
  }
}

// An operand's placement from its block and repeat strides in `params` (the struct's name),
// each checked against its device field.
template <class B, class R>
Placement placement(const char* api, const char* params, const char* operand, const RepeatField<B>& blk,
                    const RepeatField<R>& rep) {
  check_field(api, params, operand, "BlkStride", blk);
  check_field(api, params, operand, "RepStride", rep);
  return {std::uint64_t(blk.value()), std::uint64_t(rep.value())};
}

// An operand's blocks as the cost model walks them (Placement: block and repeat strides in blocks).
template <class T>
npu::detail::BlockWalk walk_of(const npu::detail::Core& core, const LocalTensor<T>& t, const Placement& p) {
  return {static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(t.GetPhyAddr()) - core.ub), p.blk, p.rep, 8};
}

// Counts and charges one repeat-form instruction; dst, src0, src1: its operands' block walks
// (nullptr: none, or not charged for bank conflicts).
inline void charge_repeats(npu::detail::InstrCost cost, std::int32_t repeatTimes, npu::detail::Buffer* w,
                           npu::detail::Buffer* r0, npu::detail::Buffer* r1, const npu::detail::BlockWalk* dst = nullptr,
                           const npu::detail::BlockWalk* src0 = nullptr, const npu::detail::BlockWalk* src1 = nullptr) {
  npu::detail::Core& core = npu::detail::current();
  core.counters.vector_repeats += static_cast<std::uint64_t>(repeatTimes);
  core.counters.vector_instructions += 1;
  npu::detail::charge_vector(core, static_cast<std::uint64_t>(repeatTimes), 1, cost, w, dst, r0, src0, r1, src1);
}

template <class T, bool FloatOnly>
constexpr void require_type() {
  static_assert(kVectorArith<T>, "the repeat form runs on the vector unit's types (float, half, int16, int32)");
  static_assert(!FloatOnly || kFloatLike<T>, "this instruction takes float or half");
}

template <class T, class F>
void binary_repeat(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,
                   Mask mask, std::int32_t repeatTimes, const BinaryRepeatParams& p, F f) {
  check_repeats(api, repeatTimes);
  const std::uint32_t last = mask.check<T>(api);
  constexpr const char* kParams = "BinaryRepeatParams";
  const Placement pd = placement(api, kParams, "dst", p.dstBlkStride, p.dstRepStride);
  const Placement p0 = placement(api, kParams, "src0", p.src0BlkStride, p.src0RepStride);
  const Placement p1 = placement(api, kParams, "src1", p.src1BlkStride, p.src1RepStride);
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* r0 = Access::use(core, a, p0.span<T>(repeatTimes, last), Use::vector_read, api, "src0");
  npu::detail::Buffer* r1 = Access::use(core, b, p1.span<T>(repeatTimes, last), Use::vector_read, api, "src1");
  npu::detail::Buffer* w = Access::use(core, dst, pd.span<T>(repeatTimes, last), Use::vector_write, api, "dst");
  if (repeatTimes == 0) return;
  for (std::int32_t r = 0; r < repeatTimes; ++r) {
    for (std::uint32_t e = 0; e <= last; ++e) {
      if (!mask.on(e)) continue;
      map2(dst.GetPhyAddr() + pd.at<T>(r, e), a.GetPhyAddr() + p0.at<T>(r, e), b.GetPhyAddr() + p1.at<T>(r, e), 1, f);
    }
  }
  const npu::detail::BlockWalk wd = walk_of(core, dst, pd), w0 = walk_of(core, a, p0), w1 = walk_of(core, b, p1);
  charge_repeats(npu::detail::instr_cost(api, sizeof(T) == 2), repeatTimes, w, r0, r1, &wd, &w0, &w1);
}

template <class T, class F>
void unary_repeat(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, Mask mask,
                  std::int32_t repeatTimes, const UnaryRepeatParams& p, F f) {
  check_repeats(api, repeatTimes);
  const std::uint32_t last = mask.check<T>(api);
  const Placement pd = placement(api, "UnaryRepeatParams", "dst", p.dstBlkStride, p.dstRepStride);
  const Placement ps = placement(api, "UnaryRepeatParams", "src", p.srcBlkStride, p.srcRepStride);
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* r0 = Access::use(core, a, ps.span<T>(repeatTimes, last), Use::vector_read, api, "src");
  npu::detail::Buffer* w = Access::use(core, dst, pd.span<T>(repeatTimes, last), Use::vector_write, api, "dst");
  if (repeatTimes == 0) return;
  for (std::int32_t r = 0; r < repeatTimes; ++r) {
    for (std::uint32_t e = 0; e <= last; ++e) {
      if (mask.on(e)) map1(dst.GetPhyAddr() + pd.at<T>(r, e), a.GetPhyAddr() + ps.at<T>(r, e), 1, f);
    }
  }
  const npu::detail::BlockWalk wd = walk_of(core, dst, pd), ws = walk_of(core, a, ps);
  charge_repeats(npu::detail::instr_cost(api, sizeof(T) == 2), repeatTimes, w, r0, nullptr, &wd, &ws);
}

}  // namespace detail_

// ---- dst = src0 op src1, repeat form: Add(dst, src0, src1, mask, repeatTimes, BinaryRepeatParams)
#define OPREG_NPU_BINARY_REPEAT(Name, FloatOnly, expr)                                                        \
  template <class T>                                                                                       \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,              \
            detail_::Mask mask, std::int32_t repeatTimes, const BinaryRepeatParams& repeatParams) {          \
    detail_::require_type<T, FloatOnly>();                                                                 \
    detail_::binary_repeat(#Name, dst, src0, src1, mask, repeatTimes, repeatParams,                        \
                           [](auto a, auto b) { return expr; });                                           \
  }
OPREG_NPU_BINARY_REPEAT(Add, false, a + b)
OPREG_NPU_BINARY_REPEAT(Sub, false, a - b)
OPREG_NPU_BINARY_REPEAT(Mul, false, a * b)
OPREG_NPU_BINARY_REPEAT(Div, true, a / b)
OPREG_NPU_BINARY_REPEAT(Max, false, a > b ? a : b)
OPREG_NPU_BINARY_REPEAT(Min, false, a < b ? a : b)
#undef OPREG_NPU_BINARY_REPEAT

// ---- dst = src op scalar, repeat form: Adds(dst, src, scalar, mask, repeatTimes, UnaryRepeatParams)
#define OPREG_NPU_SCALAR_REPEAT(Name, expr)                                                                 \
  template <class T>                                                                                     \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, detail_::Mask mask, \
            std::int32_t repeatTimes, const UnaryRepeatParams& repeatParams) {                             \
    detail_::require_type<T, false>();                                                                   \
    const auto s = detail_::lane(scalarValue);                                                           \
    detail_::unary_repeat(#Name, dst, src, mask, repeatTimes, repeatParams, [s](auto a) { return expr; }); \
  }
OPREG_NPU_SCALAR_REPEAT(Adds, a + s)
OPREG_NPU_SCALAR_REPEAT(Muls, a * s)
OPREG_NPU_SCALAR_REPEAT(Maxs, a > s ? a : s)
OPREG_NPU_SCALAR_REPEAT(Mins, a < s ? a : s)
#undef OPREG_NPU_SCALAR_REPEAT

// ---- dst = f(src), repeat form: Exp(dst, src, mask, repeatTimes, UnaryRepeatParams)
#define OPREG_NPU_UNARY_REPEAT(Name, expr, approximated)                                              \
  template <class T>                                                                                \
  void Name(const LocalTensor<T>& dst, const LocalTensor<T>& src, detail_::Mask mask,                 \
            std::int32_t repeatTimes, const UnaryRepeatParams& repeatParams) {                        \
    detail_::require_type<T, true>();                                                               \
    detail_::maybe_approximate<approximated>(                                                       \
        [&](auto g) { detail_::unary_repeat(#Name, dst, src, mask, repeatTimes, repeatParams, g); }, \
        [](float a) { return expr; });                                                              \
  }
OPREG_NPU_FLOAT_UNARIES(OPREG_NPU_UNARY_REPEAT)
#undef OPREG_NPU_UNARY_REPEAT

// ---- dst[r * dstRepStride] = the sum of repeat r's selected lanes [S24]: each repeat summed as
// ReduceSum sums one (a tree of adjacent pairs, unselected lanes 0) [S23]. dstRepStride counts
// dst elements (one per reduced repeat); srcBlkStride and srcRepStride count 32-byte blocks.
// dst need only be element-aligned, src is 32-byte aligned [S24].
template <class T>
void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, detail_::Mask mask,
                    std::int32_t repeatTime, std::int32_t dstRepStride, std::int32_t srcBlkStride,
                    std::int32_t srcRepStride) {
  static_assert(std::is_same_v<T, float>, "WholeReduceSum: the emulator sums float");
  constexpr const char* api = "WholeReduceSum";
  detail_::check_repeats(api, repeatTime);
  const std::uint32_t last = mask.check<T>(api);
  for (const std::int32_t s : {dstRepStride, srcBlkStride, srcRepStride}) {
    if (s < 0) [[unlikely]] detail_::bad_repeat(api, s, "a stride is not negative");
  }
  const detail_::Placement ps{std::uint64_t(srcBlkStride), std::uint64_t(srcRepStride)};
  const std::uint64_t dst_span = repeatTime == 0 ? 0 : std::uint64_t(repeatTime - 1) * dstRepStride + 1;
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* r0 = detail_::Access::use(core, src, ps.span<T>(repeatTime, last), detail_::Use::vector_read,
                                                 api, "src");
  npu::detail::Buffer* w =
      detail_::Access::use(core, dst, dst_span, detail_::Use::vector_write, api, "dst", sizeof(T));
  if (repeatTime == 0) return;
  for (std::int32_t r = 0; r < repeatTime; ++r) {
    float lanes[64];
    for (std::uint32_t e = 0; e < 64; ++e) lanes[e] = e <= last && mask.on(e) ? src.GetPhyAddr()[ps.at<T>(r, e)] : 0.0f;
    dst.GetPhyAddr()[std::uint64_t(r) * dstRepStride] = detail_::tree(lanes, 64, 0.0f, [](float a, float b) { return a + b; });
  }
  detail_::charge_repeats(npu::detail::instr_cost(api, sizeof(T) == 2), repeatTime, w, r0, nullptr);
}

// ---- Brcb [S29]: repeat r reads src0[8r .. 8r + 7] and fills 8 blocks of dst, block j (at
// r * dstRepStride + j * dstBlkStride blocks) with copies of src0[8r + j]: per-row scalars
// broadcast to 32-byte blocks, which a repeat-form instruction then reads with block stride 0.
template <class T>
void Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src0, std::int32_t repeatTime,
          const BrcbRepeatParams& repeatParams) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Brcb: 16- or 32-bit elements");
  constexpr const char* api = "Brcb";
  constexpr std::uint32_t per_block = ONE_BLK_SIZE / sizeof(T);
  detail_::check_repeats(api, repeatTime);
  const detail_::Placement pd =
      detail_::placement(api, "BrcbRepeatParams", "dst", repeatParams.dstBlkStride, repeatParams.dstRepStride);
  npu::detail::Core& core = npu::detail::current();
  // dst: through the last lane of block 7 of the last repeat.
  npu::detail::Buffer* r0 =
      detail_::Access::use(core, src0, std::uint64_t(8) * repeatTime, detail_::Use::vector_read, api, "src0");
  npu::detail::Buffer* w =
      detail_::Access::use(core, dst, pd.span<T>(repeatTime, 8 * per_block - 1), detail_::Use::vector_write, api, "dst");
  if (repeatTime == 0) return;
  for (std::int32_t r = 0; r < repeatTime; ++r) {
    for (std::uint32_t j = 0; j < 8; ++j) {
      T* block = dst.GetPhyAddr() + pd.at<T>(r, j * per_block);
      const T v = src0.GetPhyAddr()[8 * r + j];
      for (std::uint32_t k = 0; k < per_block; ++k) block[k] = v;
    }
  }
  detail_::charge_repeats(npu::detail::instr_cost(api, sizeof(T) == 2), repeatTime, w, r0, nullptr);
}

}  // namespace opreg::npu::AscendC
