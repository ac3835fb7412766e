// The repeat forms of the vector API (issue 19): UnaryRepeatParams and the unary/scalar repeat
// forms, the bitwise mask, WholeReduceSum's per-repeat order and Brcb. Each rule of
// docs/backends/npu.md's "repeat form" row with a case that fails if the rule is removed.
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "backends/npu/kernel_util.h"
#include "npu_test_util.h"

namespace opreg::npu::testing {
namespace {

using namespace AscendC;
using kernel::PipeSync;

class Repeat : public ::testing::Test {
 protected:
  Emulator em{model()};
  Gm<float> x{"x", 8, 0.0f};

  // One block with two 2 KiB float scratch buffers, t (512 floats) and u; the body reads back
  // through the scalar unit after V_S.
  void run(const std::function<void(const LocalTensor<float>&, const LocalTensor<float>&)>& body) {
    launch(em, 1, {x.arg()}, [&] {
      TPipe pipe;
      TBuf<TPosition::VECCALC> a, b;
      pipe.InitBuffer(a, 2048);
      pipe.InitBuffer(b, 2048);
      body(a.Get<float>(), b.Get<float>());
    });
  }
  void refused(const std::function<void(const LocalTensor<float>&, const LocalTensor<float>&)>& body,
               std::vector<std::string> texts) {
    EXPECT_TRUE(ThrowsError([&] { run(body); }, ErrorKind::internal, texts));
  }
};

TEST_F(Repeat, UnaryRepeatParamsHaveUint16BlockAndUint8RepeatStrides) {
  run([](auto& t, auto& u) {
    for (std::uint32_t i = 0; i < 512; ++i) t.SetValue(i, static_cast<float>(i));
    Duplicate(u, -1.0f, 512);
    PipeSync<HardEvent::S_V>();
    // 3 repeats of the first 8 lanes, src repeats 2 blocks apart, dst 1 block apart.
    Muls(u, t, 2.0f, 8, 3, UnaryRepeatParams(1, 1, 1, 2));
    // Block stride 300 fits UnaryRepeatParams' uint16 (one block selected: only block 0 is touched).
    Adds(u[64], t, 1.0f, 8, 1, UnaryRepeatParams(300, 300, 8, 8));
    PipeSync<HardEvent::V_S>();
    EXPECT_EQ(u.GetValue(8), 32.0f);  // repeat 1: src element 16
    EXPECT_EQ(u.GetValue(23), 78.0f);  // repeat 2, lane 7: src element 32 + 7
    EXPECT_EQ(u.GetValue(24), -1.0f);  // past the 3 repeats
    EXPECT_EQ(u.GetValue(64), 1.0f);
  });
  refused([](auto& t, auto&) { Exp(t, t, 8, 1, UnaryRepeatParams(1, 1, 8, 256)); },
          {"Exp (repeat form): UnaryRepeatParams.srcRepStride = 256", "0..255"});
  refused([](auto& t, auto&) { Sqrt(t, t, 8, 1, UnaryRepeatParams(65536, 1, 8, 8)); },
          {"Sqrt (repeat form): UnaryRepeatParams.dstBlkStride = 65536", "0..65535"});
  refused([](auto& t, auto&) { Adds(t, t, 1.0f, 64, 256, UnaryRepeatParams{}); },
          {"Adds (repeat form): 256 is out of range", "repeatTimes is 0..255"});
  refused([](auto& t, auto&) { Muls(t, t, 1.0f, 65, 1, UnaryRepeatParams{}); }, {"Muls (repeat form): 65", "1..64"});
  // BinaryRepeatParams' block strides are uint8: 300 does not fit.
  refused(
      [](auto& t, auto&) {
        BinaryRepeatParams p;
        p.dstBlkStride = 300;
        Add(t, t, t, 8, 1, p);
      },
      {"Add (repeat form): BinaryRepeatParams.dstBlkStride = 300", "0..255"});
}

TEST_F(Repeat, BitwiseMaskSelectsLanesByBit) {
  run([](auto& t, auto& u) {
    Duplicate(t, 1.0f, 512);
    Duplicate(u, 0.0f, 512);
    const std::uint64_t mask[2] = {0b101ULL | (1ULL << 63), 0};
    Add(u, t, t, mask, 2, BinaryRepeatParams{});
    PipeSync<HardEvent::V_S>();
    EXPECT_EQ(u.GetValue(0), 2.0f);
    EXPECT_EQ(u.GetValue(1), 0.0f);  // bit 1 clear
    EXPECT_EQ(u.GetValue(2), 2.0f);
    EXPECT_EQ(u.GetValue(63), 2.0f);
    EXPECT_EQ(u.GetValue(66), 2.0f);  // repeat 1
  });
  // 16-bit: mask[1] selects lanes 64..127.
  launch(em, 1, {x.arg()}, [&] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> a;
    pipe.InitBuffer(a, 512);
    const LocalTensor<half> h = a.Get<half>();
    Duplicate(h, half{npu::detail::float_to_half(1.0f)}, 256);
    const std::uint64_t mask[2] = {0, 1};
    Muls(h, h, half{npu::detail::float_to_half(3.0f)}, mask, 1, UnaryRepeatParams{});
    PipeSync<HardEvent::V_S>();
    EXPECT_EQ(h.GetValue(64).bits, npu::detail::float_to_half(3.0f));
    EXPECT_EQ(h.GetValue(63).bits, npu::detail::float_to_half(1.0f));
  });
  refused(
      [](auto& t, auto&) {
        const std::uint64_t mask[2] = {1, 1};
        Mul(t, t, t, mask, 1, BinaryRepeatParams{});
      },
      {"Mul (repeat form)", "mask[1] (bitwise mode) must be 0 for 32-bit types"});
  refused(
      [](auto& t, auto&) {
        const std::uint64_t mask[2] = {0, 0};
        Exp(t, t, mask, 1, UnaryRepeatParams{});
      },
      {"Exp (repeat form)", "selects no lane"});
}

// A repeat's sum as a tree of adjacent pairs, unselected lanes 0 [S23][S24].
float RepeatTree(const float* p, std::uint64_t lanes) {
  float v[64];
  for (int i = 0; i < 64; ++i) v[i] = ((lanes >> i) & 1U) != 0 ? p[i] : 0.0f;
  for (int s = 32; s > 0; s /= 2) {
    for (int k = 0; k < s; ++k) v[k] = v[2 * k] + v[2 * k + 1];
  }
  return v[0];
}

TEST_F(Repeat, WholeReduceSumSumsEachRepeatInTheDocumentedOrder) {
  // 4 rows of 64 floats of mixed magnitudes: the tree and a running sum differ in their bits.
  std::vector<float> v(256);
  std::uint32_t state = 777;
  for (float& f : v) {
    state = state * 1664525u + 1013904223u;
    f = std::ldexp(static_cast<float>(state >> 8) / 16777216.0f - 0.5f, static_cast<int>(state % 20) - 10);
  }
  const std::uint64_t first50 = (1ULL << 50) - 1;
  const std::uint64_t odd = 0xAAAAAAAAAAAAAAAAULL;
  float running = 0;
  for (int i = 0; i < 50; ++i) running += v[i];
  ASSERT_NE(std::bit_cast<std::uint32_t>(running), std::bit_cast<std::uint32_t>(RepeatTree(v.data(), first50)));
  run([&](auto& t, auto& u) {
    for (std::uint32_t i = 0; i < 256; ++i) t.SetValue(i, v[i]);
    Duplicate(u, -7.0f, 64);
    PipeSync<HardEvent::S_V>();
    // Continuous mask: rows of 64 (8 blocks a repeat), results 2 elements apart, dst at an
    // element-aligned (not 32-byte aligned) offset.
    WholeReduceSum(u[1], t, 50, 4, 2, 1, 8);
    const std::uint64_t mask[2] = {odd, 0};
    WholeReduceSum(u[16], t, mask, 4, 1, 1, 8);
    PipeSync<HardEvent::V_S>();
    for (std::uint32_t r = 0; r < 4; ++r) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(u.GetValue(1 + 2 * r)),
                std::bit_cast<std::uint32_t>(RepeatTree(&v[64 * r], first50)));
      EXPECT_EQ(std::bit_cast<std::uint32_t>(u.GetValue(16 + r)), std::bit_cast<std::uint32_t>(RepeatTree(&v[64 * r], odd)));
    }
    EXPECT_EQ(u.GetValue(2), -7.0f);  // between two results: untouched
  });
  refused([](auto& t, auto& u) { WholeReduceSum(u, t[1], 8, 1, 1, 1, 8); }, {"WholeReduceSum: src starts at UB offset 4"});
  refused([](auto& t, auto& u) { WholeReduceSum(u, t, 8, 256, 1, 1, 8); }, {"WholeReduceSum (repeat form): 256"});
  // The last repeat's lanes must lie in src: 8 repeats of 64 lanes 8 blocks apart pass 512 floats.
  refused([](auto& t, auto& u) { WholeReduceSum(u, t[8], 64, 8, 1, 1, 8); }, {"WholeReduceSum: src"});
}

