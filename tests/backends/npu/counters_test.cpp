// The goals of the npu rms_norm kernels, read off the emulator's counters (910B4 unless said):
// single-pass forward reads x once and the weight once per core, one wave of min(40, rows)
// blocks, tiles that fill UB; chunked forward reads x at most twice; the backward writes each
// core's dW partial once; and the cost model lands on the one public timing.
#include "npu_test_util.h"

namespace opreg::npu::testing {
namespace {

class Counted : public NpuTest {
 protected:
  LaunchCounters fwd(const std::string& variant, std::int64_t rows, std::int64_t cols, DType x, DType w) {
    RmsNormFwdArgs a;
    a.x = filled({rows, cols}, x, 0.75);
    a.weight = filled({cols}, w, 1.25);
    a.y = Tensor::empty({rows, cols}, x, npu, *reg);
    a.rstd = Tensor::empty({rows}, DType::f32, npu, *reg);
    return launched(rms_norm_fwd_op(), variant, a);
  }

  LaunchCounters bwd(const std::string& variant, std::int64_t rows, std::int64_t cols, DType x, DType w) {
    RmsNormBwdArgs a;
    a.dy = filled({rows, cols}, x, 0.5);
    a.x = filled({rows, cols}, x, 0.75);
    a.weight = filled({cols}, w, 1.25);
    a.rstd = filled({rows}, DType::f32, 1.5);
    a.dx = Tensor::empty({rows, cols}, x, npu, *reg);
    a.dweight = Tensor::empty({cols}, w, npu, *reg);
    return launched(rms_norm_bwd_op(), variant, a);
  }
};

TEST_F(Counted, SinglePassForwardReadsXOnceAndTheWeightOncePerCore) {
  for (const auto& [cols, x] :
       {std::pair{1024, DType::f32}, std::pair{4096, DType::bf16}, std::pair{2000, DType::f16}}) {
    const std::int64_t rows = 4096;
    const LaunchCounters c = fwd("npu.rms_norm.fwd.single_pass", rows, cols, x, DType::f32);
    const std::uint64_t ideal =
        bytes(rows * cols, x) + static_cast<std::uint64_t>(c.block_dim) * bytes(cols, DType::f32);
    EXPECT_LE(static_cast<double>(c.counters.gm_read), 1.02 * static_cast<double>(ideal)) << cols;
    EXPECT_EQ(c.counters.gm_read, ideal);
    EXPECT_EQ(c.counters.gm_write, bytes(rows * cols, x) + bytes(rows, DType::f32));
    EXPECT_EQ(c.block_dim, 40);
    EXPECT_EQ(c.waves, 1);
    EXPECT_EQ(c.idle_cores, 0);
    EXPECT_GE(c.ub_ratio(), 0.6) << cols;
    EXPECT_EQ(c.counters.truncated_copies, 0U);
    EXPECT_EQ(c.counters.scalar_fallbacks, 0U);
  }
}

TEST_F(Counted, BlockDimIsMinOf40AndRowsInOneWave) {
  for (const std::int64_t rows : {1, 7, 40, 41, 123, 4097}) {
    const LaunchCounters c = fwd("npu.rms_norm.fwd.single_pass", rows, 64, DType::f32, DType::f32);
    EXPECT_EQ(c.block_dim, std::min<std::int64_t>(40, rows));
    EXPECT_EQ(c.waves, 1);
    EXPECT_EQ(c.idle_cores, 40 - c.block_dim);
  }
}

TEST_F(Counted, ChunkedForwardReadsXAtMostTwice) {
  for (const auto& [rows, cols, x] :
       {std::tuple{64, 20000, DType::f32}, std::tuple{2, 200000, DType::bf16}, std::tuple{41, 12289, DType::bf16}}) {
    const LaunchCounters c = fwd("npu.rms_norm.fwd.chunked", rows, cols, x, DType::f32);
    const std::uint64_t xb = bytes(rows * cols, x);
    EXPECT_LE(c.counters.gm_read, 2 * xb + static_cast<std::uint64_t>(c.block_dim) * bytes(cols, DType::f32)) << cols;
    EXPECT_GE(c.counters.gm_read, 2 * xb);
    EXPECT_EQ(c.counters.gm_write, xb + bytes(rows, DType::f32));
    EXPECT_EQ(c.block_dim, std::min<std::int64_t>(40, rows));
  }
}

TEST_F(Counted, BackwardWritesEachCoresPartialOnce) {
  for (const auto& [variant, rows, cols, x] : {std::tuple{"npu.rms_norm.bwd.single_pass", 4096, 1024, DType::bf16},
                                               std::tuple{"npu.rms_norm.bwd.chunked", 64, 20000, DType::f32},
                                               std::tuple{"npu.rms_norm.bwd.chunked", 300, 3000, DType::f16}}) {
    const LaunchCounters c = bwd(variant, rows, cols, x, DType::f32);
    // An f32 x's partial is a (hi, lo) pair (compensated.h): two rows a core.
    const std::uint64_t per_core = x == DType::f32 ? 2 : 1;
    const auto partials = per_core * static_cast<std::uint64_t>(c.block_dim) * bytes(cols, DType::f32);
    // dx, each core's partial once, dweight.
    EXPECT_EQ(c.counters.gm_write, bytes(rows * cols, x) + partials + bytes(cols, DType::f32)) << variant;
    EXPECT_EQ(c.counters.atomic_adds, 0U);
    EXPECT_EQ(c.counters.sync_alls, static_cast<std::uint64_t>(c.block_dim));
    EXPECT_EQ(c.block_dim, std::min<std::int64_t>(40, rows));
  }
  // The single pass reads dy and x once; the weight once per core and the partials once each.
  const LaunchCounters c = bwd("npu.rms_norm.bwd.single_pass", 4096, 1024, DType::bf16, DType::bf16);
  const std::uint64_t ideal = 2 * bytes(4096 * 1024, DType::bf16) + bytes(4096, DType::f32) +
                              40 * (bytes(1024, DType::bf16) + bytes(1024, DType::f32));
  EXPECT_EQ(c.counters.gm_read, ideal);
}

TEST_F(Counted, AtomicBackwardAddsEachPartialOnce) {
  const LaunchCounters c = bwd("npu.rms_norm.bwd.atomic", 400, 300, DType::f32, DType::f32);
  EXPECT_EQ(c.counters.atomic_adds, 40U);
  EXPECT_EQ(c.counters.atomic_bytes, 40U * 300 * 4);
}

TEST_F(Counted, EmptyProblemsLaunchNothingOrClearDweight) {
  const LaunchCounters none = fwd("npu.rms_norm.fwd.single_pass", 0, 64, DType::f32, DType::f32);
  EXPECT_EQ(none.block_dim, 0);
  EXPECT_EQ(none.note(), " block_dim=0 est_us=0");
  const LaunchCounters clear = bwd("npu.rms_norm.bwd.single_pass", 0, 64, DType::f32, DType::f32);
  EXPECT_EQ(clear.block_dim, 1);
  EXPECT_EQ(clear.counters.gm_write, 3 * bytes(64, DType::f32));  // a zero (hi, lo) partial, then dweight
}

// [P1]: a Triton rms_norm on a "910B", f32 (8, 256, 4096), 38.66 (us assumed), L2-resident. The
// model must land within 30% on the default profile and on the vendor's representative 910B2.
TEST_F(Counted, CostModelReproducesThePublicTimingWithin30Percent) {
  // The 910B2 (the vendor's A2 figures) within 30% of the one public timing; the 910B4 (its
  // clock and cores lower, its HBM a marked parameter) above it: with the instructions' own
  // costs [S33] this kernel is vector-bound there (docs/backends/npu.md, "Cost model").
  use(model("Ascend910B2"));
  const LaunchCounters b2 = fwd("npu.rms_norm.fwd.single_pass", 2048, 4096, DType::f32, DType::f32);
  EXPECT_TRUE(b2.l2_resident);
  EXPECT_NEAR(b2.est_us, 38.66, 0.3 * 38.66);
  use(model("Ascend910B4"));
  const LaunchCounters b4 = fwd("npu.rms_norm.fwd.single_pass", 2048, 4096, DType::f32, DType::f32);
  EXPECT_TRUE(b4.l2_resident);
  EXPECT_GT(b4.est_us, b2.est_us);
  EXPECT_LT(b4.est_us, 1.5 * 38.66);
  // The smallest kernels take ~2 us [P1] (1, 8, 128): the launch floor.
  const LaunchCounters tiny = fwd("npu.rms_norm.fwd.single_pass", 8, 128, DType::f32, DType::f32);
  EXPECT_NEAR(tiny.est_us, 2.16, 0.3 * 2.16);
}

// Forcing single_pass on a row that does not fit gives the device's error, not a wrong answer;
// the choice explains itself.
TEST_F(Counted, ForcedSinglePassOnALongRowIsAnUbOverflow) {
  RmsNormFwdArgs a;
  a.x = filled({2, 200003}, DType::f32, 0.5);
  a.weight = filled({200003}, DType::f32, 1.0);
  a.y = Tensor::empty({2, 200003}, DType::f32, npu, *reg);
  a.rstd = Tensor::empty({2}, DType::f32, npu, *reg);
  std::string why;
  const VariantInfo* chosen = reg->choose(rms_norm_fwd_op(), a, &why);
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->name, "npu.rms_norm.fwd.chunked");
  EXPECT_NE(why.find("npu.rms_norm.fwd.single_pass: a row of 200003 columns needs"), std::string::npos) << why;
  EXPECT_NE(why.find("split_row"), std::string::npos) << why;
  Config config = reg->config();
  config.force_variants = {"npu.rms_norm.fwd.single_pass"};
  reg->set_config(config);
  EXPECT_TRUE(ThrowsError([&] { reg->call(rms_norm_fwd_op(), a); }, ErrorKind::device,
                          {"507035 (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION): VEC instruction error: the ub address out of "
                           "bounds."}));
}

TEST_F(Counted, VerboseTwoLogsThePlanOfTheChoice) {
  std::vector<std::string> lines;
  reg->set_log_sink([&](std::string_view line) { lines.emplace_back(line); });
  Config config = reg->config();
  config.verbose = 2;
  reg->set_config(config);
  fwd("npu.rms_norm.fwd.single_pass", 2, 64, DType::f32, DType::f32);  // call_variant: no log
  RmsNormFwdArgs a;
  a.x = filled({300, 100}, DType::bf16, 0.5);
  a.y = Tensor::empty({300, 100}, DType::bf16, npu, *reg);
  a.rstd = Tensor::empty({300}, DType::f32, npu, *reg);
  reg->call(rms_norm_fwd_op(), a);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("-> npu.rms_norm.fwd.single_pass"), std::string::npos) << all;
  EXPECT_NE(all.find("multi_row: 300 x 100, block_dim=40"), std::string::npos) << all;
}

}  // namespace
}  // namespace opreg::npu::testing
