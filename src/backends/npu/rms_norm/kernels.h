// The rms_norm kernels of the npu backend and what they share. run_fwd / run_bwd launch the plan
// the variant's supports() made (list.cpp) on the emulator and leave its counters as the
// emulator's last launch.
#pragma once

#include <string>

#include "backends/npu/ascend/kernel_operator.h"
#include "backends/npu/kernel_util.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/rms_norm/plan.h"
#include "opreg/ops.h"
#include "opreg/registry.h"
#include "ops/describe.h"

namespace opreg::npu::rms {


// Args: RmsNormFwdArgs / RmsNormBwdArgs, or fused_add_rms_norm's (the same kernels with the
// residual's and ds_out's tiles).
template <class Args>
void run_fwd(const Args& args, const FwdPlan& plan, Emulator& emulator);
// Scratch (the [cores x hidden] dW partials, ...) comes from the backend's workspace in `ctx`.
template <class Args>
void run_bwd(const Args& args, const BwdPlan& plan, Emulator& emulator, const KernelContext& ctx);


// wf = offset + w over columns [col0, col0 + width), as float, rounded to `round` (casting none);
// `scratch` holds the raw weight of a 16-bit dtype on the way.
template <class W>
void PrepareScale(const AscendC::LocalTensor<float>& wf, const AscendC::GlobalTensor<W>& w,
                  const AscendC::LocalTensor<float>& scratch, std::int64_t col0, std::int64_t width, float offset,
                  DType round) {
  if (width == 0) return;
  kernel::LoadRowAsFloat(wf, w, col0, width, scratch);
  if (offset != 0.0f) AscendC::Adds(wf, wf, offset, static_cast<std::uint32_t>(width));
  kernel::RoundToDType(wf, scratch, round, width);
}

}  // namespace opreg::npu::rms
