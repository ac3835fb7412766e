#include "backends/npu/norm/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <type_traits>
#include <vector>

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

}  // namespace

// Liger-Kernel's GPU kernels at gpu_port::kLigerCommit, as triton-ascend launches them:
// - layer_norm forward (ops/layer_norm.py:169-227): BLOCK_SIZE = calculate_settings(n_cols), one
//   program per row, grid (n_rows,); tiles W, B (loaded once), X, Y, and a 16-bit X's float
//   copy; work: x-mean, where(mask), xc*xc, *rstd, *w, +b and two tl.sums;
// - layer_norm backward (lines 230-304): grid (sm_count,) with sm_count = num_vectorcore,
//   rows_per_program = ceil(n_rows / sm_count); tiles W (once), x, dy, dx, the float dW and dB
//   rows (stored once a program); work: x-mean, *rstd, w*dy, x_hat*wdy, x_hat*c1, +c2, wdy-, *rstd,
//   dy*x_hat, dW +=, dB += and two tl.sums;
// - group_norm (ops/group_norm.py): MAX_FUSED_SIZE = 16384 on an npu device (lines 22-25, #1003);
//   forward (206-239): hidden = (C / G) x HW, BLOCK_SIZE = min(MAX_FUSED_SIZE,
//   next_power_of_2(hidden)), grid (N, G), the set walked in BLOCK_SIZE pieces (tl.range loops):
//   tiles X, the gathered W and B, Y; backward (242-278): BLOCK_SIZE = min(MAX_FUSED_SIZE,
//   next_power_of_2(dY.shape[-1])), HW for the (N, C, HW) input Liger's tests and benchmark use
//   (assumed for opreg's spatial size), grid (N, G); tiles X, dY, dX (W and the sums are scalars).
//   group_norm's program is not emulated (its gathers and per-channel loops are not the row
//   program's): forced, its checks run and the result and counters are the npu kernel's.
gpu_port::Port port_of(const NormSizes& s, bool backward, const DeviceModel& device) {
  using gpu_port::Role;
  gpu_port::Port p;
  p.rule = gpu_port::multibuffer_from_env();
  const std::uint32_t xb = elem_bytes(s.x) * 8;
  const std::uint32_t pb = elem_bytes(s.p) * 8;
  const std::uint32_t work = xb == 16 ? 32 : 0;
  const std::int64_t sm_count = device.profile->vector_cores;
  const char* dir = backward ? "backward" : "forward";
  if (s.layer) {
    p.kernel = fmt::format("_layer_norm_{}_kernel", dir);
    p.rows = s.sets;
    p.cols = s.size();
    gpu_port::calculate_settings(p, p.cols);
    if (!backward) {
      p.programs = s.sets;
      // args: x, weight, bias | y
      p.tiles = {{{"W", s.has_weight ? pb : 0, Role::param_in, 1},
                  {"B", s.has_bias ? pb : 0, Role::param_in, 2},
                  {"X", xb, Role::row_in, 0},
                  {"Y", xb, Role::row_out, 3},
                  {"X_f32", work, Role::work, 0}}};
      p.tile_count = 5;
      p.work = {6, 0, 2};
    } else {
      p.programs = sm_count;
      p.first_mul = p.span = (s.sets + sm_count - 1) / sm_count;
      // args: x, dy, weight | dx, dW partials, dB partials
      p.tiles = {{{"w", s.has_weight ? pb : 0, Role::param_in, 2},
                  {"x", xb, Role::row_in, 0},
                  {"dy", xb, Role::row_in, 1},
                  {"dx", xb, Role::row_out, 3},
                  {"dW_row", 32, Role::prog_out, 4},
                  {"db_row", 32, Role::prog_out, 5},
                  {"x_f32", work, Role::work, 0}}};
      p.tile_count = 7;
      p.work = {11, 0, 2};
    }
    p.grid_text = fmt::format("({},)", p.programs);
  } else {
    constexpr std::int64_t kMaxFusedNpu = 16384;
    const std::int64_t n = s.groups > 0 ? s.sets / s.groups : 0;
    p.kernel = fmt::format("_group_norm_{}_kernel", dir);
    p.rows = s.sets;
    p.cols = s.size();
    const std::int64_t hidden = backward ? s.spread : s.size();
    p.block_size = std::min(kMaxFusedNpu, gpu_port::next_pow2(std::max<std::int64_t>(hidden, 1)));
    p.chunks = (hidden + p.block_size - 1) / p.block_size;
    p.programs = n * s.groups;
    p.grid_text = fmt::format("({}, {})", n, s.groups);
    p.emulated = false;
    if (!backward) {
      p.tiles = {{{"X", xb, Role::row_in, 0},
                  {"W", s.has_weight ? pb : 0, Role::row_in, 1},
                  {"B", s.has_bias ? pb : 0, Role::row_in, 2},
                  {"Y", xb, Role::row_out, 3},
                  {"X_f32", work, Role::work, 0}}};
      p.tile_count = 5;
      p.work = {0, 0, 2};  // tl.sum(X), tl.sum(X * X) (the scratch counted; not emulated)
    } else {
      p.work = {0, 0, 4};  // dW, dB, c1, c2
      p.tiles = {{{"X", xb, Role::row_in, 0},
                  {"UPSTREAM_grad", xb, Role::row_in, 1},
                  {"dx", xb, Role::row_out, 2},
                  {"X_f32", work, Role::work, 0}}};
      p.tile_count = 4;
    }
  }
  gpu_port::size(p, static_cast<std::int64_t>(device.ub_bytes));
  return p;
}