TEST_F(Repeat, BrcbBroadcastsEachElementToABlock) {
  run([](auto& t, auto& u) {
    for (std::uint32_t i = 0; i < 16; ++i) t.SetValue(i, static_cast<float>(i));
    PipeSync<HardEvent::S_V>();
    Brcb(u, t, 2, BrcbRepeatParams(1, 8));
    PipeSync<HardEvent::V_S>();
    for (std::uint32_t i = 0; i < 128; ++i) EXPECT_EQ(u.GetValue(i), static_cast<float>(i / 8)) << i;
  });
  refused([](auto& t, auto& u) { Brcb(u, t[4], 1, BrcbRepeatParams(1, 8)); }, {"Brcb: src0 starts at UB offset 16"});
  refused([](auto& t, auto& u) { Brcb(u, t, 256, BrcbRepeatParams(1, 8)); }, {"Brcb (repeat form): 256"});
  refused([](auto& t, auto& u) { Brcb(u, t, 1, BrcbRepeatParams(1, 65536)); },
          {"Brcb (repeat form): BrcbRepeatParams.dstRepStride = 65536", "0..65535"});
  // 8 blocks 8 blocks apart: the second repeat's blocks pass u's 512 floats.
  refused([](auto& t, auto& u) { Brcb(u[448], t, 2, BrcbRepeatParams(1, 8)); }, {"Brcb: dst"});
}

