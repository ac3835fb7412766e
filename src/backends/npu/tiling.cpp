#include "backends/npu/tiling.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/npu/profile.h"
#include "registry/spellings.h"

namespace opreg::npu {
namespace {

std::int64_t round32(std::int64_t bytes) { return (bytes + 31) / 32 * 32; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }


// CANN SwiGLU's rule for double buffering [C6]: double-buffer unless each core has a single
// tile, or exactly two tiles that one single-buffered tile would hold.
int choose_depth(std::int64_t tiles1, std::int64_t tiles2) {
  if (tiles2 == 0) return 1;  // two copies do not fit
  if (tiles2 >= 3) return 2;
  if (tiles2 == 2) return tiles1 == 1 ? 1 : 2;
  return 1;
}

struct Split {
  std::int64_t width = 0;
  std::int64_t chunks = 0;
  std::int64_t tail = 0;
};

// Chunks of at most `wmax` columns: as few as possible, of equal width rounded up to 16
// elements, at a 512-byte multiple where that costs no extra chunk, the last one at least 16
// wide (CANN's SPLIT_D lowers the chunk until the tail is) [C1][C6].
Split split_columns(std::int64_t cols, std::int64_t wmax, std::int64_t elem_bytes) {
  Split s;
  std::int64_t n = ceil_div(cols, wmax);
  std::int64_t w = round_up(ceil_div(cols, n), kSubAlign);
  while (w > wmax) {
    ++n;
    w = round_up(ceil_div(cols, n), kSubAlign);
  }
  const std::int64_t line = std::max<std::int64_t>(kSubAlign, kL2LineBytes / elem_bytes);
  const std::int64_t w_line = round_up(ceil_div(cols, n), line);
  if (w_line <= wmax && ceil_div(cols, w_line) == n) w = w_line;
  n = ceil_div(cols, w);
  while (n > 1 && cols - (n - 1) * w < kSubAlign && w > kSubAlign) {
    w -= kSubAlign;
    n = ceil_div(cols, w);
  }
  s.width = w;
  s.chunks = n;
  s.tail = cols - (n - 1) * w;
  return s;
}

}  // namespace

std::int64_t item_bytes(const UbItem& item, const TileShape& s) {
  const std::int64_t size = item.size;
  if (size == 0) return 0;
  switch (item.extent) {
    case Extent::tile:
      return s.rows * round32(s.pitch() * size);
    case Extent::row:
      return round32(s.width * size);
    case Extent::stats:
      return round32(s.stat_rows * size);
    case Extent::stat_blocks:
      return round32(round_up(s.stat_rows, 8) * size);
    case Extent::reduce_work:
      return round32(round_up(ceil_div(s.width, 64), 8) * size);
    case Extent::row_bytes:
      return round32(s.rows * size);
    case Extent::bytes:
      return round32(size);
  }
  return 0;
}

std::int64_t layout_bytes(std::span<const UbItem> layout, const TileShape& shape, int depth) {
  std::int64_t total = 0;
  for (const auto& item : layout) total += item_bytes(item, shape) * (item.queued ? depth : 1);
  return total;
}

constexpr auto kTileModeNames = spellings<TileMode>("one_row_per_core", "multi_row", "split_row");
constexpr auto kPartitionNames = spellings<Partition>("contiguous", "cann", "grid_stride");
std::string_view to_string(TileMode mode) { return kTileModeNames(mode); }
std::string_view to_string(Partition partition) { return kPartitionNames(partition); }

PlanRequest request_on(const DeviceModel& device, std::string_view kernel, std::int64_t rows, std::int64_t cols,
                       std::span<const UbItem> layout, family::Elem x) {
  PlanRequest r;
  r.kernel = kernel;
  r.rows = rows;
  r.cols = cols;
  r.layout = layout;
  r.gm_elem_bytes = elem_bytes(x);
  r.vector_cores = device.profile->vector_cores;
  r.ub_bytes = static_cast<std::int64_t>(device.ub_bytes);
  return r;
}

Plan plan_tiles(const PlanRequest& r) {
  Plan p;
  p.partition = r.partition;
  p.rows = r.rows;
  p.cols = r.cols;
  p.ub_bytes = r.ub_bytes;
  if (r.rows <= 0) {
    p.mode = TileMode::one_row_per_core;
    p.fits = true;
    p.why = "no rows: nothing to tile";
    return p;
  }
  const std::int64_t cores = r.vector_cores;
  if (r.partition == Partition::cann) {
    p.block_factor = ceil_div(r.rows, cores);
    p.block_dim = ceil_div(r.rows, p.block_factor);
  } else {
    p.block_dim = std::min(cores, r.rows);
    p.block_factor = ceil_div(r.rows, p.block_dim);
  }
  const std::int64_t bf = p.block_factor;
  const std::int64_t avail = r.ub_bytes - r.reserve;
  const std::int64_t elem = r.gm_elem_bytes;
  const std::int64_t align = std::max<std::int64_t>(1, 32 / elem);
  p.align = align;

  // Whole rows: a tile of R rows is one DataCopyPad of R blocks, each row one block of at most
  // 65535 bytes, consecutive rows of a core at most 65535 bytes apart in GM.
  const std::int64_t row_step = r.partition == Partition::grid_stride ? p.block_dim : 1;
  const std::int64_t gm_gap = (row_step - 1) * r.cols * elem;
  const bool row_is_one_block = r.cols * elem <= kMaxBlockLen;
  const std::int64_t cap = gm_gap > kMaxGmStride ? 1 : std::min(bf, kMaxBlockCount);
  auto rows_fitting = [&](int depth) {
    if (!row_is_one_block) return std::int64_t{0};
    return largest(cap, [&](std::int64_t rows) {
      return layout_bytes(r.layout, {rows, r.cols, rows, align}, depth) <= avail;
    });
  };
  const std::string limits = fmt::format("UB {} B less the {} B reserve", r.ub_bytes, r.reserve);
  const std::int64_t r1 = rows_fitting(1);
  // (A two-pass kernel asked for split rows still takes rows of no columns whole.)
  if (r1 > 0 && (!r.force_split || r.cols == 0)) {
    const std::int64_t r2 = r.depth == 1 ? 0 : rows_fitting(2);
    const int depth = r.depth != 0 ? r.depth : choose_depth(ceil_div(bf, r1), r2 == 0 ? 0 : ceil_div(bf, r2));
    const std::int64_t rmax = depth == 2 ? r2 : r1;
    if (rmax > 0) {
      p.depth = depth;
      p.tiles_per_core = ceil_div(bf, rmax);
      p.rows_per_tile = ceil_div(bf, p.tiles_per_core);
      p.block_size = r.cols;
      p.stat_rows = p.rows_per_tile;
      p.mode = bf == 1 ? TileMode::one_row_per_core : TileMode::multi_row;
      p.ub_used = layout_bytes(r.layout, p.shape(), depth);
      p.fits = true;
      p.why = fmt::format(
          "{}: {} x {}, block_dim={} ({} partition, <= {} rows a core), {} row(s) per tile{}, "
          "{} tile(s) a core, depth {}, UB {} of {} B ({:.0f}%)",
          to_string(p.mode), r.rows, r.cols, p.block_dim, to_string(r.partition), bf, p.rows_per_tile,
          cap == 1 && bf > 1 ? " (the GM gap between rows exceeds DataCopyPad's "
                               "65535-byte stride)"
                             : "",
          p.tiles_per_core, depth, p.ub_used, r.ub_bytes, 100 * p.ub_fill());
      return p;
    }
  }
  const std::int64_t whole = layout_bytes(r.layout, {1, r.cols, 1, align}, 1);
  const std::string whole_why =
      whole > avail
          ? fmt::format("a row of {} columns needs {} B of UB (one row a tile, single-buffered) where {} leaves {} B",
                        r.cols, whole, limits, avail)
          : fmt::format("a row of {} columns is {} B, more than one DataCopyPad block (65535 B)", r.cols,
                        r.cols * elem);
  if (!r.allow_split) {
    p.mode = bf == 1 ? TileMode::one_row_per_core : TileMode::multi_row;
    p.depth = 1;
    p.tiles_per_core = bf;
    p.block_size = r.cols;
    p.ub_used = whole;
    p.fits = false;
    p.why = whole_why;
    return p;
  }

  // Split rows: BLOCK_SIZE_SUB chunks, one row a tile, statistics of a group of rows batched.
  p.mode = TileMode::split_row;
  p.stat_rows = std::min(bf, r.max_stat_rows);
  const std::int64_t dma_cap = kMaxBlockLen / elem / kSubAlign * kSubAlign;
  auto width_fitting = [&](int depth) {
    return fit_width(r.layout, avail, depth, std::min(dma_cap, round_up(r.cols, kSubAlign)), p.stat_rows, align);
  };
  const std::int64_t w1 = width_fitting(1);
  if (w1 == 0) {
    p.fits = false;
    p.depth = 1;
    p.block_size = p.block_size_sub = kSubAlign;
    p.ub_used = layout_bytes(r.layout, {1, kSubAlign, p.stat_rows, align}, 1);
    p.why = fmt::format("{}; even a {}-column chunk needs {} B", whole_why, kSubAlign, p.ub_used);
    return p;
  }
  const std::int64_t w2 = r.depth == 1 ? 0 : width_fitting(2);
  const Split s1 = split_columns(r.cols, w1, elem);
  const Split s2 = w2 >= kSubAlign ? split_columns(r.cols, w2, elem) : Split{};
  const int depth = r.depth != 0 ? r.depth : choose_depth(bf * s1.chunks, bf * s2.chunks);
  const Split s = depth == 2 && s2.width > 0 ? s2 : s1;
  p.depth = depth == 2 && s2.width > 0 ? 2 : 1;
  p.block_size = p.block_size_sub = s.width;
  p.chunks = s.chunks;
  p.tail = s.tail;
  p.tiles_per_core = bf * s.chunks;
  p.ub_used = layout_bytes(r.layout, p.shape(), p.depth);
  p.fits = true;
  p.why = fmt::format(
      "split_row: {} x {}, block_dim={} ({} partition, <= {} rows a core): {}; BLOCK_SIZE_SUB={} in {} "
      "chunk(s), tail {}, statistics of {} rows at once, depth {}, UB {} of {} B ({:.0f}%)",
      r.rows, r.cols, p.block_dim, to_string(r.partition), bf, whole_why, s.width, s.chunks, s.tail, p.stat_rows,
      p.depth, p.ub_used, r.ub_bytes, 100 * p.ub_fill());
  return p;
}

std::int64_t fit_width(std::span<const UbItem> layout, std::int64_t avail, int depth, std::int64_t cap,
                       std::int64_t stat_rows, std::int64_t align) {
  return kSubAlign * largest(cap / kSubAlign, [&](std::int64_t k) {
           return layout_bytes(layout, {1, k * kSubAlign, stat_rows, align}, depth) <= avail;
         });
}

ReduceLayout reduce_layout(family::Elem param, bool compensated) {
  ReduceLayout l;
  l.acc = {"sum", Extent::row, 4, false};
  l.in = {"partial_in", Extent::row, 4, true};
  l.out = {"param_out", Extent::row, param == family::Elem::f32 ? 0U : elem_bytes(param), true};
  l.lo = {"sum_lo", Extent::row, compensated ? 4U : 0U, false};
  l.tmp = {"two_sum_tmp", Extent::row, compensated ? 20U : 0U, false};  // five floats a column
  return l;
}

ReduceFit fit_reduce(family::Elem param, bool compensated, std::uint64_t ub_bytes) {
  const auto items = reduce_layout(param, compensated).items();
  const std::int64_t avail = static_cast<std::int64_t>(ub_bytes) - kUbReserve;
  constexpr std::int64_t kMostColumns = kMaxBlockLen / 4 / kSubAlign * kSubAlign;
  ReduceFit fit;
  fit.width = fit_width(items, avail, 2, kMostColumns);
  if (fit.width == 0) {
    fit.depth = 1;
    fit.width = fit_width(items, avail, 1, kMostColumns);
  }
  return fit;
}

RowRange rows_of_block(const Tiles& p, std::int64_t block) {
  RowRange out;
  if (p.block_dim == 0 || block < 0 || block >= p.block_dim) return out;
  switch (p.partition) {
    case Partition::contiguous: {
      const std::int64_t q = p.rows / p.block_dim;
      const std::int64_t extra = p.rows % p.block_dim;
      out.first = block * q + std::min(block, extra);
      out.count = q + (block < extra ? 1 : 0);
      break;
    }
    case Partition::cann:
      out.first = block * p.block_factor;
      out.count = std::min(p.block_factor, p.rows - out.first);
      break;
    case Partition::grid_stride:
      out.first = block;
      out.count = (p.rows - block + p.block_dim - 1) / p.block_dim;
      out.stride = p.block_dim;
      break;
  }
  return out;
}

}  // namespace opreg::npu
