// Devices, backends and their memory services.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opreg {

using BackendId = std::uint8_t;
// Dispatch tables are plain arrays indexed by backend id, so the count is bounded.
inline constexpr int kMaxBackends = 16;
// Backend id 0 belongs to the backend named "cpu": the host, the fallback target.
inline constexpr BackendId kCpuBackendId = 0;
inline constexpr std::string_view kCpuBackendName = "cpu";

// {backend id, index}. Ids are meaningful within one Registry; print and parse through it
// (Registry::device_name / Registry::parse_device, or to_string / parse_device for the default).
struct Device {
  BackendId backend = kCpuBackendId;
  std::int16_t index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

enum class FallbackPolicy : std::uint8_t { error, warn, silent };
std::string_view to_string(FallbackPolicy policy);

struct Availability {
  bool available = false;
  int device_count = 0;
  std::string reason;  // why not available, or how it was found
};

struct DeviceProps {
  std::string name;                  // e.g. "NVIDIA H200", "Ascend 910B4 (emulated)"
  std::uint64_t memory_bytes = 0;
  int compute_units = 0;             // SMs, AI vector cores, CPU cores, EUs
  bool emulated = false;             // never picked by inference; shown as emulated everywhere
  // The device's memory is the host's (the cpu, emulators, OpenCL CPU devices, host-memory toys):
  // memory admission then counts a problem's device copies with its host copies, against what
  // the host has (false: unknown or separate memory, counted apart).
  bool host_memory = false;
  std::vector<std::pair<std::string, std::string>> extra;  // ub_bytes, sm_count, ... (for display)
  // The backend's own typed description of the device, which its variants read instead of
  // parsing `extra` (opreg/variants.h hands it to supports() as the backend's type); owned by the
  // backend, valid while it is registered. nullptr: none.
  const void* facts = nullptr;

  // Value of an extra key, or empty.
  std::string_view get(std::string_view key) const;
};

// How a benchmark (`opreg bench`) times work on one device: the backend's own clock. One timed
// span is prepare(), start(), the work, stop_us(); the bench calls them in that order, on the
// stream it runs the work on.
class KernelTimer {
 public:
  virtual ~KernelTimer() = default;
  // Before each timed span and outside it (a GPU flushes its L2 here, so every run starts cold).
  virtual void prepare() {}
  virtual void start() = 0;
  // After the span's work was issued: waits for it and returns its time in microseconds.
  virtual double stop_us() = 0;
  // What the time is, for reports: "wall clock", "cuda events, L2 flushed", "emulator est_us".
  virtual std::string method() const = 0;
  // True when the figure is a model's estimate rather than a measurement (the npu emulator).
  virtual bool estimate() const { return false; }
};

// The bandwidth a device can reach, measured (a copy) or taken from its model, which benchmarks
// divide their GB/s by.
struct BandwidthCeiling {
  double gbps = 0;     // reads and writes together, 10^9 B/s; 0: unknown (see method)
  std::string method;  // "copy on device of 2 x 128 MiB, best of 5", "profile HBM bandwidth", ...
  bool estimate = false;
};

// Where a call's device scratch comes from, when the caller's framework should own it (a
// framework's caching allocator, so that scratch is counted in its memory statistics and taken
// from its pool under graph capture). Plain function pointers and a `self` handed back to them.
// allocate: at least `bytes` of memory of device `device_index` of the call's backend, usable by
// work on `stream` (the stream the kernel runs on; nullptr: the device's default stream); it may
// throw (the call then fails with that exception); returning nullptr fails the call with an
// opreg device error. deallocate: gives a block back, with the same bytes, device and stream it
// was allocated with; it is called as soon as the kernel has been issued, before the work on
// `stream` is done, so the allocator must order the reuse after the stream's work (a
// stream-ordered allocator such as torch's caching allocator does); it must not throw.
struct ScratchAllocator {
  void* (*allocate)(void* self, std::size_t bytes, int device_index, void* stream) = nullptr;
  void (*deallocate)(void* self, void* ptr, std::size_t bytes, int device_index, void* stream) = nullptr;
  void* self = nullptr;
};

// Cached scratch memory for kernels (partial dW/dB, chunk buffers): blocks are kept per stream
// after release and reused by the next acquire on that stream, so a steady state allocates
// nothing. Reuse on the same stream is safe for asynchronous devices because work on one
// stream is ordered. A call whose context has a ScratchAllocator takes its blocks from that
// allocator instead, and gives them back to it when the lease ends (acquire's third argument).
class Backend;
class Workspace {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }
    void* data() const { return data_; }
    std::size_t bytes() const { return bytes_; }
    void reset();

   private:
    friend class Workspace;
    Workspace* owner_ = nullptr;
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
    void* stream_ = nullptr;
    const ScratchAllocator* allocator_ = nullptr;  // set: the block goes back to it, not the cache
  };

  Workspace(Backend& backend, int index);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // A block of at least `bytes` (rounded up to a power of two, at least 256) for `stream`.
  // With an allocator (not nullptr): a block of `bytes` rounded up to a multiple of 256 from
  // `allocator`, given back to it when the lease ends; the cache is not touched, and `allocator`
  // must outlive the lease (it is the call's context's: a lease lives for one kernel call).
  Lease acquire(std::size_t bytes, void* stream = nullptr, const ScratchAllocator* allocator = nullptr);
  std::size_t cached_bytes() const;
  std::size_t allocations() const;  // device allocations made so far (a reuse makes none)
  void release_cached();

 private:
  struct Cache;  // the free blocks and counters, behind a mutex (device.cpp)
  Lease borrow(std::size_t bytes, void* stream, const ScratchAllocator& allocator);
  void give_back(void* data, std::size_t bytes, void* stream);
  Backend& backend_;
  int index_;
  std::unique_ptr<Cache> cache_;
};

