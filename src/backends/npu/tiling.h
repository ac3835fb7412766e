// The one tiling planner of the npu kernels. A kernel declares its Unified Buffer layout once, as
// a table of buffers and how each scales with the tile (bytes per element per tile row, per
// column, per statistics row, fixed), the way CANN's tilings write their UB formulas (e.g.
// RmsNorm's "16 B per element + 260 B per row"). The planner sizes the tile from that table and
// the profile (UB less CANN's 1 KiB reserve, the DMA's limits, the vector core count), and the
// kernel allocates its buffers from the same table: what was planned is what is allocated, and
// the emulator's UB arena checks it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ops/families.h"

namespace opreg::npu {

// How a buffer scales with the tile.
enum class Extent : std::uint8_t {
  tile,         // rows_per_tile rows of `width` elements, each row padded to 32 bytes
  row,          // `width` elements once (a weight slice, a dW partial)
  stats,        // one element per statistics row (the tile's rows, or a split row's row group)
  stat_blocks,  // `size` bytes per statistics row, rows rounded up to 8 (whole Brcb repeats)
  reduce_work,  // ReduceSum's work space for `width` floats
  row_bytes,    // `size` bytes per tile row (CANN's per-row term)
  bytes,        // `size` bytes
};

struct UbItem {
  const char* name = "";
  Extent extent = Extent::tile;
  std::uint32_t size = 0;  // element bytes (bytes for row_bytes and bytes); 0: the buffer is absent
  bool queued = false;     // a queue buffer: one copy per slot of the queue (the depth)
};

struct TileShape {
  std::int64_t rows = 1;       // rows of a tile
  std::int64_t width = 0;      // columns of a tile row
  std::int64_t stat_rows = 1;  // statistics rows held at once
  // Elements a tile row is padded to: 32 bytes of the GM element the tile rows are copied as,
  // so that a float tile of a bf16 kernel keeps the bf16 tile's row pitch (whole-tile casts).
  std::int64_t align = 1;
  std::int64_t pitch() const { return (width + align - 1) / align * align; }
};

// One copy of a buffer, in bytes: rounded up to 32, each tile row padded to the shape's pitch.
std::int64_t item_bytes(const UbItem& item, const TileShape& shape);
// The whole layout, queue buffers counted `depth` times.
std::int64_t layout_bytes(std::span<const UbItem> layout, const TileShape& shape, int depth);

enum class TileMode : std::uint8_t {
  one_row_per_core,  // rows <= cores: each core holds its one row, the whole UB for it
  multi_row,         // whole rows in UB, several per tile
  split_row,         // a row does not fit: BLOCK_SIZE_SUB chunks of it
};
std::string_view to_string(TileMode mode);

// Which rows a core takes. contiguous: block_dim = min(cores, rows) and ranges of
// ceil(rows / cores) or one less (every core busy); cann: CANN's norm split, blockFactor =
// ceil(rows / cores) rows per core and the remainder on the last (some cores may idle);
// grid_stride: rows b, b + block_dim, ... (Liger's Triton kernels).
enum class Partition : std::uint8_t { contiguous, cann, grid_stride };
std::string_view to_string(Partition partition);

inline constexpr std::int64_t kUbReserve = 1024;      // CANN's norm tilings keep 1 KiB of UB [C1][C2][C3]
inline constexpr std::int64_t kMaxBlockCount = 4095;  // DataCopyPad blocks per copy [S9]
inline constexpr std::int64_t kMaxBlockLen = 65535;   // DataCopyPad bytes per block [S9]
inline constexpr std::int64_t kMaxGmStride = 65535;   // DataCopyPad GM gap between blocks [S9][C6]
inline constexpr std::int64_t kSubAlign = 16;         // BLOCK_SIZE_SUB is a multiple of 16 elements [C1]
inline constexpr std::int64_t kL2LineBytes = 512;     // preferred column cut [C6]

struct PlanRequest {
  std::string_view kernel;  // for messages
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::span<const UbItem> layout;
  std::uint32_t gm_elem_bytes = 4;  // the GM element of the tile rows a kernel copies (x's)
  int vector_cores = 40;
  std::int64_t ub_bytes = 196608;
  std::int64_t reserve = kUbReserve;
  int depth = 0;             // 0: choose (CANN SwiGLU's rule); 1 or 2: as given
  bool allow_split = true;   // false: whole rows or nothing (a single-pass kernel)
  bool force_split = false;  // split rows even when whole rows fit (a two-pass kernel)
  Partition partition = Partition::contiguous;
  std::int64_t max_stat_rows = 1024;  // statistics rows a split-row kernel batches
};

struct DeviceModel;
// A request on `device` (its vector cores and UB): `rows` x `cols` of tile rows with `layout` in
// UB, `x`'s elements in GM; the caller sets what else the kernel needs (splitting, partition).
PlanRequest request_on(const DeviceModel& device, std::string_view kernel, std::int64_t rows, std::int64_t cols,
                       std::span<const UbItem> layout, family::Elem x);

// The tiling, plain data (a variant's supports() makes it, the choice cache keeps it, the kernel
// runs it).
struct Tiles {
  TileMode mode = TileMode::multi_row;
  bool fits = false;  // false: the layout does not fit UB (why says by how much)
  Partition partition = Partition::contiguous;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t block_dim = 0;     // 0 when there are no rows
  std::int64_t block_factor = 0;  // the most rows a core takes
  std::int64_t rows_per_tile = 1;
  std::int64_t tiles_per_core = 0;  // of the core with the most rows (times chunks for split rows)
  std::int64_t block_size = 0;      // BLOCK_SIZE: columns of a tile row in UB (cols for whole rows)
  std::int64_t block_size_sub = 0;  // BLOCK_SIZE_SUB: the chunk of a split row (0 for whole rows)
  std::int64_t chunks = 1;
  std::int64_t tail = 0;  // the last chunk's width
  std::int64_t stat_rows = 1;
  std::int64_t align = 8;  // elements a tile row is padded to (32 bytes of the GM element)
  int depth = 1;
  std::int64_t ub_used = 0;   // bytes the layout takes at this tile
  std::int64_t ub_bytes = 0;  // the UB size
  double ub_fill() const { return ub_bytes == 0 ? 0.0 : static_cast<double>(ub_used) / static_cast<double>(ub_bytes); }
  TileShape shape() const { return {rows_per_tile, block_size, stat_rows, align}; }
};

// The planner's answer: the tiling and one line on the choice and its numbers (or why it does not
// fit), which supports() reports.
struct Plan : Tiles {
  std::string why;
};

Plan plan_tiles(const PlanRequest& request);

// The widest chunk, a multiple of 16 elements up to `cap`, for which `layout` at one row a tile
// takes at most `avail` bytes (0: not even 16). For kernels that walk columns, e.g. a reduction
// of per-core partials.
std::int64_t fit_width(std::span<const UbItem> layout, std::int64_t avail, int depth, std::int64_t cap,
                       std::int64_t stat_rows = 1, std::int64_t align = 1);

// The largest n in [1, hi] with fits(n), or 0 (fits is monotone: true up to some n). The
// planners' search for the biggest tile that fits.
template <class Fits>
std::int64_t largest(std::int64_t hi, Fits fits) {
  if (hi < 1 || !fits(1)) return 0;
  std::int64_t lo = 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The UB of the parameter-gradient reduction after SyncAll (rms_norm's dW, layer/group norm's dW
// and dB): each core sums its columns of the [cores x params] partials in core order, a float
// sum, the partials coming in (a queue) and, for a 16-bit parameter, its rounded copy going out.
// Compensated (f32 gradients, compensated.h): the partials are (hi, lo) pairs, summed into a
// (hi, lo) pair with TwoSum's five temporaries.
struct ReduceLayout {
  UbItem acc, in, out, lo, tmp;
  std::array<UbItem, 5> items() const { return {acc, in, out, lo, tmp}; }
};
ReduceLayout reduce_layout(family::Elem param, bool compensated = false);
// The widest step of that reduction UB holds (at most one DataCopyPad block of floats), double
// buffered where it can be: what a backward's plan gives its kernel.
struct ReduceFit {
  std::int64_t width = 0;
  int depth = 2;
};
ReduceFit fit_reduce(family::Elem param, bool compensated, std::uint64_t ub_bytes);

// Bytes of an element of a kernel's dtype, and of its float copy in UB (16-bit activations are
// computed in float copies; float ones in their own tiles: 0).
inline std::uint32_t elem_bytes(family::Elem e) { return e == family::Elem::f32 ? 4 : 2; }
inline std::uint32_t widened(family::Elem e) { return e == family::Elem::f32 ? 0 : 4; }

// The rows block `block` takes: first, first + stride, ... (count of them).
struct RowRange {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t stride = 1;
};
RowRange rows_of_block(const Tiles& plan, std::int64_t block);

}  // namespace opreg::npu
