#include "backends/npu/glu/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace opreg::npu::glu {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The longest DataCopyPad block that is whole 512-byte lines (65535 bytes at most).
constexpr std::int64_t kLongestLineBytes = kMaxBlockLen / kL2LineBytes * kL2LineBytes;

template <class Layout>
std::int64_t bytes_at(const Layout& layout, std::int64_t width, std::int64_t align, int depth) {
  const auto items = layout.items();
  return layout_bytes(items, TileShape{1, width, 1, align}, depth);
}

struct Sized {
  std::int64_t align = 8;
  std::int64_t avail = 0;
};

Sized sized(const GluSizes& s, const DeviceModel& device) {
  return {std::max<std::int64_t>(1, 32 / elem_bytes(s.x)), static_cast<std::int64_t>(device.ub_bytes) - kUbReserve};
}

std::string ub_line(std::int64_t used, std::int64_t ub) {
  return fmt::format("UB {} of {} B ({:.0f}%)", used, ub, ub == 0 ? 0.0 : 100.0 * static_cast<double>(used) / ub);
}

template <class Layout>
GluPlan plan_flat(const Layout& layout, const GluSizes& s, const DeviceModel& device, std::string& why) {
  GluPlan p;
  const Sized z = sized(s, device);
  // A line is 512 bytes (an L2 line) unless the UB cannot hold one line of the layout.
  std::int64_t line = kL2LineBytes / elem_bytes(s.x);
  while (line > z.align && bytes_at(layout, line, z.align, 1) > z.avail) line /= 2;
  p.line = line;
  const auto items = layout.items();
  PlanRequest r =
      request_on(device, s.backward ? "glu_bwd_flat" : "glu_fwd_flat", ceil_div(s.n, line), line, items, s.x);
  r.allow_split = false;
  const Plan t = plan_tiles(r);
  p.fits = t.fits;
  p.depth = t.depth;
  p.ub_bytes = t.ub_bytes;
  if (!t.fits) {
    why = "flat: " + t.why;
    return p;
  }
  p.tile = t.rows_per_tile * line;
  p.tiles = ceil_div(s.n, p.tile);
  p.block_dim = std::min<std::int64_t>(device.profile->vector_cores, p.tiles);
  p.ub_used = t.ub_used;
  why = fmt::format(
      "flat: {} elements in tiles of {} ({} line(s) of {} B), {} tile(s) grid-strided over block_dim={} (<= {} a "
      "core), depth {}, {}",
      s.n, p.tile, t.rows_per_tile, line * elem_bytes(s.x), p.tiles, p.block_dim, ceil_div(p.tiles, p.block_dim), p.depth,
      ub_line(p.ub_used, p.ub_bytes));
  return p;
}

template <class Layout>
GluPlan plan_sub_block(const Layout& layout, const GluSizes& s, const DeviceModel& device, std::string& why) {
  GluPlan p;
  const auto items = layout.items();
  PlanRequest r =
      request_on(device, s.backward ? "glu_bwd_sub_block" : "glu_fwd_sub_block", s.rows, s.cols, items, s.x);
  r.force_split = true;
  const Plan t = plan_tiles(r);
  p.fits = t.fits;
  p.depth = t.depth;
  p.ub_bytes = t.ub_bytes;
  p.ub_used = t.ub_used;
  p.block_dim = t.block_dim;
  p.tile = t.block_size_sub;
  p.line = t.block_size_sub;
  p.tiles = t.chunks;
  why = "sub_block: " + t.why;
  return p;
}

// The port's numbers for supports()' line (port_of below; the act does not change the grid or
// the tiles).
GluPlan plan_gpu_port(const GluSizes& s, const DeviceModel& device, std::string& why) {
  const gpu_port::Port port = port_of(Act::silu, s, device);
  GluPlan p;
  p.block_dim = port.programs;
  p.tile = port.block_size;
  p.line = kLongestLineBytes / elem_bytes(s.x);
  p.tiles = 1;
  p.depth = port.rule == gpu_port::Multibuffer::doubled ? 2 : 1;
  p.ub_bytes = static_cast<std::int64_t>(device.ub_bytes);
  p.ub_used = (port.live_bits + 7) / 8;
  p.fits = port.runs();
  why = gpu_port::refuse(port, s.backward ? "{geglu,swiglu}.bwd" : "{geglu,swiglu}.fwd").reason;
  return p;
}

}  // namespace

std::string_view to_string(Impl impl) {
  constexpr std::string_view kNames[] = {"flat", "sub_block", "gpu_port"};  // Impl's order
  return kNames[static_cast<int>(impl)];
}

std::string_view to_string(Act act) { return act == Act::gelu ? "gelu_tanh" : "silu"; }

namespace {
GluSizes sizes_from(family::Elem x, std::int64_t n, std::int64_t cols, bool backward) {
  const std::int64_t rows = cols == 0 ? 0 : n / cols;
  return {x, n, rows, cols, backward};
}
}  // namespace

GluSizes sizes_of(const family::GluFwd& d) { return sizes_from(d.type, d.n, d.hidden, false); }
GluSizes sizes_of(const family::GluBwd& d) { return sizes_from(d.type, d.n, d.hidden, true); }

