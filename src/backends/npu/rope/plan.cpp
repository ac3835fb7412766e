#include "backends/npu/rope/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace opreg::npu::rope {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// An item of `bytes` (a layout's sizes are bytes; one too large for its field cannot fit anyway).
UbItem sized(const char* name, std::int64_t bytes, bool queued) {
  const std::int64_t capped = std::min<std::int64_t>(bytes, std::numeric_limits<std::uint32_t>::max());
  return {name, Extent::bytes, static_cast<std::uint32_t>(capped), queued};
}

// A head's elements in a UB row: a chunk's x1 or x2 (half), or its interleaved pairs.
std::int64_t row_elems(family::Pairing pairing, std::int64_t chunk) {
  return pairing == family::Pairing::half ? chunk : 2 * chunk;
}

// Whether `chunk` pairs fit one DataCopyPad block: a head's run, and a table row's (an
// interleaved call may read a full-width row: 2 entries a pair).
bool one_block(const RopeSizes& s, std::int64_t chunk) {
  const std::int64_t entries = s.pairing == family::Pairing::half ? chunk : 2 * chunk;
  return row_elems(s.pairing, chunk) * elem_bytes(s.x) <= kMaxBlockLen && entries * elem_bytes(s.w) <= kMaxBlockLen;
}

// The plan's numbers at a tiling: pitch from the chunk, and the layout's bytes against UB.
struct Sizer {
  const RopeSizes& s;
  std::int64_t avail;
  RopePlan at(RopePlan p, std::int64_t chunk, std::int64_t group, std::int64_t heads, int depth) const {
    p.chunk = chunk;
    p.group = group;
    p.heads_per_tile = heads;
    p.depth = depth;
    p.pitch = round_up(row_elems(s.pairing, chunk), 32 / elem_bytes(s.x));
    return p;
  }
  std::int64_t bytes(const RopePlan& p) const {
    const auto items = layout(p).items();
    return layout_bytes(items, shape_of(p), p.depth);
  }
  bool fits(const RopePlan& base, std::int64_t chunk, std::int64_t group, std::int64_t heads, int depth) const {
    return bytes(at(base, chunk, group, heads, depth)) <= avail;
  }
};

std::string ub_line(std::int64_t used, std::int64_t ub) {
  return fmt::format("UB {} of {} B ({:.0f}%)", used, ub, ub == 0 ? 0.0 : 100.0 * static_cast<double>(used) / ub);
}

}  // namespace

std::string_view to_string(Impl impl) { return impl == Impl::rows ? "rows" : "chunked"; }

RopeSizes sizes_of(const family::Rope& d) {
  return {.x = d.type, .w = d.table_type, .pairing = d.pairing, .backward = d.backward, .batch = d.batch,
          .seq = d.seq, .dim = d.dim, .heads = d.q.heads};
}

RopeLayout layout(const RopePlan& p) {
  const bool half = p.pairing == family::Pairing::half;
  const bool exact = p.x == family::Elem::f32;
  const std::int64_t xs = elem_bytes(p.x);
  const std::int64_t ws = elem_bytes(p.w);
  const std::int64_t rows = p.group * p.pitch;          // a table tile's elements
  const std::int64_t span = p.heads_per_tile * rows;    // a run of every head of a tile
  // Angles as float: cast (16-bit tables), or over a tile's span (spread over interleaved pairs,
  // copied for several heads a tile); whole 64-float repeats, which the masked Muls that signs
  // sin covers.
  const bool spans = !half || p.heads_per_tile > 1;
  const bool angles = spans || p.w != family::Elem::f32;
  const std::int64_t angle_bytes = angles ? round_up((spans ? span : rows) * 4, 256) : 0;
  RopeLayout l;
  l.x_in = sized("x_in", p.segments * span * xs, true);
  l.x_out = sized("x_out", p.segments * span * xs, true);
  l.cos_raw = sized("cos_raw", rows * ws, true);
  l.sin_raw = sized("sin_raw", rows * ws, true);
  l.x_f32 = sized("x_f32", exact ? 0 : p.segments * span * 4, false);
  l.cos_f32 = sized("cos_f32", angle_bytes, false);
  l.sin_f32 = sized("sin_f32", angle_bytes, false);
  // t1: a product (16-bit), the swapped tile (exact, interleaved), 16-bit rows on their way to a spread.
  l.t1 = sized("product_f32", exact && half ? 0 : span * 4, false);
  l.t2 = sized("product2_f32", !exact && half ? span * 4 : 0, false);
  l.spread = sized("spread_offsets", half ? 0 : rows * 4, false);
  l.swap = sized("swap_offsets", half ? 0 : span * 4, false);
  if (exact) {
    const auto before = l.items();
    const std::int64_t at = layout_bytes(std::span(before.data(), 11), shape_of(p), p.depth);  // through swap
    l.pad = sized("bank_pad", (512 - at % 512) % 512, false);
    l.parts = sized("angle_parts_f32", kAngleParts * exact_row_bytes(p), false);
    l.exact = sized("exact_f32", kExactRows * exact_row_bytes(p), false);
  }
  return l;
}

