// The emulator's rules, each with the kernel that breaks it (the device's failure, or the
// emulator's stand-in for a hang), and the device API doing what the kernels rely on.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <mutex>
#include <numeric>
#include <set>

#include "backends/npu/ascend/convert.h"
#include "backends/npu/kernel_util.h"
#include "npu_test_util.h"

namespace opreg::npu::testing {
namespace {

using namespace AscendC;
using kernel::PipeSync;

// Whether a vector instruction accepts these tensor types (a concept, so that a call that does
// not compile is false rather than an error).
template <class Dst, class Src>
concept AddAccepts = requires(Dst d, Src s) {
  AscendC::Add(d, s, d, 8u);
};
template <class T>
concept MulsAccepts = requires(T t) {
  AscendC::Muls(t, t, 2.0f, 8u);
};

class Emulated : public ::testing::Test {
 protected:
  Emulator em{model()};
};

// ---- Unified Buffer

// An Ascend C kernel that allocates past the UB compiles; the device faults at run time with the
// runtime's vector core exception, once for the launch, and the outputs are left poisoned.
TEST_F(Emulated, UbPastTheEndIsTheRuntimesVectorCoreExceptionOncePerLaunch) {
  Gm<float> x("x", 8, 1.5F);
  Gm<float> y("y", 8, 2.5F);
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 40, {x.arg(), y.out()}, [] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> a, b;
          pipe.InitBuffer(a, 100000);
          pipe.InitBuffer(b, 100000);  // 200000 B in all, 3392 B past the 196608
        });
      },
      ErrorKind::device,
      {"npu runtime error 507035 (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION): VEC instruction error: the ub address out of "
       "bounds. Kernel task happen error, retCode=0x31, [vector core exception].",
       "test_kernel", "InitBuffer of 100000 bytes at UB offset 100000 ends 3392 bytes past", "left poisoned"}));
  for (float v : x.data) EXPECT_EQ(v, 1.5F);  // inputs untouched
  for (float v : y.data) EXPECT_TRUE(std::isnan(v));
}

TEST_F(Emulated, UbHoldsExactlyTheProfilesBytesIn32ByteSteps) {
  Gm<float> x("x", 8);
  const LaunchCounters c = launch(em, 1, {x.arg()}, [] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> a, b;
    pipe.InitBuffer(a, 1);  // takes 32
    pipe.InitBuffer(b, 196608 - 32);
    EXPECT_EQ(pipe.used_bytes(), 196608U);
  });
  EXPECT_EQ(c.ub_peak, 196608U);
  EXPECT_DOUBLE_EQ(c.ub_ratio(), 1.0);
}

TEST(EmulatorProfiles, UbOverrideAndEveryProfileHoldItsSize) {
  for (const Profile& p : profiles()) {
    Emulator em(model(p.name));
    Gm<float> x("x", 8);
    EXPECT_TRUE(ThrowsError(
        [&] {
          launch(em, 1, {x.arg()}, [&] {
            TPipe pipe;
            TBuf<TPosition::VECCALC> a;
            pipe.InitBuffer(a, static_cast<std::uint32_t>(p.ub_bytes + 32));
          });
        },
        ErrorKind::device, {fmt::format("ends 32 bytes past the {}-byte Unified Buffer", p.ub_bytes)}));
  }
  Emulator small(model("Ascend910B4", "16384"));
  EXPECT_EQ(small.ub_bytes(), 16384U);
}

TEST(EmulatorProfiles, EnvironmentValuesAreValidated) {
  EXPECT_EQ(model("910B2").profile->vector_cores, 48);
  EXPECT_EQ(model("Ascend950PR").ub_bytes, 253952U);
  EXPECT_EQ(model("Ascend910_93").profile->ai_cores, 24);
  EXPECT_EQ(select_device_model(std::nullopt, std::nullopt).profile->name, std::string("Ascend910B4"));
  EXPECT_TRUE(ThrowsError([] { model("Ascend910B9"); }, ErrorKind::invalid_argument,
                          {"OPREG_NPU_PROFILE='Ascend910B9'", "Ascend910B4, Ascend910B2, Ascend910_93, Ascend950PR"}));
  for (const char* bad : {"1000", "20001", "4096x", "-64", "2097152", "abc"}) {
    EXPECT_TRUE(ThrowsError([&] { model("Ascend910B4", bad); }, ErrorKind::invalid_argument,
                            {fmt::format("OPREG_NPU_UB_BYTES='{}'", bad), "multiple of 32"}));
  }
}

// ---- Launch

TEST_F(Emulated, BlockDimAbove65535IsTheTritonAndAclError) {
  Gm<float> x("x", 8);
  EXPECT_TRUE(ThrowsError([&] { launch(em, 65536, {x.arg()}, [] {}); }, ErrorKind::unsupported,
                          {"grid should be less than 65536! You can try \"export TRITON_ALL_BLOCKS_PARALLEL=1\" to "
                           "avoid this problem.",
                           "coreDim=65536 can't be greater than UINT16_MAX"}));
  EXPECT_TRUE(ThrowsError([&] { launch(em, 0, {x.arg()}, [] {}); }, ErrorKind::unsupported, {"block_dim 0"}));
  const std::int64_t ok[] = {255, 257};
  EXPECT_EQ(grid_blocks(ok), 65535);
  const std::int64_t too_many[] = {256, 16, 16};
  EXPECT_TRUE(ThrowsError([&] { grid_blocks(too_many); }, ErrorKind::unsupported, {"grid should be less than 65536!"}));
}

