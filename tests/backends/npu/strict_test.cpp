// Strict mode and UB alignment (issue 19): each rule with the kernel that breaks it, the same
// kernel with the synchronisation (or alignment) a real Ascend C kernel needs, and the rule
// switched off where it can be, so that each test fails if its rule is removed.
#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <string_view>
#include <vector>

#include "backends/npu/kernel_util.h"
#include "npu_test_util.h"

namespace opreg::npu::testing {
namespace {

using namespace AscendC;
using kernel::PipeSync;

class Strict : public ::testing::Test {
 protected:
  Emulator em{model()};
  Gm<float> x{"x", 256, 1.0f};
  Gm<float> y{"y", 256, 0.0f};
  static inline LocalTensor<float> u_;  // the second buffer of run()

  // One block with a 1 KiB scratch buffer `t` (a second one, `u`, after it) and GM tensors over
  // x and y.
  void run(const std::function<void(const LocalTensor<float>&, const GlobalTensor<float>&,
                                    const GlobalTensor<float>&)>& body) {
    launch(em, 1, {x.arg(), y.arg()}, [&] {
      TPipe pipe;
      TBuf<TPosition::VECCALC> buf, second;
      pipe.InitBuffer(buf, 1024);
      pipe.InitBuffer(second, 1024);
      u_ = second.Get<float>();
      GlobalTensor<float> gx, gy;
      gx.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), 256);
      gy.SetGlobalBuffer(reinterpret_cast<float*>(y.addr()), 256);
      body(buf.Get<float>(), gx, gy);
    });
  }
};

// ---- UB alignment per API [S6][S23]

TEST_F(Strict, VectorOperandsStart32ByteAligned) {
  EXPECT_TRUE(ThrowsError([&] { run([](auto& t, auto&, auto&) { Add(t[1], t[8], t[16], 1); }); },
                          ErrorKind::internal, {"Add: dst starts at UB offset 4", "not 32-byte aligned"}));
  EXPECT_TRUE(ThrowsError([&] { run([](auto& t, auto&, auto&) { Muls(t, t[3], 2.0f, 8); }); }, ErrorKind::internal,
                          {"Muls: src starts at UB offset 12", "not 32-byte aligned"}));
  run([](auto& t, auto&, auto&) { Add(t[8], t[16], t[24], 1); });  // 32-byte slots are fine
}

TEST_F(Strict, DmaUbAddressesStart32ByteAligned) {
  EXPECT_TRUE(ThrowsError(
      [&] { run([](auto& t, auto& gx, auto&) { DataCopyPad(t[2], gx, {1, 16, 0, 0, 0}, {}); }); },
      ErrorKind::internal, {"DataCopyPad: dst starts at UB offset 8", "DataCopy/DataCopyPad"}));
  EXPECT_TRUE(ThrowsError([&] { run([](auto& t, auto&, auto& gy) { DataCopy(gy, t[4], 8); }); }, ErrorKind::internal,
                          {"DataCopy: src starts at UB offset 16"}));
}

TEST_F(Strict, AReductionsDstNeedsOnlyElementAlignment) {
  run([](auto& t, auto&, auto&) {
    Duplicate(t, 1.0f, 64);
    ReduceSum(t[65], t, t[128], 64);  // dst at byte 260: allowed [S23]
    PipeSync<HardEvent::V_S>();
    EXPECT_EQ(t.GetValue(65), 64.0f);
  });
  EXPECT_TRUE(ThrowsError([&] { run([](auto& t, auto&, auto&) { ReduceSum(t[200], t[1], t[128], 8); }); },
                          ErrorKind::internal, {"ReduceSum: src starts at UB offset 4"}));
}

// ---- Pipe synchronisation [S25][S26]

TEST_F(Strict, CopiedInDataReadByTheScalarUnitNeedsMte2S) {
  auto body = [](bool sync) {
    return [sync](auto& t, auto& gx, auto&) {
      DataCopyPad(t, gx, {1, 32, 0, 0, 0}, {});
      if (sync) PipeSync<HardEvent::MTE2_S>();
      EXPECT_EQ(t.GetValue(3), 1.0f);
    };
  };
  EXPECT_TRUE(ThrowsError([&] { run(body(false)); }, ErrorKind::internal,
                          {"LocalTensor::GetValue", "last written by DataCopyPad (MTE2)", "read by S",
                           "missing event is MTE2_S", "SetFlag<HardEvent::MTE2_S>"}));
  run(body(true));
  em.set_strict(false);  // the rule is strict mode's
  run(body(false));
}

