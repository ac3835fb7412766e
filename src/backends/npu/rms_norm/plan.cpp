#include "backends/npu/rms_norm/plan.h"

#include "backends/npu/compensated.h"

#include "ops/describe.h"

namespace opreg::npu::rms {
namespace {

std::uint32_t bytes_of(DType d) { return static_cast<std::uint32_t>(element_size(d)); }

// 16-bit activations are computed in float, so they need float copies; float ones are used in place.
std::uint32_t widened(DType x) { return x == DType::f32 ? 0 : 4; }

PlanRequest request(const Problem& s, const DeviceModel& device, std::span<const UbItem> layout, Impl impl) {
  PlanRequest r;
  r.rows = s.rows;
  r.cols = s.cols;
  r.layout = layout;
  r.gm_elem_bytes = bytes_of(s.x);
  r.vector_cores = device.profile->vector_cores;
  r.ub_bytes = static_cast<std::int64_t>(device.ub_bytes);
  r.allow_split = impl != Impl::single_pass;
  r.force_split = impl == Impl::chunked;
  return r;
}

}  // namespace

std::string_view to_string(Impl impl) {
  switch (impl) {
    case Impl::single_pass:
      return "single_pass";
    case Impl::chunked:
      return "chunked";
    case Impl::atomic:
      return "atomic";
  }
  return "?";
}

namespace {

template <class Desc>
Problem problem_from(const Desc& d) {
  const DType x = family::dtype_of(d.x_type);
  const bool weighted = d.weight != nullptr;
  return {x, weighted ? family::dtype_of(d.w_type) : x, weighted, d.rows, d.hidden};
}

}  // namespace

Problem problem_of(const family::RowNormFwd& d) {
  Problem p = problem_from(d);
  p.fused = d.residual != nullptr;
  return p;
}
Problem problem_of(const family::RowNormBwd& d) {
  Problem p = problem_from(d);
  p.fused = d.ds_out != nullptr;
  return p;
}

FwdLayout fwd_layout(DType x, bool has_weight, bool fused, bool short_row_path) {
  const std::uint32_t xs = bytes_of(x);
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

BwdLayout bwd_layout(DType x, bool has_weight, bool fused) {
  const std::uint32_t xs = bytes_of(x);
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


FwdPlan plan_fwd(Impl impl, const Problem& s, const DeviceModel& device, std::string* why) {
  const auto items = fwd_layout(s.x, s.has_weight, s.fused, short_rows(s.cols)).items();
  PlanRequest r = request(s, device, items, impl);
  r.kernel = s.fused ? "fused_add_rms_norm_fwd" : "rms_norm_fwd";
  Plan p = plan_tiles(r);
  if (why != nullptr) *why = std::move(p.why);
  return {impl, p};
}

BwdPlan plan_bwd(Impl impl, const Problem& s, const DeviceModel& device, std::string* why) {
  const auto items = bwd_layout(s.x, s.has_weight, s.fused).items();
  // No rows still leaves dweight to clear: one core, planned as for one row, takes none.
  Problem planned = s;
  planned.rows = s.rows == 0 ? 1 : s.rows;
  PlanRequest r = request(planned, device, items, impl);
  r.kernel = s.fused ? "fused_add_rms_norm_bwd" : "rms_norm_bwd";
  Plan tiles = plan_tiles(r);
  if (s.rows == 0) {
    tiles.rows = 0;
    tiles.why = "no rows (dweight is zero): " + tiles.why;
  }
  if (why != nullptr) *why = std::move(tiles.why);
  BwdPlan p{impl, tiles};
  // The dW column reduction after SyncAll: the widest chunk of its layout that fits, double
  // buffered where it can be.
  const auto reduce_items = reduce_layout(s.w, exact_dw(s.x, s.has_weight)).items();
  const std::int64_t avail = static_cast<std::int64_t>(device.ub_bytes) - kUbReserve;
  constexpr std::int64_t kMostColumns = kMaxBlockLen / 4 / kSubAlign * kSubAlign;
  p.reduce_width = fit_width(reduce_items, avail, 2, kMostColumns);
  if (p.reduce_width == 0) {
    p.reduce_depth = 1;
    p.reduce_width = fit_width(reduce_items, avail, 1, kMostColumns);
  }
  return p;
}

DType none_scale_dtype(DType /*x*/, DType w) { return w; }

}  // namespace opreg::npu::rms