// Gather [S35]: dst[i] = src at byte srcOffset[i] (plus the base), any permutation or repetition,
// 32- and 16-bit (bf16 included: it moves, it does not compute); an offset that is not an element
// of src, and a dst over its sources, are refused.
TEST_F(Repeat, GatherCollectsElementsByByteOffset) {
  run([](auto& t, auto& u) {
    const LocalTensor<std::uint32_t> off = u[256].template ReinterpretCast<std::uint32_t>();
    for (std::uint32_t i = 0; i < 64; ++i) {
      t.SetValue(i, static_cast<float>(i));
      off.SetValue(i, (i ^ 1U) * 4);  // neighbours swapped: (1, 0, 3, 2, ...)
    }
    off.SetValue(64, 0);
    PipeSync<HardEvent::S_V>();
    Gather(u, t, off, 0, 64);
    Gather(u[64], t, off, 8, 2);  // the base moves every read by two floats
    const LocalTensor<bfloat16_t> tb = t[128].template ReinterpretCast<bfloat16_t>();
    const LocalTensor<bfloat16_t> ub = u[128].template ReinterpretCast<bfloat16_t>();
    Gather(ub, tb, off, 0, 2);  // bytes 4 and 0: elements 2 and 0
    PipeSync<HardEvent::V_S>();
    for (std::uint32_t i = 0; i < 64; ++i) EXPECT_EQ(u.GetValue(i), static_cast<float>(i ^ 1U)) << i;
    EXPECT_EQ(u.GetValue(64), 3.0f);
    EXPECT_EQ(u.GetValue(65), 2.0f);
  });
  refused(
      [](auto& t, auto& u) {
        const LocalTensor<std::uint32_t> off = u[256].template ReinterpretCast<std::uint32_t>();
        off.SetValue(0, 2);
        PipeSync<HardEvent::S_V>();
        Gather(u, t, off, 0, 1);
      },
      {"Gather: srcOffset[0] = 2", "not an element of src"});
  refused(
      [](auto& t, auto& u) {
        const LocalTensor<std::uint32_t> off = u[256].template ReinterpretCast<std::uint32_t>();
        off.SetValue(0, 4 * 8);
        PipeSync<HardEvent::S_V>();
        Gather(u, t[504], off, 0, 1);  // t[504] holds 8 floats: byte 32 is past them
      },
      {"Gather: srcOffset[0] = 32", "8 elements"});
  refused(
      [](auto& t, auto& u) {
        const LocalTensor<std::uint32_t> off = u[256].template ReinterpretCast<std::uint32_t>();
        off.SetValue(0, 0);
        PipeSync<HardEvent::S_V>();
        Gather(t, t, off, 0, 1);
      },
      {"Gather: dst overlaps src"});
}

}  // namespace
}  // namespace opreg::npu::testing
