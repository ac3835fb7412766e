// The npu glu kernels' own tests (issue 19) beside the shared conformance grids: the seeds'
// failures reproduced by the forced-only gpu_port (ub overflow on the seed's 65536-column rows,
// the grid limit past 65535 rows) with flat passing the same shapes, the three variants agreeing
// bit for bit where they all run, and the counters flat is built for (910B4).
#include <cstring>

#include "npu_test_util.h"
#include "ops/problem.h"

namespace opreg::npu::testing {
namespace {

const char* const kOps[] = {"geglu.fwd", "geglu.bwd", "swiglu.fwd", "swiglu.bwd"};

class Glu : public NpuTest {
 protected:
  void force(const std::string& variant) {
    Config c = reg->config();
    c.force_variants = {variant};
    reg->set_config(c);
  }

  // Forced to flat, the problem runs and matches the reference.
  void flat_passes(const ProblemSpec& s, const char* op) {
    Problem p(*reg, s, npu);
    p.poison();
    force(std::string("npu.") + op + ".flat");
    p.run();
    EXPECT_TRUE(p.check().pass()) << op;
  }

  // The outputs' bytes after `variant` ran (checked against the reference).
  std::vector<std::vector<std::byte>> outputs_of(const ProblemSpec& s, const std::string& variant) {
    Problem p(*reg, s, npu);
    p.poison();
    force(variant);
    const DispatchResult r = p.run();
    EXPECT_EQ(r.variant->name, variant);
    const CheckReport report = p.check();
    EXPECT_TRUE(report.pass()) << variant << ": " << report.summary();
    std::vector<std::vector<std::byte>> out;
    for (const ProblemOutput& o : p.outputs()) {
      const auto* b = static_cast<const std::byte*>(o.value.data());
      out.emplace_back(b, b + o.value.nbytes());
    }
    return out;
  }

};

TEST_F(Glu, GpuPortIsNeverChosenAndSaysWhatItWouldDo) {
  for (const char* op : kOps) {
    Problem p(*reg, spec(op, Shape{4, 64}, DType::f32), npu);
    const std::string base(op);
    const std::string name = "npu." + base + ".gpu_port";
    const Verdict v = p.run_variant(name);
    EXPECT_FALSE(v.ok) << name;
    EXPECT_NE(v.reason.find("never chosen"), std::string::npos) << v.reason;
    EXPECT_NE(v.reason.find("BLOCK_SIZE 64"), std::string::npos) << v.reason;
    EXPECT_EQ(p.run().variant->name, "npu." + base + ".flat");
  }
}

// The seed's geglu shape has 65536 columns (256 x 65536 bf16; two rows show the same launch):
// BLOCK_SIZE 65536; Liger's program loads a and b (doubled by multibuffer), stores c and computes
// in an f32 copy of a: 65536 x (2 x 2 x 16 + 16 + 32) = 7340032 bits; the backward loads dc, a, b,
// stores da, db: 65536 x (3 x 2 x 16 + 2 x 16 + 32) = 10485760 bits.
TEST_F(Glu, GpuPortForcedOnTheSeedRowFailsWithUbOverflowWhereFlatPasses) {
  const std::pair<const char*, const char*> cases[] = {
      {"geglu.fwd", "7340032"}, {"swiglu.bwd", "10485760"}, {"swiglu.fwd", "7340032"}, {"geglu.bwd", "10485760"}};
  for (const auto& [op, bits] : cases) {
    const ProblemSpec s = spec(op, Shape{2, 65536}, DType::bf16);
    {
      Problem p(*reg, s, npu);
      force(std::string("npu.") + op + ".gpu_port");
      EXPECT_TRUE(ThrowsError(
          [&] { p.run(); }, ErrorKind::unsupported,
          {std::string("ub overflow, requires ") + bits + " bits while 1572864 bits available!", "multi-buffer"}))
          << op;
    }
    flat_passes(s, op);
  }
}

TEST_F(Glu, GpuPortForcedOnMoreThan65535RowsHitsTheGridLimitWhereFlatPasses) {
  for (const char* op : {"swiglu.fwd", "geglu.bwd"}) {
    const ProblemSpec s = spec(op, Shape{65536, 2}, DType::f16);
    {
      Problem p(*reg, s, npu);
      force(std::string("npu.") + op + ".gpu_port");
      EXPECT_TRUE(ThrowsError([&] { p.run(); }, ErrorKind::unsupported,
                              {"grid should be less than 65536!", "TRITON_ALL_BLOCKS_PARALLEL=1"}))
          << op;
    }
    flat_passes(s, op);
    EXPECT_LE(em->last_launch()->block_dim, 40);
  }
}

// One body, three walks: whatever tile a value falls in, it gets the same operations.
TEST_F(Glu, FlatSubBlockAndGpuPortAgreeBitForBit) {
  for (const char* op : kOps) {
    for (const DType d : {DType::f32, DType::f16, DType::bf16}) {
      const ProblemSpec s = spec(op, Shape{5, 3, 301}, d);
      const auto flat = outputs_of(s, std::string("npu.") + op + ".flat");
      EXPECT_EQ(outputs_of(s, std::string("npu.") + op + ".sub_block"), flat) << op << " " << to_string(d);
      EXPECT_EQ(outputs_of(s, std::string("npu.") + op + ".gpu_port"), flat) << op << " " << to_string(d);
    }
  }
}

// flat reads each input once and writes each output once, in one wave that leaves no core idle,
// with tiles that fill UB; sub_block moves the same bytes, but a short row costs it a copy of its
// own where flat copies whole 512-byte lines.
TEST_F(Glu, FlatMovesTheIdealBytesInOneFullWave) {
  for (const char* op : kOps) {
    for (const DType d : {DType::bf16, DType::f32}) {
      Problem p(*reg, spec(op, Shape{64, 8192}, d), npu);
      force(std::string("npu.") + op + ".flat");
      p.run();
      const LaunchCounters c = *em->last_launch();
      EXPECT_EQ(c.counters.gm_read + c.counters.gm_write, p.bytes()) << op;
      EXPECT_EQ(c.block_dim, 40) << op;
      EXPECT_EQ(c.waves, 1) << op;
      EXPECT_EQ(c.idle_cores, 0) << op;
      EXPECT_GE(c.ub_ratio(), 0.6) << op << " " << to_string(d);
      EXPECT_EQ(c.counters.truncated_copies, 0U);
      EXPECT_EQ(c.counters.scalar_fallbacks, 0U);
    }
  }
}

TEST_F(Glu, SubBlockPaysACopyPerShortRow) {
  const ProblemSpec s = spec("swiglu.fwd", Shape{4000, 7}, DType::bf16);
  std::uint64_t dma[2] = {0, 0};
  std::uint64_t moved[2] = {0, 0};
  int i = 0;
  for (const char* v : {"npu.swiglu.fwd.flat", "npu.swiglu.fwd.sub_block"}) {
    Problem p(*reg, s, npu);
    force(v);
    p.run();
    const LaunchCounters c = *em->last_launch();
    dma[i] = c.counters.dma_in + c.counters.dma_out;
    moved[i++] = c.counters.gm_read + c.counters.gm_write;
  }
  EXPECT_EQ(moved[0], moved[1]);
  EXPECT_EQ(dma[1], 3U * 4000U);  // a and b in, c out, for each row
  EXPECT_LE(dma[0], 3U * 2U * 40U);
}

}  // namespace
}  // namespace opreg::npu::testing
