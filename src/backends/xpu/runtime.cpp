#include "backends/xpu/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "registry/fail.h"

namespace opreg::xpu {
namespace {

// A string an OpenCL info query returns: `query(size, data, size_ret)` asked for the size, then
// for the text; empty when either call fails.
template <class Query>
std::string query_string(Query query) {
  std::size_t size = 0;
  if (query(0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string out(size, '\0');
  if (query(size, out.data(), nullptr) != CL_SUCCESS) return {};
  out.resize(std::strlen(out.c_str()));
  return out;
}

std::string platform_string(cl_platform_id platform, cl_platform_info what) {
  return query_string([&](std::size_t n, void* p, std::size_t* r) { return clGetPlatformInfo(platform, what, n, p, r); });
}

std::string device_string(cl_device_id device, cl_device_info what) {
  return query_string([&](std::size_t n, void* p, std::size_t* r) { return clGetDeviceInfo(device, what, n, p, r); });
}

template <class T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  if (clGetDeviceInfo(device, what, sizeof(T), &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

// The warm-up buffer: what formats.cl promises each kernel, per work-item of the launch.
constexpr std::size_t kWarmBytesPerItem = 8;

std::size_t floor_pow2(std::size_t v) {
  std::size_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

// The OpenCL C standard to build with: 3.0 where the device lists it, else 2.0 (every device
// here has SVM, so at least OpenCL 2.0).
std::string cl_std_of(cl_device_id device) {
  std::size_t size = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_OPENCL_C_ALL_VERSIONS, 0, nullptr, &size) == CL_SUCCESS && size > 0) {
    std::vector<cl_name_version> versions(size / sizeof(cl_name_version));
    if (clGetDeviceInfo(device, CL_DEVICE_OPENCL_C_ALL_VERSIONS, size, versions.data(), nullptr) == CL_SUCCESS) {
      for (const auto& v : versions) {
        if (CL_VERSION_MAJOR(v.version) == 3) return "CL3.0";
      }
    }
  }
  const std::string c = device_string(device, CL_DEVICE_OPENCL_C_VERSION);  // "OpenCL C 2.0 ..."
  if (c.rfind("OpenCL C 1.", 0) == 0) return "CL1.2";
  return "CL2.0";
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Launch parameters from the device limits (Intel's occupancy tables: work-groups up to 1024
// work-items; Arc gives a work-group at most 64 KiB of local memory, which the kernels stay far
// under: two floats per work-item).
void plan_launches(DeviceInfo& d) {
  std::size_t l = std::min<std::size_t>(1024, d.max_work_group_size);
  const std::size_t local_cap = std::min<std::uint64_t>(d.local_mem, 64 * 1024) / (2 * sizeof(float));
  l = std::min(l, local_cap);
  // On a CPU device (PoCL) a work-group is one thread running its work-items in a loop between
  // barriers, vectorised across them; a row's tree sum costs log2(L) such loops, so a smaller
  // group wins there (64 measured best of 32..256 on rms_norm 4096 x 4096, docs/perf.md).
  if (!d.gpu) l = std::min<std::size_t>(l, 64);
  d.work_group_size = floor_pow2(std::max<std::size_t>(l, 1));
  // The fused backward keeps a (sum, compensation) pair per dweight column in private memory:
  // registers on a GPU (16 columns, 32 registers a work-item, rows up to 16 L), cache-resident
  // arrays on a CPU device, where a long row costs no registers (rows up to 256 L).
  d.fused_columns = d.gpu ? 16 : 256;
  // A few groups per compute unit keep every unit busy while one waits on memory; the row and
  // column loops stride over the rest, so a launch never needs more.
  d.max_groups = static_cast<std::size_t>(std::max(1, d.compute_units)) * 4;
}

}  // namespace

std::string_view cl_error_name(cl_int code) {
  switch (code) {
#define OPREG_CL_ERROR(name) \
  case name:                 \
    return #name;
    OPREG_CL_ERROR(CL_SUCCESS)
    OPREG_CL_ERROR(CL_DEVICE_NOT_FOUND)
    OPREG_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    OPREG_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    OPREG_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    OPREG_CL_ERROR(CL_OUT_OF_RESOURCES)
    OPREG_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    OPREG_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    OPREG_CL_ERROR(CL_INVALID_VALUE)
    OPREG_CL_ERROR(CL_INVALID_DEVICE_TYPE)
    OPREG_CL_ERROR(CL_INVALID_PLATFORM)
    OPREG_CL_ERROR(CL_INVALID_DEVICE)
    OPREG_CL_ERROR(CL_INVALID_CONTEXT)
    OPREG_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    OPREG_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    OPREG_CL_ERROR(CL_INVALID_MEM_OBJECT)
    OPREG_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    OPREG_CL_ERROR(CL_INVALID_PROGRAM)
    OPREG_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    OPREG_CL_ERROR(CL_INVALID_KERNEL_NAME)
    OPREG_CL_ERROR(CL_INVALID_KERNEL)
    OPREG_CL_ERROR(CL_INVALID_ARG_INDEX)
    OPREG_CL_ERROR(CL_INVALID_ARG_VALUE)
    OPREG_CL_ERROR(CL_INVALID_ARG_SIZE)
    OPREG_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    OPREG_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    OPREG_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    OPREG_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    OPREG_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    OPREG_CL_ERROR(CL_INVALID_OPERATION)
    OPREG_CL_ERROR(CL_INVALID_BUFFER_SIZE)
    OPREG_CL_ERROR(CL_MEM_COPY_OVERLAP)
    OPREG_CL_ERROR(CL_PLATFORM_NOT_FOUND_KHR)
#undef OPREG_CL_ERROR
    default:
      return "CL_ERROR";
  }
}

void check(cl_int status, std::string_view where, std::string_view call) {
  if (status != CL_SUCCESS) fail(ErrorKind::device, "{}: {} failed: {} ({})", where, call, cl_error_name(status), status);
}

// ---------------------------------------------------------------------------------------------
// Discovery

Discovery discover(const EnvironmentReport& environment) {
  Discovery out;
  std::vector<std::string> notes = environment.notes;
  if (std::string why; load_cl_api(&why) == nullptr) {
    out.reason = why;
    return out;
  }
  cl_uint count = 0;
  const cl_int status = clGetPlatformIDs(0, nullptr, &count);
  if (status != CL_SUCCESS || count == 0) {
    const char* vendors = std::getenv("OCL_ICD_VENDORS");
    out.reason = fmt::format("no OpenCL platform: the ICD loader found no vendor library ({}; {} ({}))",
                             vendors != nullptr ? fmt::format("OCL_ICD_VENDORS={}", vendors)
                                                : std::string("/etc/OpenCL/vendors"),
                             cl_error_name(status), status);
    return out;
  }
  std::vector<cl_platform_id> platforms(count);
  clGetPlatformIDs(count, platforms.data(), nullptr);
  std::vector<DeviceInfo> gpus;
  std::vector<DeviceInfo> cpus;
  for (cl_platform_id platform : platforms) {
    const std::string pname = platform_string(platform, CL_PLATFORM_NAME);
    const std::string pvendor = platform_string(platform, CL_PLATFORM_VENDOR);
    const std::string pversion = platform_string(platform, CL_PLATFORM_VERSION);
    const bool pocl = contains(pname, "Portable Computing Language");
    cl_uint n = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) {
      std::string why = fmt::format("OpenCL platform '{}' lists no devices", pname);
      if (const char* devices = std::getenv("POCL_DEVICES"); pocl && devices != nullptr) {
        why += fmt::format(" (POCL_DEVICES={} names its drivers)", devices);
      }
      if (pocl && !environment.pocl_cache_problem.empty()) why += ": " + environment.pocl_cache_problem;
      notes.push_back(why);
      continue;
    }
    // PoCL may list its devices and still build no program without a writable kernel cache
    // (clBuildProgram fails on the first kernel): such devices are not offered.
    if (pocl && !environment.pocl_cache_problem.empty()) {
      notes.push_back(fmt::format("OpenCL platform '{}' left out: {}", pname, environment.pocl_cache_problem));
      continue;
    }
    std::vector<cl_device_id> devices(n);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, devices.data(), nullptr);
    for (cl_device_id device : devices) {
      DeviceInfo d;
      d.platform = platform;
      d.device = device;
      d.platform_name = pname;
      d.platform_version = pversion;
      d.name = device_string(device, CL_DEVICE_NAME);
      d.version = device_string(device, CL_DEVICE_VERSION);
      d.driver_version = device_string(device, CL_DRIVER_VERSION);
      const auto type = device_value<cl_device_type>(device, CL_DEVICE_TYPE);
      const bool intel = contains(pvendor, "Intel") || contains(pname, "Intel");
      d.gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
      if (d.gpu && !intel) {
        notes.push_back(fmt::format("'{}' on '{}' is not an Intel GPU", d.name, pname));
        continue;
      }
      if (!d.gpu && (type & CL_DEVICE_TYPE_CPU) == 0) {
        notes.push_back(fmt::format("'{}' on '{}' is neither a GPU nor a CPU device", d.name, pname));
        continue;
      }
      d.svm = device_value<cl_device_svm_capabilities>(device, CL_DEVICE_SVM_CAPABILITIES);
      if ((d.svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) == 0) {
        notes.push_back(fmt::format("'{}' on '{}' has no shared virtual memory (OpenCL 2.0 SVM)", d.name, pname));
        continue;
      }
      d.global_mem = device_value<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE);
      d.local_mem = device_value<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE);
      d.max_alloc = device_value<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      d.compute_units = static_cast<int>(device_value<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS));
      d.max_work_group_size = device_value<std::size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      d.cl_std = cl_std_of(device);
      d.correctly_rounded_sqrt = (device_value<cl_device_fp_config>(device, CL_DEVICE_SINGLE_FP_CONFIG) &
                                  CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
      plan_launches(d);
      (d.gpu ? gpus : cpus).push_back(std::move(d));
    }
  }
  out.devices = std::move(gpus);
  const std::size_t gpu_count = out.devices.size();
  for (auto& d : cpus) out.devices.push_back(std::move(d));
  if (out.devices.empty()) {
    out.reason = "no usable OpenCL device";
  } else if (gpu_count == 0) {
    out.reason = fmt::format("no Intel GPU; {} OpenCL CPU device{} listed as emulated (used only when named)",
                             out.devices.size(), out.devices.size() == 1 ? "" : "s");
  } else {
    out.reason = fmt::format("{} Intel GPU{} through OpenCL ({})", gpu_count, gpu_count == 1 ? "" : "s",
                             out.devices.front().platform_name);
  }
  for (const auto& note : notes) out.reason += "; " + note;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Programs

ProgramHandle build_program(cl_context context, cl_device_id device, std::string_view source,
                            const std::string& options, std::string_view what) {
  const char* text = source.data();
  const std::size_t length = source.size();
  cl_int status = CL_SUCCESS;
  ProgramHandle program(clCreateProgramWithSource(context, 1, &text, &length, &status));
  check(status, what, "clCreateProgramWithSource");
  status = clBuildProgram(program.get(), 1, &device, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    std::string log = query_string([&](std::size_t n, void* p, std::size_t* r) {
      return clGetProgramBuildInfo(program.get(), device, CL_PROGRAM_BUILD_LOG, n, p, r);
    });
    while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
    constexpr std::size_t kMaxLog = 8000;
    if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n[compiler log cut at 8000 characters]";
    fail(ErrorKind::device, "{}: clBuildProgram failed: {} ({}) with options '{}'; compiler log:\n{}", what,
         cl_error_name(status), status, options, log.empty() ? "(empty)" : log);
  }
  return program;
}

// ---------------------------------------------------------------------------------------------
// DeviceRuntime

DeviceRuntime::DeviceRuntime(const DeviceInfo& info, std::string label) : info_(info), label_(std::move(label)) {
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                              reinterpret_cast<cl_context_properties>(info_.platform), 0};
  cl_int status = CL_SUCCESS;
  context_ = ContextHandle(clCreateContext(properties, 1, &info_.device, nullptr, nullptr, &status));
  check(status, label_, "clCreateContext");
  // In order: the workspace reuses scratch on a queue relying on that order.
  const cl_queue_properties queue_properties[] = {0};
  queue_ = QueueHandle(clCreateCommandQueueWithProperties(context_.get(), info_.device, queue_properties, &status));
  check(status, label_, "clCreateCommandQueueWithProperties");
  build_and_warm();
}

DeviceRuntime::~DeviceRuntime() {
  if (queue_.get() != nullptr) clFinish(queue_.get());
  std::lock_guard<std::mutex> lock(allocations_mutex_);
  for (const auto& [base, bytes] : allocations_) clSVMFree(context_.get(), reinterpret_cast<void*>(base));
  allocations_.clear();
}

SlowStepNotice::SlowStepNotice(std::string line, std::chrono::milliseconds after, std::FILE* out) {
  waiter_ = std::thread([this, line = std::move(line), after, out] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_.wait_for(lock, after, [this] { return finished_; })) return;
    std::fprintf(out, "%s\n", line.c_str());
    std::fflush(out);
    printed_ = true;
  });
}

