// Vector instructions (Ascend C's count-form API; the repeat forms are in vector_repeat.h): they
// read and write LocalTensors only, so a GM tensor handed to one does not compile, and a
// type-erased address outside the core's UB is refused when the instruction runs. An instruction covers up to 255 repeats of 256 bytes; a
// longer count is several instructions, and the counters and the cost model charge per
// instruction and per repeat, never per element. Arithmetic follows the A2 vector unit's types:
// float and half (rounded to half after each operation), int16/int32 for the integer ops; int64
// runs element by element on the scalar unit (counted as a scalar fallback); bf16 has no
// arithmetic (Cast it to float).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "backends/npu/ascend/convert.h"
#include "backends/npu/ascend/pipe.h"
#include "backends/npu/ascend/tensor.h"

namespace opreg::npu::AscendC {

namespace detail_ {

template <class T>
inline constexpr bool kFloatLike = std::is_same_v<T, float> || std::is_same_v<T, half>;
template <class T>
inline constexpr bool kVectorArith =
    kFloatLike<T> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int16_t>;
// Types only some profiles' vector units compute on (Profile::native_bf16_int64): on the others
// int64 runs element by element on the scalar unit and bf16 is refused (Cast to float first).
template <class T>
inline constexpr bool kScalarFallback = std::is_same_v<T, std::int64_t>;
template <class T>
inline constexpr bool kProfileArith = std::is_same_v<T, bfloat16_t> || kScalarFallback<T>;

// A count-form operand for the cost model: its first element in UB (nullptr: none) and its
// element size.
struct Operand {
  const void* p = nullptr;
  std::uint64_t bytes = 0;
};

// Counts the instruction(s) and charges them to the vector pipe (or, for a scalar fallback, to
// the scalar unit, element by element). A repeat covers 256 bytes of elements of elem_bytes (a
// Cast's 16-bit side covers 4 blocks of its own); the operands are contiguous.
template <class T>
inline void issue(npu::detail::Core& core, npu::detail::InstrCost cost, std::uint64_t elems, std::uint64_t elem_bytes,
                  npu::detail::Buffer* w, npu::detail::Buffer* r0, npu::detail::Buffer* r1, Operand d, Operand a = {},
                  Operand b = {}) {
  if (elems == 0) return;
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    if (!core.native_bf16_int64) [[unlikely]] {
      npu::detail::kernel_fail(core, std::string("no bf16 arithmetic on the vector unit of ") + core.launch_profile +
                                         " (A2/A3): Cast to float first (the 950PR computes on bf16)");
    }
  }
  if (kScalarFallback<T> && !core.native_bf16_int64) {
    ++core.counters.scalar_fallbacks;
    double start = core.time.issue;
    for (const npu::detail::Buffer* r : {r0, r1}) {
      if (r != nullptr && r->write_done > start) start = r->write_done;
    }
    core.time.issue = start + static_cast<double>(elems) * core.cycle_ns;
    if (w != nullptr) w->write_done = core.time.issue;
  } else {
    const std::uint64_t repeats = (elems * elem_bytes + ONE_REPEAT_BYTE_SIZE - 1) / ONE_REPEAT_BYTE_SIZE;
    const std::uint64_t instructions = (repeats + MAX_REPEAT_TIMES - 1) / MAX_REPEAT_TIMES;
    core.counters.vector_repeats += repeats;
    core.counters.vector_instructions += instructions;
    npu::detail::BlockWalk walks[3];
    const npu::detail::BlockWalk* used[3] = {};
    const Operand ops[3] = {d, a, b};
    for (int i = 0; i < 3; ++i) {
      if (ops[i].p == nullptr) continue;
      const std::uint64_t blocks = 8 * ops[i].bytes / elem_bytes;
      walks[i] = {static_cast<std::uint64_t>(static_cast<const std::byte*>(ops[i].p) - core.ub), 1, blocks, blocks};
      used[i] = &walks[i];
    }
    npu::detail::charge_vector(core, repeats, instructions, cost, w, used[0], r0, used[1], r1, used[2]);
  }
}

// d[i] = f(a[i], b[i]) in the lane type (float for half).
template <class T, class F>
inline void map2(T* d, const T* a, const T* b, std::uint32_t n, F f) {
  if constexpr (std::is_same_v<T, half>) {
    const float* tab = npu::detail::half_table();
    for (std::uint32_t i = 0; i < n; ++i) d[i].bits = npu::detail::float_to_half(f(tab[a[i].bits], tab[b[i].bits]));
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    for (std::uint32_t i = 0; i < n; ++i) {
      d[i].bits = npu::detail::float_to_bf16(f(npu::detail::bf16_to_float(a[i].bits), npu::detail::bf16_to_float(b[i].bits)));
    }
  } else {
    for (std::uint32_t i = 0; i < n; ++i) d[i] = static_cast<T>(f(a[i], b[i]));
  }
}

template <class T, class F>
inline void map1(T* d, const T* a, std::uint32_t n, F f) {
  if constexpr (std::is_same_v<T, half>) {
    const float* tab = npu::detail::half_table();
    for (std::uint32_t i = 0; i < n; ++i) d[i].bits = npu::detail::float_to_half(f(tab[a[i].bits]));
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    for (std::uint32_t i = 0; i < n; ++i) d[i].bits = npu::detail::float_to_bf16(f(npu::detail::bf16_to_float(a[i].bits)));
  } else {
    for (std::uint32_t i = 0; i < n; ++i) d[i] = static_cast<T>(f(a[i]));
  }
}

template <class T>
inline auto lane(const T& v) {
  if constexpr (std::is_same_v<T, half>) {
    return npu::detail::half_table()[v.bits];
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return npu::detail::bf16_to_float(v.bits);
  } else {
    return v;
  }
}

template <class T, class F>
void binary(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,
            std::uint32_t count, F f) {
  static_assert(kVectorArith<T> || kProfileArith<T>, "no vector arithmetic on this type");
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* r0 = Access::use(core, a, count, Use::vector_read, api, "src0");
  npu::detail::Buffer* r1 = Access::use(core, b, count, Use::vector_read, api, "src1");
  npu::detail::Buffer* w = Access::use(core, dst, count, Use::vector_write, api, "dst");
  issue<T>(core, npu::detail::instr_cost(api, sizeof(T) == 2), count, sizeof(T), w, r0, r1, {dst.GetPhyAddr(), sizeof(T)},
           {a.GetPhyAddr(), sizeof(T)},
           {b.GetPhyAddr(), sizeof(T)});
  map2(dst.GetPhyAddr(), a.GetPhyAddr(), b.GetPhyAddr(), count, f);
}

template <class T, class F>
void unary(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, std::uint32_t count, F f) {
  static_assert(kVectorArith<T> || kProfileArith<T>, "no vector arithmetic on this type");
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* r0 = Access::use(core, a, count, Use::vector_read, api, "src");
  npu::detail::Buffer* w = Access::use(core, dst, count, Use::vector_write, api, "dst");
  issue<T>(core, npu::detail::instr_cost(api, sizeof(T) == 2), count, sizeof(T), w, r0, nullptr,
           {dst.GetPhyAddr(), sizeof(T)}, {a.GetPhyAddr(), sizeof(T)});
  map1(dst.GetPhyAddr(), a.GetPhyAddr(), count, f);
}

// One repeat's worth of floats (n <= 64; masked-off lanes take `identity`) combined as a binary
// tree of adjacent pairs: (x0 + x1), (x2 + x3), ..., then pairs of those, as the ReduceSum page
// describes a repeat's sum [S23].
template <class F>
inline float tree(const float* p, std::uint32_t n, float identity, F combine) {
  float v[64];
  std::uint32_t i = 0;
  for (; i < n; ++i) v[i] = p[i];
  for (; i < 64; ++i) v[i] = identity;
  for (std::uint32_t s = 32; s > 0; s /= 2) {
    for (std::uint32_t k = 0; k < s; ++k) v[k] = combine(v[2 * k], v[2 * k + 1]);
  }
  return v[0];
}

// dst[0] = src combined over `count` elements [S23]: each 64-float repeat as a tree of adjacent
// pairs; the repeats' results then in order (the A2/A3 count form, "method 2"), or, on the 950PR
// ("method 1"), as a tree again, one level of repeats at a time through `work`. Counted as one
// instruction per level of repeats, as the hardware's reduction runs.
template <class F>
void reduce(const char* api, const LocalTensor<float>& dst, const LocalTensor<float>& src,
            const LocalTensor<float>& work, std::uint32_t count, float identity, F combine) {
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* r = Access::use(core, src, count, Use::vector_read, api, "src");
  // dst: element-aligned (the reductions' exception to the 32-byte rule) [S23][S24].
  npu::detail::Buffer* w = Access::use(core, dst, 1, Use::vector_write, api, "dst", sizeof(float));
  npu::detail::Buffer* k = Access::use(core, work, ((count + 63) / 64 + 7) / 8 * 8, Use::vector_write, api, "work");
  float* out = work.GetPhyAddr();
  const float* in = src.GetPhyAddr();
  std::uint64_t repeats = 0;
  std::uint64_t instructions = 0;
  float result = identity;
  bool first_level = true;
  for (std::uint32_t n = count; n > 0;) {
    const std::uint32_t m = (n + 63) / 64;
    for (std::uint32_t j = 0; j < m; ++j)
      out[j] = tree(in + 64 * j, n - 64 * j < 64 ? n - 64 * j : 64, identity, combine);
    repeats += m;
    instructions += (m + MAX_REPEAT_TIMES - 1) / MAX_REPEAT_TIMES;
    in = out;
    if (m == 1) {
      result = out[0];
      break;
    }
    if (first_level && !core.reduce_tree_across_repeats) {
      // The repeats' sums in order; charged as the tree's levels would be (same counters on every
      // profile).
      result = out[0];
      for (std::uint32_t j = 1; j < m; ++j) result = combine(result, out[j]);
      for (std::uint32_t left = m; left > 1; left = (left + 63) / 64) {
        const std::uint32_t next = (left + 63) / 64;
        repeats += next;
        instructions += (next + MAX_REPEAT_TIMES - 1) / MAX_REPEAT_TIMES;
      }
      break;
    }
    first_level = false;
    n = m;
  }
  dst.GetPhyAddr()[0] = result;
  if (count != 0) {
    core.counters.vector_repeats += repeats;
    core.counters.vector_instructions += instructions;
    // Charged as the reduction's instructions, without bank-group walks (one cycle a repeat there).
    npu::detail::charge_vector(core, repeats, instructions, npu::detail::instr_cost(api, false), w, nullptr, r,
                               nullptr, k, nullptr);
    k->write_done = core.time.vec;
  }
}

}  // namespace detail_

