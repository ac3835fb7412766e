// The xpu rope family's variant (rope, forward and backward, list.cpp): the plan supports() makes
// once per problem (plan.cpp: the kernel, the team size and the grid) and the run that launches
// it (launch.cpp; kernels in kernels.cl, one per (q format, table format) pair serving both
// directions).
#pragma once

#include <cstdint>

#include "backends/xpu/plan.h"

namespace opreg::xpu::rope {

using family::Rope;

// teams: a team of work-items per (b, t) position, reading its angles once for every head.
struct Plan {
  std::uint64_t group = 0;      // L the plan was made for
  std::uint64_t positions = 0;  // B * T
  std::uint64_t half = 0;       // pairs a head: D / 2
  std::uint64_t team = 0;       // work-items a position: a power of two, at most L
  std::uint64_t global = 0;     // work-items of the launch
  const char* kernel = nullptr;
};

// The sizing of a plan on `g` (supports(), and a run's re-plan).
void make_plan(const Rope& d, const Geometry& g, Plan& plan);

// teams takes every problem.
void teams_planner(const Rope& d, const DeviceInfo& device, Plan& plan);

void teams_run(const Rope& d, const Plan& plan, const KernelContext& ctx);

}  // namespace opreg::xpu::rope
