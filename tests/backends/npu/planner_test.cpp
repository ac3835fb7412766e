// The tiling planner on its own: CANN's own UB formula reproduced, the boundaries where a row
// just fits and just does not, the DMA limits that force one row a tile, the BLOCK_SIZE_SUB
// rules, the core split, and the UB fill the goals ask for.
#include <gtest/gtest.h>

#include <vector>

#include "backends/npu/rms_norm/plan.h"
#include "backends/npu/tiling.h"

namespace opreg::npu {
namespace {

PlanRequest request(std::span<const UbItem> layout, std::int64_t rows, std::int64_t cols, std::uint32_t elem = 4) {
  PlanRequest r;
  r.rows = rows;
  r.cols = cols;
  r.layout = layout;
  r.gm_elem_bytes = elem;
  return r;
}

// CANN's RmsNorm MERGE_N tiling [C1]: rowFactor = (UB - 1 KiB) / (colAlign * 16 + 260), single
// buffered. The same budget as a layout table gives the same rows per tile.
TEST(Planner, ReproducesCannRmsNormMergeNRowFactor) {
  const UbItem cann[] = {{"x_y_tmp", Extent::tile, 16, false}, {"per_row", Extent::row_bytes, 260, false}};
  for (const std::int64_t cols : {8, 128, 1000, 1024, 2000}) {
    PlanRequest r = request(cann, 100000, cols);
    r.depth = 1;
    const Plan p = plan_tiles(r);
    const std::int64_t col_align = (cols + 7) / 8 * 8;
    const std::int64_t cann_rows = std::min<std::int64_t>((196608 - 1024) / (col_align * 16 + 260), p.block_factor);
    // As many tiles as CANN's row factor makes; the planner evens their sizes out.
    EXPECT_LE(p.rows_per_tile, cann_rows) << cols;
    EXPECT_EQ(p.tiles_per_core, (p.block_factor + cann_rows - 1) / cann_rows) << cols;
  }
  // The example: 1024 columns give 11 rows a tile.
  PlanRequest r = request(cann, 4096, 1024);
  r.depth = 1;
  EXPECT_EQ(plan_tiles(r).rows_per_tile, 11);
}

TEST(Planner, ItemBytesPadEachTileRowTo32Bytes) {
  const UbItem f32{"t", Extent::tile, 4, false};
  // 64 rows of 123 floats: 64 x 128 floats.
  EXPECT_EQ(item_bytes(f32, {64, 123, 64, 8}), 64 * 128 * 4);
  // A float tile of a bf16 kernel keeps bf16's pitch (16 elements): 7 columns take 16 floats.
  EXPECT_EQ(item_bytes(f32, {3, 7, 3, 16}), 3 * 16 * 4);
  EXPECT_EQ(item_bytes({"w", Extent::row, 2, false}, {5, 7, 5, 16}), 32);
  EXPECT_EQ(item_bytes({"s", Extent::stats, 4, false}, {5, 7, 9, 16}), 64);
  EXPECT_EQ(item_bytes({"q", Extent::tile, 4, true}, {2, 8, 2, 8}), 64);
  const UbItem layout[] = {{"q", Extent::tile, 4, true}, {"r", Extent::row, 4, false}};
  EXPECT_EQ(layout_bytes(layout, {2, 8, 2, 8}, 2), 2 * 64 + 32);
}

// The largest row the forward's single-pass layout holds, found from the table, fits; one more
// column does not, and the chunked plan takes it.
TEST(Planner, RowThatJustFitsAndJustDoesNot) {
  for (const family::Elem x : {family::Elem::f32, family::Elem::bf16}) {
    const auto items = rms_norm::fwd_layout(x, true).items();
    const std::uint32_t elem = elem_bytes(x);
    const std::int64_t align = 32 / elem;
    std::int64_t fit = 1;
    while (layout_bytes(items, {1, fit + 1, 1, align}, 1) <= 196608 - 1024) ++fit;
    PlanRequest r = request(items, 7, fit, elem);
    r.allow_split = false;
    const Plan yes = plan_tiles(r);
    EXPECT_TRUE(yes.fits) << yes.why;
    EXPECT_EQ(yes.mode, TileMode::one_row_per_core);
    EXPECT_EQ(yes.depth, 1);
    EXPECT_GE(yes.ub_fill(), 0.98);
    r.cols = fit + 1;
    const Plan no = plan_tiles(r);
    EXPECT_FALSE(no.fits);
    EXPECT_NE(no.why.find("needs"), std::string::npos) << no.why;
    r.allow_split = true;
    const Plan split = plan_tiles(r);
    EXPECT_TRUE(split.fits);
    EXPECT_EQ(split.mode, TileMode::split_row);
    EXPECT_EQ(split.chunks, 2);
  }
}

// Rows a core takes that are far apart in GM (grid-stride over long rows) cannot be one
// DataCopyPad: the GM gap between blocks is at most 65535 bytes.
TEST(Planner, DmaStrideLimitForcesOneRowPerTile) {
  const UbItem small[] = {{"x", Extent::tile, 4, true}};
  PlanRequest r = request(small, 4000, 64);  // 256-byte rows
  r.partition = Partition::grid_stride;
  const Plan strided = plan_tiles(r);  // 40 cores: rows 10240 B apart, within the limit
  EXPECT_GT(strided.rows_per_tile, 1);
  r.cols = 512;  // 2 KiB rows, 40 apart: 79872 B between a core's rows
  const Plan far = plan_tiles(r);
  EXPECT_EQ(far.rows_per_tile, 1);
  EXPECT_NE(far.why.find("65535-byte stride"), std::string::npos) << far.why;
  r.partition = Partition::contiguous;
  EXPECT_GT(plan_tiles(r).rows_per_tile, 1);
  // A row longer than one DataCopyPad block (65535 B) is split even when UB could hold it.
  const UbItem tiny[] = {{"x", Extent::tile, 4, false}};
  PlanRequest big = request(tiny, 4, 16384);
  big.ub_bytes = 1 << 20;
  const Plan p = plan_tiles(big);
  EXPECT_EQ(p.mode, TileMode::split_row);
  EXPECT_LE(p.block_size_sub * 4, kMaxBlockLen);
  // blockCount: at most 4095 rows a tile.
  PlanRequest many = request(tiny, 1 << 20, 1);
  many.ub_bytes = 1 << 20;
  many.vector_cores = 1;
  const Plan most = plan_tiles(many);
  EXPECT_LE(most.rows_per_tile, 4095);
  EXPECT_EQ(most.tiles_per_core, ((1 << 20) + 4094) / 4095);
}

TEST(Planner, SplitChunksAreMultiplesOf16WithATailOfAtLeast16) {
  for (const family::Elem x : {family::Elem::f32, family::Elem::bf16, family::Elem::f16}) {
    const auto items = rms_norm::bwd_layout(x, true).items();
    const auto elem = elem_bytes(x);
    for (std::int64_t cols = 4000; cols < 300000; cols = cols * 3 / 2 + 7) {
      for (const std::int64_t ub : {196608, 253952, 16384}) {
        PlanRequest r = request(items, 41, cols, elem);
        r.ub_bytes = ub;
        r.force_split = true;
        const Plan p = plan_tiles(r);
        ASSERT_TRUE(p.fits) << p.why;
        EXPECT_EQ(p.block_size_sub % kSubAlign, 0) << cols;
        EXPECT_EQ((p.chunks - 1) * p.block_size_sub + p.tail, cols);
        EXPECT_GT(p.tail, 0);
        if (p.chunks > 1) {
          EXPECT_GE(p.tail, kSubAlign) << cols;
        }
        EXPECT_LE(p.block_size_sub * elem, kMaxBlockLen);
        EXPECT_LE(p.ub_used, ub - kUbReserve) << p.why;
      }
    }
  }
  // A chunk at a 512-byte multiple when that costs no extra chunk: 200000 f32 in 512-B lines.
  const auto items = rms_norm::fwd_layout(family::Elem::f32, true).items();
  const Plan p = plan_tiles(request(items, 2, 200000));
  EXPECT_EQ(p.block_size_sub % 128, 0) << p.why;
}

TEST(Planner, BlockDimIsMinOfCoresAndRowsWithContiguousRanges) {
  const UbItem layout[] = {{"x", Extent::tile, 4, true}};
  for (const std::int64_t rows : {1, 7, 39, 40, 41, 81, 4096, 70000}) {
    for (const Partition part : {Partition::contiguous, Partition::cann, Partition::grid_stride}) {
      PlanRequest r = request(layout, rows, 64);
      r.partition = part;
      const Plan p = plan_tiles(r);
      if (part != Partition::cann) {
        EXPECT_EQ(p.block_dim, std::min<std::int64_t>(40, rows));
      }
      EXPECT_EQ(p.block_factor, (rows + p.block_dim - 1) / p.block_dim);
      std::vector<int> covered(static_cast<std::size_t>(rows), 0);
      std::int64_t smallest = rows;
      std::int64_t largest = 0;
      for (std::int64_t b = 0; b < p.block_dim; ++b) {
        const RowRange rr = rows_of_block(p, b);
        smallest = std::min(smallest, rr.count);
        largest = std::max(largest, rr.count);
        for (std::int64_t i = 0; i < rr.count; ++i) ++covered[static_cast<std::size_t>(rr.first + i * rr.stride)];
      }
      for (int c : covered) ASSERT_EQ(c, 1);
      EXPECT_EQ(largest, p.block_factor);
      if (part == Partition::contiguous) {
        EXPECT_LE(largest - smallest, 1);
      }
    }
  }
  // CANN's split of 41 rows leaves cores idle (blockFactor 2: 21 cores); ours uses 40.
  PlanRequest r = request(layout, 41, 64);
  r.partition = Partition::cann;
  EXPECT_EQ(plan_tiles(r).block_dim, 21);
}

// The goal: a tile fills at least 60% of UB for hidden >= 1024 (4096 rows, 910B4 and 950PR).
TEST(Planner, TilesFillAtLeast60PercentOfUb) {
  for (const std::int64_t ub : {196608, 253952}) {
    for (const family::Elem x : {family::Elem::f32, family::Elem::bf16}) {
      const auto fwd = rms_norm::fwd_layout(x, true).items();
      const auto bwd = rms_norm::bwd_layout(x, true).items();
      for (std::int64_t hidden = 1024; hidden <= 65536; hidden *= 2) {
        for (const auto& items : {std::span<const UbItem>(fwd), std::span<const UbItem>(bwd)}) {
          PlanRequest r = request(items, 4096, hidden, elem_bytes(x));
          r.ub_bytes = ub;
          const Plan p = plan_tiles(r);
          EXPECT_GE(p.ub_fill(), 0.6) << p.why;
          EXPECT_EQ(p.block_dim, 40);
        }
      }
    }
  }
}

TEST(Planner, DoubleBuffersOnlyWhenACoreHasSeveralTiles) {
  const auto items = rms_norm::fwd_layout(family::Elem::f32, true).items();
  EXPECT_EQ(plan_tiles(request(items, 40, 4096)).depth, 1);    // one row a core
  EXPECT_EQ(plan_tiles(request(items, 4096, 4096)).depth, 2);  // many tiles a core
  PlanRequest fixed = request(items, 4096, 4096);
  fixed.depth = 1;
  EXPECT_EQ(plan_tiles(fixed).depth, 1);
}

TEST(Planner, EmptyProblems) {
  const auto items = rms_norm::fwd_layout(family::Elem::f32, true).items();
  const Plan none = plan_tiles(request(items, 0, 100));
  EXPECT_EQ(none.block_dim, 0);
  EXPECT_TRUE(none.fits);
  const Plan no_cols = plan_tiles(request(items, 100, 0));
  EXPECT_TRUE(no_cols.fits);
  EXPECT_EQ(no_cols.block_dim, 40);
}

}  // namespace
}  // namespace opreg::npu
