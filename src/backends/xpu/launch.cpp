// What the xpu families' plans and launches share (launch.h).
#include "backends/xpu/launch.h"

#include <mutex>
#include <set>

#include <fmt/format.h>

namespace opreg::xpu {

const char* format_name(Elem elem) { return elem == Elem::f16 ? "f16" : elem == Elem::bf16 ? "bf16" : "f32"; }

const char* kernel_name(const std::string& name) {
  // A few dozen names at most (the kernels of the programs); a set's nodes never move.
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

Verdict cpu_device_only(const DeviceInfo& device, std::string_view what, std::string_view instead) {
  if (device.gpu) return Verdict::reject(fmt::format("a GPU device: {}; {}", what, instead));
  return Verdict::accept();
}

Launch::Launch(const KernelContext& ctx)
    : rt(static_cast<XpuBackend&>(*ctx.backend).runtime(ctx.device.index)),
      queue(rt.queue(ctx.stream)),
      variant(ctx.variant->name.c_str()),
      group(rt.work_group_size()) {}

Geometry Launch::geometry() const {
  Geometry g = Geometry::of(rt.info());
  g.group = group;
  return g;
}

void Launch::zero(void* data, std::uint64_t bytes, Elem elem) const {
  if (data == nullptr || bytes == 0) return;
  const std::uint32_t zero = 0;
  rt.fill(queue, data, bytes, &zero, elem_bytes(elem));
}

}  // namespace opreg::xpu