TEST_F(Emulated, BlocksRunInWavesOverTheVectorCores) {
  Gm<std::int32_t> out("out", 100, -1);
  std::mutex m;
  std::set<int> cores;
  const LaunchCounters c = launch(em, 100, {out.arg()}, [&] {
    GlobalTensor<std::int32_t> g;
    g.SetGlobalBuffer(reinterpret_cast<std::int32_t*>(out.addr()), 100);
    g.SetValue(static_cast<std::uint64_t>(GetBlockIdx()), static_cast<std::int32_t>(GetBlockNum()));
    std::lock_guard lock(m);
    cores.insert(npu::detail::current().index);
  });
  EXPECT_EQ(c.block_dim, 100);
  EXPECT_EQ(c.waves, 3);
  EXPECT_EQ(c.idle_cores, 20);
  EXPECT_EQ(cores.size(), 40U);
  EXPECT_TRUE(std::all_of(out.data.begin(), out.data.end(), [](std::int32_t v) { return v == 100; }));
  // Blocks beyond the first wave pay the per-block overhead of the cost model.
  EXPECT_GE(c.est_us, cost_constants().launch_floor_us + 2 * cost_constants().block_overhead_us);
}

// The order blocks run in is shuffled per launch and fixed by the seed (one block at a time).
TEST_F(Emulated, BlockOrderIsShuffledAndSeeded) {
  em.set_host_threads(1);
  Gm<float> x("x", 8);
  auto order = [&] {
    std::vector<std::int64_t> seen;
    std::mutex m;
    launch(em, 40, {x.arg()}, [&] {
      std::lock_guard lock(m);
      seen.push_back(GetBlockIdx());
    });
    return seen;
  };
  em.set_seed(7);
  const auto first = order();
  const auto second = order();
  em.set_seed(7);
  const auto again = order();
  std::vector<std::int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> ids(40);
  std::iota(ids.begin(), ids.end(), 0);
  EXPECT_EQ(sorted, ids);
  EXPECT_NE(first, ids);     // shuffled
  EXPECT_NE(first, second);  // a new order each launch
  EXPECT_EQ(first, again);   // the same seed, the same orders
}

TEST_F(Emulated, SyncAllIsABarrierAcrossTheLaunch) {
  Gm<std::int32_t> slots("slots", 40, 0);
  Gm<std::int32_t> seen("seen", 40, 0);
  launch(em, 40, {slots.arg(), seen.arg()}, [&] {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
    GlobalTensor<std::int32_t> s, t;
    s.SetGlobalBuffer(reinterpret_cast<std::int32_t*>(slots.addr()), 40);
    t.SetGlobalBuffer(reinterpret_cast<std::int32_t*>(seen.addr()), 40);
    const auto b = static_cast<std::uint64_t>(GetBlockIdx());
    s.SetValue(b, static_cast<std::int32_t>(b) + 1);
    SyncAll();
    t.SetValue(b, s.GetValue((b + 1) % 40));  // every neighbour wrote before the barrier
  });
  for (int b = 0; b < 40; ++b) EXPECT_EQ(seen.data[static_cast<std::size_t>(b)], (b + 1) % 40 + 1);
}

TEST_F(Emulated, SyncAllWithMoreBlocksThanCoresIsRefused) {
  Gm<float> x("x", 8);
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 41, {x.arg()}, [] {
          KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
          SyncAll();
        });
      },
      ErrorKind::internal, {"SyncAll with block_dim 41 above the 40 vector cores of Ascend910B4", "hangs"}));
}

// The hard SyncAll belongs to mix kernels: a kernel declared KERNEL_TYPE_AIV_ONLY, or declaring
// nothing (compiled as one), is refused at its SyncAll, naming the declaration it needs.
TEST_F(Emulated, SyncAllNeedsAMixKernelType) {
  Gm<float> x("x", 8);
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 4, {x.arg()}, [] {
          KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
          SyncAll();
        });
      },
      ErrorKind::internal,
      {"SyncAll in a kernel of type KERNEL_TYPE_AIV_ONLY", "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0)"}));
  EXPECT_TRUE(ThrowsError([&] { launch(em, 4, {x.arg()}, [] { SyncAll(); }); }, ErrorKind::internal,
                          {"KERNEL_TYPE_AIV_ONLY (none declared)"}));
  launch(em, 4, {x.arg()}, [] {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
    SyncAll();
  });
}

TEST_F(Emulated, SyncAllMissedByABlockIsTheHangItWouldBe) {
  Gm<float> x("x", 8);
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 4, {x.arg()}, [] {
          KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
          if (GetBlockIdx() != 2) SyncAll();
        });
      },
      ErrorKind::internal, {"SyncAll"}));
}

// ---- Data movement

