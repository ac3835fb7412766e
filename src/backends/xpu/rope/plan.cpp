// The xpu rope family's plans (plan.h): a team of ceil_pow2(D / 2) work-items a position (at most
// the work-group, whose L / team teams then take L / team positions), and enough work-groups for
// the positions, at most max_groups (the teams stride over the rest).
#include "backends/xpu/rope/plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/xpu/launch.h"

namespace opreg::xpu::rope {

void make_plan(const Rope& d, const Geometry& g, Plan& p) {
  p.group = g.group;
  p.positions = static_cast<std::uint64_t>(d.batch * d.seq);
  p.half = static_cast<std::uint64_t>(d.dim / 2);
  p.team = std::min<std::uint64_t>(g.group, ceil_pow2(std::max<std::uint64_t>(p.half, 1)));
  p.kernel = kernel_name(fmt::format("rope_{}_{}", format_name(d.type), format_name(d.table_type)));
  p.global = g.groups_for(ceil_div(p.positions, g.group / p.team)) * g.group;
}

void teams_planner(const Rope& d, const DeviceInfo& device, Plan& plan) { make_plan(d, Geometry::of(device), plan); }

}  // namespace opreg::xpu::rope
