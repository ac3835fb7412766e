// What every xpu family list needs to launch its kernels: the device's runtime and queue for a
// call, tensors located in their SVM allocations, work-group counts, format names. Internal to
// src/backends/xpu (each family's list.cpp includes it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "backends/xpu/xpu_backend.h"
#include "opreg/registry.h"

namespace opreg::xpu {

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

inline std::uint64_t ceil_pow2(std::uint64_t v) {
  std::uint64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// The kernels' name for a tensor format: "f32", "f16", "bf16".
inline const char* format_name(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    default:
      return "f32";
  }
}

// One kernel call's device side: the runtime of the context's device, the queue it runs on,
// and the work-group size L every launch uses.
struct Launch {
  XpuBackend& backend;
  DeviceRuntime& rt;
  cl_command_queue queue;
  const char* variant;
  std::uint64_t group;  // L

  Launch(const KernelContext& ctx, const char* name)
      : backend(static_cast<XpuBackend&>(*ctx.backend)),
        rt(backend.runtime(ctx.device.index)),
        queue(rt.queue(ctx.stream)),
        variant(name),
        group(rt.work_group_size()) {}

  // `t`'s memory as a kernel receives it; an error naming `what` when it is not this device's.
  DevicePointer at(const Tensor& t, const char* what) const {
    return rt.locate(t.data(), t.nbytes(), fmt::format("{}: tensor {}", variant, what));
  }

  // Work-groups for `items` units of work: one each, up to the most a launch uses (the kernels
  // stride over the rest).
  std::uint64_t groups_for(std::uint64_t items) const {
    return std::max<std::uint64_t>(1, std::min<std::uint64_t>(items, rt.info().max_groups));
  }

  Kernel& kernel(const std::string& name) const { return rt.kernel(name); }

  // A tensor's bytes set to zero (a parameter gradient summed over nothing).
  void zero(const Tensor& t) const {
    if (!t.defined() || t.numel() == 0) return;
    const std::uint32_t zero = 0;
    rt.fill(queue, t.data(), t.nbytes(), &zero, element_size(t.dtype()));
  }
};

}  // namespace opreg::xpu
