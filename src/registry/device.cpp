#include "opreg/device.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>

#include "opreg/error.h"
#include "registry/admission.h"
#include "registry/fail.h"
#include "registry/spellings.h"

namespace opreg {

std::string_view to_string(FallbackPolicy policy) {
  static constexpr auto kNames = spellings<FallbackPolicy>("error", "warn", "silent");
  return kNames(policy);
}

std::string_view DeviceProps::get(std::string_view key) const {
  for (const auto& [k, v] : extra) {
    if (k == key) return v;
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Backend

struct Backend::State {
  std::atomic<std::int64_t> live_tensors{0};
  std::mutex workspaces_mutex;
  std::map<int, std::unique_ptr<Workspace>> workspaces;
};

Backend::Backend() : state_(std::make_unique<State>()) {}

Backend::~Backend() {
  // Only this class's part of the object is left, so deallocate() is pure here: a workspace
  // still caching blocks (its backend did not call release_workspaces()) is leaked with them.
  for (auto& [index, ws] : state_->workspaces) {
    if (ws->cached_bytes() != 0) static_cast<void>(ws.release());
  }
}

std::int64_t Backend::live_tensors() const { return state_->live_tensors.load(std::memory_order_relaxed); }

void Backend::count_tensor(int delta) noexcept {
  state_->live_tensors.fetch_add(delta, std::memory_order_relaxed);
}

void Backend::release_workspaces() noexcept {
  std::lock_guard lock(state_->workspaces_mutex);
  for (auto& [index, ws] : state_->workspaces) ws->release_cached();
}

Workspace& Backend::workspace(int index) {
  std::lock_guard lock(state_->workspaces_mutex);
  auto& slot = state_->workspaces[index];
  if (!slot) slot = std::make_unique<Workspace>(*this, index);
  return *slot;
}

// ---------------------------------------------------------------------------------------------
// Workspace

namespace {
constexpr std::size_t kMinWorkspaceBlock = 256;
}  // namespace

Workspace::Lease& Workspace::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = other.owner_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    stream_ = other.stream_;
    allocator_ = other.allocator_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
    other.stream_ = nullptr;
    other.allocator_ = nullptr;
  }
  return *this;
}

void Workspace::Lease::reset() {
  if (owner_ != nullptr && data_ != nullptr) {
    if (allocator_ != nullptr) {
      allocator_->deallocate(allocator_->self, data_, bytes_, owner_->index_, stream_);
    } else {
      owner_->give_back(data_, bytes_, stream_);
    }
  }
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
  stream_ = nullptr;
  allocator_ = nullptr;
}

struct Workspace::Cache {
  mutable std::mutex mutex;
  std::multimap<std::pair<void*, std::size_t>, void*> free;  // (stream, bytes) -> block
  std::size_t cached_bytes = 0;
  std::size_t allocations = 0;
};

Workspace::Workspace(Backend& backend, int index)
    : backend_(backend), index_(index), cache_(std::make_unique<Cache>()) {}

// Leases still out when the workspace goes (that is, when its backend does) dangle: a lease
// is meant to live for one kernel call, well inside the backend's lifetime.
Workspace::~Workspace() { release_cached(); }

Workspace::Lease Workspace::acquire(std::size_t bytes, void* stream, const ScratchAllocator* allocator) {
  constexpr std::size_t kLargestBlock = std::size_t{1} << (std::numeric_limits<std::size_t>::digits - 1);
  if (bytes > kLargestBlock) {
    fail(ErrorKind::invalid_argument, "workspace request of {} bytes is larger than the largest block ({} bytes)",
         bytes, kLargestBlock);
  }
  if (allocator != nullptr) return borrow(bytes, stream, *allocator);
  // Power-of-two size classes make blocks of nearby sizes interchangeable, so varying
  // problem sizes still reach a steady state with few distinct blocks.
  const std::size_t size = std::max(kMinWorkspaceBlock, std::bit_ceil(bytes));
  Lease lease;
  {
    std::lock_guard lock(cache_->mutex);
    auto it = cache_->free.find({stream, size});
    if (it != cache_->free.end()) {
      lease.data_ = it->second;
      cache_->free.erase(it);
      cache_->cached_bytes -= size;
    }
  }
  if (lease.data_ == nullptr) {
    // Outside the lock: a device allocation may be slow, and other streams need not wait.
    if (size >= kAdmissionThreshold) {
      admit(backend_, index_, backend_.properties(index_).memory_bytes, size,
            fmt::format("{}:{}", backend_.name(), index_), "a workspace block");
    }
    lease.data_ = backend_.allocate(index_, size);
    std::lock_guard lock(cache_->mutex);
    ++cache_->allocations;
  }
  lease.owner_ = this;
  lease.bytes_ = size;
  lease.stream_ = stream;
  return lease;
}

// The caller's allocator decides about memory (admission, reuse, its own rounding); the block is
// only rounded to whole 256-byte units, the alignment kernels may assume of a workspace block.
Workspace::Lease Workspace::borrow(std::size_t bytes, void* stream, const ScratchAllocator& allocator) {
  if (allocator.allocate == nullptr || allocator.deallocate == nullptr) {
    fail(ErrorKind::invalid_argument, "{}:{}: the scratch allocator has no {} function", backend_.name(), index_,
         allocator.allocate == nullptr ? "allocate" : "deallocate");
  }
  const std::size_t units = bytes / kMinWorkspaceBlock + (bytes % kMinWorkspaceBlock != 0 ? 1 : 0);
  const std::size_t size = std::max<std::size_t>(1, units) * kMinWorkspaceBlock;
  void* data = allocator.allocate(allocator.self, size, index_, stream);
  if (data == nullptr) {
    fail(ErrorKind::device, "{}:{}: the scratch allocator returned no memory for {} bytes of scratch", backend_.name(),
         index_, size);
  }
  Lease lease;
  lease.owner_ = this;
  lease.data_ = data;
  lease.bytes_ = size;
  lease.stream_ = stream;
  lease.allocator_ = &allocator;
  return lease;
}

std::size_t Workspace::cached_bytes() const {
  std::lock_guard lock(cache_->mutex);
  return cache_->cached_bytes;
}

std::size_t Workspace::allocations() const {
  std::lock_guard lock(cache_->mutex);
  return cache_->allocations;
}

void Workspace::release_cached() {
  decltype(cache_->free) blocks;
  {
    std::lock_guard lock(cache_->mutex);
    blocks.swap(cache_->free);
    cache_->cached_bytes = 0;
  }
  for (const auto& [key, data] : blocks) backend_.deallocate(index_, data, key.second);
}

void Workspace::give_back(void* data, std::size_t bytes, void* stream) {
  // Called from a lease's destructor, so it must not throw: if the free list cannot grow,
  // the block goes back to the device instead of into the cache.
  try {
    std::lock_guard lock(cache_->mutex);
    cache_->free.emplace(std::pair{stream, bytes}, data);
    cache_->cached_bytes += bytes;
    return;
  } catch (...) {
  }
  backend_.deallocate(index_, data, bytes);
}

// ---------------------------------------------------------------------------------------------
// HostMemoryBackend

namespace {
// A cache line: vector loads never straddle two allocations' lines and false sharing
// between tensors cannot happen.
constexpr std::size_t kHostAlignment = 64;
}  // namespace

HostMemoryBackend::~HostMemoryBackend() { release_workspaces(); }

void* HostMemoryBackend::allocate(int /*index*/, std::size_t bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max() - (kHostAlignment - 1)) {
    fail(ErrorKind::device, "{}: cannot allocate {} bytes of host memory: too large", name(), bytes);
  }
  // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a real,
  // unique block so callers never have to special-case nullptr.
  std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  if (rounded == 0) rounded = kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  if (p == nullptr) fail(ErrorKind::device, "{}: allocation of {} bytes of host memory failed", name(), bytes);
  return p;
}

