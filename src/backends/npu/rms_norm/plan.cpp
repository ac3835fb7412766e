
#include <fmt/format.h>

#include <type_traits>

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

template <class Desc>
Verdict port_supports(const Desc& d, const DeviceModel& device, gpu_port::Port& port) {
  const RowNormSizes s = sizes_of(d);
  const std::uint32_t xb = elem_bytes(s.x) * 8;
  const std::uint32_t wb = s.has_weight ? elem_bytes(s.w) * 8 : 0;
  const std::uint32_t fb = s.fused ? xb : 0;
  const auto ub = static_cast<std::int64_t>(device.ub_bytes);
  if constexpr (kBackward<Desc>) {
    port = gpu_port::plan(
        s.rows, s.cols, {{"dy", xb}, {"ds_out", fb}, {"x", xb}, {"weight", wb}, {"dx", xb}, {"dw_row", wb ? 32U : 0U}},
        ub);
  } else {
    port = gpu_port::plan(s.rows, s.cols, {{"x", xb}, {"residual", fb}, {"weight", wb}, {"y", xb}, {"s", fb}}, ub);
  }
  return gpu_port::refuse(port, fmt::format("{}.{}", op_of(s), kBackward<Desc> ? "bwd" : "fwd"));
}

template <class Desc>
void port_run(const Desc& d, const gpu_port::Port& port, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  const RowNormSizes s = sizes_of(d);
  gpu_port::launch(emulator, fmt::format("{}_{}_gpu_port", op_of(s), kBackward<Desc> ? "bwd" : "fwd"), port);
  if constexpr (kBackward<Desc>) {
    BwdPlan plan = plan_bwd(Impl::single_pass, s, emulator.model());
    if (!plan.tiles.fits) plan = plan_bwd(Impl::chunked, s, emulator.model());
    run_bwd(d, plan, ctx);
  } else {
    FwdPlan plan = plan_fwd(Impl::single_pass, s, emulator.model());
    if (!plan.tiles.fits) plan = plan_fwd(Impl::chunked, s, emulator.model());
    run_fwd(d, plan, ctx);
  }
}
template Verdict port_supports(const family::RowNormFwd&, const DeviceModel&, gpu_port::Port&);
template Verdict port_supports(const family::RowNormBwd&, const DeviceModel&, gpu_port::Port&);
template void port_run(const family::RowNormFwd&, const gpu_port::Port&, const KernelContext&);
template void port_run(const family::RowNormBwd&, const gpu_port::Port&, const KernelContext&);

}  // namespace opreg::npu::rms_norm