TEST_F(Emulated, DataCopyPadLimitsAreErrors) {
  Gm<float> x("x", 1 << 20);
  struct Bad {
    DataCopyExtParams p;
    const char* needle;
  };
  const Bad bad[] = {{{4096, 4, 0, 0, 0}, "DataCopyExtParams.blockCount = 4096 is outside 1..4095 on Ascend910B4"},
                     {{0, 4, 0, 0, 0}, "DataCopyExtParams.blockCount = 0"},
                     {{1, 1u << 21, 0, 0, 0}, "DataCopyExtParams.blockLen = 2097152 is outside 1..2097151"}};
  for (const Bad& b : bad) {
    EXPECT_TRUE(ThrowsError(
        [&] {
          launch(em, 1, {x.arg()}, [&] {
            TPipe pipe;
            TBuf<TPosition::VECCALC> buf;
            pipe.InitBuffer(buf, 150000);
            GlobalTensor<float> g;
            g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), x.data.size());
            DataCopyPad(buf.Get<float>(), g, b.p, DataCopyPadExtParams<float>{});
          });
        },
        ErrorKind::internal, {"DataCopyPad", b.needle, "split the copy"}));
  }
}

// DataCopyExtParams is wider than the older DataCopyParams [S7][S9]: a 65536-byte block and a
// 65536-byte GM stride are fine in the one and refused in the other; the 950PR takes up to 65535
// blocks in one DataCopyPad, the A2 profiles 4095.
TEST_F(Emulated, DmaLimitsFollowTheParameterStructAndTheProfile) {
  Gm<float> x("x", 1 << 20);
  auto copy = [&](Emulator& e, auto params) {
    launch(e, 1, {x.arg()}, [&] {
      TPipe pipe;
      TBuf<TPosition::VECCALC> buf;
      pipe.InitBuffer(buf, 150000);
      GlobalTensor<float> g;
      g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), x.data.size());
      if constexpr (std::is_same_v<decltype(params), DataCopyParams>) {
        DataCopyPad(buf.Get<float>(), g, params, DataCopyPadParams{});
      } else {
        DataCopyPad(buf.Get<float>(), g, params, DataCopyPadExtParams<float>{});
      }
    });
  };
  copy(em, DataCopyExtParams{1, 65536, 0, 0, 0});
  copy(em, DataCopyExtParams{2, 32, 65536, 0, 0});
  copy(em, DataCopyParams{2, 32, 65535, 0});
  EXPECT_TRUE(ThrowsError([&] { copy(em, DataCopyParams{4096, 4, 0, 0}); }, ErrorKind::internal,
                          {"DataCopyPad: DataCopyParams.blockCount = 4096 is outside 1..4095"}));
  EXPECT_TRUE(ThrowsError([&] { copy(em, DataCopyParams{1, 0, 0, 0}); }, ErrorKind::internal,
                          {"DataCopyParams.blockLen = 0"}));
  // 4096 blocks of 32 bytes: too many for the 910B4, fine on the 950PR.
  EXPECT_TRUE(ThrowsError([&] { copy(em, DataCopyExtParams{4096, 32, 0, 0, 0}); }, ErrorKind::internal,
                          {"blockCount = 4096 is outside 1..4095 on Ascend910B4"}));
  Emulator em950(model("Ascend950PR"));
  copy(em950, DataCopyExtParams{4096, 32, 0, 0, 0});
  // DataCopy's DataCopyParams counts 32-byte blocks: 4095 at most.
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 1, {x.arg()}, [&] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> buf;
          pipe.InitBuffer(buf, 150000);
          GlobalTensor<float> g;
          g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), x.data.size());
          DataCopy(buf.Get<float>(), g, DataCopyParams{4096, 1, 0, 0});
        });
      },
      ErrorKind::internal, {"DataCopy: DataCopyParams.blockCount = 4096"}));
}

TEST_F(Emulated, MultiRowTilesArePaddedPerRowTo32Bytes) {
  // 64 rows of 123 floats (492 B) land 512 B apart: the tile takes 64 x 128 floats.
  Gm<float> x("x", 64 * 123);
  std::iota(x.data.begin(), x.data.end(), 0.0f);
  Gm<float> y("y", 64 * 123, -1.0f);
  const DataCopyExtParams rows{64, 123 * 4, 0, 0, 0};
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 1, {x.arg()}, [&] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> buf;
          pipe.InitBuffer(buf, 64 * 123 * 4);  // unpadded: too small
          GlobalTensor<float> g;
          g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), x.data.size());
          DataCopyPad(buf.Get<float>(), g, rows, DataCopyPadExtParams<float>{});
        });
      },
      ErrorKind::internal, {"DataCopyPad", "32768 bytes of a LocalTensor of 31488 bytes"}));
  launch(em, 1, {x.arg(), y.arg()}, [&] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * 128 * 4);
    GlobalTensor<float> g, h;
    g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), x.data.size());
    h.SetGlobalBuffer(reinterpret_cast<float*>(y.addr()), y.data.size());
    const LocalTensor<float> t = buf.Get<float>();
    DataCopyPad(t, g, rows, DataCopyPadExtParams<float>{});
    PipeSync<HardEvent::MTE2_S>();
    EXPECT_EQ(t.GetValue(128), 123.0f);        // row 1 starts at float 128
    EXPECT_TRUE(std::isnan(t.GetValue(123)));  // the padding is not data (fresh UB reads NaN)
    PipeSync<HardEvent::MTE2_MTE3>();
    DataCopyPad(h, t, rows);
  });
  EXPECT_EQ(x.data, y.data);
}