void HostMemoryBackend::deallocate(int /*index*/, void* ptr, std::size_t /*bytes*/) noexcept { std::free(ptr); }

// The guards on zero bytes matter: memcpy and friends are undefined on null pointers even
// for a zero length, and zero-sized tensors have no memory.
void HostMemoryBackend::copy_to_host(int /*index*/, void* dst, const void* src, std::size_t bytes, void* /*stream*/) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

void HostMemoryBackend::copy_from_host(int /*index*/, void* dst, const void* src, std::size_t bytes, void* /*stream*/) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

void HostMemoryBackend::copy_on_device(int /*index*/, void* dst, const void* src, std::size_t bytes, void* /*stream*/) {
  // Source and destination may be views of one allocation.
  if (bytes != 0) std::memmove(dst, src, bytes);
}

void HostMemoryBackend::fill(int /*index*/, void* dst, std::size_t bytes, const void* pattern,
                             std::size_t pattern_bytes, void* /*stream*/) {
  if (pattern_bytes == 0 || bytes % pattern_bytes != 0) {
    fail(ErrorKind::invalid_argument, "{}: fill of {} bytes with a {}-byte pattern: the pattern must divide the size",
         name(), bytes, pattern_bytes);
  }
  if (bytes == 0) return;
  auto* out = static_cast<unsigned char*>(dst);
  const auto* pat = static_cast<const unsigned char*>(pattern);
  bool uniform = true;
  for (std::size_t i = 1; i < pattern_bytes && uniform; ++i) uniform = pat[i] == pat[0];
  if (uniform) {
    std::memset(out, pat[0], bytes);
    return;
  }
  // Doubling copies: log2(bytes / pattern_bytes) memcpy calls instead of one per element.
  std::memcpy(out, pat, pattern_bytes);
  std::size_t done = pattern_bytes;
  while (done < bytes) {
    const std::size_t n = std::min(done, bytes - done);
    std::memcpy(out + done, out, n);
    done += n;
  }
}

void HostMemoryBackend::synchronize(int /*index*/, void* /*stream*/) {}

std::uint64_t HostMemoryBackend::memory_available(int /*index*/) { return host_memory_available(); }

void admit(Backend& backend, int index, std::uint64_t capacity, std::uint64_t bytes, std::string_view device,
           std::string_view what) {
  if (bytes < kAdmissionThreshold) return;
  const std::uint64_t available = backend.memory_available(index);
  std::uint64_t limit = capacity;
  if (available != 0) limit = capacity != 0 ? std::min(capacity, available) : available;
  if (limit != 0 && bytes > limit) {
    fail(ErrorKind::device, "{} needs {} bytes ({:.1f} GiB) on {}, which has {} bytes ({:.1f} GiB) available", what,
         bytes, static_cast<double>(bytes) / (1ULL << 30), device, limit, static_cast<double>(limit) / (1ULL << 30));
  }
}

std::uint64_t host_memory_available() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  std::uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

}  // namespace opreg
