// The xpu gated-unit lists: geglu and swiglu, forward and backward (kernels in kernels.cl).
//   xpu.<geglu|swiglu>.<fwd|bwd>.chunk    OpenCL CPU devices only: each work-item a contiguous run
//                                         (vectorised inside the work-item by PoCL's compiler)
//   xpu.<geglu|swiglu>.<fwd|bwd>.stream   element-wise, the work-items striding over the elements
// One kernel per format serves both activations (an argument). Every problem is accepted; the
// launch is sized at the call: enough work-groups for kElementsPerItem elements a work-item, at
// most the device's max_groups.

#include <cstdint>
#include <string>
#include <vector>

#include "backends/xpu/launch.h"
#include "opreg/ops.h"
#include "opreg/variants.h"
#include "ops/describe.h"

namespace opreg::xpu {
namespace {

enum Activation : cl_int { gelu = 0, silu = 1 };  // kernels.cl's ACT_GELU, ACT_SILU

enum class Shape : std::uint8_t { stream, chunk };

// Below this many elements a work-item, a launch uses fewer groups (a small problem then runs
// on one or a few groups rather than waking every compute unit for a handful of elements).
constexpr std::uint64_t kElementsPerItem = 16;
// chunk: each work-item's contiguous run is a multiple of this many elements (whole vectors,
// the loop's overhead amortised).
constexpr std::uint64_t kChunkElements = 256;

// kernels.cl's `torch` argument: 1 where rounding torch changes anything (a 16-bit dtype).
template <class Args>
cl_int torch_of(const Args& a) {
  return family::rounding_of(a.rounding, family::elem_of(a.a.dtype())) == family::GluRounding::torch ? 1 : 0;
}

// The kernel of a shape, its grid, and for chunk the run each work-item takes.
struct Plan {
  std::string kernel;
  std::uint64_t global;
  std::uint64_t chunk;
};
Plan plan_of(const Launch& l, const char* direction, DType dtype, std::uint64_t n, Shape shape) {
  const bool chunked = shape == Shape::chunk;
  Plan p{fmt::format("glu_{}_{}{}", direction, format_name(dtype), chunked ? "_chunk" : ""),
         l.groups_for(ceil_div(n, l.group * (chunked ? kChunkElements : kElementsPerItem))) * l.group, 0};
  if (chunked) p.chunk = ceil_div(ceil_div(n, p.global), kChunkElements) * kChunkElements;
  return p;
}

template <Activation A, Shape S>
void fwd_run(const GluFwdArgs& args, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const auto n = static_cast<std::uint64_t>(args.a.numel());
  if (n == 0) return;
  const DevicePointer a = l.at(args.a, "a");
  const DevicePointer b = l.at(args.b, "b");
  const DevicePointer c = l.at(args.c, "c");
  const Plan p = plan_of(l, "fwd", args.a.dtype(), n, S);
  if (S == Shape::chunk) {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.global, l.group, SvmArg{a.base}, a.offset, SvmArg{b.base}, b.offset,
                SvmArg{c.base}, c.offset, static_cast<cl_ulong>(n), static_cast<cl_ulong>(p.chunk),
                static_cast<cl_int>(A), torch_of(args));
  } else {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.global, l.group, SvmArg{a.base}, a.offset, SvmArg{b.base}, b.offset,
                SvmArg{c.base}, c.offset, static_cast<cl_ulong>(n), static_cast<cl_int>(A), torch_of(args));
  }
}

template <Activation A, Shape S>
void bwd_run(const GluBwdArgs& args, const KernelContext& ctx) {
  Launch l(ctx, ctx.variant->name.c_str());
  const auto n = static_cast<std::uint64_t>(args.a.numel());
  if (n == 0) return;
  const DevicePointer dc = l.at(args.dc, "dc");
  const DevicePointer a = l.at(args.a, "a");
  const DevicePointer b = l.at(args.b, "b");
  const DevicePointer da = l.at(args.da, "da");
  const DevicePointer db = l.at(args.db, "db");
  const Plan p = plan_of(l, "bwd", args.a.dtype(), n, S);
  if (S == Shape::chunk) {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.global, l.group, SvmArg{dc.base}, dc.offset, SvmArg{a.base}, a.offset,
                SvmArg{b.base}, b.offset, SvmArg{da.base}, da.offset, SvmArg{db.base}, db.offset,
                static_cast<cl_ulong>(n), static_cast<cl_ulong>(p.chunk), static_cast<cl_int>(A), torch_of(args));
  } else {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.global, l.group, SvmArg{dc.base}, dc.offset, SvmArg{a.base}, a.offset,
                SvmArg{b.base}, b.offset, SvmArg{da.base}, da.offset, SvmArg{db.base}, db.offset,
                static_cast<cl_ulong>(n), static_cast<cl_int>(A), torch_of(args));
  }
}

// chunk is for OpenCL CPU devices (PoCL): on a GPU, contiguous runs per work-item would make
// neighbouring work-items read addresses a run apart (uncoalesced).
template <class Args>
Verdict cpu_device_only(const Args&, const DeviceInfo& device) {
  if (device.gpu) return Verdict::reject("a GPU device: contiguous runs per work-item do not coalesce; stream fits");
  return Verdict::accept();
}

std::vector<Tunable> tunables(Shape shape) {
  return {{"work_group", "device work_group_size"},
          {"elements_per_item", std::to_string(shape == Shape::chunk ? kChunkElements : kElementsPerItem)},
          {"max_groups", "compute_units*4"}};
}

}  // namespace

void register_glu(Registry& r) {
  // Order = priority: chunk (CPU devices only) first, stream for every device.
  register_list(r, geglu_fwd_op(), "xpu",
                {{"chunk", &cpu_device_only<GluFwdArgs>, &fwd_run<gelu, Shape::chunk>, tunables(Shape::chunk)},
                 {"stream", &fwd_run<gelu, Shape::stream>, tunables(Shape::stream)}});
  register_list(r, geglu_bwd_op(), "xpu",
                {{"chunk", &cpu_device_only<GluBwdArgs>, &bwd_run<gelu, Shape::chunk>, tunables(Shape::chunk)},
                 {"stream", &bwd_run<gelu, Shape::stream>, tunables(Shape::stream)}});
  register_list(r, swiglu_fwd_op(), "xpu",
                {{"chunk", &cpu_device_only<GluFwdArgs>, &fwd_run<silu, Shape::chunk>, tunables(Shape::chunk)},
                 {"stream", &fwd_run<silu, Shape::stream>, tunables(Shape::stream)}});
  register_list(r, swiglu_bwd_op(), "xpu",
                {{"chunk", &cpu_device_only<GluBwdArgs>, &bwd_run<silu, Shape::chunk>, tunables(Shape::chunk)},
                 {"stream", &bwd_run<silu, Shape::stream>, tunables(Shape::stream)}});
}

}  // namespace opreg::xpu