// One block whose body gets the whole of a float TBuf of `bytes`, at UB offset 0, and a float
// GlobalTensor over x (the launch's one argument).
template <class F>
LaunchCounters with_gm_floats(Emulator& em, Gm<float>& x, std::uint32_t bytes, F body) {
  return launch(em, 1, {x.arg()}, [&x, bytes, body] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, bytes);
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), x.data.size());
    body(buf.Get<float>(), g);
  });
}
template <class F>
LaunchCounters with_ub_floats(Emulator& em, std::uint32_t bytes, F body) {
  Gm<float> x("x", 8);
  return with_gm_floats(em, x, bytes, [&body](const LocalTensor<float>& t, const GlobalTensor<float>&) { body(t); });
}

// GM alignment on A2 (the cost model, docs/backends/npu.md [S31]): 16 KiB read from a 512-byte
// aligned address take 0.7 of the time the same bytes take from an address 32 bytes further.
TEST_F(Emulated, CopiesFromGmNot512ByteAlignedRunAt70Percent) {
  Gm<float> x("x", 8192);
  const auto copy_from = [&](std::uint32_t first) {
    return with_gm_floats(em, x, 16384, [first](const LocalTensor<float>& t, const GlobalTensor<float>& g) {
      DataCopy(t, g[first], 4096);
    });
  };
  const LaunchCounters aligned = copy_from(0);
  const LaunchCounters off = copy_from(8);  // 32 bytes in
  EXPECT_EQ(aligned.counters.gm_read, off.counters.gm_read);
  // Past each copy's set-up (below), the bytes move at 0.7 of the aligned rate.
  const double cycle_us = 1e-3 / em.profile().clock_ghz;
  const double setup_us = cost_constants().dma_setup_cycles * cycle_us;
  EXPECT_NEAR((aligned.mte_us - setup_us) / (off.mte_us - setup_us), 0.7, 1e-9);
  // dma_overhead counts the set-up, and for the unaligned copy the 3/7 more its bytes took.
  EXPECT_EQ(aligned.counters.dma_overhead, 57U);
  EXPECT_NEAR(static_cast<double>(off.counters.dma_overhead),
              57 + (off.mte_us - aligned.mte_us) / cycle_us, 1.0);
}

// Every DMA pays a set-up before its bytes move (assumed 57 cycles: a 16 KiB copy then reaches
// 90% of the engine's rate; docs/backends/npu.md [S34]): one 64 KiB copy beats 2,048 copies of
// 32 bytes by 2048 (S + 32 / r) / (S + 65536 / r), with r the engine's bytes a cycle.
TEST_F(Emulated, OneLargeDmaBeatsManySmallOnesByTheSetUps) {
  Gm<float> x("x", 16384);
  const auto copies = [&](int count, std::uint32_t floats) {
    return with_gm_floats(em, x, 65536, [count, floats](const LocalTensor<float>& t, const GlobalTensor<float>& g) {
      for (int i = 0; i < count; ++i) DataCopy(t[i * floats], g[i * floats], floats);
    });
  };
  const LaunchCounters one = copies(1, 16384);
  const LaunchCounters many = copies(2048, 8);
  EXPECT_EQ(one.counters.gm_read, many.counters.gm_read);
  const Profile& p = em.profile();
  const double r = cost_constants().l2_efficiency * p.l2_read_bpc;  // a resident working set, one core
  const double s = cost_constants().dma_setup_cycles;
  // 1920 of the 2048 small copies start off a 512-byte boundary: 32 / 0.7 bytes' time each [S31].
  const double small = 2048 * s + (128 * 32 + 1920 * 32 / p.gm_unaligned_rate) / r;
  EXPECT_NEAR(many.mte_us / one.mte_us, small / (s + 65536 / r), 1e-6);
  EXPECT_GT(many.mte_us / one.mte_us, 100);
  EXPECT_NEAR(static_cast<double>(many.counters.dma_overhead), small - 2048 * 32 / r, 2048);
}

// A working set larger than the L2 finds the L2's worth of it there (docs/backends/npu.md):
// twice the L2 reads half its bytes at the L2 rate and half at HBM's.
TEST_F(Emulated, AWorkingSetTwiceTheL2ReadsHalfFromIt) {
  Gm<float> x("x", 4096);
  const Profile& p = em.profile();
  // The working set counts the arguments' spans: x, and a second argument the kernel never
  // touches, at an address no allocation has, of `extra` bytes.
  const auto* far = reinterpret_cast<const void*>(std::uintptr_t{1} << 46);
  const auto run = [&](std::uint64_t extra) {
    return em.launch("test_kernel", 1, {{x.arg(), GmArg{"far", far, extra}}}, [&x] {
      TPipe pipe;
      TBuf<TPosition::VECCALC> buf;
      pipe.InitBuffer(buf, 16384);
      GlobalTensor<float> g;
      g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), 4096);
      DataCopy(buf.Get<float>(), g, 4096);
    });
  };
  const LaunchCounters fits = run(64);
  const LaunchCounters twice = run(2 * p.l2_bytes - 16384);
  EXPECT_EQ(fits.l2_fraction, 1.0);
  EXPECT_NEAR(twice.l2_fraction, 0.5, 1e-9);
  const double cycle_ns = 1.0 / p.clock_ghz;
  const double setup_ns = cost_constants().dma_setup_cycles * cycle_ns;
  const double l2_ns = 16384 / (cost_constants().l2_efficiency * p.l2_read_bpc * p.clock_ghz);
  const double hbm_ns = 16384 / std::min(p.ddr_read_bpc * p.clock_ghz, p.hbm_gbps);
  EXPECT_NEAR(fits.mte_us * 1000, setup_ns + l2_ns, 1e-6);
  EXPECT_NEAR(twice.mte_us * 1000, setup_ns + 0.5 * l2_ns + 0.5 * hbm_ns, 1e-6);
}

