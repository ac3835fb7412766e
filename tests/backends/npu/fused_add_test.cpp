// fused_add_rms_norm on the npu (rms_norm's kernels with the residual's tiles): s is formed in UB
// and written once, the single-pass forward reads x and the residual once, the chunked one reads
// s back instead of x and the residual; and the forced-only gpu_port fails where Liger's Triton
// kernel fails on Ascend, with the device's texts.
#include "npu_test_util.h"

namespace opreg::npu::testing {
namespace {

class FusedAdd : public NpuTest {
 protected:
  FusedAddRmsNormFwdArgs fwd_args(std::int64_t rows, std::int64_t cols, DType x, DType w) {
    FusedAddRmsNormFwdArgs a;
    a.x = filled({rows, cols}, x, 0.75);
    a.residual = filled({rows, cols}, x, -0.25);
    a.weight = filled({cols}, w, 1.25);
    a.y = Tensor::empty({rows, cols}, x, npu, *reg);
    a.s = Tensor::empty({rows, cols}, x, npu, *reg);
    a.rstd = Tensor::empty({rows}, DType::f32, npu, *reg);
    return a;
  }
  FusedAddRmsNormBwdArgs bwd_args(std::int64_t rows, std::int64_t cols, DType x, DType w) {
    FusedAddRmsNormBwdArgs a;
    a.dy = filled({rows, cols}, x, 0.5);
    a.ds_out = filled({rows, cols}, x, 0.125);
    a.s = filled({rows, cols}, x, 0.75);
    a.weight = filled({cols}, w, 1.25);
    a.rstd = filled({rows}, DType::f32, 1.5);
    a.dx = Tensor::empty({rows, cols}, x, npu, *reg);
    a.dweight = Tensor::empty({cols}, w, npu, *reg);
    return a;
  }
  // Runs `variant` forced (a forced built-in variant runs the plan it was refused for).
  template <class Args>
  void forced(const Op<Args>& op, const std::string& variant, const Args& a) {
    Config c = reg->config();
    c.force_variants = {variant};
    reg->set_config(c);
    reg->call(op, a);
  }
  LaunchCounters run_fwd(const std::string& variant, std::int64_t rows, std::int64_t cols, DType x, DType w) {
    return launched(fused_add_rms_norm_fwd_op(), variant, fwd_args(rows, cols, x, w));
  }
};

TEST_F(FusedAdd, SinglePassReadsXAndTheResidualOnceAndWritesSOnce) {
  const std::int64_t rows = 4096;
  const std::int64_t cols = 2048;
  const LaunchCounters c = run_fwd("npu.fused_add_rms_norm.fwd.single_pass", rows, cols, DType::bf16, DType::f32);
  const auto cores = static_cast<std::uint64_t>(c.block_dim);
  EXPECT_EQ(c.counters.gm_read, 2 * bytes(rows * cols, DType::bf16) + cores * bytes(cols, DType::f32));
  EXPECT_EQ(c.counters.gm_write, 2 * bytes(rows * cols, DType::bf16) + bytes(rows, DType::f32));
  EXPECT_EQ(c.block_dim, 40);
  EXPECT_EQ(c.waves, 1);
}

TEST_F(FusedAdd, ChunkedReadsSBackRatherThanXAndTheResidual) {
  const std::int64_t rows = 41;
  const std::int64_t cols = 70001;
  const LaunchCounters c = run_fwd("npu.fused_add_rms_norm.fwd.chunked", rows, cols, DType::f16, DType::f16);
  const auto cores = static_cast<std::uint64_t>(c.block_dim);
  EXPECT_EQ(c.counters.gm_read, 3 * bytes(rows * cols, DType::f16) + cores * bytes(cols, DType::f16));
  EXPECT_EQ(c.counters.gm_write, 2 * bytes(rows * cols, DType::f16) + bytes(rows, DType::f32));
}

TEST_F(FusedAdd, BackwardReadsDsOutOnceWhereDxIsFormed) {
  const std::int64_t rows = 256;
  const std::int64_t cols = 1000;
  const LaunchCounters c = launched(fused_add_rms_norm_bwd_op(), "npu.fused_add_rms_norm.bwd.single_pass",
                                    bwd_args(rows, cols, DType::bf16, DType::bf16));
  const auto cores = static_cast<std::uint64_t>(c.block_dim);
  // dy, ds_out, s; rstd; the weight and, after SyncAll, the dW partials once per core.
  EXPECT_EQ(c.counters.gm_read, 3 * bytes(rows * cols, DType::bf16) + bytes(rows, DType::f32) +
                                    cores * bytes(cols, DType::bf16) + cores * bytes(cols, DType::f32));
}

// Liger's fused add: one program per row, BLOCK_SIZE = 65536 for the seed's row of 65536 bf16;
// x, residual and weight loaded (doubled by multibuffer), y and s stored, and the f32 copy of x:
// 65536 x (3 x 2 x 16 + 2 x 16 + 32) bits, and the tl.sum scratch, (65536 / 64 + 8) floats.
TEST_F(FusedAdd, GpuPortOverflowsUbOnTheSeedsRow) {
  EXPECT_TRUE(ThrowsError(
      [&] {
        forced(fused_add_rms_norm_fwd_op(), "npu.fused_add_rms_norm.fwd.gpu_port",
               fwd_args(4, 65536, DType::bf16, DType::bf16));
      },
      ErrorKind::unsupported, {"ub overflow, requires 10518784 bits while 1572864 bits available!"}));
  // The chosen variant takes the same row.
  reg->set_config(Config{});
  EXPECT_EQ(reg->call(fused_add_rms_norm_fwd_op(), fwd_args(4, 65536, DType::bf16, DType::bf16)).variant->name,
            "npu.fused_add_rms_norm.fwd.chunked");
}

// The forward launches a program per row: 70000 rows are past the launcher's limit. The backward
// launches num_vectorcore programs (rows_per_program = ceil(rows / 40)), so it runs.
TEST_F(FusedAdd, GpuPortGridPast65535Programs) {
  EXPECT_TRUE(ThrowsError(
      [&] {
        forced(fused_add_rms_norm_fwd_op(), "npu.fused_add_rms_norm.fwd.gpu_port",
               fwd_args(70000, 3, DType::f32, DType::f32));
      },
      ErrorKind::unsupported,
      {"grid should be less than 65536! You can try \"export TRITON_ALL_BLOCKS_PARALLEL=1\" to avoid this problem."}));
  forced(fused_add_rms_norm_bwd_op(), "npu.fused_add_rms_norm.bwd.gpu_port", bwd_args(70000, 3, DType::f32, DType::f32));
  EXPECT_EQ(em->last_launch()->block_dim, 40);
  reg->set_config(Config{});
  EXPECT_EQ(reg->call(fused_add_rms_norm_fwd_op(), fwd_args(70000, 3, DType::f32, DType::f32)).variant->name,
            "npu.fused_add_rms_norm.fwd.single_pass");
}

// Never chosen: supports() refuses with the port's numbers, even where the device would take it.
TEST_F(FusedAdd, GpuPortIsNeverChosen) {
  const Verdict v = reg->call_variant(fused_add_rms_norm_fwd_op(), "npu.fused_add_rms_norm.fwd.gpu_port",
                                      fwd_args(3, 5, DType::f32, DType::f32));
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("never chosen"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("BLOCK_SIZE 8"), std::string::npos) << v.reason;
}

}  // namespace
}  // namespace opreg::npu::testing
