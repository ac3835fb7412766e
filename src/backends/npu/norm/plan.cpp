#include "backends/npu/norm/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "backends/npu/compensated.h"
#include "backends/npu/gpu_port.h"
#include "backends/npu/norm/kernels.h"
#include "backends/npu/npu_backend.h"

namespace opreg::npu::norm {
namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }


// Resident [C] params in channel mode, as float (and their raw 16-bit copy on the way in).
UbItem resident(const char* name, const NormSizes& s, bool present, std::uint32_t elem = 4) {
  const auto bytes = static_cast<std::uint32_t>(std::max<std::int64_t>(s.params(), 1) * elem);
  return {name, Extent::bytes, present && s.channel_mode() ? bytes : 0U, false};
}

template <class Desc>
NormSizes from(const Desc& d, NormOp op, bool has_bias) {
  NormSizes s;
  s.x = d.x_type;
  s.p = d.p_type;
  s.has_weight = d.weight != nullptr;
  s.has_bias = has_bias;
  s.layer = op == NormOp::layer_norm;
  s.sets = d.shape.sets;
  s.groups = d.shape.groups;
  s.channels = d.shape.channels;
  s.spread = d.shape.spread;
  return s;
}

std::string op_name(const NormSizes& s) { return s.layer ? "layer_norm" : "group_norm"; }

// The GPU kernel's live tiles (Liger-Kernel computes in f32): layer_norm forward x, w, b, y;
// backward dy, x, w, dx, dw, db; group_norm forward x, y; backward dy, x, dx.
std::int64_t gpu_tiles(const NormSizes& s, bool backward) {
  if (s.layer) return backward ? 6 : 4;
  return backward ? 3 : 2;
}

NormPlan plan_gpu_port(const NormSizes& s, const DeviceModel& device, bool backward, std::string* why) {
  NormPlan p;
  p.impl = Impl::gpu_port;
  p.tiles.rows = s.sets;
  p.tiles.block_dim = s.sets;
  p.tiles.fits = false;
  p.tiles.block_size =
      static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(std::max<std::int64_t>(s.size(), 1))));
  p.live_tiles = static_cast<std::int32_t>(gpu_tiles(s, backward));
  if (why != nullptr) {
    *why = fmt::format(
        "gpu_port is forced-only: the GPU kernel's shape on Ascend, one block per {} ({} blocks; a launch takes at "
        "most 65535), BLOCK_SIZE = next_power_of_2({}) = {}, {} f32 tiles double-buffered = {} bits of UB where the "
        "device has {}; npu.{}.{}.single_pass / chunked split the sets over the cores",
        s.layer ? "row" : "(N, group)", s.sets, s.size(), p.tiles.block_size, p.live_tiles, p.live_bits(),
        device.ub_bytes * 8, op_name(s), backward ? "bwd" : "fwd");
  }
  return p;
}