// MTE2 and MTE3 are separate pipes (the cost model, docs/backends/npu.md): from L2 (a small
// working set), a copy in next to an independent copy out costs nothing more than the copy out.
TEST_F(Emulated, CopiesInAndOutRunOnSeparatePipes) {
  Gm<float> in("in", 4096);
  Gm<float> out("out", 4096);
  const auto run = [&](bool copy_in, bool copy_out) {
    return launch(em, 1, {in.arg(), out.arg()}, [&in, &out, copy_in, copy_out] {
      TPipe pipe;
      TBuf<TPosition::VECCALC> a, b;
      pipe.InitBuffer(a, 16384);
      pipe.InitBuffer(b, 16384);
      GlobalTensor<float> gi, go;
      gi.SetGlobalBuffer(reinterpret_cast<float*>(in.addr()), 4096);
      go.SetGlobalBuffer(reinterpret_cast<float*>(out.addr()), 4096);
      if (copy_out) Duplicate(b.Get<float>(), 1.0f, 4096);
      if (copy_in) DataCopy(a.Get<float>(), gi, 2048);  // half of what goes out: done first
      if (copy_out) {
        PipeSync<HardEvent::V_MTE3>();
        DataCopy(go, b.Get<float>(), 4096);
      }
    });
  };
  const LaunchCounters both = run(true, true);
  const LaunchCounters out_only = run(false, true);
  EXPECT_TRUE(both.l2_resident);
  EXPECT_GT(run(true, false).mte_us, 0.0);
  EXPECT_GT(both.mte_us, out_only.mte_us);         // the copy in was charged ...
  EXPECT_DOUBLE_EQ(both.est_us, out_only.est_us);  // ... beside the copy out, not before it
}

TEST_F(Emulated, PlainDataCopyRoundsDownTo32BytesAndCountsIt) {
  Gm<float> x("x", 16);
  std::iota(x.data.begin(), x.data.end(), 1.0f);
  const LaunchCounters c = launch(em, 1, {x.arg()}, [&] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64);
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), 16);
    const LocalTensor<float> t = buf.Get<float>();
    DataCopy(t, g, 13);  // 52 bytes: the device moves 32
    PipeSync<HardEvent::MTE2_S>();
    EXPECT_EQ(t.GetValue(7), 8.0f);
    EXPECT_TRUE(std::isnan(t.GetValue(8)));  // not copied
  });
  EXPECT_EQ(c.counters.truncated_copies, 1U);
  EXPECT_EQ(c.counters.truncated_bytes, 20U);
  EXPECT_EQ(c.counters.gm_read, 32U);
}

TEST_F(Emulated, GmAccessOutOfBoundsNamesKernelTensorAndRange) {
  Gm<float> x("x", 100);
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(
            em, 1, {x.arg()},
            [&] {
              TPipe pipe;
              TBuf<TPosition::VECCALC> buf;
              pipe.InitBuffer(buf, 1024);
              GlobalTensor<float> g;
              g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()) + 40, 60);
              DataCopyPad(buf.Get<float>(), g[50], {1, 20 * 4, 0, 0, 0}, DataCopyPadExtParams<float>{});
            },
            "my_kernel");
      },
      ErrorKind::internal, {"npu kernel my_kernel", "elements [0, 20)", "GM tensor x", "element 90", "out of bounds"}));
  // A GlobalTensor must lie inside one of the kernel's GM arguments.
  std::vector<float> elsewhere(16);
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 1, {x.arg()}, [&] {
          GlobalTensor<float> g;
          g.SetGlobalBuffer(elsewhere.data(), 16);
        });
      },
      ErrorKind::internal, {"SetGlobalBuffer", "not lie inside any GM argument"}));
}

TEST_F(Emulated, AtomicAddCopiesAddIntoGm) {
  Gm<float> acc("acc", 8, 1.0f);
  const LaunchCounters c = launch(em, 40, {acc.arg()}, [&] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 32);
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<float*>(acc.addr()), 8);
    const LocalTensor<float> t = buf.Get<float>();
    Duplicate(t, 0.5f, 8);
    PipeSync<HardEvent::V_MTE3>();
    SetAtomicAdd<float>();
    DataCopyPad(g, t, {1, 32, 0, 0, 0});
    SetAtomicNone();
  });
  for (float v : acc.data) EXPECT_EQ(v, 21.0f);
  EXPECT_EQ(c.counters.atomic_adds, 40U);
}

// ---- Vector instructions