// ---- dst = src0 op src1
template <class T>
void Add(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, std::uint32_t calCount) {
  detail_::binary("Add", dst, src0, src1, calCount, [](auto a, auto b) { return a + b; });
}
template <class T>
void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, std::uint32_t calCount) {
  detail_::binary("Sub", dst, src0, src1, calCount, [](auto a, auto b) { return a - b; });
}
template <class T>
void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, std::uint32_t calCount) {
  detail_::binary("Mul", dst, src0, src1, calCount, [](auto a, auto b) { return a * b; });
}
template <class T>
void Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, std::uint32_t calCount) {
  static_assert(detail_::kFloatLike<T>, "Div: float or half");
  detail_::binary("Div", dst, src0, src1, calCount, [](auto a, auto b) { return a / b; });
}
template <class T>
void Max(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, std::uint32_t calCount) {
  detail_::binary("Max", dst, src0, src1, calCount, [](auto a, auto b) { return a > b ? a : b; });
}
template <class T>
void Min(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, std::uint32_t calCount) {
  detail_::binary("Min", dst, src0, src1, calCount, [](auto a, auto b) { return a < b ? a : b; });
}

// ---- dst = src op scalar
template <class T>
void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, std::uint32_t calCount) {
  const auto s = detail_::lane(scalarValue);
  detail_::unary("Adds", dst, src, calCount, [s](auto a) { return a + s; });
}
template <class T>
void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, std::uint32_t calCount) {
  const auto s = detail_::lane(scalarValue);
  detail_::unary("Muls", dst, src, calCount, [s](auto a) { return a * s; });
}
template <class T>
void Maxs(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, std::uint32_t calCount) {
  const auto s = detail_::lane(scalarValue);
  detail_::unary("Maxs", dst, src, calCount, [s](auto a) { return a > s ? a : s; });
}
template <class T>
void Mins(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, std::uint32_t calCount) {
  const auto s = detail_::lane(scalarValue);
  detail_::unary("Mins", dst, src, calCount, [s](auto a) { return a < s ? a : s; });
}