namespace {

NormPlan plan_gpu_port(const NormSizes& s, const DeviceModel& device, bool backward, std::string* why) {
  const gpu_port::Port port = port_of(s, backward, device);
  NormPlan p;
  p.impl = Impl::gpu_port;
  p.tiles.rows = s.sets;
  p.tiles.block_dim = port.programs;
  p.tiles.fits = false;
  p.tiles.block_size = port.block_size;
  p.live_tiles = port.tile_count;
  if (why != nullptr) {
    *why = gpu_port::refuse(port, fmt::format("{}.{}", op_name(s), backward ? "bwd" : "fwd")).reason;
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

// gpu_port, forced: Liger's GPU kernel's failures, once and before anything runs; where it
// would run, the result from single_pass (or chunked), then (layer_norm) the port's program on
// scratch outputs, whose counters are the last launch's.
template <class Desc>
void port_run(const Desc& d, const NormSizes& s, bool backward, Emulator& em, const KernelContext& ctx) {
  const gpu_port::Port port = port_of(s, backward, em.model());
  gpu_port::check(port, fmt::format("{}.{}", op_name(s), backward ? "bwd" : "fwd"));
  if constexpr (std::is_same_v<Desc, family::NormBwd>) {
    launch_bwd(d, s, runnable_plan(&plan_bwd, s, em.model()), em, ctx);
  } else {
    launch_fwd(d, s, runnable_plan(&plan_fwd, s, em.model()), em);
  }
  if (!port.emulated || port.programs == 0 || port.cols == 0) return;
  const auto xbytes = static_cast<std::size_t>(s.sets * s.size()) * elem_bytes(s.x);
  const auto pbytes = static_cast<std::size_t>(std::max<std::int64_t>(s.params(), 1)) * elem_bytes(s.p);
  const std::size_t pitch = (xbytes + 63) / 64 * 64;
  const std::size_t partials = static_cast<std::size_t>(port.programs * port.cols) * 4;
  const Workspace::Lease scratch = acquire_scratch(ctx, pitch + (backward ? 2 * partials : 0));
  auto* base = static_cast<std::byte*>(scratch.data());
  std::vector<GmArg> args;
  if constexpr (std::is_same_v<Desc, family::NormBwd>) {
    args = {{"x", d.x, xbytes},
            {"dy", d.dy, xbytes},
            {"weight", s.has_weight ? d.weight : d.x, s.has_weight ? pbytes : 64},
            {"dx_scratch", base, xbytes, true},
            {"dW_partials_scratch", base + pitch, partials, true},
            {"dB_partials_scratch", base + pitch + partials, partials, true}};
  } else {
    args = {{"x", d.x, xbytes},
            {"weight", s.has_weight ? d.weight : d.x, s.has_weight ? pbytes : 64},
            {"bias", s.has_bias ? d.bias : d.x, s.has_bias ? pbytes : 64},
            {"y_scratch", base, xbytes, true}};
  }
  gpu_port::emulate(em, port.kernel + "_gpu_port", port, args);
}

}  // namespace

template <NormOp Op>
void run_fwd(const family::NormFwd& d, const NormPlan& plan, const KernelContext& ctx) {
  Emulator& em = emulator_in(ctx);
  const NormSizes s = sizes_of(d, Op);
  if (plan.impl != Impl::gpu_port) return launch_fwd(d, s, plan, em);
  port_run(d, s, false, em, ctx);
}
template <NormOp Op>
void run_bwd(const family::NormBwd& d, const NormPlan& plan, const KernelContext& ctx) {
  Emulator& em = emulator_in(ctx);
  const NormSizes s = sizes_of(d, Op);
  if (plan.impl != Impl::gpu_port) return launch_bwd(d, s, plan, em, ctx);
  port_run(d, s, true, em, ctx);
}
template void run_fwd<NormOp::layer_norm>(const family::NormFwd&, const NormPlan&, const KernelContext&);
template void run_fwd<NormOp::group_norm>(const family::NormFwd&, const NormPlan&, const KernelContext&);
template void run_bwd<NormOp::layer_norm>(const family::NormBwd&, const NormPlan&, const KernelContext&);
template void run_bwd<NormOp::group_norm>(const family::NormBwd&, const NormPlan&, const KernelContext&);

}  // namespace opreg::npu::norm
