// What every xpu family's plan and launch share: the device geometry a plan is made for (from the
// device's facts, its DeviceInfo), kernel names made once, the CPU-device-only rule, and one call's
// device side (runtime, queue, tensors located in their SVM allocations). Internal to
// src/backends/xpu (each family's plan.cpp and launch.cpp include it; list.cpp does not).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/xpu/xpu_backend.h"
#include "opreg/registry.h"
#include "ops/families.h"

namespace opreg::xpu {

using family::Elem;

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

inline std::uint64_t ceil_pow2(std::uint64_t v) {
  std::uint64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// The kernels' name for a format: "f32", "f16", "bf16".
const char* format_name(Elem elem);
inline std::uint64_t elem_bytes(Elem elem) { return elem == Elem::f32 ? 4 : 2; }

// A kernel's name with static storage, so that a plan can hold it: `name` interned once per
// distinct name (supports() makes it; a call formats nothing).
const char* kernel_name(const std::string& name);

// The device geometry a plan is sized by: the work-group size L every launch uses, the most
// work-groups a launch uses (the kernels stride over the rest), and F, the dweight columns a
// work-item keeps in the fused backward.
struct Geometry {
  std::uint64_t group = 0;
  std::uint64_t max_groups = 0;
  std::uint64_t fused_columns = 0;

  static Geometry of(const DeviceInfo& device) {
    return {device.work_group_size, device.max_groups, static_cast<std::uint64_t>(device.fused_columns)};
  }
  // Work-groups for `items` units of work: one each, up to max_groups.
  std::uint64_t groups_for(std::uint64_t items) const {
    return std::max<std::uint64_t>(1, std::min<std::uint64_t>(items, max_groups));
  }
};

// The CPU-shaped variants (a work-item per row or set, a contiguous run per work-item) are for
// OpenCL CPU devices (PoCL): on a GPU neighbouring work-items would read addresses a row apart
// (uncoalesced) and leave most of the device idle. `instead` names what fits a GPU.
Verdict cpu_device_only(const DeviceInfo& device, std::string_view what, std::string_view instead);

// One kernel call's device side: the runtime of the context's device, the queue it runs on, and
// the work-group size L every launch uses.
struct Launch {
  DeviceRuntime& rt;
  cl_command_queue queue;
  const char* variant;
  std::uint64_t group;  // L

  explicit Launch(const KernelContext& ctx);

  // The geometry of this device's launches: the runtime's L (a kernel's own limit may have made it
  // smaller than the device's), the facts' max_groups and F.
  Geometry geometry() const;

  // `t`'s memory ([data, data + bytes)) as a kernel receives it; an error naming `what` (a string
  // literal such as "tensor x") when it is not this device's.
  DevicePointer at(const void* data, std::uint64_t bytes, const char* what) const {
    return rt.locate(data, bytes, what, variant);
  }

  std::uint64_t groups_for(std::uint64_t items) const { return geometry().groups_for(items); }

  Kernel& kernel(const char* name) const { return rt.kernel(name); }

  // `bytes` at `data` set to zero in elements of `elem` (a parameter gradient summed over nothing).
  void zero(void* data, std::uint64_t bytes, Elem elem) const;

  // The plan a call runs: `plan` where it was made for this runtime's L (always, but where a kernel
  // of the device allows fewer work-items than the device, known only once its program is built),
  // else the same planning on the runtime's geometry.
  template <class Desc, class Plan>
  Plan current(const Desc& d, const Plan& plan) const {
    if (plan.group == group) return plan;
    Plan fresh = plan;
    make_plan(d, geometry(), fresh);
    return fresh;
  }
};

}  // namespace opreg::xpu