// The float unary instructions, each X(Name, f) with f of a float `a`: their contiguous form below,
// their repeat form in vector_repeat.h.
// Each as X(name, f(a), approximated): whether the device's result may miss the correctly
// rounded one (Abs is exact).
#define OPREG_NPU_FLOAT_UNARIES(X)    \
  X(Exp, std::exp(a), true)           \
  X(Ln, std::log(a), true)            \
  X(Sqrt, std::sqrt(a), true)         \
  X(Rsqrt, 1.0f / std::sqrt(a), true) \
  X(Reciprocal, 1.0f / a, true)       \
  X(Abs, std::fabs(a), false)

namespace detail_ {

// Approximate math (Emulator::set_approx_math): r, the result for input a, moved by -2 to +2 ulp,
// the amount fixed by a's bits (the same input always gives the same result). An assumption
// where no error bound is published: docs/backends/npu.md. NaN, infinities and zeros stay, and a
// result keeps its sign and stays finite: the steps stop short of zero and of infinity.
inline float within_2ulp(float r, float a) {
  if (!std::isfinite(r) || r == 0.0f) return r;
  std::uint32_t h = std::bit_cast<std::uint32_t>(a) * 0x9E3779B1u;
  h ^= h >> 15;
  const int steps = static_cast<int>(h % 5) - 2;
  const float toward = steps < 0 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  for (int i = 0; i < (steps < 0 ? -steps : steps); ++i) {
    const float next = std::nextafter(r, toward);
    if (next == 0.0f || !std::isfinite(next)) break;
    r = next;
  }
  return r;
}

// f, or with approximate math on and `approximated`, within 2 ulp of it.
template <bool Approximated, class Apply, class F>
void maybe_approximate(Apply&& apply, F f) {
  if (Approximated && npu::detail::current().approx_math) {
    apply([f](float a) { return within_2ulp(f(a), a); });
  } else {
    apply(f);
  }
}

}  // namespace detail_

