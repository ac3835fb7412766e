// rope on the npu: the UB layout of its kernel (what the planner sizes and the kernel allocates)
// and the plan a variant's supports() and the kernel share.
//
// One kernel for both directions (the backward is the rotation with sin negated) and both
// pairings. Each core takes a contiguous range of (b, t) positions (the planner's contiguous
// partition, at most one block a vector core). It walks its positions in groups of `group`
// positions of one batch row; for a group it loads each position's cos and sin once (a table
// tile: D/2 angles a position, entries i * table_step of the row) and then rotates every head of
// q and of k at those positions with them, `heads_per_tile` heads of one side a tile
// (tile = heads x positions x the head's pairs). Two variants cut the same walk:
//   rows     whole heads: a tile holds all D elements of its heads, several positions a group
//            (as many as UB holds beside the tile); refuses a head too long for UB or for one
//            DataCopyPad block.
//   chunked  one position a group and one head a tile, each head in BLOCK_SIZE_SUB chunks of
//            `chunk` pairs (a multiple of 16, evened out over the head): any D.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/npu/profile.h"
#include "backends/npu/tiling.h"
#include "ops/families.h"
#include "opreg/variants.h"

namespace opreg::npu::rope {

enum class Impl : std::uint8_t { rows, chunked };
std::string_view to_string(Impl impl);

// The problem as the planner sees it: what the registry's choice key holds (q's shape, the
// dtypes, the pairing). k's head count, the tables' width and rows, the strides and whether an
// output is its input are not all in that key, so nothing planned depends on them: the kernel
// takes k's heads a tile at a time, reserves a row of D entries for a table chunk whatever its
// width, and picks each copy's walk and synchronisation from the strides it is launched with.
struct RopeSizes {
  family::Elem x = family::Elem::f32;
  family::Elem w = family::Elem::f32;
  family::Pairing pairing = family::Pairing::half;
  bool backward = false;
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t dim = 0;
  std::int64_t heads = 0;  // q's
};
RopeSizes sizes_of(const family::Rope& d);

// What a variant's supports() decides and the kernel runs (plain data: the choice cache keeps it).
struct RopePlan {
  Impl impl = Impl::rows;
  bool fits = false;
  family::Elem x = family::Elem::f32;
  family::Elem w = family::Elem::f32;
  family::Pairing pairing = family::Pairing::half;
  int depth = 1;
  std::int64_t positions = 0;       // batch x seq
  std::int64_t pairs = 0;           // D / 2
  std::int64_t block_dim = 0;       // 0: nothing to launch
  std::int64_t group = 1;           // positions a group (one table tile)
  std::int64_t heads_per_tile = 1;  // heads of one side a tile
  std::int64_t chunk = 0;           // pairs a chunk (BLOCK_SIZE_SUB; all pairs for rows)
  std::int64_t chunks = 1;
  std::int64_t segments = 2;        // runs of a head a tile row holds: x1 and x2 (half), or one (interleaved)
  std::int64_t pitch = 0;           // elements from one UB row to the next (32-byte multiple)
  std::int64_t ub_used = 0;
  std::int64_t ub_bytes = 0;
};

// The kernel's UB. Queues: q's or k's heads in and out (x dtype; a tile is its runs x1, x2 (or
// the interleaved pairs) of every head at every position, each run of all its heads one span),
// the cos and sin rows as they come from GM (the table dtype, a row of `pitch`). Scratch: the tile
// as float (16-bit x), the angles as float (16-bit tables cast; over a tile's span where they are
// spread over interleaved pairs by Gather or copied for several heads a tile: whole 64-float
// repeats for the sign's masked Muls), and for interleaved pairs the Gather offsets that spread an
// angle over its pair and that swap a pair's neighbours. A 16-bit x's tile takes one or two float
// products (t1, t2); an f32 x's tile is rotated exactly (kernels.cpp): the angles clamped and
// split in halves once a table tile (6 rows of floats: `parts`), and the tile's operands clamped
// and split with the products' scratch (10: `exact`), interleaved pairs' swapped tile in t1.
// The exact path's rows are placed for the UB's bank groups [S30]: `pad` starts `parts` at a
// 512-byte multiple of UB, every row takes exact_row_bytes, and a row sits at its start or 256
// bytes into it, so that the two sources of each binary instruction of the exact products read
// different halves of the bank groups (kernels.cpp names each row's half).
struct RopeLayout {
  UbItem x_in, x_out, cos_raw, sin_raw, x_f32, cos_f32, sin_f32, t1, t2, spread, swap, pad, parts, exact;
  std::array<UbItem, 14> items() const {
    return {x_in, x_out, cos_raw, sin_raw, x_f32, cos_f32, sin_f32, t1, t2, spread, swap, pad, parts, exact};
  }
};
// Rows of floats in `parts` and in `exact` (each a tile's span: heads_per_tile x group x pitch
// floats), and the bytes a row takes there: its floats and a 256-byte shift, in whole 512-byte lines.
inline constexpr std::int64_t kAngleParts = 6;
inline constexpr std::int64_t kExactRows = 10;
inline std::int64_t exact_row_bytes(const RopePlan& p) {
  return (p.heads_per_tile * p.group * p.pitch * 4 + 256 + 511) / 512 * 512;
}
RopeLayout layout(const RopePlan& plan);
// The shape the layout's items are sized at (every item is bytes: the tile is two-dimensional).
inline TileShape shape_of(const RopePlan&) { return TileShape{1, 0, 1, 1}; }

// `why` (optional) gets one line on the tiling, or on why it does not fit.
RopePlan plan(Impl impl, const RopeSizes& sizes, const DeviceModel& device, std::string* why = nullptr);

// The variants' supports(): plans on the device's model and says what it planned or why it refuses.
template <Impl I>
Verdict supports(const family::Rope& d, const DeviceModel& device, RopePlan& p) {
  std::string why;
  p = plan(I, sizes_of(d), device, &why);
  if (p.fits) return {true, std::move(why)};
  return Verdict::reject(std::move(why));
}

// The kernel's launch (kernels.cpp): runs the plan on the emulator of the call's context.
void run(const family::Rope& d, const RopePlan& plan, const KernelContext& ctx);

}  // namespace opreg::npu::rope