RopePlan plan(Impl impl, const RopeSizes& s, const DeviceModel& device, std::string* why) {
  RopePlan p;
  p.impl = impl;
  p.x = s.x;
  p.w = s.w;
  p.pairing = s.pairing;
  p.positions = s.batch * s.seq;
  p.pairs = s.dim / 2;
  p.segments = s.pairing == family::Pairing::half ? 2 : 1;
  p.ub_bytes = static_cast<std::int64_t>(device.ub_bytes);
  std::string line;
  const std::string_view name = to_string(impl);
  const Sizer z{s, p.ub_bytes - kUbReserve};
  const std::int64_t n = p.pairs;
  auto done = [&](std::string text) {
    if (why != nullptr) *why = std::move(text);
    return p;
  };
  if (p.positions == 0 || n == 0) {
    p.fits = true;
    p.chunk = n;
    return done(fmt::format("{}: no positions: nothing to launch", name));
  }
  p.block_dim = std::min<std::int64_t>(device.profile->vector_cores, p.positions);
  const std::int64_t per_core = ceil_div(p.positions, p.block_dim);
  std::int64_t chunk = n;
  int depth = 2;
  if (impl == Impl::rows) {
    if (!one_block(s, n)) {
      return done(fmt::format("rows: a head of D = {} is more than one DataCopyPad block ({} B) can hold; chunked "
                              "splits it",
                              s.dim, kMaxBlockLen));
    }
    if (!z.fits(p, n, 1, 1, 2)) depth = 1;
    if (!z.fits(p, n, 1, 1, depth)) {
      return done(fmt::format("rows: one head of D = {} at one position takes {} B of UB with its table rows, more "
                              "than the {} B there are; chunked splits it",
                              s.dim, z.bytes(z.at(p, n, 1, 1, 1)), z.avail));
    }
    // Positions a group first (a table tile serves every head at them, and a head's positions
    // are one copy in HF's layout), then heads a tile with the UB left (a position's heads are
    // one copy in the transposed layout, and when the positions are few: decode).
    const std::int64_t max_group = std::min({s.seq, per_core, kMaxBlockCount});
    const std::int64_t max_heads = std::min<std::int64_t>(std::max<std::int64_t>(s.heads, 1), kMaxBlockCount);
    std::int64_t group = largest(max_group, [&](std::int64_t r) { return z.fits(p, n, r, 1, depth); });
    const std::int64_t heads = largest(max_heads, [&](std::int64_t g) { return z.fits(p, n, group, g, depth); });
    // Evened out: the groups of a core's run of positions (within a batch row) of one size.
    const std::int64_t run = std::min(s.seq, per_core);
    if (group < run) group = ceil_div(run, ceil_div(run, group));
    p = z.at(p, n, group, heads, depth);
  } else {
    // BLOCK_SIZE_SUB: the longest multiple of 16 pairs (all of them when fewer) that fits UB and
    // one DataCopyPad block at one position and one head, then evened out over the head.
    auto fits = [&](std::int64_t c) { return one_block(s, c) && z.fits(p, c, 1, 1, 1); };
    std::int64_t longest = fits(n) ? n : kSubAlign * largest(n / kSubAlign, [&](std::int64_t k) {
      return fits(kSubAlign * k);
    });
    if (longest == 0) {
      return done(fmt::format("chunked: not even {} pairs of D = {} fit UB ({} B) beside their table rows",
                              std::min(n, kSubAlign), s.dim, z.avail));
    }
    const std::int64_t pieces = ceil_div(n, longest);
    chunk = pieces == 1 ? n : std::min(longest, round_up(ceil_div(n, pieces), kSubAlign));
    if (!z.fits(p, chunk, 1, 1, 2)) depth = 1;
    p = z.at(p, chunk, 1, 1, depth);
  }
  p.chunks = ceil_div(n, p.chunk);
  p.fits = true;
  p.ub_used = z.bytes(p);
  return done(fmt::format(
      "{}: {} positions (B {} x T {}) over block_dim={} (contiguous partition, <= {} a core), groups of <= {} "
      "position(s), {} head(s) a tile, {} chunk(s) of {} pairs ({} pairing, rows of {}), depth {}, {}",
      name, p.positions, s.batch, s.seq, p.block_dim, per_core, p.group, p.heads_per_tile, p.chunks, p.chunk,
      s.pairing == family::Pairing::half ? "half" : "interleaved", p.pitch, p.depth, ub_line(p.ub_used, p.ub_bytes)));
}

}  // namespace opreg::npu::rope
