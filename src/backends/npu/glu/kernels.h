// The geglu and swiglu kernels of the npu backend. run_fwd / run_bwd launch the plan the
// variant's supports() made (list.cpp) on the emulator and leave its counters as the emulator's
// last launch.
#pragma once

#include <cstdint>

#include "backends/npu/ascend/runtime.h"
#include "backends/npu/glu/plan.h"
#include "opreg/ops.h"

namespace opreg::npu::glu {

void run_fwd(const GluFwdArgs& args, Act act, const GluPlan& plan, Emulator& emulator);
void run_bwd(const GluBwdArgs& args, Act act, const GluPlan& plan, Emulator& emulator);

// The hidden size the planner sees: a's last dim (a 0-d tensor is one element).
std::int64_t hidden_of(const Tensor& a);

}  // namespace opreg::npu::glu