NormPlan plan(Impl impl, const NormSizes& s0, const DeviceModel& device, std::span<const UbItem> layout, bool backward,
          std::string* why) {
  if (impl == Impl::gpu_port) return plan_gpu_port(s0, device, backward, why);
  // No sets still leaves dweight and dbias to clear in the backward: one block, planned as for
  // one set, takes none.
  NormSizes s = s0;
  const bool empty = s.sets == 0;
  if (empty && backward) s.sets = 1;
  NormPlan p;
  p.impl = impl;
  Tiles& t = p.tiles;
  t.partition = Partition::contiguous;
  t.rows = s0.sets;
  t.cols = s.size();
  t.ub_bytes = static_cast<std::int64_t>(device.ub_bytes);
  p.dma_rows = s.dma_rows();
  p.row_len = s.row_len();
  if (s.sets == 0) {
    t.fits = true;
    t.mode = TileMode::one_row_per_core;
    if (why != nullptr) *why = "no sets: nothing to compute";
    return p;
  }
  const std::int64_t cores = device.profile->vector_cores;
  t.block_dim = std::min<std::int64_t>(cores, s.sets);
  t.block_factor = ceil_div(s.sets, t.block_dim);
  const std::int64_t bf = t.block_factor;
  const std::int64_t elem = elem_bytes(s.x);
  t.align = std::max<std::int64_t>(1, 32 / elem);
  const std::int64_t avail = t.ub_bytes - kUbReserve;
  const std::int64_t R = p.dma_rows;
  const std::int64_t L = p.row_len;
  const bool row_is_one_block = L * elem <= kMaxBlockLen;
  auto bytes = [&](std::int64_t rows, std::int64_t width, std::int64_t stats, int depth) {
    return layout_bytes(layout, {rows, width, stats, t.align}, depth);
  };
  const std::string name = fmt::format("npu.{}.{}", op_name(s), backward ? "bwd" : "fwd");
  const std::string shape = fmt::format("{} set(s) of {} x {} ({} DMA row(s) of {})", s0.sets, s.channels, s.spread, R, L);

  // Whole sets: a tile of m sets is one DataCopyPad of m * R rows.
  const std::int64_t cap = row_is_one_block ? std::min(bf, kMaxBlockCount / std::max<std::int64_t>(R, 1)) : 0;
  auto sets_fitting = [&](int depth) {
    return largest(cap, [&](std::int64_t m) { return bytes(m * R, L, m, depth) <= avail; });
  };
  const std::int64_t m1 = sets_fitting(1);
  if (impl == Impl::single_pass) {
    if (m1 == 0) {
      t.fits = false;
      t.depth = 1;
      t.rows_per_tile = R;
      t.block_size = L;
      t.ub_used = bytes(R, L, 1, 1);
      if (why != nullptr) {
        *why = fmt::format("{}: a whole set needs {} B of UB where UB {} B less the {} B reserve leaves {} B{}; {}.chunked "
                           "takes sets of any size",
                           shape, t.ub_used, t.ub_bytes, kUbReserve, avail,
                           row_is_one_block ? (R > kMaxBlockCount ? " (and more rows than a DataCopyPad takes)" : "")
                                            : " (a row is more than one DataCopyPad block)",
                           name);
      }
      return p;
    }
    const std::int64_t m2 = sets_fitting(2);
    const int depth = m2 > 0 && ceil_div(bf, m2) >= 2 ? 2 : 1;
    const std::int64_t mmax = depth == 2 ? m2 : m1;
    t.depth = depth;
    t.tiles_per_core = ceil_div(bf, mmax);
    p.sets_per_tile = ceil_div(bf, t.tiles_per_core);
    t.rows_per_tile = p.sets_per_tile * R;
    t.block_size = L;
    t.stat_rows = p.sets_per_tile;
    t.mode = bf == 1 ? TileMode::one_row_per_core : TileMode::multi_row;
    t.ub_used = bytes(t.rows_per_tile, L, t.stat_rows, depth);
    t.fits = true;
    if (why != nullptr) {
      *why = fmt::format("single_pass: {}, block_dim={} (contiguous, <= {} sets a core), {} set(s) a tile, {} tile(s) a "
                         "core, depth {}, UB {} of {} B ({:.0f}%)",
                         shape, t.block_dim, bf, p.sets_per_tile, t.tiles_per_core, depth, t.ub_used, t.ub_bytes,
                         100 * t.ub_fill());
    }
    return p;
  }

  // Chunked: pieces of a set, statistics of up to 256 sets held at once.
  t.mode = TileMode::split_row;
  t.stat_rows = std::min<std::int64_t>(bf, 256);
  const std::int64_t st = t.stat_rows;
  const std::int64_t rcap = row_is_one_block ? std::min(R, kMaxBlockCount) : 0;
  auto rows_fitting = [&](int depth) {
    return largest(rcap, [&](std::int64_t r) { return bytes(r, L, st, depth) <= avail; });
  };
  std::int64_t r2 = rows_fitting(2);
  int depth = 2;
  if (r2 == 0 && rows_fitting(1) > 0 && ceil_div(R, rows_fitting(1)) * bf < 3) depth = 1;
  std::int64_t rmax = depth == 2 ? r2 : rows_fitting(1);
  if (rmax == 0 && rows_fitting(1) > 0) {
    depth = 1;
    rmax = rows_fitting(1);
  }
  if (rmax > 0) {
    p.pieces = ceil_div(R, rmax);
    p.piece_rows = ceil_div(R, p.pieces);
    t.rows_per_tile = p.piece_rows;
    t.block_size = L;
  } else {
    const std::int64_t dma_cap = kMaxBlockLen / elem / kSubAlign * kSubAlign;
    const std::int64_t wcap = std::min(dma_cap, round_up(std::max<std::int64_t>(L, 1), kSubAlign));
    std::int64_t w = fit_width(layout, avail, 2, wcap, st, t.align);
    depth = 2;
    if (w < kSubAlign * 8 && fit_width(layout, avail, 1, wcap, st, t.align) > w) {
      w = fit_width(layout, avail, 1, wcap, st, t.align);
      depth = 1;
    }
    if (w == 0) {
      t.fits = false;
      t.depth = 1;
      t.block_size = kSubAlign;
      t.ub_used = bytes(1, kSubAlign, st, 1);
      if (why != nullptr) *why = fmt::format("{}: even a {}-element chunk needs {} B of UB", shape, kSubAlign, t.ub_used);
      return p;
    }
    std::int64_t chunks = ceil_div(L, w);
    const std::int64_t chunk = std::min(w, round_up(ceil_div(L, chunks), kSubAlign));
    chunks = ceil_div(L, chunk);
    p.piece_rows = 0;
    p.pieces = R * chunks;
    t.rows_per_tile = 1;
    t.block_size = chunk;
    t.block_size_sub = chunk;
    t.chunks = chunks;
    t.tail = L - (chunks - 1) * chunk;
  }
  t.depth = depth;
  t.tiles_per_core = bf * p.pieces;
  t.ub_used = bytes(t.rows_per_tile, t.block_size, st, depth);
  t.fits = t.ub_used <= avail;
  if (why != nullptr) {
    *why = p.piece_rows > 0
               ? fmt::format("chunked: {}, block_dim={} (contiguous, <= {} sets a core), pieces of {} DMA row(s), {} a "
                             "set, read twice, statistics of {} sets at once, depth {}, UB {} of {} B ({:.0f}%)",
                             shape, t.block_dim, bf, p.piece_rows, p.pieces, st, depth, t.ub_used, t.ub_bytes,
                             100 * t.ub_fill())
               : fmt::format("chunked: {}, block_dim={} (contiguous, <= {} sets a core), BLOCK_SIZE_SUB={} in {} "
                             "chunk(s) a row, tail {}, {} pieces a set, read twice, statistics of {} sets at once, "
                             "depth {}, UB {} of {} B ({:.0f}%)",
                             shape, t.block_dim, bf, t.block_size_sub, t.chunks, t.tail, p.pieces, st, depth, t.ub_used,
                             t.ub_bytes, 100 * t.ub_fill());
  }
  if (empty) t.rows = 0;
  return p;
}

}  // namespace

