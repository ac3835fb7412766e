// The cuda rms_norm variants: cuda.rms_norm.{fwd,bwd}.{cluster,rows,split}, and
// cuda.fused_add_rms_norm.{fwd.{rows,split},bwd.{cluster,rows,split}}, over the row-norm family's
// descriptors (plan.cpp; the lists are list.cpp). Internal to the cuda backend; declared here so
// its tests and benchmarks can see the plans the variants make.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "backends/cuda_like/rms_norm/launch.h"
#include "opreg/registry.h"

namespace opreg::cuda_like {

// What a variant's choice looks at, read off the descriptor and the device's facts.
struct RowProblem {
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  Elem x_type = Elem::f32;
  Elem w_type = Elem::f32;  // x's when there is no weight
  bool aligned = false;  // every row of every tensor starts on 16 bytes: 16-byte accesses
  GpuInfo gpu;
};
RowProblem row_problem(const RowNormFwd& d, const GpuInfo& gpu);
RowProblem row_problem(const RowNormBwd& d, const GpuInfo& gpu);

// The shapes the variants use, or why they cannot take the problem.
struct ShapeOrWhy {
  std::optional<RowShape> shape;
  std::string why;
};
ShapeOrWhy rows_shape(const RowProblem& p, bool backward);
ShapeOrWhy cluster_shape(const RowProblem& p, bool backward);

// Threads for `want` per row: a power of two up to a warp (rows share warps), else whole warps.
int round_threads(std::int64_t want);

// A row of `nvec` accesses of `vec` elements spread over threads of `nv` accesses each (the rows
// variants of both norm families): round_threads of what it takes a row, and 256 / tpr rows a
// block under 256; nothing where that is over `limit` threads. `capacity` is raised to the
// elements `limit` threads hold.
template <class Shape>
std::optional<Shape> spread_row(std::int64_t nvec, int vec, int nv, int limit, std::int64_t& capacity) {
  capacity = std::max<std::int64_t>(capacity, static_cast<std::int64_t>(limit) * nv * vec);
  const std::int64_t want = (nvec + nv - 1) / nv;
  if (want > limit) return std::nullopt;
  Shape s;
  s.vec = vec;
  s.nv = nv;
  s.tpr = round_threads(want);
  s.slots = s.tpr >= 256 ? 1 : 256 / s.tpr;
  return s;
}

// A variant's plan (what its supports() decided, the kernel launches): the launch shape of the
// rows and cluster variants, and the launch geometry of the exact instantiation (grid from its
// occupancy on the device, shared memory, workspace). `ok` false: the variant refused.
struct ResidentPlan {
  bool ok = false;
  RowShape shape;
  Launch launch;
};
struct SplitPlan {
  int vec = 1;
  Launch launch;
};

// The variants' functions (Desc: RowNormFwd or RowNormBwd): the plans (Fused: the fused op's, for
// the names a failed planning gives; split plans every problem, it holds any row) and the runs.
template <class Desc, bool Fused>
struct RowNormPlans {
  static Verdict rows_supports(const Desc& d, const GpuInfo& gpu, ResidentPlan& plan);
  static Verdict cluster_supports(const Desc& d, const GpuInfo& gpu, ResidentPlan& plan);
  static void split_plan(const Desc& d, const GpuInfo& gpu, SplitPlan& plan);
};
template <class Desc>
struct RowNormRuns {
  static void rows_run(const Desc& d, const ResidentPlan& plan, const KernelContext& ctx);
  static void cluster_run(const Desc& d, const ResidentPlan& plan, const KernelContext& ctx);
  static void split_run(const Desc& d, const SplitPlan& plan, const KernelContext& ctx);
};

}  // namespace opreg::cuda_like