// ---- dst = f(src), float and half
#define OPREG_NPU_FLOAT_UNARY(name, f, approximated)                                                 \
  template <class T>                                                                                 \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, std::uint32_t calCount) {          \
    static_assert(detail_::kFloatLike<T>, #name ": float or half");                                  \
    detail_::maybe_approximate<approximated>(                                                        \
        [&](auto g) { detail_::unary(#name, dst, src, calCount, g); }, [](float a) { return f; }); \
  }
OPREG_NPU_FLOAT_UNARIES(OPREG_NPU_FLOAT_UNARY)
#undef OPREG_NPU_FLOAT_UNARY

// ---- dst[i] = scalar
template <class T>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, std::uint32_t calCount) {
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* w = detail_::Access::use(core, dst, calCount, detail_::Use::vector_write, "Duplicate", "dst");
  detail_::issue<T>(core, npu::detail::instr_cost("Duplicate", sizeof(T) == 2), calCount, sizeof(T), w, nullptr,
                    nullptr, {dst.GetPhyAddr(), sizeof(T)});
  T* d = dst.GetPhyAddr();
  for (std::uint32_t i = 0; i < calCount; ++i) d[i] = scalarValue;
}

// ---- dst = src converted: half/bf16 -> float (exact), float -> half/bf16 (CAST_RINT; CAST_NONE
// rounds the same way when the value does not fit).
template <class D, class S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, RoundMode mode, std::uint32_t calCount) {
  constexpr bool widen = std::is_same_v<D, float> && (std::is_same_v<S, half> || std::is_same_v<S, bfloat16_t>);
  constexpr bool narrow = std::is_same_v<S, float> && (std::is_same_v<D, half> || std::is_same_v<D, bfloat16_t>);
  static_assert(widen || narrow, "Cast: the emulator converts between float and half or bfloat16_t");
  npu::detail::Core& core = npu::detail::current();
  if (narrow && mode != RoundMode::CAST_RINT && mode != RoundMode::CAST_NONE) [[unlikely]] {
    npu::detail::kernel_fail(core, "Cast: only CAST_RINT and CAST_NONE are emulated for float -> 16-bit");
  }
  npu::detail::Buffer* r = detail_::Access::use(core, src, calCount, detail_::Use::vector_read, "Cast", "src");
  npu::detail::Buffer* w = detail_::Access::use(core, dst, calCount, detail_::Use::vector_write, "Cast", "dst");
  // A repeat is 64 floats: the float side's 8 blocks, the 16-bit side's 4. Its cost by direction
  // and 16-bit type [S33]: from bf16 6 + 2 a repeat, from half 6 + 1, to bf16 3 + 1.5, to half 4 + 1.
  constexpr bool bf16 = std::is_same_v<D, bfloat16_t> || std::is_same_v<S, bfloat16_t>;
  constexpr npu::detail::InstrCost cost = widen ? (bf16 ? npu::detail::InstrCost{6, 2} : npu::detail::InstrCost{6, 1})
                                                : (bf16 ? npu::detail::InstrCost{3, 1.5} : npu::detail::InstrCost{4, 1});
  detail_::issue<float>(core, cost, calCount, 4, w, r, nullptr, {dst.GetPhyAddr(), sizeof(D)},
                        {src.GetPhyAddr(), sizeof(S)});
  D* d = dst.GetPhyAddr();
  const S* s = src.GetPhyAddr();
  if constexpr (std::is_same_v<S, half>) {
    const float* tab = npu::detail::half_table();
    for (std::uint32_t i = 0; i < calCount; ++i) d[i] = tab[s[i].bits];
  } else if constexpr (std::is_same_v<S, bfloat16_t>) {
    for (std::uint32_t i = 0; i < calCount; ++i) d[i] = npu::detail::bf16_to_float(s[i].bits);
  } else if constexpr (std::is_same_v<D, half>) {
    for (std::uint32_t i = 0; i < calCount; ++i) d[i].bits = npu::detail::float_to_half(s[i]);
  } else {
    for (std::uint32_t i = 0; i < calCount; ++i) d[i].bits = npu::detail::float_to_bf16(s[i]);
  }
}

// ---- Gather, the count form [S35]: dst[i] = the element of src at byte srcBaseAddr + srcOffset[i]
// from src's start, for i < count (a permutation or a repetition of src's elements: vgather).
// 16- and 32-bit elements, bf16 included (it moves data, no arithmetic); dst, src and srcOffset
// 32-byte aligned; every offset (with the base) a multiple of the element size and inside src (the
// device leaves an offset outside src undefined: here it is an error naming the lane). dst must
// not overlap src or srcOffset. Charged as vgather: 5 + 12 cycles a repeat of 64 32-bit elements,
// 7 + 24 a repeat of 128 16-bit ones [S33].
template <class T>
void Gather(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<std::uint32_t>& srcOffset,
            const std::uint32_t srcBaseAddr, const std::uint32_t count) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Gather: 16- or 32-bit elements");
  constexpr const char* api = "Gather";
  npu::detail::Core& core = npu::detail::current();
  npu::detail::Buffer* ro = detail_::Access::use(core, srcOffset, count, detail_::Use::vector_read, api, "srcOffset");
  const std::uint32_t* off = srcOffset.GetPhyAddr();
  std::uint64_t reach = 0;  // src elements up to the farthest one read
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t at = std::uint64_t{srcBaseAddr} + off[i];
    if (at % sizeof(T) != 0 || at / sizeof(T) >= src.GetSize()) [[unlikely]] {
      npu::detail::kernel_fail(core, std::string(api) + ": srcOffset[" + std::to_string(i) + "] = " +
                                         std::to_string(off[i]) + " (with srcBaseAddr " + std::to_string(srcBaseAddr) +
                                         ") is not an element of src (" + std::to_string(src.GetSize()) + " elements of " +
                                         std::to_string(sizeof(T)) + " bytes): offsets are bytes from src's start, "
                                         "element-aligned and inside it");
    }
    reach = std::max(reach, at / sizeof(T) + 1);
  }
  npu::detail::Buffer* rs = detail_::Access::use(core, src, reach, detail_::Use::vector_read, api, "src");
  npu::detail::Buffer* w = detail_::Access::use(core, dst, count, detail_::Use::vector_write, api, "dst");
  const auto lo = reinterpret_cast<std::uintptr_t>(dst.GetPhyAddr());
  const std::uintptr_t hi = lo + std::uint64_t{count} * sizeof(T);
  const auto apart = [&](const void* p, std::uint64_t bytes) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return count == 0 || bytes == 0 || hi <= a || a + bytes <= lo;
  };
  if (!apart(src.GetPhyAddr(), reach * sizeof(T)) || !apart(off, std::uint64_t{count} * 4)) [[unlikely]] {
    npu::detail::kernel_fail(core, std::string(api) + ": dst overlaps src or srcOffset: gather into a buffer of its own");
  }
  // The source's reads scatter, so only dst and the offsets walk the bank groups.
  detail_::issue<float>(core, npu::detail::instr_cost(api, sizeof(T) == 2), count, sizeof(T), w, rs, ro,
                        {dst.GetPhyAddr(), sizeof(T)}, {off, 4});
  const auto* s = reinterpret_cast<const std::byte*>(src.GetPhyAddr());
  T* d = dst.GetPhyAddr();
  for (std::uint32_t i = 0; i < count; ++i) std::memcpy(&d[i], s + srcBaseAddr + off[i], sizeof(T));
}

