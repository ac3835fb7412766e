// The cuda geglu and swiglu variant, cuda.{geglu,swiglu}.{fwd,bwd}.stream: its plan (the access
// width and the grid) and its run, over the gated-unit family's descriptors (GluFwd, GluBwd).
#pragma once

#include "backends/cuda_like/facts.h"
#include "backends/cuda_like/glu/launch.h"
#include "opreg/registry.h"

namespace opreg::cuda_like {

// 16-byte packs when every tensor starts on 16 bytes; enough blocks to fill every multiprocessor,
// each thread walking the tensor grid-stride. Takes every problem.
Verdict fwd_supports(const family::GluFwd& d, const GpuInfo& gpu, GluLaunch& plan);
Verdict bwd_supports(const family::GluBwd& d, const GpuInfo& gpu, GluLaunch& plan);
template <GluAct Act>
void fwd_run(const family::GluFwd& d, const GluLaunch& plan, const KernelContext& ctx);
template <GluAct Act>
void bwd_run(const family::GluBwd& d, const GluLaunch& plan, const KernelContext& ctx);

}  // namespace opreg::cuda_like