SlowStepNotice::~SlowStepNotice() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  done_.notify_all();
  waiter_.join();
}

bool SlowStepNotice::printed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return printed_;
}

void DeviceRuntime::build_and_warm() {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // A warm PoCL cache builds and warms everything in a few seconds; a cold one compiles every
  // kernel first (about a minute on two cores, twice that under ASan). Past 5 s, say so once.
  const char* cache = std::getenv("POCL_CACHE_DIR");
  const SlowStepNotice notice(
      fmt::format("opreg: {}: compiling the xpu backend's OpenCL kernels (first use with a cold kernel cache, {}: "
                  "about a minute; later runs reuse the cache)",
                  label_, cache != nullptr && *cache != '\0' ? fmt::format("POCL_CACHE_DIR={}", cache)
                                                             : std::string("the driver's default cache")),
      std::chrono::seconds(5));
  std::string options = fmt::format("-cl-std={} -cl-kernel-arg-info -D OPREG_FUSED_COLUMNS={}", info_.cl_std,
                                    info_.fused_columns);
  if (info_.correctly_rounded_sqrt) options += " -cl-fp32-correctly-rounded-divide-sqrt";
  work_group_size_ = info_.work_group_size;
  for (const auto& program : program_sources()) {
    ProgramHandle built =
        build_program(context_.get(), info_.device, program.source, options,
                      fmt::format("{}: xpu program '{}'", label_, program.name));
    cl_uint count = 0;
    check(clCreateKernelsInProgram(built.get(), 0, nullptr, &count), label_, "clCreateKernelsInProgram");
    std::vector<cl_kernel> handles(count);
    check(clCreateKernelsInProgram(built.get(), count, handles.data(), nullptr), label_, "clCreateKernelsInProgram");
    for (cl_kernel handle : handles) {
      auto kernel = std::make_unique<Kernel>();
      kernel->handle = KernelHandle(handle);
      kernel->name = query_string([&](std::size_t n, void* p, std::size_t* r) {
        return clGetKernelInfo(handle, CL_KERNEL_FUNCTION_NAME, n, p, r);
      });
      std::size_t limit = 0;
      check(clGetKernelWorkGroupInfo(handle, info_.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(limit), &limit, nullptr),
            label_, "clGetKernelWorkGroupInfo");
      if (limit < work_group_size_) work_group_size_ = floor_pow2(std::max<std::size_t>(limit, 1));
      std::string name = kernel->name;
      kernels_.emplace(std::move(name), std::move(kernel));
    }
    programs_.push_back(std::move(built));
  }
  const auto built = Clock::now();
  build_seconds_ = std::chrono::duration<double>(built - start).count();
  // Each kernel at the one work-group size every launch uses, on the smallest and the largest
  // grid a launch uses: PoCL compiles a work-group function per (kernel, local size, grid under
  // or over 65536 work-items) at its first launch, 0.1-0.25 s each on a 2-core host.
  placeholder_ = allocate(64);
  const std::size_t largest = std::max<std::size_t>(1, info_.max_groups) * work_group_size_;
  void* buffer = allocate(kWarmBytesPerItem * largest);
  try {
    for (auto& [name, kernel] : kernels_) {
      warm(*kernel, work_group_size_, buffer);
      if (largest > work_group_size_) warm(*kernel, largest, buffer);
    }
    finish(queue_.get());
  } catch (...) {
    free(buffer);
    throw;
  }
  free(buffer);
  warm_seconds_ = std::chrono::duration<double>(Clock::now() - built).count();
}