// ---- dst[0] = the sum (the largest) of count elements of src. `work` holds at least
// ceil(count / 64) floats (ReduceSumWorkElems).
inline std::uint32_t ReduceSumWorkElems(std::uint32_t count) { return ((count + 63) / 64 + 7) / 8 * 8; }

template <class T>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, std::uint32_t count) {
  static_assert(std::is_same_v<T, float>, "ReduceSum: the emulator sums float");
  detail_::reduce("ReduceSum", dst, src, work, count, 0.0f, [](float a, float b) { return a + b; });
}

template <class T>
void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, std::uint32_t count,
               bool calIndex = false) {
  static_assert(std::is_same_v<T, float>, "ReduceMax: the emulator reduces float");
  if (calIndex) npu::detail::kernel_fail(npu::detail::current(), "ReduceMax: calIndex is not emulated");
  detail_::reduce("ReduceMax", dst, src, work, count, -std::numeric_limits<float>::infinity(),
                  [](float a, float b) { return a < b ? b : a; });
}

// ---- Synchronisation
// Waits for every core of the launch (refused when the launch has more blocks than vector cores,
// and in a kernel not declared KERNEL_TYPE_MIX_AIV_1_0).
template <bool isAIVOnly = true>
void SyncAll() {
  npu::detail::sync_all(npu::detail::current());
}