std::string_view to_string(Impl impl) {
  constexpr std::string_view kNames[] = {"single_pass", "chunked", "gpu_port"};  // Impl's order
  return kNames[static_cast<int>(impl)];
}

NormSizes sizes_of(const family::NormFwd& d, NormOp op) { return from(d, op, d.bias != nullptr); }
NormSizes sizes_of(const family::NormBwd& d, NormOp op) { return from(d, op, d.dbias != nullptr); }

FwdLayout fwd_layout(const NormSizes& s) {
  const std::uint32_t xs = elem_bytes(s.x);
  const bool row = !s.channel_mode();
  FwdLayout l;
  l.x = {"x", Extent::tile, xs, true};
  l.y = {"y", Extent::tile, xs, true};
  l.xf = {"x_f32", Extent::tile, widened(s.x), false};
  l.yf = {"y_f32", Extent::tile, widened(s.x), false};
  l.wf = {"w_f32", Extent::row, row && s.has_weight ? 4U : 0U, false};
  l.bf = {"b_f32", Extent::row, row && s.has_bias ? 4U : 0U, false};
  l.wc = resident("w_channels", s, s.has_weight);
  l.bc = resident("b_channels", s, s.has_bias);
  l.p_raw = resident("params_raw", s, (s.has_weight || s.has_bias) && s.p != family::Elem::f32, elem_bytes(s.p));
  l.mean = {"mean", Extent::stats, 4, false};
  l.m2 = {"m2", Extent::stats, 4, false};
  l.scale = {"scale", Extent::stats, 4, false};
  l.rstd = {"rstd", Extent::stats, 4, false};
  l.acc = {"acc", Extent::bytes, 32, false};
  l.work = {"reduce_work", Extent::reduce_work, 4, false};
  return l;
}