Verdict verdict(Act act, const GluPlan& plan, std::string why) {
  if (plan.impl == Impl::gpu_port) {
    return Verdict::reject(why + fmt::format("; force it to see the device's failure (npu.{}.{}.flat takes any shape)",
                                             act == Act::gelu ? "geglu" : "swiglu", plan.backward ? "bwd" : "fwd"));
  }
  if (plan.fits) return {true, std::move(why)};
  return Verdict::reject(std::move(why));
}

FwdLayout fwd_layout(family::Elem x) {
  const std::uint32_t xs = elem_bytes(x);
  FwdLayout l;
  l.a = {"a", Extent::tile, xs, true};
  l.b = {"b", Extent::tile, xs, true};
  l.pad_c = {"bank_pad", Extent::bytes, 256, false};
  l.c = {"c", Extent::tile, xs, true};
  l.af = {"a_f32", Extent::tile, widened(x), false};
  l.pad_t = {"bank_pad", Extent::bytes, l.af.size != 0 ? 256U : 0U, false};
  l.t = {"gate_f32", Extent::tile, 4, false};
  return l;
}

BwdLayout bwd_layout(family::Elem x) {
  const std::uint32_t xs = elem_bytes(x);
  BwdLayout l;
  l.dc = {"dc", Extent::tile, xs, true};
  l.a = {"a", Extent::tile, xs, true};
  l.b = {"b", Extent::tile, xs, true};
  l.da = {"da", Extent::tile, xs, true};
  l.db = {"db", Extent::tile, xs, true};
  l.af = {"a_f32", Extent::tile, widened(x), false};
  l.s = {"sigmoid_f32", Extent::tile, 4, false};
  l.slope = {"slope_f32", Extent::tile, widened(x), false};  // f32: in da's tile
  l.value = {"value_f32", Extent::tile, widened(x), false};  // f32: in db's tile
  return l;
}

GluPlan plan(Impl impl, const GluSizes& s, const DeviceModel& device, std::string* why) {
  std::string line;
  GluPlan p;
  auto with = [&](const auto& layout) {
    switch (impl) {
      case Impl::flat:
        return plan_flat(layout, s, device, line);
      case Impl::sub_block:
        return plan_sub_block(layout, s, device, line);
      case Impl::gpu_port:
        return plan_gpu_port(s, device, line);
    }
    return GluPlan{};
  };
  if (s.n == 0) {
    p.fits = true;
    p.ub_bytes = static_cast<std::int64_t>(device.ub_bytes);
    line = fmt::format("{}: no elements: nothing to launch", to_string(impl));
  } else {
    p = s.backward ? with(bwd_layout(s.x)) : with(fwd_layout(s.x));
  }
  p.impl = impl;
  p.backward = s.backward;
  p.n = s.n;
  p.rows = s.rows;
  p.cols = s.cols;
  if (s.n == 0) p.block_dim = 0;
  if (why != nullptr) *why = std::move(line);
  return p;
}

// Liger-Kernel's GPU kernels at gpu_port::kLigerCommit: ops/geglu.py:96-130 and
// ops/swiglu.py's launches (off Blackwell): BLOCK_SIZE = calculate_settings(n_cols), one program
// per row, grid (n_rows,). Tiles: a, b (dc) loaded, c (da, db) stored, and the float copy of a
// 16-bit a. Work per element counted in the kernels: geglu forward a*a*a, 0.044715*, +a, *sqrt(2/pi),
// tanh (exp and reciprocal on the vector unit, with its adds), 1+, 0.5*a*, *b: 10 ops and 2
// transcendentals; backward 25 and 2; swiglu forward *gate_multiplier, sigmoid (-x, exp, +1,
// reciprocal), x*sig, *b: 5 and 2; backward 11 and 2.
gpu_port::Port port_of(Act act, const GluSizes& s, const DeviceModel& device) {
  using gpu_port::Role;
  gpu_port::Port p;
  p.rule = gpu_port::multibuffer_from_env();
  const std::uint32_t xb = elem_bytes(s.x) * 8;
  const std::uint32_t work = xb == 16 ? 32 : 0;
  const bool gelu = act == Act::gelu;
  p.kernel = fmt::format("_{}_{}_kernel", gelu ? "geglu_tanh" : "swiglu", s.backward ? "backward" : "forward");
  p.rows = s.rows;
  p.cols = s.cols;
  gpu_port::calculate_settings(p, s.cols);
  p.programs = s.rows;
  p.grid_text = fmt::format("({},)", s.rows);
  if (!s.backward) {
    // args: a, b | c
    p.tiles = {{{"a", xb, Role::row_in, 0}, {"b", xb, Role::row_in, 1}, {"c", xb, Role::row_out, 2},
                {"a_f32", work, Role::work, 0}}};
    p.tile_count = 4;
    p.work = {gelu ? 10 : 5, 2, 0};
  } else {
    // args: dc, a, b | da, db
    p.tiles = {{{"dc", xb, Role::row_in, 0}, {"a", xb, Role::row_in, 1}, {"b", xb, Role::row_in, 2},
                {"da", xb, Role::row_out, 3}, {"db", xb, Role::row_out, 4}, {"a_f32", work, Role::work, 0}}};
    p.tile_count = 6;
    p.work = {gelu ? 25 : 11, 2, 0};
  }
  gpu_port::size(p, static_cast<std::int64_t>(device.ub_bytes));
  return p;
}

}  // namespace opreg::npu::glu