TEST_F(Strict, AVectorResultCopiedOutNeedsVMte3) {
  auto body = [](bool sync) {
    return [sync](auto& t, auto&, auto& gy) {
      Duplicate(t, 2.0f, 8);
      if (sync) PipeSync<HardEvent::V_MTE3>();
      DataCopyPad(gy, t, {1, 32, 0, 0, 0});
    };
  };
  EXPECT_TRUE(ThrowsError([&] { run(body(false)); }, ErrorKind::internal,
                          {"DataCopyPad: src", "last written by Duplicate (V)", "read by MTE3",
                           "missing event is V_MTE3"}));
  run(body(true));
  EXPECT_EQ(y.data[7], 2.0f);
  em.set_strict(false);
  run(body(false));
}

TEST_F(Strict, CopiedInDataComputedOnNeedsMte2V) {
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& t, auto& gx, auto&) {
          DataCopyPad(t, gx, {1, 32, 0, 0, 0}, {});
          Muls(t, t, 2.0f, 8);
        });
      },
      ErrorKind::internal, {"Muls: src", "missing event is MTE2_V"}));
  // A barrier orders every pipe.
  run([](auto& t, auto& gx, auto&) {
    DataCopyPad(t, gx, {1, 32, 0, 0, 0}, {});
    PipeBarrier<PIPE_ALL>();
    Muls(t, t, 2.0f, 8);
  });
}

TEST_F(Strict, OverwritingWhatAnotherPipeStillReadsNeedsTheReverseEvent) {
  // The vector unit reads t, then MTE2 copies new data into it: V_MTE2 (write after read).
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& t, auto& gx, auto&) {
          const LocalTensor<float> u = u_;
          Duplicate(t, 1.0f, 64);
          PipeSync<HardEvent::V_MTE2>();  // orders the write, not the read after it
          Muls(u, t, 2.0f, 64);
          DataCopyPad(t, gx, {1, 32, 0, 0, 0}, {});
        });
      },
      ErrorKind::internal, {"DataCopyPad: dst", "was read by V since its last write", "missing event is V_MTE2"}));
  // MTE3 copies t out, then the vector unit writes it again: MTE3_V.
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& t, auto&, auto& gy) {
          Duplicate(t, 1.0f, 8);
          PipeSync<HardEvent::V_MTE3>();
          DataCopyPad(gy, t, {1, 32, 0, 0, 0});
          Duplicate(t, 3.0f, 8);
        });
      },
      ErrorKind::internal, {"Duplicate: dst", "was read by MTE3", "missing event is MTE3_V"}));
}

TEST_F(Strict, GmWrittenByMte3AndReadBackByMte2NeedsMte3Mte2) {
  auto body = [](int how) {
    return [how](auto& t, auto&, auto& gy) {
      Duplicate(t, 5.0f, 64);
      PipeSync<HardEvent::V_MTE3>();
      DataCopyPad(gy, t, {1, 256, 0, 0, 0});
      PipeSync<HardEvent::MTE3_V>();
      PipeSync<HardEvent::V_MTE2>();
      if (how == 1) PipeSync<HardEvent::MTE3_MTE2>();
      if (how == 2) PipeBarrier<PIPE_ALL>();
      // how 3 reads GM this core did not write
      DataCopyPad(u_, gy[how == 3 ? 64 : 32], {1, 32, 0, 0, 0}, {});
    };
  };
  EXPECT_TRUE(ThrowsError([&] { run(body(0)); }, ErrorKind::internal,
                          {"DataCopyPad: reads GM that this core's MTE3 wrote", "MTE3_MTE2"}));
  run(body(1));
  run(body(2));
  run(body(3));
}

TEST_F(Strict, FlagsComeInPairsWithIdsZeroToSeven) {
  EXPECT_TRUE(ThrowsError([&] { run([](auto&, auto&, auto&) { WaitFlag<HardEvent::V_S>(0); }); },
                          ErrorKind::internal, {"WaitFlag<HardEvent::V_S>(0)", "waits forever"}));
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto&, auto&, auto&) {
          SetFlag<HardEvent::MTE2_V>(1);
          SetFlag<HardEvent::MTE2_V>(1);
        });
      },
      ErrorKind::internal, {"SetFlag<HardEvent::MTE2_V>(1)", "already set"}));
  EXPECT_TRUE(ThrowsError([&] { run([](auto&, auto&, auto&) { SetFlag<HardEvent::V_S>(8); }); }, ErrorKind::internal,
                          {"eventID is 0..7"}));
  run([](auto&, auto&, auto&) {
    const auto a = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::V_S));
    SetFlag<HardEvent::V_S>(a);
    const auto b = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::V_S));
    EXPECT_NE(a, b);  // FetchEventID skips a raised flag
    SetFlag<HardEvent::V_S>(b);
    WaitFlag<HardEvent::V_S>(a);
    WaitFlag<HardEvent::V_S>(b);
  });
}