TEST_F(Emulated, VectorInstructionsTakeLocalTensorsOnly) {
  // A GM tensor handed to a vector instruction does not compile.
  static_assert(!AddAccepts<LocalTensor<float>, GlobalTensor<float>>);
  static_assert(!MulsAccepts<GlobalTensor<float>>);
  static_assert(AddAccepts<LocalTensor<float>, LocalTensor<float>>);
  static_assert(MulsAccepts<LocalTensor<float>>);
  // Where the type is erased (SetAddr), the instruction checks the address at run time.
  Gm<float> x("x", 64, 1.0f);
  EXPECT_TRUE(ThrowsError(
      [&] {
        launch(em, 1, {x.arg()}, [&] {
          TPipe pipe;
          TBuf<TPosition::VECCALC> buf;
          pipe.InitBuffer(buf, 256);
          LocalTensor<float> fake;
          fake.SetAddr({256, reinterpret_cast<std::uint64_t>(x.data.data()), TPosition::VECCALC});
          Add(buf.Get<float>(), buf.Get<float>(), fake, 64);
        });
      },
      ErrorKind::internal, {"Add: src1", "not in this core's Unified Buffer", "DataCopy"}));
}

TEST_F(Emulated, QueueStatesCatchMissingSynchronisation) {
  Gm<float> x("x", 64, 1.0f);
  auto run = [&](const std::function<void(TQue<TPosition::VECIN, 1>&, TQue<TPosition::VECOUT, 1>&)>& body) {
    launch(em, 1, {x.arg()}, [&] {
      TPipe pipe;
      TQue<TPosition::VECIN, 1> in;
      TQue<TPosition::VECOUT, 1> out;
      pipe.InitBuffer(in, 1, 256);
      pipe.InitBuffer(out, 1, 256);
      body(in, out);
    });
  };
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& in, auto& out) {
          LocalTensor<float> a = in.template AllocTensor<float>();
          LocalTensor<float> b = out.template AllocTensor<float>();
          Muls(b, a, 2.0f, 64);  // computing on an input before EnQue/DeQue
        });
      },
      ErrorKind::internal, {"Muls: src", "MTE2 -> V synchronisation is missing"}));
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& in, auto&) {
          in.template AllocTensor<float>();
          in.template AllocTensor<float>();
        });
      },
      ErrorKind::internal, {"AllocTensor", "waits forever"}));
  EXPECT_TRUE(ThrowsError([&] { run([](auto& in, auto&) { in.template DeQue<float>(); }); }, ErrorKind::internal,
                          {"DeQue from an empty VECIN queue"}));
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([](auto& in, auto& out) {
          LocalTensor<float> a = in.template AllocTensor<float>();
          in.EnQue(a);
          a = in.template DeQue<float>();
          in.FreeTensor(a);
          LocalTensor<float> b = out.template AllocTensor<float>();
          Muls(b, a, 2.0f, 64);  // use after FreeTensor
        });
      },
      ErrorKind::internal, {"Muls: src", "freed"}));
  EXPECT_TRUE(ThrowsError(
      [&] {
        run([&](auto&, auto& out) {
          LocalTensor<float> b = out.template AllocTensor<float>();
          Duplicate(b, 1.0f, 64);
          GlobalTensor<float> g;
          g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), 64);
          DataCopy(g, b, 64);  // copying out before EnQue/DeQue
        });
      },
      ErrorKind::internal, {"DataCopy: src", "V -> MTE3 synchronisation is missing"}));
}

TEST_F(Emulated, RepeatsAreCountedPerInstructionOf255AtMost) {
  Gm<float> x("x", 8);
  const LaunchCounters c = launch(em, 1, {x.arg()}, [] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * 256 * 4);
    const LocalTensor<float> t = buf.Get<float>();
    Duplicate(t, 1.0f, 64 * 256);  // 256 repeats of 64 floats: two instructions
    Add(t, t, t, 64);              // one repeat
    Add(t, t, t, 0);               // nothing
  });
  EXPECT_EQ(c.counters.vector_repeats, 257U);
  EXPECT_EQ(c.counters.vector_instructions, 3U);
}

// Approximate math (OPREG_NPU_MATH=approx): Exp's results within 2 ulp of the correctly rounded
// ones, some of them off, the same on every run; Abs stays exact.
TEST_F(Emulated, ApproximateMathStaysWithinTwoUlpAndIsDeterministic) {
  static constexpr std::uint32_t kN = 1024;
  const auto exp_of_ramp = [&](bool approx) {
    em.set_approx_math(approx);
    std::vector<float> out(2 * kN);
    with_ub_floats(em, 4 * kN * 4, [&out](const LocalTensor<float>& t) {
      for (std::uint32_t i = 0; i < kN; ++i) t.SetValue(i, -20.0f + 0.039f * static_cast<float>(i));
      PipeSync<HardEvent::S_V>();
      Exp(t[kN], t[0], kN);
      Abs(t[2 * kN], t[0], kN);
      PipeSync<HardEvent::V_S>();
      for (std::uint32_t i = 0; i < 2 * kN; ++i) out[i] = t.GetValue(kN + i);
    });
    em.set_approx_math(false);
    return out;
  };
  const std::vector<float> exact = exp_of_ramp(false);
  const std::vector<float> approx = exp_of_ramp(true);
  EXPECT_EQ(approx, exp_of_ramp(true));
  int off = 0;
  for (std::uint32_t i = 0; i < kN; ++i) {
    const auto ulps = std::abs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(approx[i])) -
                               std::bit_cast<std::int32_t>(exact[i]));
    EXPECT_LE(ulps, 2) << i;
    off += ulps != 0;
    EXPECT_EQ(approx[kN + i], exact[kN + i]);  // Abs
  }
  EXPECT_GT(off, static_cast<int>(kN) / 2);
}