// What a backend provides. Implementations live in src/backends/<name>/ (or in user code for
// custom backends) and are registered with Registry::add_backend. Copies are synchronous
// with respect to `stream` (nullptr: the device's default stream): when copy_to_host returns,
// the data is on the host. Backends are always held by shared_ptr (Registry::add_backend takes
// one), so an allocation can keep its backend alive through shared_from_this().
class Backend : public std::enable_shared_from_this<Backend> {
 public:
  Backend();
  virtual ~Backend();

  virtual std::string name() const = 0;
  // Higher is tried first by device inference (cuda 400, npu 300, xpu 200, cpu 0).
  virtual int inference_priority() const = 0;
  virtual FallbackPolicy default_fallback() const = 0;
  // Called once when the backend is registered; must not throw for "not here" (say why).
  virtual Availability probe() = 0;
  virtual DeviceProps properties(int index) const = 0;
  // Environment variables this backend reads and validates (OPREG_NPU_PROFILE, ...).
  virtual std::vector<std::string> env_vars() const { return {}; }

  virtual void* allocate(int index, std::size_t bytes) = 0;
  virtual void deallocate(int index, void* ptr, std::size_t bytes) noexcept = 0;
  virtual void copy_to_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  virtual void copy_from_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  virtual void copy_on_device(int index, void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  // Repeats `pattern` (pattern_bytes long, dividing bytes) over dst.
  virtual void fill(int index, void* dst, std::size_t bytes, const void* pattern,
                    std::size_t pattern_bytes, void* stream) = 0;
  virtual void synchronize(int index, void* stream) = 0;
  virtual void* default_stream(int /*index*/) { return nullptr; }
  // Extra " key=value" pairs about the last kernel device `index` ran (each with a leading
  // space), which `opreg run` appends to its result line; empty when the backend has none (the
  // npu emulator reports its launch counters here).
  virtual std::string last_run_note(int /*index*/) const { return {}; }
  // The clock `opreg bench` times device `index` with, on `stream`. Default: the host's wall
  // clock with synchronize(index, stream) before the start and before the stop.
  virtual std::unique_ptr<KernelTimer> make_timer(int index, void* stream);
  // Device `index`'s bandwidth ceiling. Default: copy_on_device of a 128 MiB buffer, timed with
  // make_timer, best of a few (each copy reads and writes every byte once).
  virtual BandwidthCeiling bandwidth_ceiling(int index);
  // Bytes of device memory that can be allocated now, for the admission checks that refuse a
  // request before allocating it (0: unknown, the checks then use properties().memory_bytes).
  // Host memory: the kernel's MemAvailable.
  virtual std::uint64_t memory_available(int /*index*/) { return 0; }
  // The DLPack device type (DLDeviceType's value) of this backend's memory, for DLPack import and
  // export and plugin tensors: kDLCPU = 1, kDLCUDA = 2, kDLOpenCL = 4; the default is kDLExtDev
  // (12), a device DLPack has no type for.
  virtual int dlpack_device_type() const { return 12; }

  // The cached scratch allocator of device `index`.
  Workspace& workspace(int index);

  // Tensors allocated through this backend (Tensor::empty) that are still alive. A registry
  // does not give this backend's id to another backend while any exist, so an old tensor can
  // never be taken for the new backend's.
  std::int64_t live_tensors() const;

 protected:
  // Gives every workspace's cached blocks back through deallocate(). ~Backend cannot: the
  // derived deallocate() is gone by then, so it leaks what is still cached rather than make a
  // pure virtual call. A backend therefore calls this from its own destructor
  // (HostMemoryBackend's does, with its own deallocate()).
  void release_workspaces() noexcept;

 private:
  friend class Tensor;
  void count_tensor(int delta) noexcept;  // Tensor::empty's allocations, +1 / -1
  struct State;  // live-tensor count and workspaces (device.cpp): keeps <atomic>, <mutex> and
                 // <map> out of the public headers
  std::unique_ptr<State> state_;
};

// Memory services on host memory, for backends whose device memory is the host's: the cpu
// backend, emulators (the NPU model keeps GM in host memory) and test backends.
class HostMemoryBackend : public Backend {
 public:
  ~HostMemoryBackend() override;
  void* allocate(int index, std::size_t bytes) override;
  void deallocate(int index, void* ptr, std::size_t bytes) noexcept override;
  void copy_to_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override;
  void copy_from_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override;
  void copy_on_device(int index, void* dst, const void* src, std::size_t bytes, void* stream) override;
  void fill(int index, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes,
            void* stream) override;
  void synchronize(int index, void* stream) override;
  std::uint64_t memory_available(int index) override;
};

// What the host can give now (/proc/meminfo's MemAvailable; 0 where it cannot be read).
std::uint64_t host_memory_available();

// The execution context every entry point accepts: the stream or queue to run on, and where the
// call's device scratch comes from.
struct ExecContext {
  void* stream = nullptr;  // nullptr: the device's default stream
  // nullptr: the backend's cached Workspace. Otherwise every scratch block the call's kernels
  // take comes from this allocator and goes back to it (ScratchAllocator says how); it must live
  // until the call returns. A call that falls back to the cpu through host copies does not use
  // it (its scratch is host memory).
  const ScratchAllocator* scratch = nullptr;
};

class Registry;
// Printing and parsing through the process-wide default registry.
std::string to_string(Device device);
Device parse_device(std::string_view text);

}  // namespace opreg