TEST_F(Strict, QueuesCarryTheirOwnSynchronisation) {
  run([](auto&, auto& gx, auto& gy) {
    TQue<TPosition::VECIN, 1> in;
    TQue<TPosition::VECOUT, 1> out;
    GetTPipePtr()->InitBuffer(in, 1, 256);
    GetTPipePtr()->InitBuffer(out, 1, 256);
    for (int i = 0; i < 3; ++i) {
      LocalTensor<float> a = in.AllocTensor<float>();
      DataCopyPad(a, gx, {1, 256, 0, 0, 0}, {});
      in.EnQue(a);
      a = in.DeQue<float>();
      LocalTensor<float> b = out.AllocTensor<float>();
      Muls(b, a, 3.0f, 64);
      in.FreeTensor(a);
      out.EnQue(b);
      b = out.DeQue<float>();
      DataCopyPad(gy[64], b, {1, 256, 0, 0, 0});
      out.FreeTensor(b);
    }
  });
  EXPECT_EQ(y.data[64], 3.0f);
}

// ---- The repeat form [S22][S27]

TEST_F(Strict, RepeatFormTakesMaskRepeatsAndStrides) {
  run([](auto& t, auto&, auto&) {
    const LocalTensor<float> u = u_;
    Duplicate(t, 1.0f, 256);
    Duplicate(u, 0.0f, 256);
    // 2 repeats, 10 elements each; src0 repeats 8 blocks apart, dst 2 blocks apart.
    BinaryRepeatParams p;
    p.dstRepStride = 2;
    Add(u, t, t, 10, 2, p);
    PipeSync<HardEvent::V_S>();
    EXPECT_EQ(u.GetValue(9), 2.0f);   // repeat 0, element 9
    EXPECT_EQ(u.GetValue(10), 0.0f);  // masked off
    EXPECT_EQ(u.GetValue(16), 2.0f);  // repeat 1 starts 2 blocks (16 floats) on
  });
  EXPECT_TRUE(ThrowsError([&] { run([](auto& t, auto&, auto&) { Add(t, t, t, 64, 256, BinaryRepeatParams{}); }); },
                          ErrorKind::internal, {"Add (repeat form): 256 is out of range", "repeatTimes is 0..255"}));
  EXPECT_TRUE(ThrowsError([&] { run([](auto& t, auto&, auto&) { Mul(t, t, t, 65, 1, BinaryRepeatParams{}); }); },
                          ErrorKind::internal, {"Mul (repeat form): 65", "1..64"}));
  // A stride that reaches past the tensor is refused like any operand that does not fit.
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& t, auto&, auto&) {
          BinaryRepeatParams p;
          p.src1RepStride = 255;
          Sub(t, t, t, 64, 2, p);
        });
      },
      ErrorKind::internal, {"Sub: src1"}));
}

// ---- ReduceSum's documented order [S23]

// The reference: a 64-float repeat as a tree of adjacent pairs (masked lanes 0), then the repeats'
// sums in order (A2/A3, method 2) or as such trees again (950PR, method 1).
float RepeatTree(const float* p, std::size_t n) {
  float v[64] = {};
  for (std::size_t i = 0; i < n; ++i) v[i] = p[i];
  for (std::size_t s = 32; s > 0; s /= 2) {
    for (std::size_t k = 0; k < s; ++k) v[k] = v[2 * k] + v[2 * k + 1];
  }
  return v[0];
}
float DocumentedSum(std::vector<float> x, bool tree_across_repeats) {
  std::vector<float> sums;
  for (std::size_t j = 0; j < x.size(); j += 64) sums.push_back(RepeatTree(&x[j], std::min<std::size_t>(64, x.size() - j)));
  if (!tree_across_repeats) {
    float acc = sums[0];
    for (std::size_t j = 1; j < sums.size(); ++j) acc += sums[j];
    return acc;
  }
  return sums.size() == 1 ? sums[0] : DocumentedSum(sums, true);
}