// UB bank groups (the cost model, docs/backends/npu.md [S30]): a binary instruction whose two
// sources sit at the same offset modulo 512 B reads every bank group twice a repeat, two cycles;
// sources 256 B apart modulo 512 B read 16 different groups, one cycle. 64 repeats each.
TEST_F(Emulated, SourcesInTheSameBankGroupsTakeTwoCyclesARepeat) {
  // dst at 128 KiB, src0 at 0, src1 at `src1_bytes`: 64 repeats of 64 floats.
  const auto add_at = [&](std::uint32_t src1_bytes) {
    return with_ub_floats(em, 3 * 65536, [src1_bytes](const LocalTensor<float>& t) {
      Add(t[32768], t[0], t[src1_bytes / 4], 64 * 64);
    });
  };
  const LaunchCounters same = add_at(16384);         // 512 B x 32: the same groups
  const LaunchCounters apart = add_at(16384 + 256);  // the other 8 groups
  const LaunchCounters near = add_at(16384 + 32);    // one group over: 7 of 8 groups read twice
  EXPECT_EQ(same.counters.vector_repeats, 64U);
  EXPECT_EQ(same.counters.bank_conflicts, 64U);
  EXPECT_EQ(apart.counters.bank_conflicts, 0U);
  EXPECT_EQ(near.counters.bank_conflicts, 64U);
  // Add's own cost [S33]: 6 cycles of start-up, then the repeats at the bank groups' pace.
  const double cycle_us = 1e-3 / em.profile().clock_ghz;
  EXPECT_NEAR(same.vec_us, (6 + 2 * 64) * cycle_us, 1e-9);
  EXPECT_NEAR(apart.vec_us, (6 + 64) * cycle_us, 1e-9);
}

// Each instruction's own cost on A2/A3 [S33]: a start-up, then its cycles a repeat, 1 for Abs, 2
// for Exp on float and 4 on half, 7 for the cross-lane sum of ReduceSum; 64 repeats each.
TEST_F(Emulated, InstructionsCostTheirMeasuredProfile) {
  const double cycle_us = 1e-3 / em.profile().clock_ghz;
  const auto timed = [&](auto body) { return with_ub_floats(em, 3 * 65536, body).vec_us / cycle_us; };
  EXPECT_NEAR(timed([](const LocalTensor<float>& t) { Abs(t[32768], t[0], 64 * 64); }), 4 + 64, 1e-6);
  EXPECT_NEAR(timed([](const LocalTensor<float>& t) { Exp(t[32768], t[0], 64 * 64); }), 12 + 2 * 64, 1e-6);
  EXPECT_NEAR(timed([](const LocalTensor<float>& t) {
                Exp(t[32768].ReinterpretCast<half>(), t[0].ReinterpretCast<half>(), 128 * 64);
              }),
              12 + 4 * 64, 1e-6);
  // 4096 floats: 64 repeats of vcadd, then one more over their 64 sums: two instructions.
  EXPECT_NEAR(timed([](const LocalTensor<float>& t) { ReduceSum(t[32768], t[0], t[40960], 64 * 64); }),
              2 * 20 + 7 * 65, 1e-6);
  // vgather: 5 + 12 a repeat of 64 floats (the offsets are 4096 uint32 from t[40960]: all zero).
  EXPECT_NEAR(timed([](const LocalTensor<float>& t) {
                Duplicate(t[40960].ReinterpretCast<std::int32_t>(), 0, 64 * 64);
                PipeBarrier<PIPE_V>();
                Gather(t[32768], t[0], t[40960].ReinterpretCast<std::uint32_t>(), 0, 64 * 64);
              }) - timed([](const LocalTensor<float>& t) {
                Duplicate(t[40960].ReinterpretCast<std::int32_t>(), 0, 64 * 64);
              }),
              5 + 12 * 64, 1e-6);
  // The 950PR has no source for them: one cycle a repeat, no start-up.
  Emulator a5(model("Ascend950PR"));
  const double a5_cycle_us = 1e-3 / a5.profile().clock_ghz;
  EXPECT_NEAR(with_ub_floats(a5, 3 * 65536, [](const LocalTensor<float>& t) { Exp(t[32768], t[0], 64 * 64); })
                      .vec_us /
                  a5_cycle_us,
              64, 1e-6);
}

// Eight blocks of one operand in one bank group (block stride 16: 512 B apart) take eight
// cycles a repeat; a block stride of 8 (256 B) puts them in two groups, four cycles [S30].
TEST_F(Emulated, BlocksOfOneOperandInOneGroupQueue) {
  const auto adds_with = [&](std::uint8_t blk) {
    return with_ub_floats(em, 65536, [blk](const LocalTensor<float>& t) {
      const BinaryRepeatParams p(blk, 1, 1, 1, 8, 8);
      Add(t[8192], t[0], t[64], 64, 1, p);  // one repeat; the sources in groups 0-7 and 8-15
    });
  };
  EXPECT_EQ(adds_with(16).counters.bank_conflicts, 7U);
  EXPECT_EQ(adds_with(8).counters.bank_conflicts, 3U);
}

