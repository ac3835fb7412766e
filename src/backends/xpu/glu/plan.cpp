// The xpu gated-unit family's plans (plan.h): the kernel and the launch, sized by the element
// count: enough work-groups for kElementsPerItem elements a work-item, at most max_groups.
#include "backends/xpu/glu/plan.h"

#include <fmt/format.h>

#include "backends/xpu/launch.h"

namespace opreg::xpu::glu {
namespace {

// Below this many elements a work-item, a launch uses fewer groups (a small problem then runs
// on one or a few groups rather than waking every compute unit for a handful of elements).
constexpr std::uint64_t kElementsPerItem = 16;
// chunk: each work-item's contiguous run is a multiple of this many elements (whole vectors,
// the loop's overhead amortised).
constexpr std::uint64_t kChunkElements = 256;

void size(const char* direction, Elem type, std::uint64_t n, const Geometry& g, Plan& p) {
  const bool chunked = p.shape == Shape::chunk;
  p.group = g.group;
  p.n = n;
  p.kernel = kernel_name(fmt::format("glu_{}_{}{}", direction, format_name(type), chunked ? "_chunk" : ""));
  p.global = g.groups_for(ceil_div(n, g.group * (chunked ? kChunkElements : kElementsPerItem))) * g.group;
  p.chunk = chunked && n != 0 ? ceil_div(ceil_div(n, p.global), kChunkElements) * kChunkElements : 0;
}

}  // namespace

void make_plan(const GluFwd& d, const Geometry& g, Plan& plan) {
  size("fwd", d.type, static_cast<std::uint64_t>(d.n), g, plan);
}
void make_plan(const GluBwd& d, const Geometry& g, Plan& plan) {
  size("bwd", d.type, static_cast<std::uint64_t>(d.n), g, plan);
}

template <class Desc>
Verdict plan_glu(const Desc& d, const DeviceInfo& device, Act act, Shape shape, Plan& plan) {
  plan.act = act;
  plan.shape = shape;
  make_plan(d, Geometry::of(device), plan);
  if (shape == Shape::stream) return Verdict::accept();
  return cpu_device_only(device, "contiguous runs per work-item do not coalesce", "stream fits");
}
template Verdict plan_glu(const GluFwd&, const DeviceInfo&, Act, Shape, Plan&);
template Verdict plan_glu(const GluBwd&, const DeviceInfo&, Act, Shape, Plan&);

}  // namespace opreg::xpu::glu