// Launches `global` work-items of `kernel` with every pointer on `buffer` (kWarmBytesPerItem per
// work-item) and every scalar 1 (the contract in formats.cl), reading the argument kinds from the kernel's
// own metadata (-cl-kernel-arg-info).
void DeviceRuntime::warm(Kernel& kernel, std::size_t global, void* buffer) {
  cl_uint args = 0;
  check(clGetKernelInfo(kernel.handle.get(), CL_KERNEL_NUM_ARGS, sizeof(args), &args, nullptr), label_,
        "clGetKernelInfo");
  std::lock_guard<std::mutex> lock(kernel.mutex);
  for (cl_uint i = 0; i < args; ++i) {
    cl_kernel_arg_address_qualifier space = 0;
    check(clGetKernelArgInfo(kernel.handle.get(), i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(space), &space, nullptr),
          label_, "clGetKernelArgInfo");
    const std::string type = query_string([&](std::size_t n, void* p, std::size_t* r) {
      return clGetKernelArgInfo(kernel.handle.get(), i, CL_KERNEL_ARG_TYPE_NAME, n, p, r);
    });
    if (space == CL_KERNEL_ARG_ADDRESS_GLOBAL) {
      set_arg(kernel, i, SvmArg{buffer});
    } else if (space == CL_KERNEL_ARG_ADDRESS_LOCAL) {
      set_arg(kernel, i, LocalArg{2 * sizeof(float) * work_group_size_});
    } else if (type == "ulong") {
      set_arg(kernel, i, cl_ulong{1});
    } else if (type == "uint") {
      set_arg(kernel, i, cl_uint{1});
    } else if (type == "int") {
      set_arg(kernel, i, cl_int{1});
    } else if (type == "float") {
      set_arg(kernel, i, cl_float{1});
    } else {
      fail(ErrorKind::internal, "{}: kernel {} argument {} has type '{}', which the warm-up does not know", label_,
           kernel.name, i, type);
    }
  }
  enqueue(queue_.get(), kernel, global, work_group_size_);
}

