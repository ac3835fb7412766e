// The cuda rms_norm variants: cuda.rms_norm.{fwd,bwd}.{cluster,rows,split}. Internal to the cuda
// backend; declared here so its tests and benchmarks can see the plans the variants make.
#pragma once

#include <optional>
#include <string>

#include "backends/cuda_like/rms_norm_launch.h"
#include "opreg/ops.h"
#include "opreg/registry.h"

namespace opreg::cuda_like {

// Registers the six variants (for the registry's lifetime).
void register_rms_norm(Registry& registry);

// What a variant's choice looks at, read off the arguments and the device's properties.
struct RowProblem {
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  Elem xt = Elem::f32;
  Elem wt = Elem::f32;
  bool aligned = false;  // every row of every tensor starts on 16 bytes: 16-byte accesses
  GpuInfo gpu;
};
RowProblem row_problem(const RmsNormFwdArgs& args, const DeviceProps& props);
RowProblem row_problem(const RmsNormBwdArgs& args, const DeviceProps& props);

// The shapes the variants use, or why they cannot take the problem.
struct ShapeOrWhy {
  std::optional<RowShape> shape;
  std::string why;
};
ShapeOrWhy rows_shape(const RowProblem& p, bool backward);
ShapeOrWhy cluster_shape(const RowProblem& p, bool backward);

// Threads for `want` per row: a power of two up to a warp (rows share warps), else whole warps.
int round_threads(std::int64_t want);

// The kernels' view of the arguments.
RmsFwdParams fwd_params(const RmsNormFwdArgs& args, const RowProblem& problem);
RmsBwdParams bwd_params(const RmsNormBwdArgs& args, const RowProblem& problem);

}  // namespace opreg::cuda_like