BwdLayout bwd_layout(const NormSizes& s) {
  const std::uint32_t xs = elem_bytes(s.x);
  const bool row = !s.channel_mode();
  const std::uint32_t w = row && s.has_weight ? 4U : 0U;
  const std::uint32_t b = row && s.has_bias ? 4U : 0U;
  BwdLayout l;
  l.dy = {"dy", Extent::tile, xs, true};
  l.x = {"x", Extent::tile, xs, true};
  l.dx = {"dx", Extent::tile, xs, true};
  l.dyf = {"dy_f32", Extent::tile, widened(s.x), false};
  l.xf = {"x_f32", Extent::tile, widened(s.x), false};
  l.t = {"tmp_f32", Extent::tile, 4, false};
  l.wf = {"w_f32", Extent::row, w, false};
  l.dwp = {"dw_partial", Extent::row, w, false};
  l.dwb = {"dw_block", Extent::row, w, false};
  l.dbp = {"db_partial", Extent::row, b, false};
  l.dbb = {"db_block", Extent::row, b, false};
  l.wc = resident("w_channels", s, s.has_weight);
  l.dwc = resident("dw_channels", s, s.has_weight);
  l.dbc = resident("db_channels", s, s.has_bias);
  l.p_raw = resident("params_raw", s, s.has_weight && s.p != family::Elem::f32, elem_bytes(s.p));
  l.mean = {"mean", Extent::stats, 4, false};
  l.rstd = {"rstd", Extent::stats, 4, false};
  l.c1 = {"c1", Extent::stats, 4, false};
  l.c2 = {"c2", Extent::stats, 4, false};
  l.acc = {"acc", Extent::bytes, 32, false};
  l.work = {"reduce_work", Extent::reduce_work, 4, false};
  l.exact = {"exact_scratch", Extent::bytes, exact_params(s) && (w != 0 || b != 0) ? kernel::kExactNormBytes : 0U, false};
  return l;
}


NormPlan plan_fwd(Impl impl, const NormSizes& s, const DeviceModel& device, std::string* why) {
  const auto items = fwd_layout(s).items();
  return plan(impl, s, device, items, false, why);
}

NormPlan plan_bwd(Impl impl, const NormSizes& s, const DeviceModel& device, std::string* why) {
  const auto items = bwd_layout(s).items();
  NormPlan p = plan(impl, s, device, items, true, why);
  if (impl != Impl::gpu_port) p.reduce = fit_reduce(s.p, exact_params(s), device.ub_bytes);
  return p;
}

namespace {

// The plan a forced gpu_port computes with once its launch could run: single_pass where the sets
// fit, else chunked.
NormPlan runnable_plan(NormPlan (*plan_fn)(Impl, const NormSizes&, const DeviceModel&, std::string*),
                       const NormSizes& s, const DeviceModel& device) {
  NormPlan p = plan_fn(Impl::single_pass, s, device, nullptr);
  if (!p.tiles.fits) p = plan_fn(Impl::chunked, s, device, nullptr);
  return p;
}

void probe_gpu_port(const NormSizes& s, const NormPlan& plan, bool backward, Emulator& emulator) {
  if (s.sets == 0) return;
  const std::string name = std::string(s.layer ? "layer_norm" : "group_norm") + (backward ? "_bwd" : "_fwd") +
                           "_gpu_port";
  // One block per set (the launch refuses more than 65535); in each, the GPU kernel's live tiles.
  gpu_port::Port port;
  port.programs = s.sets;
  port.block_size = plan.tiles.block_size;
  port.live_bits = plan.live_bits();
  port.ub_bits = static_cast<std::int64_t>(emulator.ub_bytes()) * 8;
  gpu_port::launch(emulator, name, port);
}

}  // namespace

template <NormOp Op>
void run_fwd(const family::NormFwd& d, const NormPlan& plan, const KernelContext& ctx) {
  Emulator& em = emulator_in(ctx);
  const NormSizes s = sizes_of(d, Op);
  if (plan.impl != Impl::gpu_port) return launch_fwd(d, s, plan, em);
  probe_gpu_port(s, plan, false, em);
  launch_fwd(d, s, runnable_plan(&plan_fwd, s, em.model()), em);
}
template <NormOp Op>
void run_bwd(const family::NormBwd& d, const NormPlan& plan, const KernelContext& ctx) {
  Emulator& em = emulator_in(ctx);
  const NormSizes s = sizes_of(d, Op);
  if (plan.impl != Impl::gpu_port) return launch_bwd(d, s, plan, em, ctx);
  probe_gpu_port(s, plan, true, em);
  launch_bwd(d, s, runnable_plan(&plan_bwd, s, em.model()), em, ctx);
}
template void run_fwd<NormOp::layer_norm>(const family::NormFwd&, const NormPlan&, const KernelContext&);
template void run_fwd<NormOp::group_norm>(const family::NormFwd&, const NormPlan&, const KernelContext&);
template void run_bwd<NormOp::layer_norm>(const family::NormBwd&, const NormPlan&, const KernelContext&);
template void run_bwd<NormOp::group_norm>(const family::NormBwd&, const NormPlan&, const KernelContext&);

}  // namespace opreg::npu::norm
