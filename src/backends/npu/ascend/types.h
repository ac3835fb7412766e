// The vocabulary of the Ascend C device API (names as CANN's kernel_operator.h spells them), for
// kernels written against the emulator. Everything lives in opreg::npu::AscendC so that a kernel
// reads as the Ascend C kernel it stands for (`using namespace AscendC;`).
#pragma once

#include <cstdint>
#include <limits>

#include "opreg/dtype.h"

// Ascend C's function and address-space qualifiers. On the host they mean nothing; kept so that
// kernel code keeps its device spelling.
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __gm__
#define __gm__
#endif
// A kernel's entry function (extern "C" __global__ __aicore__ void f(GM_ADDR ...) in Ascend C).
// The build's device-code check (check_device_code.cmake) finds kernels by it and requires each
// to declare its kernel type (KERNEL_TASK_TYPE_DEFAULT).
#ifndef __global__
#define __global__
#endif

namespace opreg::npu::AscendC {

// The 16-bit storage types: the same bit patterns as opreg's tensors hold.
using half = opreg::half;
using bfloat16_t = opreg::bfloat16;

// What an Ascend C kernel has in place of <type_traits> and <algorithm> (the device compiler
// offers no C++ standard library): IsSameType<T, U>::value, and scalar min and max in
// AscendC::Std (lib/std/algorithm.h).
template <class T, class U>
struct IsSameType {
  static constexpr bool value = __is_same(T, U);  // the compiler's own test (GCC, Clang, bisheng)
};
namespace Std {
template <class T>
constexpr T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
constexpr T max(T a, T b) {
  return a < b ? b : a;
}
}  // namespace Std

// A kernel argument in global memory (GM). In Ascend C a macro for `__gm__ uint8_t*`.
using GM_ADDR = std::uint8_t*;

// Where a local tensor lives in the vector core's pipeline: copied in by MTE2 (VECIN), copied
// out by MTE3 (VECOUT), or scratch for the vector unit (VECCALC).
enum class TPosition : std::uint8_t { GM, VECIN, VECOUT, VECCALC };
using QuePosition = TPosition;

// The pipes of a vector core: scalar, vector, GM -> UB (MTE2), UB -> GM (MTE3).
enum pipe_t : std::uint8_t { PIPE_S, PIPE_V, PIPE_MTE2, PIPE_MTE3, PIPE_ALL };

// Synchronisation events between pipes, named source_target (MTE2_V: V waits for MTE2) [S25].
// The emulated vector core has S, V, MTE2 and MTE3; the cube's events (MTE1, M, FIX) exist for
// their spelling only and are refused at compile time.
enum class HardEvent : std::uint8_t {
  MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M, V_V, MTE3_MTE1, MTE1_MTE3,
  MTE1_V, MTE2_M, M_MTE2, V_MTE1, M_FIX, FIX_M, MTE3_MTE2, MTE2_MTE3, S_V, V_S, S_MTE2, MTE2_S, S_MTE3, MTE3_S,
  MTE2_FIX, FIX_MTE2, FIX_S, M_S, FIX_MTE3
};
// Event ids (Ascend C's event_t), 0..7 on A2/A3/950 [S25].
enum event_t : std::int32_t { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };
using TEventID = std::int8_t;

// What a kernel runs on, declared in its body with KERNEL_TASK_TYPE_DEFAULT (Ascend C,
// atlasascendc_api_07_0218): AIV_ONLY starts vector cores only; MIX_AIV_1_0 also starts only
// vector cores but "with hard sync": a kernel that calls SyncAll() must be declared MIX_AIV_1_0.
// The emulated vector core has no cube, so the other types (AIC_ONLY, MIX_AIC_*) are not offered.
enum KernelMetaType : std::uint8_t { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_MIX_AIV_1_0 };

enum class RoundMode : std::uint8_t { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

inline constexpr std::uint32_t ONE_BLK_SIZE = 32;           // a UB data block
inline constexpr std::uint32_t ONE_REPEAT_BYTE_SIZE = 256;  // what one vector repeat reads (8 blocks)
inline constexpr std::uint32_t MAX_REPEAT_TIMES = 255;      // repeatTimes is a uint8

// DataCopy's strided form: blockLen, srcStride and dstStride count 32-byte blocks.
struct DataCopyParams {
  std::uint16_t blockCount = 1;
  std::uint16_t blockLen = 0;
  std::uint16_t srcStride = 0;
  std::uint16_t dstStride = 0;
};

// A field of a repeat-parameter struct. On the device it is a uint8_t or uint16_t and a larger
// value wraps silently when assigned; the emulator keeps what the kernel assigned, so that the
// API reading the struct refuses a value the device's field cannot hold, naming the API, the
// field and the value (RepeatParamsCheck in vector_repeat.h).
template <class Device>
class RepeatField {
 public:
  static constexpr std::int64_t kMax = std::numeric_limits<Device>::max();
  constexpr RepeatField(std::int64_t v = 0) : v_(v) {}  // NOLINT: assigned like the device's integer
  constexpr operator Device() const { return static_cast<Device>(v_); }
  constexpr std::int64_t value() const { return v_; }

