// The cuda layer_norm and group_norm variants: cuda.layer_norm.{fwd,bwd}.{rows,split,sets} and
// cuda.group_norm.{fwd,bwd}.{split,sets}, over the norm family's descriptors (plan.cpp; the lists
// are list.cpp).
#pragma once

#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/norm/launch.h"
#include "opreg/registry.h"

namespace opreg::cuda_like {

// The plans: `ok` false: refused (a forced variant runs the plan and says why).
struct LnRowsPlan {
  bool ok = false;
  LnRowsLaunch launch;
};
struct NormSplitPlan {
  bool ok = false;
  NormSplitLaunch launch;
};

// Desc: family::NormFwd or family::NormBwd. sets takes every problem.
template <class Desc>
Verdict sets_supports(const Desc& d, const GpuInfo& gpu, NormLaunch& plan);
template <class Desc>
void sets_run(const Desc& d, const NormLaunch& plan, const KernelContext& ctx);
template <class Desc>
Verdict ln_rows_supports(const Desc& d, const GpuInfo& gpu, LnRowsPlan& plan);
template <class Desc>
void ln_rows_run(const Desc& d, const LnRowsPlan& plan, const KernelContext& ctx);
template <class Desc>
Verdict split_supports(const Desc& d, const GpuInfo& gpu, NormSplitPlan& plan);
template <class Desc>
void split_run(const Desc& d, const NormSplitPlan& plan, const KernelContext& ctx);

}  // namespace opreg::cuda_like
