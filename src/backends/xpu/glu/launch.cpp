// The xpu gated-unit family's runs (plan.h): the plan's kernel launched on the call's tensors
// (kernels.cl's `torch`: 1 where rounding torch changes anything, a 16-bit dtype).
#include <array>
#include <cstddef>
#include <tuple>

#include "backends/xpu/glu/plan.h"
#include "backends/xpu/launch.h"

namespace opreg::xpu::glu {
namespace {

// The kernel on `tensors`, then the element count, (chunk) the run, the activation and `torch`.
template <class... Tensors>
void launch(const Launch& l, const Plan& p, family::GluRounding rounding, const Tensors&... tensors) {
  const auto torch = static_cast<cl_int>(rounding == family::GluRounding::torch);
  const auto act = static_cast<cl_int>(p.act);
  if (p.shape == Shape::chunk) {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.global, p.group, tensors..., static_cast<cl_ulong>(p.n),
                static_cast<cl_ulong>(p.chunk), act, torch);
  } else {
    l.rt.launch(l.queue, l.kernel(p.kernel), p.global, p.group, tensors..., static_cast<cl_ulong>(p.n), act, torch);
  }
}

// The run of either direction: `operands` located in order (forward a, b, c; backward dc, a, b,
// da, db), each n elements.
struct Operand {
  const void* data;
  const char* name;  // "tensor a": the message when it is not this device's memory
};
template <class Desc, std::size_t N>
void run(const Desc& d, const Plan& planned, const KernelContext& ctx, const std::array<Operand, N>& operands) {
  const Launch l(ctx);
  const Plan p = l.current(d, planned);
  if (p.n == 0) return;
  std::array<DevicePointer, N> tensors;
  for (std::size_t i = 0; i < N; ++i) tensors[i] = l.at(operands[i].data, p.n * elem_bytes(d.type), operands[i].name);
  std::apply([&](const auto&... t) { launch(l, p, d.rounding, t...); }, tensors);
}

}  // namespace

void fwd_run(const GluFwd& d, const Plan& plan, const KernelContext& ctx) {
  run<GluFwd, 3>(d, plan, ctx, {{{d.a, "tensor a"}, {d.b, "tensor b"}, {d.c, "tensor c"}}});
}

void bwd_run(const GluBwd& d, const Plan& plan, const KernelContext& ctx) {
  run<GluBwd, 5>(d, plan, ctx,
                 {{{d.dc, "tensor dc"}, {d.a, "tensor a"}, {d.b, "tensor b"}, {d.da, "tensor da"}, {d.db, "tensor db"}}});
}

}  // namespace opreg::xpu::glu
