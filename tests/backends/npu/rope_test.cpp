// The npu rope kernel's own tests beside the shared conformance grids: a position_ids value
// outside the table makes that position's outputs NaN on both variants and pairings without a
// read outside the table (the conformance problems' positions all lie inside it); the table rows
// are read once a position and every head rotated from them (the counters); and the planner's
// whole-head limit, where rows hands over to chunked (910B4).
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/npu/rope/plan.h"
#include "npu_test_util.h"

namespace opreg::npu::testing {
namespace {

using Rope = NpuTest;

// q [1, 2, 4, D], k [1, 1, 4, D], tables of 5 rows: positions 0, -1, 7, 3. Values chosen so that
// every product is exact: x 0.75, cos 0.5, sin 0.25.
TEST_F(Rope, APositionOutsideTheTableGivesNaNOutputsThere) {
  const std::vector<std::int64_t> ids{0, -1, 7, 3};
  for (const DType dtype : {DType::f32, DType::bf16}) {
    for (const RopeStyle style : {RopeStyle::half, RopeStyle::interleaved}) {
      for (const char* impl : {"rows", "chunked"}) {
        for (const bool backward : {false, true}) {
          const std::int64_t D = 20;
          RopeFwdArgs a;
          a.q = filled({1, 2, 4, D}, dtype, 0.75);
          a.k = filled({1, 1, 4, D}, dtype, 0.75);
          a.cos = filled({5, D}, dtype, 0.5);
          a.sin = filled({5, D}, dtype, 0.25);
          std::vector<std::int64_t> host_ids = ids;
          a.position_ids = Tensor::empty({4}, DType::i64, npu, *reg);
          a.position_ids.copy_from(Tensor::wrap(std::span<std::int64_t>(host_ids), Shape{4}), *reg);
          a.q_out = Tensor::empty({1, 2, 4, D}, dtype, npu, *reg);
          a.k_out = Tensor::empty({1, 1, 4, D}, dtype, npu, *reg);
          a.q_out.fill(7.0, *reg);
          a.style = style;
          const std::string variant = std::string("npu.rope.") + (backward ? "bwd." : "fwd.") + impl;
          if (backward) {
            RopeBwdArgs b{a.q, a.k, a.cos, a.sin, a.position_ids, a.q_out, a.k_out, style};
            launched(rope_bwd_op(), variant, b);
          } else {
            launched(rope_fwd_op(), variant, a);
          }
          // The rotation of (0.75, 0.75) by (0.5, +-0.25): first 0.1875 (0.5625 back), second 0.5625 (0.1875).
          const double first = backward ? 0.5625 : 0.1875;
          const double second = backward ? 0.1875 : 0.5625;
          const Tensor q = a.q_out.to(Device{}, *reg);
          for (std::int64_t h = 0; h < 2; ++h) {
            for (std::int64_t t = 0; t < 4; ++t) {
              for (std::int64_t i = 0; i < D; ++i) {
                const double got = load_as_double(q.data(), dtype, static_cast<std::size_t>((h * 4 + t) * D + i));
                const bool is_first = style == RopeStyle::half ? i < D / 2 : i % 2 == 0;
                if (t == 1 || t == 2) {
                  EXPECT_TRUE(std::isnan(got)) << variant << " h" << h << " t" << t << " i" << i << ": " << got;
                } else {
                  EXPECT_EQ(got, is_first ? first : second) << variant << " h" << h << " t" << t << " i" << i;
                }
              }
            }
          }
        }
      }
    }
  }
}

// Each position's cos and sin rows come in once (half pairs read D/2 entries of a full-width
// row) and rotate all its q and k heads: gm_read is q, k and B x T table rows, gm_write q and k.
TEST_F(Rope, TablesAreReadOncePerPositionForAllItsHeads) {
  for (const bool transposed : {false, true}) {
    for (const RopeStyle style : {RopeStyle::half, RopeStyle::interleaved}) {
      const std::int64_t B = 2, Hq = 8, Hk = 2, T = 300, D = 128;
      ProblemSpec s = spec("rope.fwd", Shape{B, Hq, T, D}, DType::bf16);
      s.wdtype = DType::f32;
      s.kv_heads = Hk;
      s.style = style;
      s.transposed = transposed;
      s.table = RopeTable::half;  // [1, T, D / 2]: both pairings read the whole row
      Problem p(*reg, s, npu);
      p.poison();
      EXPECT_TRUE(p.run_variant("npu.rope.fwd.rows").ok);
      EXPECT_TRUE(p.check().pass());
      const LaunchCounters c = *em->last_launch();
      const std::uint64_t heads = bytes(B * (Hq + Hk) * T * D, DType::bf16);
      EXPECT_EQ(c.counters.gm_read, heads + 2 * bytes(B * T * D / 2, DType::f32)) << transposed;
      EXPECT_EQ(c.counters.gm_write, heads);
      EXPECT_EQ(c.block_dim, 40);
      EXPECT_EQ(c.waves, 1);
      EXPECT_EQ(c.idle_cores, 0);
      EXPECT_EQ(c.counters.truncated_copies, 0U);
      EXPECT_EQ(c.counters.scalar_fallbacks, 0U);
    }
  }
}

// rows takes a head whole up to the planner's limit; one pair more and it refuses, and chunked
// cuts the head in chunks of a multiple of 16 pairs that fit UB.
TEST_F(Rope, RowsHandsTheLongestHeadsToChunked) {
  using rope::Impl;
  const DeviceModel m = model();
  for (const family::Elem x : {family::Elem::f32, family::Elem::bf16}) {
    for (const family::Pairing pairing : {family::Pairing::half, family::Pairing::interleaved}) {
      rope::RopeSizes s{.x = x, .w = x, .pairing = pairing, .batch = 1, .seq = 3, .dim = 2, .heads = 2};
      auto rows_take = [&](std::int64_t pairs) {
        s.dim = 2 * pairs;
        return rope::plan(Impl::rows, s, m).fits;
      };
      const std::int64_t limit = largest(1 << 20, rows_take);
      ASSERT_GT(limit, 64);
      EXPECT_FALSE(rows_take(limit + 1));
      s.dim = 2 * limit;
      const rope::RopePlan at = rope::plan(Impl::rows, s, m);
      EXPECT_LE(at.ub_used, at.ub_bytes - kUbReserve);
      EXPECT_EQ(at.chunks, 1);
      s.dim = 2 * (limit + 1);
      const rope::RopePlan past = rope::plan(Impl::chunked, s, m);
      EXPECT_TRUE(past.fits);
      EXPECT_EQ(past.chunks, 2);
      EXPECT_EQ(past.chunk % kSubAlign, 0);
      EXPECT_LE(past.ub_used, past.ub_bytes - kUbReserve);
    }
  }
}

}  // namespace
}  // namespace opreg::npu::testing
