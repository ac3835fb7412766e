#include "backends/xpu/xpu_backend.h"

#include <fmt/format.h>

#include "backends/builtin.h"
#include "opreg/registry.h"
#include "registry/fail.h"

namespace opreg::xpu {
namespace {

std::string svm_kinds(cl_device_svm_capabilities svm) {
  std::string out;
  const auto add = [&](cl_device_svm_capabilities bit, const char* name) {
    if ((svm & bit) != 0) out += fmt::format("{}{}", out.empty() ? "" : "+", name);
  };
  add(CL_DEVICE_SVM_COARSE_GRAIN_BUFFER, "coarse");
  add(CL_DEVICE_SVM_FINE_GRAIN_BUFFER, "fine");
  add(CL_DEVICE_SVM_FINE_GRAIN_SYSTEM, "system");
  add(CL_DEVICE_SVM_ATOMICS, "atomics");
  return out;
}

}  // namespace

XpuBackend::XpuBackend() = default;

XpuBackend::~XpuBackend() {
  // Cached workspace blocks go back through deallocate() while the runtimes still exist.
  release_workspaces();
}

Availability XpuBackend::probe() {
  try {
    environment_ = prepare_environment();
    discovery_ = discover(environment_);
  } catch (const std::exception& e) {
    // Nothing here is supposed to throw; if something does, xpu is simply not available.
    return {false, 0, fmt::format("OpenCL discovery failed: {}", e.what())};
  }
  slots_.clear();
  for (std::size_t i = 0; i < discovery_.devices.size(); ++i) slots_.push_back(std::make_unique<Slot>());
  const int count = static_cast<int>(discovery_.devices.size());
  return {count > 0, count, discovery_.reason};
}

DeviceProps XpuBackend::properties(int index) const {
  const DeviceInfo& d = discovery_.devices.at(static_cast<std::size_t>(index));
  DeviceProps props;
  props.emulated = !d.gpu;
  props.host_memory = !d.gpu;  // an OpenCL CPU device's buffers are the host's memory
  props.name = d.gpu ? d.name : fmt::format("{} on {} (emulated, OpenCL CPU device)", d.name, d.platform_name);
  props.memory_bytes = d.global_mem;
  props.compute_units = d.compute_units;
  props.extra = {{"opencl", d.version},
                 {"cl_std", d.cl_std},
                 {"svm", svm_kinds(d.svm)},
                 {"max_work_group_size", std::to_string(d.max_work_group_size)},
                 {"local_mem_bytes", std::to_string(d.local_mem)},
                 {kWorkGroupSizeKey, std::to_string(d.work_group_size)},
                 {kFusedColumnsKey, std::to_string(d.fused_columns)}};
  if (!d.gpu && !environment_.pocl_cache_dir.empty()) props.extra.emplace_back("pocl_cache_dir", environment_.pocl_cache_dir);
  props.facts = &d;  // what the variants read
  return props;
}

std::string XpuBackend::label(int index) const {
  const bool emulated = !discovery_.devices.at(static_cast<std::size_t>(index)).gpu;
  return fmt::format("xpu:{}{}", index, emulated ? " (emulated)" : "");
}

DeviceRuntime& XpuBackend::runtime(int index) {
  if (index < 0 || static_cast<std::size_t>(index) >= slots_.size()) {
    fail(ErrorKind::device, "device xpu:{} does not exist: xpu has {} device(s)", index, slots_.size());
  }
  Slot& slot = *slots_[static_cast<std::size_t>(index)];
  if (DeviceRuntime* ready = slot.ready.load(std::memory_order_acquire); ready != nullptr) return *ready;
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.runtime == nullptr) {
    slot.runtime = std::make_unique<DeviceRuntime>(discovery_.devices[static_cast<std::size_t>(index)], label(index));
    slot.ready.store(slot.runtime.get(), std::memory_order_release);
  }
  return *slot.runtime;
}

void* XpuBackend::allocate(int index, std::size_t bytes) { return runtime(index).allocate(bytes); }

void XpuBackend::deallocate(int index, void* ptr, std::size_t /*bytes*/) noexcept {
  // Memory can only come from a runtime that exists.
  if (index >= 0 && static_cast<std::size_t>(index) < slots_.size()) {
    if (DeviceRuntime* rt = slots_[static_cast<std::size_t>(index)]->ready.load(std::memory_order_acquire)) rt->free(ptr);
  }
}

void XpuBackend::copy_to_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) {
  DeviceRuntime& rt = runtime(index);
  rt.copy(rt.queue(stream), dst, src, bytes);
}

void XpuBackend::copy_from_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) {
  DeviceRuntime& rt = runtime(index);
  rt.copy(rt.queue(stream), dst, src, bytes);
}

void XpuBackend::copy_on_device(int index, void* dst, const void* src, std::size_t bytes, void* stream) {
  DeviceRuntime& rt = runtime(index);
  rt.copy(rt.queue(stream), dst, src, bytes);
}

void XpuBackend::fill(int index, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes,
                      void* stream) {
  DeviceRuntime& rt = runtime(index);
  // clEnqueueSVMMemFill copies the pattern before it returns, so the fill may stay queued.
  rt.fill(rt.queue(stream), dst, bytes, pattern, pattern_bytes);
}

void XpuBackend::synchronize(int index, void* stream) {
  DeviceRuntime& rt = runtime(index);
  rt.finish(rt.queue(stream));
}

// Each family folder's lists (<family>/list.cpp), registered below.
#define OPREG_FAMILY(family) void register_##family(Registry& registry);
#include "families/xpu.inc"  // the family folders (cmake/OpregFamilies.cmake)
#undef OPREG_FAMILY

}  // namespace opreg::xpu

namespace opreg {

void register_xpu(Registry& registry) {
  auto backend = std::make_shared<xpu::XpuBackend>();
  registry.add_backend(backend).release();
#define OPREG_FAMILY(family) xpu::register_##family(registry);
#include "families/xpu.inc"
#undef OPREG_FAMILY
}

}  // namespace opreg
