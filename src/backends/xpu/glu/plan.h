// The xpu gated-unit family's variants (geglu and swiglu, list.cpp): the plan supports() makes
// once per problem (plan.cpp: the kernel and its grid) and the run that launches it (launch.cpp;
// kernels in kernels.cl, one kernel per format serving both activations).
#pragma once

#include <cstdint>

#include "backends/xpu/plan.h"

namespace opreg::xpu::glu {

using family::GluBwd;
using family::GluFwd;

enum class Act : std::int32_t { gelu = 0, silu = 1 };  // kernels.cl's ACT_GELU, ACT_SILU (the op)

//   chunk   OpenCL CPU devices only: each work-item a contiguous run (vectorised inside the
//           work-item by PoCL's compiler)
//   stream  element-wise, the work-items striding over the elements
enum class Shape : std::uint8_t { chunk, stream };

struct Plan {
  Act act = Act::gelu;  // set by supports(), kept by a re-plan
  Shape shape = Shape::stream;
  std::uint64_t group = 0;  // L the plan was made for
  std::uint64_t n = 0;
  std::uint64_t global = 0;  // work-items of the launch
  std::uint64_t chunk = 0;   // chunk: each work-item's run
  const char* kernel = nullptr;
};

// The sizing of a plan whose act and shape are set, on `g` (also a run's re-plan).
void make_plan(const GluFwd& d, const Geometry& g, Plan& plan);
void make_plan(const GluBwd& d, const Geometry& g, Plan& plan);

// supports(): the plan, and the shape's rule on the device.
template <class Desc>
Verdict plan_glu(const Desc& d, const DeviceInfo& device, Act act, Shape shape, Plan& plan);

template <Act A, class Desc>
Verdict chunk_supports(const Desc& d, const DeviceInfo& device, Plan& plan) {
  return plan_glu(d, device, A, Shape::chunk, plan);
}
// stream takes every problem.
template <Act A, class Desc>
void stream_planner(const Desc& d, const DeviceInfo& device, Plan& plan) {
  plan_glu(d, device, A, Shape::stream, plan);
}

void fwd_run(const GluFwd& d, const Plan& plan, const KernelContext& ctx);
void bwd_run(const GluBwd& d, const Plan& plan, const KernelContext& ctx);

}  // namespace opreg::xpu::glu