cl_command_queue DeviceRuntime::queue(void* stream) {
  if (stream == nullptr || stream == queue_.get()) return queue_.get();
  {
    std::lock_guard<std::mutex> lock(queues_mutex_);
    for (const QueueHandle& q : more_queues_) {
      if (q.get() == stream) return q.get();
    }
  }
  fail(ErrorKind::invalid_argument,
       "{}: the execution context's stream {} is not a command queue opreg made for this device; accepted: 0 (the "
       "device's own queue) or a queue from the runtime's new_queue() (opreg cannot check any other handle without "
       "the driver reading through it)",
       label_, stream);
}

cl_command_queue DeviceRuntime::new_queue() {
  cl_int status = CL_SUCCESS;
  const cl_queue_properties in_order[] = {0};
  QueueHandle q(clCreateCommandQueueWithProperties(context_.get(), info_.device, in_order, &status));
  check(status, label_, "clCreateCommandQueueWithProperties");
  std::lock_guard<std::mutex> lock(queues_mutex_);
  return more_queues_.emplace_back(std::move(q)).get();
}

Kernel& DeviceRuntime::kernel(std::string_view name) {
  const auto it = kernels_.find(name);
  if (it == kernels_.end()) fail(ErrorKind::internal, "{}: no xpu kernel named '{}' was built", label_, name);
  return *it->second;
}