TEST_F(Emulated, TypesTheVectorUnitLacksFallBackToScalarCode) {
  Gm<float> x("x", 8);
  const LaunchCounters c = launch(em, 1, {x.arg()}, [] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 1024);
    const LocalTensor<std::int64_t> t = buf.Get<std::int64_t>();
    Duplicate(t, std::int64_t{3}, 16);
    Add(t, t, t, 16);
    PipeSync<HardEvent::V_S>();
    EXPECT_EQ(t.GetValue(15), 6);
  });
  EXPECT_EQ(c.counters.scalar_fallbacks, 2U);
}

// The 950PR's vector unit computes on bf16 and int64 (A5's vadd: i8-i64, f16, bf16, f32 [S33]):
// bf16 results rounded to bf16 after each instruction, int64 at 32 lanes a repeat. The A2/A3
// profiles refuse bf16 arithmetic (Cast to float first) and run int64 on the scalar unit (above).
TEST_F(Emulated, The950PRComputesOnBf16AndInt64) {
  Gm<float> x("x", 8);
  const auto kernel = [] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf, wide;
    pipe.InitBuffer(buf, 1024);
    pipe.InitBuffer(wide, 1024);
    const LocalTensor<bfloat16_t> t = buf.Get<bfloat16_t>();
    Duplicate(t, bfloat16_t{0x3F80}, 128);  // 1.0
    Adds(t, t, bfloat16_t{0x3C00}, 128);  // + 2^-7: 1 + 2^-7, exact in bf16
    Mul(t, t, t, 128);
    const LocalTensor<std::int64_t> w = wide.Get<std::int64_t>();
    Duplicate(w, std::int64_t{1} << 40, 32);
    Add(w, w, w, 32);
    PipeSync<HardEvent::V_S>();
    // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14, rounded to bf16: 1 + 2^-6 (float would keep the 2^-14).
    EXPECT_EQ(npu::detail::bf16_to_float(t.GetValue(127).bits), 1.015625f);
    EXPECT_EQ(w.GetValue(31), std::int64_t{1} << 41);
  };
  Emulator a5(model("Ascend950PR"));
  const LaunchCounters c = launch(a5, 1, {x.arg()}, kernel);
  EXPECT_EQ(c.counters.scalar_fallbacks, 0U);
  EXPECT_EQ(c.counters.vector_repeats, 1U + 1U + 1U + 1U + 1U);
  EXPECT_TRUE(ThrowsError([&] { launch(em, 1, {x.arg()}, kernel); }, ErrorKind::internal,
                          {"no bf16 arithmetic on the vector unit of Ascend910B4 (A2/A3): Cast to float first"}));
}

TEST_F(Emulated, ReduceSumAndArithmetic) {
  Gm<float> x("x", 1000);
  for (std::size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<float>(i % 7) - 3.0f + 0.25f;
  const double want = std::accumulate(x.data.begin(), x.data.end(), 0.0);
  launch(em, 1, {x.arg()}, [&] {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf, sum, work;
    pipe.InitBuffer(buf, 4000);
    pipe.InitBuffer(sum, 32);
    pipe.InitBuffer(work, ReduceSumWorkElems(1000) * 4);
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<float*>(x.addr()), 1000);
    const LocalTensor<float> t = buf.Get<float>();
    DataCopyPad(t, g, {1, 4000, 0, 0, 0}, DataCopyPadExtParams<float>{});
    PipeSync<HardEvent::MTE2_V>();
    ReduceSum(sum.Get<float>(), t, work.Get<float>(), 1000);
    PipeSync<HardEvent::V_S>();
    EXPECT_NEAR(sum.Get<float>().GetValue(0), want, 1e-3);
    Muls(t, t, 2.0f, 1000);
    Adds(t, t, 1.0f, 1000);
    Sqrt(t, t, 7);
    PipeSync<HardEvent::V_S>();
    EXPECT_FLOAT_EQ(t.GetValue(6), std::sqrt(2.0f * x.data[6] + 1.0f));
  });
}

// ---- The vector unit's conversions agree with opreg's on every class of float.

TEST(EmulatorCast, ConversionsMatchOpregsExactRounding) {
  for (std::uint32_t bits = 0; bits < 0xFFFFFFFFu - 4093; bits += 4093) {
    const float f = std::bit_cast<float>(bits);
    EXPECT_EQ(npu::detail::float_to_half(f), to_half(f).bits) << std::hex << bits;
    EXPECT_EQ(npu::detail::float_to_bf16(f), to_bfloat16(f).bits) << std::hex << bits;
  }
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const double want = to_double(half{static_cast<std::uint16_t>(h)});
    const float got = npu::detail::half_table()[h];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << h;
    }
  }
  // Ties and the edges of the half range.
  for (const float f : {65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f, 1.0f + 0x1p-11f}) {
    EXPECT_EQ(npu::detail::float_to_half(f), to_half(f).bits) << f;
    EXPECT_EQ(npu::detail::float_to_half(-f), to_half(-f).bits) << f;
  }
}

TEST(EmulatorOutsideALaunch, TheDeviceApiNeedsACore) {
  EXPECT_TRUE(ThrowsError([] { TPipe pipe; }, ErrorKind::internal, {"outside a kernel launch"}));
}

}  // namespace
}  // namespace opreg::npu::testing
