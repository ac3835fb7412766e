
#include <fmt/format.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/npu/ascend/runtime.h"
#include "backends/npu/compensated.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/rms_norm/plan.h"

namespace opreg::npu::rms_norm {
namespace {

template <class Desc>
constexpr bool kBackward = std::is_same_v<Desc, family::RowNormBwd>;

PlanRequest request(const RowNormSizes& s, const DeviceModel& device, std::span<const UbItem> layout, Impl impl,
                    std::string_view kernel) {
  PlanRequest r = request_on(device, kernel, s.rows, s.cols, layout, s.x);
  r.allow_split = impl != Impl::single_pass;
  r.force_split = impl == Impl::chunked;
  return r;
}

template <class Desc>
RowNormSizes sizes_from(const Desc& d, bool fused) {
  const bool weighted = d.weight != nullptr;
  return {d.x_type, weighted ? d.w_type : d.x_type, weighted, d.rows, d.hidden, fused};
}

const char* op_of(const RowNormSizes& s) { return s.fused ? "fused_add_rms_norm" : "rms_norm"; }

Verdict verdict(bool fits, std::string why, Impl impl, const RowNormSizes& s, const char* direction) {
  if (fits) return {true, std::move(why)};
  if (impl == Impl::single_pass) why += fmt::format("; npu.{}.{}.chunked takes rows of any length", op_of(s), direction);
  return Verdict::reject(std::move(why));
}

}  // namespace

std::string_view to_string(Impl impl) {
  constexpr std::string_view kNames[] = {"single_pass", "chunked", "atomic"};  // Impl's order
  return kNames[static_cast<int>(impl)];
}

RowNormSizes sizes_of(const family::RowNormFwd& d) { return sizes_from(d, d.residual != nullptr); }
RowNormSizes sizes_of(const family::RowNormBwd& d) { return sizes_from(d, d.ds_out != nullptr); }

FwdLayout fwd_layout(family::Elem x, bool has_weight, bool fused, bool short_row_path) {
  const std::uint32_t xs = elem_bytes(x);
  FwdLayout l;
  l.x = {"x", Extent::tile, xs, true};
  l.res = {"residual", Extent::tile, fused ? xs : 0U, true};
  l.y = {"y", Extent::tile, xs, true};
  l.s = {"s", Extent::tile, fused ? xs : 0U, true};
  l.xf = {"x_f32", Extent::tile, widened(x), false};
  l.sq = {"sq_f32", Extent::tile, widened(x), false};  // float x squares into y's tile
  l.wf = {"w_f32", Extent::row, has_weight ? 4U : 0U, false};
  l.sums = {"sums", Extent::stats, 4, false};
  l.scale = {"scale", Extent::stats, 4, false};
  l.rstd = {"rstd", Extent::stats, 4, false};
  l.rstd_blocks = {"rstd_blocks", Extent::stat_blocks, short_row_path ? 32U : 0U, false};
  l.acc = {"acc", Extent::bytes, 32, false};
  l.work = {"reduce_work", Extent::reduce_work, 4, false};
  return l;
}

BwdLayout bwd_layout(family::Elem x, bool has_weight, bool fused) {
  const std::uint32_t xs = elem_bytes(x);
  const std::uint32_t w = has_weight ? 4 : 0;
  BwdLayout l;
  l.dy = {"dy", Extent::tile, xs, true};
  l.ds = {"ds_out", Extent::tile, fused ? xs : 0U, true};
  l.x = {"x", Extent::tile, xs, true};
  l.dx = {"dx", Extent::tile, xs, true};
  l.dyf = {"dy_f32", Extent::tile, widened(x), false};
  l.xf = {"x_f32", Extent::tile, widened(x), false};
  l.t = {"tmp_f32", Extent::tile, 4, false};
  l.wf = {"w_f32", Extent::row, w, false};
  l.dwp = {"dw_partial", Extent::row, w, false};
  l.blk = {"dw_block", Extent::row, w, false};
  l.rstd = {"rstd", Extent::stats, 4, false};
  l.dot = {"dot", Extent::stats, 4, false};
  l.coeff = {"coeff", Extent::stats, 4, false};
  l.acc = {"acc", Extent::bytes, 32, false};
  l.work = {"reduce_work", Extent::reduce_work, 4, false};
  l.exact = {"exact_scratch", Extent::bytes, exact_dw(x, has_weight) ? kernel::kExactBytes : 0U, false};
  return l;
}

FwdPlan plan_fwd(Impl impl, const RowNormSizes& s, const DeviceModel& device, std::string* why) {
  const auto items = fwd_layout(s.x, s.has_weight, s.fused, short_rows(s.cols)).items();
  const PlanRequest r = request(s, device, items, impl, s.fused ? "fused_add_rms_norm_fwd" : "rms_norm_fwd");
  Plan p = plan_tiles(r);
  if (why != nullptr) *why = std::move(p.why);
  return {impl, p};
}

BwdPlan plan_bwd(Impl impl, const RowNormSizes& s, const DeviceModel& device, std::string* why) {
  const auto items = bwd_layout(s.x, s.has_weight, s.fused).items();
  // No rows still leaves dweight to clear: one core, planned as for one row, takes none.
  RowNormSizes planned = s;
  planned.rows = s.rows == 0 ? 1 : s.rows;
  const PlanRequest r = request(planned, device, items, impl, s.fused ? "fused_add_rms_norm_bwd" : "rms_norm_bwd");
  Plan tiles = plan_tiles(r);
  if (s.rows == 0) {
    tiles.rows = 0;
    tiles.why = "no rows (dweight is zero): " + tiles.why;
  }
  if (why != nullptr) *why = std::move(tiles.why);
  return {impl, tiles, fit_reduce(s.w, exact_dw(s.x, s.has_weight), device.ub_bytes)};
}

template <Impl I, class Desc, class Plan>
Verdict supports(const Desc& d, const DeviceModel& device, Plan& plan) {
  constexpr bool kBwd = std::is_same_v<Desc, family::RowNormBwd>;
  std::string why;
  const RowNormSizes s = sizes_of(d);
  if constexpr (kBwd) {
    plan = plan_bwd(I, s, device, &why);
  } else {
    plan = plan_fwd(I, s, device, &why);
  }
  return verdict(plan.tiles.fits, std::move(why), I, s, kBwd ? "bwd" : "fwd");
}
template Verdict supports<Impl::single_pass>(const family::RowNormFwd&, const DeviceModel&, FwdPlan&);
template Verdict supports<Impl::chunked>(const family::RowNormFwd&, const DeviceModel&, FwdPlan&);
template Verdict supports<Impl::single_pass>(const family::RowNormBwd&, const DeviceModel&, BwdPlan&);
template Verdict supports<Impl::chunked>(const family::RowNormBwd&, const DeviceModel&, BwdPlan&);
template Verdict supports<Impl::atomic>(const family::RowNormBwd&, const DeviceModel&, BwdPlan&);

namespace {

// Liger-Kernel's GPU kernels at gpu_port::kLigerCommit, as triton-ascend launches them:
// - rms_norm forward (ops/rms_norm.py:436-510): BLOCK_SIZE = calculate_settings(n_cols); one
//   program per row (_rms_norm_forward_kernel, grid (n_rows,)) when BLOCK_SIZE > 256 or
//   n_rows < 4096 * 8, else _block_rms_norm_forward_kernel with BLOCK_ROW 16, grid
//   cdiv(n_rows, 16) (line 469);
// - rms_norm backward (lines 513-601): sm_count = get_npu_core_count() on an npu (ops/utils.py
//   :144-153: the driver's num_vectorcore, the profile's vector cores), grid (sm_count,),
//   rows_per_program = ceil(n_rows / sm_count) (line 537), or the block kernel striding over
//   rows by sm_count x BLOCK_ROW (lines 367, 577); each program's float dW row goes to
//   _dW[sm_count, n_cols], summed by torch afterwards (line 605, another launch, not emulated);
// - fused_add_rms_norm forward (ops/fused_add_rms_norm.py:227-282): one program per row, always
//   (line 259); backward (285-353): grid (sm_count,), rows_per_program = ceil(n_rows / sm_count).
// Tiles: each tl.load's and tl.store's row, the float dW row (tl.zeros), and one float copy of
// a 16-bit row (the compiler's other temporaries are not counted: a lower bound). Work per
// element, counted in the kernels (llama casting): forward x*x, x*rstd, offset+w, *w (fused: +
// the residual add) and one tl.sum; backward dy*w, rstd*m, m*x, c*x, +, x*rstd, dy*(.), dW += (fused:
// + ds_out) and one tl.sum.
gpu_port::Port port_of(const RowNormSizes& s, bool backward, const DeviceModel& device) {
  using gpu_port::Role;
  gpu_port::Port p;
  p.rule = gpu_port::multibuffer_from_env();
  const std::uint32_t xb = elem_bytes(s.x) * 8;
  const std::uint32_t wb = s.has_weight ? elem_bytes(s.w) * 8 : 0;
  const std::uint32_t work = xb == 16 ? 32 : 0;
  p.rows = s.rows;
  p.cols = s.cols;
  gpu_port::calculate_settings(p, s.cols);
  const bool row_kernel = s.fused || p.block_size > 256 || s.rows < 4096 * 8;
  const std::int64_t sm_count = device.profile->vector_cores;
  // Args: inputs first, then the scratch outputs (the order port_run builds them in).
  if (!backward) {
    if (row_kernel) {
      p.kernel = s.fused ? "_fused_add_rms_norm_forward_kernel" : "_rms_norm_forward_kernel";
      p.programs = s.rows;
    } else {
      p.kernel = "_block_rms_norm_forward_kernel";
      p.block_rows = 16;
      p.programs = (s.rows + 15) / 16;
      p.first_mul = p.step = p.span = 16;
    }
    p.grid_text = fmt::format("({},)", p.programs);
    // args: x, residual, weight | y, s
    p.tiles = {{{"x", xb, Role::row_in, 0},
                {"residual", s.fused ? xb : 0, Role::row_in, 1},
                {"weight", wb, Role::param_in, 2},
                {"y", xb, Role::row_out, 3},
                {"s", s.fused ? xb : 0, Role::row_out, 4},
                {"x_f32", work, Role::work, 0}}};
    p.tile_count = 6;
    p.work = {s.fused ? 5 : 4, 0, 1};
  } else {
    p.programs = sm_count;
    p.grid_text = fmt::format("({},)", sm_count);
    if (row_kernel) {
      p.kernel = s.fused ? "_fused_add_rms_norm_backward_kernel" : "_rms_norm_backward_kernel";
      p.first_mul = p.span = (s.rows + sm_count - 1) / sm_count;
    } else {
      p.kernel = "_block_rms_norm_backward_kernel";
      p.block_rows = 16;
      p.first_mul = 16;
      p.step = sm_count * 16;
      p.span = s.rows;
    }
    // args: dy, x, ds_out, weight | dx, dw partials
    p.tiles = {{{"dy", xb, Role::row_in, 0},
                {"x", xb, Role::row_in, 1},
                {"ds_out", s.fused ? xb : 0, Role::row_in, 2},
                {"weight", wb, Role::param_in, 3},
                {"dx", xb, Role::row_out, 4},
                {"dw_row", wb != 0 ? 32U : 0U, Role::prog_out, 5},
                {"x_f32", work, Role::work, 0}}};
    p.tile_count = 7;
    p.work = {s.fused ? 9 : 8, 0, 1};
  }
  gpu_port::size(p, static_cast<std::int64_t>(device.ub_bytes));
  return p;
}

}  // namespace

template <class Desc>
Verdict port_supports(const Desc& d, const DeviceModel& device, gpu_port::Summary& port) {
  const RowNormSizes s = sizes_of(d);
  const gpu_port::Port full = port_of(s, kBackward<Desc>, device);
  port = gpu_port::summary(full);
  return gpu_port::refuse(full, fmt::format("{}.{}", op_of(s), kBackward<Desc> ? "bwd" : "fwd"));
}

template <class Desc>
void port_run(const Desc& d, const gpu_port::Summary& planned, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  const RowNormSizes s = sizes_of(d);
  const std::string op_dir = fmt::format("{}.{}", op_of(s), kBackward<Desc> ? "bwd" : "fwd");
  // The plan was made when supports() ran; the rule is read again so a changed environment is
  // what the failure reports.
  const gpu_port::Port port = port_of(s, kBackward<Desc>, emulator.model());
  static_cast<void>(planned);
  gpu_port::check(port, op_dir);  // fails once, before anything runs
  // The result: the npu's own kernel (single_pass, or chunked for a row UB cannot hold).
  if constexpr (kBackward<Desc>) {
    BwdPlan plan = plan_bwd(Impl::single_pass, s, emulator.model());
    if (!plan.tiles.fits) plan = plan_bwd(Impl::chunked, s, emulator.model());
    run_bwd(d, plan, ctx);
  } else {
    FwdPlan plan = plan_fwd(Impl::single_pass, s, emulator.model());
    if (!plan.tiles.fits) plan = plan_fwd(Impl::chunked, s, emulator.model());
    run_fwd(d, plan, ctx);
  }
  if (port.programs == 0 || s.cols == 0) return;
  // Then the port's program, its outputs into scratch: its counters are the last launch's.
  const std::size_t xbytes = static_cast<std::size_t>(s.rows * s.cols) * elem_bytes(s.x);
  const std::size_t wbytes = static_cast<std::size_t>(s.cols) * elem_bytes(s.w);
  const std::size_t out1 = (xbytes + 63) / 64 * 64;
  const std::size_t out2 =
      kBackward<Desc> ? static_cast<std::size_t>(port.programs * s.cols) * 4 : (s.fused ? xbytes : 0);
  const Workspace::Lease scratch = acquire_scratch(ctx, out1 + std::max<std::size_t>(out2, 64));
  auto* base = static_cast<std::byte*>(scratch.data());
  std::vector<GmArg> args;
  if constexpr (kBackward<Desc>) {
    args = {{"dy", d.dy, xbytes},
            {"x", d.x, xbytes},
            {"ds_out", s.fused && d.ds_out != nullptr ? d.ds_out : d.dy, s.fused ? xbytes : 64},
            {"weight", s.has_weight ? d.weight : d.dy, s.has_weight ? wbytes : 64},
            {"dx_scratch", base, xbytes, true},
            {"dw_partials_scratch", base + out1, std::max<std::size_t>(out2, 64), true}};
  } else {
    args = {{"x", d.x, xbytes},
            {"residual", s.fused ? d.residual : d.x, s.fused ? xbytes : 64},
            {"weight", s.has_weight ? d.weight : d.x, s.has_weight ? wbytes : 64},
            {"y_scratch", base, xbytes, true},
            {"s_scratch", base + out1, std::max<std::size_t>(out2, 64), true}};
  }
  gpu_port::emulate(emulator, fmt::format("{}_gpu_port", port.kernel), port, args);
}
template Verdict port_supports(const family::RowNormFwd&, const DeviceModel&, gpu_port::Summary&);
template Verdict port_supports(const family::RowNormBwd&, const DeviceModel&, gpu_port::Summary&);
template void port_run(const family::RowNormFwd&, const gpu_port::Summary&, const KernelContext&);
template void port_run(const family::RowNormBwd&, const gpu_port::Summary&, const KernelContext&);

}  // namespace opreg::npu::rms_norm
