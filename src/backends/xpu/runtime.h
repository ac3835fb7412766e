// The OpenCL runtime of the xpu backend: device discovery through the ICD loader, and per device
// a context, an in-order queue, SVM allocations, and the programs built once and warmed.
// Internal to src/backends/xpu (tests include it to reach the OpenCL objects directly).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "backends/xpu/cl_api.h"
#include "backends/xpu/environment.h"

namespace opreg::xpu {

// "CL_OUT_OF_RESOURCES" for -5, ...; "CL_ERROR" for codes it does not know.
std::string_view cl_error_name(cl_int code);
// Throws opreg::Error (device) "<where>: <call> failed: <name> (<code>)" unless status is CL_SUCCESS.
void check(cl_int status, std::string_view where, std::string_view call);

// Owns one OpenCL object reference; Release is its release function's entry in the loaded table.
template <class T, auto ClApi::*Release>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T object) : object_(object) {}
  Handle(Handle&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset() {
    if (object_ != nullptr) (cl_api().*Release)(std::exchange(object_, nullptr));
  }
  T get() const { return object_; }

 private:
  T object_ = nullptr;
};
using ContextHandle = Handle<cl_context, &ClApi::clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, &ClApi::clReleaseCommandQueue>;
using ProgramHandle = Handle<cl_program, &ClApi::clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, &ClApi::clReleaseKernel>;

// One OpenCL device the backend lists as an xpu device.
struct DeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::string platform_name;   // "Portable Computing Language", "Intel(R) OpenCL Graphics"
  std::string platform_version;
  std::string name;            // the device's own name
  std::string version;         // "OpenCL 3.0 PoCL ..."
  std::string driver_version;
  bool gpu = false;            // an Intel GPU; otherwise an OpenCL CPU device (emulated)
  std::uint64_t global_mem = 0;
  std::uint64_t local_mem = 0;
  std::uint64_t max_alloc = 0;
  int compute_units = 0;
  std::size_t max_work_group_size = 0;
  cl_device_svm_capabilities svm = 0;
  std::string cl_std;          // the -cl-std= the programs are built with: CL3.0, CL2.0
  bool correctly_rounded_sqrt = false;
  // Launch parameters the kernels are planned with (see docs/backends/xpu.md).
  std::size_t work_group_size = 0;  // L: a power of two <= 1024
  int fused_columns = 0;            // dweight columns a work-item keeps in the fused backward
  std::size_t max_groups = 0;       // work-groups a launch uses at most (the kernels stride over the rest)
};

struct Discovery {
  std::vector<DeviceInfo> devices;  // Intel GPUs first, then OpenCL CPU devices
  std::string reason;               // for Availability: what was found, or why nothing was
};

// Enumerates OpenCL platforms and devices (after prepare_environment()). Never throws: what is
// missing goes into `reason`.
Discovery discover(const EnvironmentReport& environment);

// Builds `source` for `device`; an opreg::Error (device) carrying the compiler's log when the
// build fails. `what` names the program in messages.
ProgramHandle build_program(cl_context context, cl_device_id device, std::string_view source,
                            const std::string& options, std::string_view what);

// A kernel of a built program. Arguments of an OpenCL kernel object are state, so setting them
// and enqueueing happen under `mutex` (one call's arguments never mix with another's).
struct Kernel {
  std::string name;
  KernelHandle handle;
  std::mutex mutex;
};

// Launch arguments besides plain scalars.
struct SvmArg {
  const void* pointer;  // the base of an SVM allocation (plus a separate byte offset argument)
};
struct LocalArg {
  std::size_t bytes;
};

// A tensor's memory as a kernel receives it: the SVM allocation holding it and the byte offset.
struct DevicePointer {
  void* base = nullptr;
  cl_ulong offset = 0;
};

// Writes `line` (and a newline) to `out` if it is still alive `after` from its construction: the
// one line a slow first step (PoCL compiling every kernel into a cold cache: a minute or more)
// prints so that it does not look hung, and that a quick one (a warm cache) never prints.
class SlowStepNotice {
 public:
  SlowStepNotice(std::string line, std::chrono::milliseconds after, std::FILE* out = stderr);
  ~SlowStepNotice();
  SlowStepNotice(const SlowStepNotice&) = delete;
  SlowStepNotice& operator=(const SlowStepNotice&) = delete;
  bool printed() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  bool printed_ = false;
  std::thread waiter_;
};