// A barrier on the issuing core [S26]: PIPE_ALL waits for every pipe (strict mode: everything
// issued before it is visible to every pipe after it); PIPE_V / PIPE_MTE2 / PIPE_MTE3 order one
// pipe within itself (which the emulator's scoreboard already does; PIPE_V is what the no-auto-sync
// mode checks, Emulator::set_auto_sync); PIPE_S is a hardware error.
template <pipe_t pipe>
void PipeBarrier() {
  static_assert(pipe != PIPE_S, "PipeBarrier<PIPE_S>() is a hardware error: the scalar unit orders itself");
  if constexpr (pipe == PIPE_ALL) {
    npu::detail::Core& core = npu::detail::current();
    core.time.issue = core.time.end();
    core.pipes.barrier_all();
  } else if constexpr (pipe == PIPE_V) {
    ++npu::detail::current().pipes.v_barriers;
  }
}

namespace detail_ {

// The (source, target) pipes of a vector core's event, or kNoPipe for the cube's.
constexpr std::uint8_t event_pipe(HardEvent e, bool target) {
  using namespace npu::detail;
  switch (e) {
    case HardEvent::MTE2_V: return target ? kPipeV : kPipeMte2;
    case HardEvent::V_MTE2: return target ? kPipeMte2 : kPipeV;
    case HardEvent::MTE3_V: return target ? kPipeV : kPipeMte3;
    case HardEvent::V_MTE3: return target ? kPipeMte3 : kPipeV;
    case HardEvent::V_V: return kPipeV;
    case HardEvent::MTE3_MTE2: return target ? kPipeMte2 : kPipeMte3;
    case HardEvent::MTE2_MTE3: return target ? kPipeMte3 : kPipeMte2;
    case HardEvent::S_V: return target ? kPipeV : kPipeS;
    case HardEvent::V_S: return target ? kPipeS : kPipeV;
    case HardEvent::S_MTE2: return target ? kPipeMte2 : kPipeS;
    case HardEvent::MTE2_S: return target ? kPipeS : kPipeMte2;
    case HardEvent::S_MTE3: return target ? kPipeMte3 : kPipeS;
    case HardEvent::MTE3_S: return target ? kPipeS : kPipeMte3;
    default: return kNoPipe;
  }
}

[[noreturn]] void bad_flag(const npu::detail::Core& core, const char* api, std::uint8_t from, std::uint8_t to,
                           std::int32_t id, const char* why);

}  // namespace detail_

