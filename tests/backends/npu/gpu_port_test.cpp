// gpu_port as the real port (issue 39): Liger-Kernel's GPU kernels as triton-ascend launches
// them (src/backends/npu/gpu_port.h): their grids and BLOCK_SIZE caps, the failures raised once
// before any launch, the multi-buffer rule (OPREG_NPU_TRITON_MULTIBUFFER), and, where the port
// runs, its own program's counters as the last launch.
#include "backends/npu/gpu_port.h"

#include <cstdlib>

#include "backends/npu/norm/plan.h"
#include "npu_test_util.h"

namespace opreg::npu::testing {
namespace {

class GpuPort : public NpuTest {
 protected:
  void TearDown() override { unsetenv("OPREG_NPU_TRITON_MULTIBUFFER"); }
  void force(const std::string& variant) {
    Config c = reg->config();
    c.force_variants = {variant};
    if (variant.empty()) c.force_variants.clear();
    reg->set_config(c);
  }
  FusedAddRmsNormFwdArgs fwd_args(std::int64_t rows, std::int64_t cols, DType x) {
    FusedAddRmsNormFwdArgs a;
    a.x = filled({rows, cols}, x, 0.75);
    a.residual = filled({rows, cols}, x, -0.25);
    a.weight = filled({cols}, x, 1.25);
    a.y = Tensor::empty({rows, cols}, x, npu, *reg);
    a.s = Tensor::empty({rows, cols}, x, npu, *reg);
    a.rstd = Tensor::empty({rows}, DType::f32, npu, *reg);
    return a;
  }
  RmsNormBwdArgs rms_bwd_args(std::int64_t rows, std::int64_t cols) {
    RmsNormBwdArgs a;
    a.dy = filled({rows, cols}, DType::f32, 0.5);
    a.x = filled({rows, cols}, DType::f32, 0.75);
    a.weight = filled({cols}, DType::f32, 1.25);
    a.rstd = filled({rows}, DType::f32, 1.5);
    a.dx = Tensor::empty({rows, cols}, DType::f32, npu, *reg);
    a.dweight = Tensor::empty({cols}, DType::f32, npu, *reg);
    return a;
  }
  static norm::NormSizes group_norm(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t groups) {
    norm::NormSizes s;
    s.layer = false;
    s.has_weight = s.has_bias = true;
    s.sets = n * groups;
    s.groups = groups;
    s.channels = c / groups;
    s.spread = hw;
    return s;
  }
};

// Liger's benchmark shape (benchmark_group_norm.py: M 128, hidden 2048, channels_per_group 4,
// H 512, f32): one program per (N, group), 128 x 512 = 65536 programs, past the launcher's
// limit. (Checked on the port itself: the 512 MB problem would not make a fast test.)
TEST_F(GpuPort, GroupNormAtLigersBenchmarkShapeFailsWithTheGridText) {
  for (const bool backward : {false, true}) {
    const gpu_port::Port p = norm::port_of(group_norm(128, 2048, 512, 512), backward, em->model());
    EXPECT_EQ(p.programs, 65536);
    EXPECT_EQ(p.grid_text, "(128, 512)");
    EXPECT_TRUE(ThrowsError([&] { gpu_port::check(p, "group_norm"); }, ErrorKind::unsupported,
                            {"grid should be less than 65536! You can try \"export TRITON_ALL_BLOCKS_PARALLEL=1\" to "
                             "avoid this problem.",
                             "65536 programs"}));
  }
}

// BLOCK_SIZE follows Liger's caps: forward min(16384 on an npu, next_power_of_2((C/G) x HW)),
// backward min(16384, next_power_of_2(HW)); the issue-19 seed group (64 channels x 4096) gives
// 16384 and 4096, so the forward's bits are 16384 x (x, w, b doubled, y once: 3 x 2 x 32 + 32)
// and the tl.sum scratch, (16384 / 64 + 8) floats.
TEST_F(GpuPort, GroupNormBlockSizeFollowsLigersCaps) {
  const gpu_port::Port f = norm::port_of(group_norm(2, 2048, 4096, 32), false, em->model());
  EXPECT_EQ(f.block_size, 16384);
  EXPECT_EQ(f.chunks, 16);
  EXPECT_EQ(f.live_bits, 16384 * (3 * 2 * 32 + 32) + (256 + 8) * 32);
  const gpu_port::Port b = norm::port_of(group_norm(2, 2048, 4096, 32), true, em->model());
  EXPECT_EQ(b.block_size, 4096);
  EXPECT_TRUE(b.ub_ok()) << b.live_bits;  // x, dy doubled and dx: 4096 x 160 bits
}

// The compile-time check fails once, before anything runs: the emulator's last launch and its
// est_us clock are those of the call before.
TEST_F(GpuPort, UbOverflowIsRaisedOnceBeforeTheLaunch) {
  reg->call(fused_add_rms_norm_fwd_op(), fwd_args(4, 64, DType::bf16));
  const LaunchCounters before = *em->last_launch();
  const double clock = em->est_us_total();
  force("npu.fused_add_rms_norm.fwd.gpu_port");
  // x, residual, weight doubled, y and s once, the f32 copy of x: 65536 x (3 x 2 x 16 + 2 x 16 + 32),
  // and the tl.sum scratch, (65536 / 64 + 8) floats: 10485760 + 33024.
  EXPECT_TRUE(ThrowsError([&] { reg->call(fused_add_rms_norm_fwd_op(), fwd_args(4, 65536, DType::bf16)); },
                          ErrorKind::unsupported,
                          {"ub overflow, requires 10518784 bits while 1572864 bits available! (possible reason:",
                           "before the launch of 4 programs"}));
  EXPECT_EQ(em->last_launch()->kernel, before.kernel);
  EXPECT_EQ(em->last_launch()->seed, before.seed);
  EXPECT_EQ(em->est_us_total(), clock);
}

// rms_norm's backward launches num_vectorcore programs (grid (40,) on the 910B4), not a program
// per row: 70000 rows of 8 run (Liger's block kernel, BLOCK_ROW 16, striding by 40 x 16 rows).
TEST_F(GpuPort, RmsNormBackwardOf70000RowsRunsOnNumVectorcorePrograms) {
  force("npu.rms_norm.bwd.gpu_port");
  const auto r = reg->call(rms_norm_bwd_op(), rms_bwd_args(70000, 8));
  EXPECT_EQ(r.variant->name, "npu.rms_norm.bwd.gpu_port");
  const LaunchCounters c = *em->last_launch();
  EXPECT_EQ(c.block_dim, 40);
  EXPECT_EQ(c.waves, 1);
  // dy and x once, the weight once a program; dx once and a float dW row a program.
  EXPECT_EQ(c.counters.gm_read, 2 * bytes(70000 * 8, DType::f32) + 40 * bytes(8, DType::f32));
  EXPECT_EQ(c.counters.gm_write, bytes(70000 * 8, DType::f32) + 40 * bytes(8, DType::f32));
}

// Seed 001's shape (fused_add_rms_norm f32, 2048 rows, hidden 512): the forward port's 2048
// programs in 52 waves cost more than the npu's own 40-block kernel.
TEST_F(GpuPort, ForwardPortCostsMoreThanTheNativeKernelAtTheSeedShape) {
  const auto native = reg->call(fused_add_rms_norm_fwd_op(), fwd_args(2048, 512, DType::f32));
  const double native_us = em->last_launch()->est_us;
  EXPECT_EQ(native.variant->name, "npu.fused_add_rms_norm.fwd.single_pass");
  force("npu.fused_add_rms_norm.fwd.gpu_port");
  const double before = em->est_us_total();
  reg->call(fused_add_rms_norm_fwd_op(), fwd_args(2048, 512, DType::f32));
  const LaunchCounters port = *em->last_launch();
  // The values are the native kernel's (it ran first, on the user's outputs); the call's time is
  // the port's alone, and the counters say where the values came from.
  EXPECT_EQ(port.values_from, "fused_add_rms_norm_fwd_single_pass");
  EXPECT_NE(port.note().find(" values_from=fused_add_rms_norm_fwd_single_pass"), std::string::npos);
  EXPECT_NEAR(em->est_us_total() - before, port.est_us, 1e-9);
  EXPECT_EQ(port.block_dim, 2048);
  EXPECT_EQ(port.waves, 52);
  EXPECT_GT(port.est_us, 2 * native_us);
  // x and the residual once, the weight once a program; y and s once.
  EXPECT_EQ(port.counters.gm_read, 2 * bytes(2048 * 512, DType::f32) + 2048 * bytes(512, DType::f32));
  EXPECT_EQ(port.counters.gm_write, 2 * bytes(2048 * 512, DType::f32));
}

// geglu bf16 rows of 16384: a and b doubled, c, the f32 copy of a: 16384 x 112 bits overflow;
// pruning one tile's second buffer (PR #1458) leaves 16384 x 96 = 1572864, which fits.
TEST_F(GpuPort, PruningMultiBufferTurnsAnOverflowIntoALaunch) {
  Problem p(*reg, spec("geglu.fwd", Shape{2, 16384}, DType::bf16), npu);
  force("npu.geglu.fwd.gpu_port");
  EXPECT_TRUE(ThrowsError([&] { p.run(); }, ErrorKind::unsupported,
                          {"ub overflow, requires 1835008 bits while 1572864 bits available!", "multibuffer double"}));
  setenv("OPREG_NPU_TRITON_MULTIBUFFER", "prune", 1);
  Problem q(*reg, spec("geglu.fwd", Shape{2, 16384}, DType::bf16), npu);
  EXPECT_EQ(q.run().variant->name, "npu.geglu.fwd.gpu_port");
  EXPECT_EQ(em->last_launch()->block_dim, 2);
  setenv("OPREG_NPU_TRITON_MULTIBUFFER", "triple", 1);
  Problem r(*reg, spec("geglu.fwd", Shape{2, 16384}, DType::bf16), npu);
  EXPECT_TRUE(ThrowsError([&] { r.run(); }, ErrorKind::invalid_argument, {"OPREG_NPU_TRITON_MULTIBUFFER=triple"}));
}

}  // namespace
}  // namespace opreg::npu::testing