// Everything the backend holds for one device once it is first used: made by the first
// allocation (or first kernel call), which builds every program and warms every kernel.
class DeviceRuntime {
 public:
  // `label` names the device in messages ("xpu:0 (emulated)").
  DeviceRuntime(const DeviceInfo& info, std::string label);
  ~DeviceRuntime();
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  const DeviceInfo& info() const { return info_; }
  const std::string& label() const { return label_; }
  cl_context context() const { return context_.get(); }
  cl_command_queue default_queue() const { return queue_.get(); }
  // The queue a call runs on: the default queue for nullptr, or `stream` when it is a queue this
  // runtime made (new_queue()). Any other value is an opreg::Error (invalid_argument) and is never
  // dereferenced: a caller's handle cannot be checked without the driver reading through it, so a
  // stale or made-up one would crash the process in the driver.
  cl_command_queue queue(void* stream);
  // Another in-order queue of this device's context, for callers that want their own stream;
  // it lives as long as the runtime.
  cl_command_queue new_queue();
  // The work-group size every kernel is launched with (info().work_group_size, or less when a
  // kernel allows less on this device).
  std::size_t work_group_size() const { return work_group_size_; }
  // A kernel of the built programs; an opreg::Error (internal) for an unknown name.
  Kernel& kernel(std::string_view name);
  // Wall time of building and warming, for logs and docs.
  double build_seconds() const { return build_seconds_; }
  double warm_seconds() const { return warm_seconds_; }
  std::size_t kernel_count() const { return kernels_.size(); }

  // Memory: coarse-grained SVM (what Intel GPUs offer); the host reaches it only through the
  // copy and fill calls below.
  void* allocate(std::size_t bytes);
  void free(void* pointer) noexcept;
  // The allocation holding [pointer, pointer + bytes); an opreg::Error (invalid_argument) naming
  // `what` (and `owner`, the variant, when given) when it is not memory of this device. The
  // message is made only then: a call locates every tensor.
  DevicePointer locate(const void* pointer, std::size_t bytes, std::string_view what,
                       std::string_view owner = {}) const;
  void copy(cl_command_queue queue, void* dst, const void* src, std::size_t bytes);
  void fill(cl_command_queue queue, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes);
  void finish(cl_command_queue queue);

  // Sets the arguments and enqueues `global` work-items in groups of `local`. A DevicePointer is
  // two arguments, the allocation and the byte offset (every kernel takes its buffers so).
  template <class... Args>
  void launch(cl_command_queue queue, Kernel& kernel, std::size_t global, std::size_t local, const Args&... args) {
    std::lock_guard<std::mutex> lock(kernel.mutex);
    cl_uint index = 0;
    (add_arg(kernel, index, args), ...);
    enqueue(queue, kernel, global, local);
  }

 private:
  void add_arg(Kernel& kernel, cl_uint& index, const DevicePointer& pointer) {
    set_arg(kernel, index++, SvmArg{pointer.base});
    set_arg(kernel, index++, pointer.offset);
  }
  template <class T>
  void add_arg(Kernel& kernel, cl_uint& index, const T& value) {
    set_arg(kernel, index++, value);
  }
  void set_arg(Kernel& kernel, cl_uint index, const SvmArg& arg);
  void set_arg(Kernel& kernel, cl_uint index, const LocalArg& arg);
  template <class T>
  void set_arg(Kernel& kernel, cl_uint index, const T& value) {
    static_assert(std::is_arithmetic_v<T>, "kernel scalars are cl_int, cl_uint, cl_ulong or cl_float");
    set_scalar(kernel, index, &value, sizeof(T));
  }
  void set_scalar(Kernel& kernel, cl_uint index, const void* value, std::size_t bytes);
  void enqueue(cl_command_queue queue, Kernel& kernel, std::size_t global, std::size_t local);
  void build_and_warm();
  void warm(Kernel& kernel, std::size_t global, void* buffer);

  DeviceInfo info_;
  std::string label_;
  ContextHandle context_;
  QueueHandle queue_;
  mutable std::mutex queues_mutex_;
  std::vector<QueueHandle> more_queues_;  // new_queue()'s, alive until the runtime ends
  std::vector<ProgramHandle> programs_;
  std::map<std::string, std::unique_ptr<Kernel>, std::less<>> kernels_;
  std::size_t work_group_size_ = 0;
  void* placeholder_ = nullptr;  // stands in for the memory of empty tensors
  double build_seconds_ = 0;
  double warm_seconds_ = 0;
  mutable std::mutex allocations_mutex_;
  std::map<std::uintptr_t, std::size_t> allocations_;  // base -> bytes
};

// The programs the runtime builds: name and full source (formats.cl in front of each program's
// file), embedded at configure time from src/backends/xpu/kernels.
struct ProgramSource {
  std::string_view name;
  std::string_view source;
};
std::vector<ProgramSource> program_sources();

}  // namespace opreg::xpu