void* DeviceRuntime::allocate(std::size_t bytes) {
  // A zero-byte request still gets a real block (clSVMAlloc refuses 0), so callers never see nullptr.
  const std::size_t size = std::max<std::size_t>(bytes, 64);
  if (info_.max_alloc != 0 && size > info_.max_alloc) {
    fail(ErrorKind::device, "{}: cannot allocate {} bytes: the device's largest allocation is {} bytes", label_, bytes,
         info_.max_alloc);
  }
  void* p = clSVMAlloc(context_.get(), CL_MEM_READ_WRITE, size, 0);
  if (p == nullptr) fail(ErrorKind::device, "{}: clSVMAlloc of {} bytes failed", label_, bytes);
  std::lock_guard<std::mutex> lock(allocations_mutex_);
  allocations_.emplace(reinterpret_cast<std::uintptr_t>(p), size);
  return p;
}

void DeviceRuntime::free(void* pointer) noexcept {
  if (pointer == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(allocations_mutex_);
    if (allocations_.erase(reinterpret_cast<std::uintptr_t>(pointer)) == 0) return;
  }
  // Work still queued may use the block: clSVMFree does not wait for it. Queues the caller made
  // are the caller's to finish first, as with any asynchronous device.
  clFinish(queue_.get());
  clSVMFree(context_.get(), pointer);
}

DevicePointer DeviceRuntime::locate(const void* pointer, std::size_t bytes, std::string_view what,
                                    std::string_view owner) const {
  // An empty tensor may have no memory at all; kernels never touch it, but every pointer
  // argument must be SVM.
  if (bytes == 0 && pointer == nullptr) return {placeholder_, 0};
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(allocations_mutex_);
  auto it = allocations_.upper_bound(address);
  if (it != allocations_.begin()) {
    --it;
    const std::uintptr_t base = it->first;
    if (address - base <= it->second && bytes <= it->second - (address - base)) {
      return {reinterpret_cast<void*>(base), static_cast<cl_ulong>(address - base)};
    }
  }
  fail(ErrorKind::invalid_argument,
       "{}: {} ({} bytes at {}) is not memory of this device; xpu kernels read only tensors made on the device "
       "(Tensor::empty, Tensor::to): wrapped host memory is not shared virtual memory",
       label_, owner.empty() ? std::string(what) : fmt::format("{}: {}", owner, what), bytes, pointer);
}

