// The xpu gated-unit lists: geglu and swiglu, forward and backward (kernels in kernels.cl).
//   xpu.<geglu|swiglu>.<fwd|bwd>.stream   element-wise, the work-items striding over the elements
// One kernel per format serves both activations (an argument). Every problem is accepted; the
// launch is sized at the call: enough work-groups for kElementsPerItem elements a work-item, at
// most the device's max_groups.

#include <cstdint>

#include "backends/xpu/launch.h"
#include "opreg/ops.h"
#include "opreg/variants.h"

namespace opreg::xpu {
namespace {

enum Activation : cl_int { gelu = 0, silu = 1 };  // kernels.cl's ACT_GELU, ACT_SILU

// Below this many elements a work-item, a launch uses fewer groups (a small problem then runs
// on one or a few groups rather than waking every compute unit for a handful of elements).
constexpr std::uint64_t kElementsPerItem = 16;

std::uint64_t global_size(const Launch& l, std::uint64_t n) {
  return l.groups_for(ceil_div(n, l.group * kElementsPerItem)) * l.group;
}

template <Activation A>
void fwd_run(const GluFwdArgs& args, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const auto n = static_cast<std::uint64_t>(args.a.numel());
  if (n == 0) return;
  const DevicePointer a = l.at(args.a, "a");
  const DevicePointer b = l.at(args.b, "b");
  const DevicePointer c = l.at(args.c, "c");
  l.rt.launch(l.queue, l.kernel(fmt::format("glu_fwd_{}", format_name(args.a.dtype()))), global_size(l, n), l.group,
              SvmArg{a.base}, a.offset, SvmArg{b.base}, b.offset, SvmArg{c.base}, c.offset, static_cast<cl_ulong>(n),
              static_cast<cl_int>(A));
}

template <Activation A>
void bwd_run(const GluBwdArgs& args, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const auto n = static_cast<std::uint64_t>(args.a.numel());
  if (n == 0) return;
  const DevicePointer dc = l.at(args.dc, "dc");
  const DevicePointer a = l.at(args.a, "a");
  const DevicePointer b = l.at(args.b, "b");
  const DevicePointer da = l.at(args.da, "da");
  const DevicePointer db = l.at(args.db, "db");
  l.rt.launch(l.queue, l.kernel(fmt::format("glu_bwd_{}", format_name(args.a.dtype()))), global_size(l, n), l.group,
              SvmArg{dc.base}, dc.offset, SvmArg{a.base}, a.offset, SvmArg{b.base}, b.offset, SvmArg{da.base},
              da.offset, SvmArg{db.base}, db.offset, static_cast<cl_ulong>(n), static_cast<cl_int>(A));
}

std::vector<Tunable> tunables() {
  return {{"work_group", "device work_group_size"},
          {"elements_per_item", std::to_string(kElementsPerItem)},
          {"max_groups", "compute_units*4"}};
}

}  // namespace

void register_glu(Registry& r) {
  register_list(r, geglu_fwd_op(), "xpu", {{"stream", &fwd_run<gelu>, tunables()}});
  register_list(r, geglu_bwd_op(), "xpu", {{"stream", &bwd_run<gelu>, tunables()}});
  register_list(r, swiglu_fwd_op(), "xpu", {{"stream", &fwd_run<silu>, tunables()}});
  register_list(r, swiglu_bwd_op(), "xpu", {{"stream", &bwd_run<silu>, tunables()}});
}

}  // namespace opreg::xpu