// SetFlag<A_B>(id): pipe A raises the flag once everything it was issued so far is done;
// WaitFlag<A_B>(id): pipe B waits for it [S25]. In strict mode the pair makes A's earlier work
// visible to B's later work; a WaitFlag without its SetFlag (a hang), a SetFlag on a flag still
// raised, and an id outside 0..7 are errors. No time is charged: the emulator's scoreboard
// already orders the data they protect.
namespace detail_ {
// The pending slot of flag `eventID` of `event`'s pipe pair, after the checks SetFlag and WaitFlag
// share: a vector core's pipes and an id in 0..7; `raised` says whether the call needs the flag
// raised (WaitFlag) or clear (SetFlag), `why` what it is if not.
template <HardEvent event>
std::uint32_t& flag_slot(npu::detail::Core& core, const char* api, std::int32_t eventID, bool raised,
                         const char* why) {
  constexpr std::uint8_t from = event_pipe(event, false);
  constexpr std::uint8_t to = event_pipe(event, true);
  static_assert(from != npu::detail::kNoPipe, "the emulated vector core has no cube pipes (MTE1, M, FIX)");
  if (eventID < 0 || eventID >= npu::detail::kEventIds) [[unlikely]] {
    bad_flag(core, api, from, to, eventID, "eventID is 0..7");
  }
  std::uint32_t& pending = core.pipes.pending[from][to][eventID];
  if ((pending != 0) != raised) [[unlikely]] bad_flag(core, api, from, to, eventID, why);
  return pending;
}
}  // namespace detail_

template <HardEvent event>
void SetFlag(std::int32_t eventID) {
  npu::detail::Core& core = npu::detail::current();
  detail_::flag_slot<event>(core, "SetFlag", eventID, false, "the flag is already set and not yet waited for") =
      core.pipes.seq + 1;
}

template <HardEvent event>
void WaitFlag(std::int32_t eventID) {
  npu::detail::Core& core = npu::detail::current();
  std::uint32_t& pending =
      detail_::flag_slot<event>(core, "WaitFlag", eventID, true, "no SetFlag raised it: on the device this waits forever");
  std::uint32_t& synced = core.pipes.synced[detail_::event_pipe(event, false)][detail_::event_pipe(event, true)];
  if (pending > synced) synced = pending;
  pending = 0;
}

// The kernel's TPipe (Ascend C's GetTPipePtr()).
inline TPipe* GetTPipePtr() { return static_cast<TPipe*>(npu::detail::current().tpipe); }

// Ascend C's kernel type declaration, the first statement of a kernel's body (a macro there, as
// here, so that the kernel keeps its device spelling).
#define KERNEL_TASK_TYPE_DEFAULT(type) ::opreg::npu::detail::declare_kernel_type(::opreg::npu::detail::current(), (type))

inline std::int64_t GetBlockIdx() { return npu::detail::current().block; }
inline std::int64_t GetBlockNum() { return npu::detail::block_dim(npu::detail::current()); }

}  // namespace opreg::npu::AscendC