TEST(ReduceSumOrder, BitExactOnTheA2AndThe950PRWhereOrdersDiffer) {
  // 4096 values of mixed magnitudes: adjacent pairs, halves, and in-order repeat sums all give
  // different float bits here (checked below, so the test means something).
  std::vector<float> v(4096);
  std::uint32_t state = 12345;
  for (float& f : v) {
    state = state * 1664525u + 1013904223u;
    f = std::ldexp(static_cast<float>(state >> 8) / 16777216.0f - 0.5f, static_cast<int>(state % 24) - 12);
  }
  const float a2 = DocumentedSum(v, false);
  const float a5 = DocumentedSum(v, true);
  ASSERT_NE(std::bit_cast<std::uint32_t>(a2), std::bit_cast<std::uint32_t>(a5));
  for (const char* profile : {"Ascend910B4", "Ascend950PR"}) {
    Emulator em(model(profile));
    Gm<float> x("x", v.size());
    x.data = v;
    float got = 0;
    launch(em, 1, {x.arg()}, [&] {
      TPipe pipe;
      TBuf<TPosition::VECCALC> buf, out, work;
      pipe.InitBuffer(buf, 4096 * 4);
      pipe.InitBuffer(out, 32);
      pipe.InitBuffer(work, ReduceSumWorkElems(4096) * 4);
      GlobalTensor<float> g;
      g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), 4096);
      DataCopyPad(buf.Get<float>(), g, {1, 4096 * 4, 0, 0, 0}, {});
      PipeSync<HardEvent::MTE2_V>();
      ReduceSum(out.Get<float>(), buf.Get<float>(), work.Get<float>(), 4096);
      PipeSync<HardEvent::V_S>();
      got = out.Get<float>().GetValue(0);
    });
    const float want = std::string_view(profile) == "Ascend950PR" ? a5 : a2;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << profile;
  }
  // The emulator's former order (each repeat as a tree of halves) differs from the documented one.
  auto halves = [](const float* p) {
    float w[64];
    std::copy(p, p + 64, w);
    for (int s = 32; s > 0; s /= 2) {
      for (int k = 0; k < s; ++k) w[k] += w[k + s];
    }
    return w[0];
  };
  float old_order = halves(&v[0]);
  for (std::size_t j = 64; j < v.size(); j += 64) old_order += halves(&v[j]);
  EXPECT_NE(std::bit_cast<std::uint32_t>(old_order), std::bit_cast<std::uint32_t>(a2));
}

// ---- No auto-sync (OPREG_NPU_SYNC=manual) [S26]: the vector pipe does not order dependent
// instructions by itself; PipeBarrier<PIPE_V> (or PIPE_ALL) between a write and a later read.
TEST_F(Strict, WithoutAutoSyncAVectorResultReadByVNeedsPipeBarrierV) {
  em.set_auto_sync(false);
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& t, auto&, auto&) {
          const LocalTensor<float> u = u_;
          Duplicate(t, 1.0f, 64);
          Muls(u, t, 2.0f, 64);
        });
      },
      ErrorKind::internal,
      {"Muls: src (UB offset 0, in a VECCALC buffer at 0) reads what a vector instruction (Duplicate the last) wrote "
       "with no PipeBarrier<PIPE_V>() between them",
       "insert PipeBarrier<PIPE_V>();"}));
  // In place: the instruction reads the previous write, so it needs the barrier too.
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& t, auto&, auto&) {
          Duplicate(t, 1.0f, 64);
          Muls(t, t, 2.0f, 64);
        });
      },
      ErrorKind::internal, {"Muls: src", "PipeBarrier<PIPE_V>()"}));
  // A barrier, PIPE_V or PIPE_ALL, orders them; independent instructions need none.
  run([](auto& t, auto&, auto&) {
    const LocalTensor<float> u = u_;
    Duplicate(t, 1.0f, 64);
    Duplicate(u, 3.0f, 64);
    PipeBarrier<PIPE_V>();
    Muls(t, t, 2.0f, 64);
    PipeBarrier<PIPE_ALL>();
    Add(u, u, t, 64);
  });
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& t, auto&, auto&) {
          Duplicate(t, 1.0f, 64);
          PipeBarrier<PIPE_V>();
          Muls(t, t, 2.0f, 64);
          Adds(t, t, 1.0f, 64);  // reads Muls' result: a barrier each time
        });
      },
      ErrorKind::internal, {"Adds: src", "(Muls the last)"}));
  // The record is per byte: an instruction reading bytes no vector instruction wrote since the
  // barrier (the next row of a tile) needs none.
  run([](auto& t, auto&, auto&) {
    Duplicate(t, 1.0f, 128);
    PipeBarrier<PIPE_V>();
    Muls(t, t, 2.0f, 64);              // writes t[0, 64)
    Muls(t[64], t[64], 3.0f, 64);      // reads t[64, 128): Duplicate's, ordered by the barrier
  });
  // With auto-sync (the default) the same code runs.
  em.set_auto_sync(true);
  run([](auto& t, auto&, auto&) {
    Duplicate(t, 1.0f, 64);
    Muls(t, t, 2.0f, 64);
  });
}

}  // namespace
}  // namespace opreg::npu::testing