void DeviceRuntime::copy(cl_command_queue queue, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  if (d < s + bytes && s < d + bytes) {
    // Views of one allocation may overlap; clEnqueueSVMMemcpy refuses that, so go through the host.
    std::vector<unsigned char> staging(bytes);
    check(clEnqueueSVMMemcpy(queue, CL_TRUE, staging.data(), src, bytes, 0, nullptr, nullptr), label_,
          "clEnqueueSVMMemcpy");
    check(clEnqueueSVMMemcpy(queue, CL_TRUE, dst, staging.data(), bytes, 0, nullptr, nullptr), label_,
          "clEnqueueSVMMemcpy");
    return;
  }
  check(clEnqueueSVMMemcpy(queue, CL_TRUE, dst, src, bytes, 0, nullptr, nullptr), label_, "clEnqueueSVMMemcpy");
}

void DeviceRuntime::fill(cl_command_queue queue, void* dst, std::size_t bytes, const void* pattern,
                         std::size_t pattern_bytes) {
  if (pattern_bytes == 0 || bytes % pattern_bytes != 0) {
    fail(ErrorKind::invalid_argument, "{}: fill of {} bytes with a {}-byte pattern: the pattern must divide the size",
         label_, bytes, pattern_bytes);
  }
  if (bytes == 0) return;
  const bool native = pattern_bytes <= 128 && (pattern_bytes & (pattern_bytes - 1)) == 0 &&
                      reinterpret_cast<std::uintptr_t>(dst) % pattern_bytes == 0;
  if (native) {
    check(clEnqueueSVMMemFill(queue, dst, pattern, pattern_bytes, bytes, 0, nullptr, nullptr), label_,
          "clEnqueueSVMMemFill");
    return;
  }
  std::vector<unsigned char> staging(bytes);
  for (std::size_t i = 0; i < bytes; i += pattern_bytes) std::memcpy(staging.data() + i, pattern, pattern_bytes);
  check(clEnqueueSVMMemcpy(queue, CL_TRUE, dst, staging.data(), bytes, 0, nullptr, nullptr), label_,
        "clEnqueueSVMMemcpy");
}

void DeviceRuntime::finish(cl_command_queue queue) { check(clFinish(queue), label_, "clFinish"); }

void DeviceRuntime::set_arg(Kernel& kernel, cl_uint index, const SvmArg& arg) {
  const cl_int status = clSetKernelArgSVMPointer(kernel.handle.get(), index, arg.pointer);
  if (status != CL_SUCCESS) {
    fail(ErrorKind::internal, "{}: kernel {} argument {}: clSetKernelArgSVMPointer failed: {} ({})", label_,
         kernel.name, index, cl_error_name(status), status);
  }
}

void DeviceRuntime::set_arg(Kernel& kernel, cl_uint index, const LocalArg& arg) {
  set_scalar(kernel, index, nullptr, arg.bytes);
}

void DeviceRuntime::set_scalar(Kernel& kernel, cl_uint index, const void* value, std::size_t bytes) {
  const cl_int status = clSetKernelArg(kernel.handle.get(), index, bytes, value);
  if (status != CL_SUCCESS) {
    fail(ErrorKind::internal, "{}: kernel {} argument {} ({} bytes): clSetKernelArg failed: {} ({})", label_,
         kernel.name, index, bytes, cl_error_name(status), status);
  }
}

void DeviceRuntime::enqueue(cl_command_queue queue, Kernel& kernel, std::size_t global, std::size_t local) {
  const cl_int status = clEnqueueNDRangeKernel(queue, kernel.handle.get(), 1, nullptr, &global, &local, 0, nullptr,
                                               nullptr);
  if (status != CL_SUCCESS) {
    fail(ErrorKind::device, "{}: launching kernel {} ({} work-items in groups of {}) failed: {} ({})", label_,
         kernel.name, global, local, cl_error_name(status), status);
  }
}

}  // namespace opreg::xpu