 private:
  std::int64_t v_;
};

// The repeat forms' strides, in 32-byte blocks [S27]: block b of repeat r of an operand starts at
// (r * repStride + b * blkStride) blocks. BinaryRepeatParams (atlasascendc_api_07_0013): every
// stride a uint8_t. UnaryRepeatParams (atlasascendc_api_07_0012): block strides uint16_t,
// repeat strides uint8_t. BrcbRepeatParams (kernel_struct_brcb.h): uint16_t dst strides.
struct BinaryRepeatParams {
  BinaryRepeatParams() = default;
  BinaryRepeatParams(std::int64_t dstBlk, std::int64_t src0Blk, std::int64_t src1Blk, std::int64_t dstRep,
                     std::int64_t src0Rep, std::int64_t src1Rep)
      : dstBlkStride(dstBlk),
        src0BlkStride(src0Blk),
        src1BlkStride(src1Blk),
        dstRepStride(dstRep),
        src0RepStride(src0Rep),
        src1RepStride(src1Rep) {}
  RepeatField<std::uint8_t> dstBlkStride = 1;
  RepeatField<std::uint8_t> src0BlkStride = 1;
  RepeatField<std::uint8_t> src1BlkStride = 1;
  RepeatField<std::uint8_t> dstRepStride = 8;
  RepeatField<std::uint8_t> src0RepStride = 8;
  RepeatField<std::uint8_t> src1RepStride = 8;
};

struct UnaryRepeatParams {
  UnaryRepeatParams() = default;
  UnaryRepeatParams(std::int64_t dstBlk, std::int64_t srcBlk, std::int64_t dstRep, std::int64_t srcRep)
      : dstBlkStride(dstBlk), srcBlkStride(srcBlk), dstRepStride(dstRep), srcRepStride(srcRep) {}
  RepeatField<std::uint16_t> dstBlkStride = 1;
  RepeatField<std::uint16_t> srcBlkStride = 1;
  RepeatField<std::uint8_t> dstRepStride = 8;
  RepeatField<std::uint8_t> srcRepStride = 8;
};

struct BrcbRepeatParams {
  BrcbRepeatParams() = default;
  BrcbRepeatParams(std::int64_t dstBlk, std::int64_t dstRep) : dstBlkStride(dstBlk), dstRepStride(dstRep) {}
  RepeatField<std::uint16_t> dstBlkStride = 1;
  RepeatField<std::uint16_t> dstRepStride = 8;
};

// DataCopyPad's older parameter form (DataCopyParams with DataCopyPadParams): blockLen in bytes,
// blockCount 1..4095, blockLen 1..65535, strides uint16 [S9].
struct DataCopyPadParams {
  bool isPad = false;
  std::uint8_t leftPadding = 0;
  std::uint8_t rightPadding = 0;
  std::uint64_t paddingValue = 0;  // its low bytes are the element
};

// DataCopyPad's parameters: blockLen in bytes; the GM side's stride in bytes, the UB side's in
// 32-byte blocks (each UB block starts 32-byte aligned). Wider than DataCopyParams: blockLen up
// to 2^21 - 1 bytes, uint32 strides; blockCount 1..4095 (1..65535 on the 950PR) [S7][S9].
struct DataCopyExtParams {
  std::uint16_t blockCount = 1;
  std::uint32_t blockLen = 0;
  std::uint32_t srcStride = 0;
  std::uint32_t dstStride = 0;
  std::uint32_t rsv = 0;
};

// What DataCopyPad writes into the rest of each block's last 32-byte granule (GM -> UB).
template <class T>
struct DataCopyPadExtParams {
  bool isPad = false;
  std::uint8_t leftPadding = 0;
  std::uint8_t rightPadding = 0;
  T paddingValue{};
};

// A raw UB address, as LocalTensor::SetAddr takes it: the one place where a kernel can hand a
// vector instruction memory whose type says nothing about where it is.
struct TBuffAddr {
  std::uint32_t dataLen = 0;
  std::uint64_t bufferAddr = 0;
  TPosition logicPos = TPosition::VECCALC;
};

}  // namespace opreg::npu::AscendC
