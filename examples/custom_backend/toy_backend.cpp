// The toy accelerator (see toy_backend.h). Everything here is what a vendor writes for a real
// device, with host memory standing in for device memory: the backend class (name, inference
// priority, fallback policy, probe, device properties, memory services), the kernels, and the
// registration function that puts them into a registry.
#include "toy_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "opreg/ops.h"

namespace toy {
namespace {

using opreg::DType;
using opreg::Tensor;

constexpr std::uint64_t kMemoryBytes = 1ULL << 30;  // what the toy device pretends to have
constexpr std::int64_t kMaxHidden = 1 << 20;         // the toy kernels' row limit

class ToyBackend final : public opreg::Backend {
 public:
  ~ToyBackend() override { release_workspaces(); }  // with our own deallocate, while it exists

  std::string name() const override { return "toy"; }
  // Below every built-in accelerator, above cpu; it is emulated, so inference only picks it when
  // it is named (OPREG_DEVICE=toy).
  int inference_priority() const override { return 50; }
  opreg::FallbackPolicy default_fallback() const override { return opreg::FallbackPolicy::warn; }
  opreg::Availability probe() override { return {true, 1, "the toy accelerator of examples/custom_backend"}; }
  opreg::DeviceProps properties(int) const override {
    opreg::DeviceProps props;
    props.name = "Toy accelerator (host memory)";
    props.memory_bytes = kMemoryBytes;
    props.compute_units = 2;
    props.emulated = true;     // not hardware: every output says so
    props.host_memory = true;  // its blocks are host memory: admission counts them with the host's
    props.extra = {{"lanes", "4"}, {"max_hidden", std::to_string(kMaxHidden)}};
    return props;
  }

  // Memory services: 64-byte aligned host blocks, counted against the device's memory.
  void* allocate(int, std::size_t bytes) override {
    const std::uint64_t before = in_use_.fetch_add(bytes);
    if (before + bytes > kMemoryBytes) {
      in_use_.fetch_sub(bytes);
      throw opreg::Error(opreg::ErrorKind::device, "toy: out of memory: " + std::to_string(bytes) + " bytes asked, " +
                                                       std::to_string(before) + " of " +
                                                       std::to_string(kMemoryBytes) + " in use");
    }
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (p == nullptr) {
      in_use_.fetch_sub(bytes);
      throw opreg::Error(opreg::ErrorKind::device, "toy: host allocation of " + std::to_string(bytes) + " failed");
    }
    return p;
  }
  void deallocate(int, void* ptr, std::size_t bytes) noexcept override {
    std::free(ptr);
    in_use_.fetch_sub(bytes);
  }
  void copy_to_host(int, void* dst, const void* src, std::size_t bytes, void*) override { std::memmove(dst, src, bytes); }
  void copy_from_host(int, void* dst, const void* src, std::size_t bytes, void*) override {
    std::memmove(dst, src, bytes);
  }
  void copy_on_device(int, void* dst, const void* src, std::size_t bytes, void*) override {
    std::memmove(dst, src, bytes);
  }
  void fill(int, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes, void*) override {
    for (std::size_t at = 0; at < bytes; at += pattern_bytes) std::memcpy(static_cast<char*>(dst) + at, pattern, pattern_bytes);
  }
  void synchronize(int, void*) override {}  // kernels run to completion on the calling thread
  // What opreg's admission check compares a large request with before allocating it.
  std::uint64_t memory_available(int) override { return kMemoryBytes - std::min(kMemoryBytes, in_use_.load()); }

 private:
  std::atomic<std::uint64_t> in_use_{0};
};

// ---- Kernels. They accumulate in double and read and write every dtype through opreg's exact
// conversions: slow, simple and correct, which is what a toy is for.

double round_to(DType dtype, double v) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(v);
    case DType::f16: return opreg::to_double(opreg::to_half(v));
    case DType::bf16: return opreg::to_double(opreg::to_bfloat16(v));
    default: return v;
  }
}

double at(const Tensor& t, std::int64_t i) { return opreg::load_as_double(t.data(), t.dtype(), static_cast<std::size_t>(i)); }
void put(const Tensor& t, std::int64_t i, double v) {
  opreg::store_from_double(t.data(), t.dtype(), static_cast<std::size_t>(i), v);
}

// (offset + w) as the casting mode sees it (none rounds it to the weight's dtype); 1 without a
// weight. Kept in scratch (acquire_scratch: the backend's workspace cache, or the caller's allocator).
double* scales(const Tensor& weight, std::int64_t hidden, double offset, opreg::Casting casting,
               opreg::Workspace::Lease& lease, const opreg::KernelContext& ctx) {
  lease = opreg::acquire_scratch(ctx, static_cast<std::size_t>(hidden) * sizeof(double));
  auto* s = static_cast<double*>(lease.data());
  for (std::int64_t i = 0; i < hidden; ++i) {
    if (!weight.defined()) {
      s[i] = 1.0;
    } else {
      s[i] = casting == opreg::Casting::none ? round_to(weight.dtype(), offset + at(weight, i)) : offset + at(weight, i);
    }
  }
  return s;
}

// x * rstd as the casting mode sees it: llama and none round it to x's dtype, gemma does not.
double xhat(double x, double rstd, opreg::Casting casting, DType dtype) {
  return casting == opreg::Casting::gemma ? x * rstd : round_to(dtype, x * rstd);
}

void rms_norm_fwd(const opreg::RmsNormFwdArgs& a, const opreg::KernelContext& ctx) {
  const auto [rows, hidden] = opreg::rows_hidden(a.x.shape());
  opreg::Workspace::Lease lease;
  const double* scale = scales(a.weight, hidden, a.offset, a.casting, lease, ctx);
  for (std::int64_t r = 0; r < rows; ++r) {
    double squares = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) squares += at(a.x, r * hidden + i) * at(a.x, r * hidden + i);
    const double rstd = 1.0 / std::sqrt((hidden > 0 ? squares / static_cast<double>(hidden) : 0.0) + a.eps);
    for (std::int64_t i = 0; i < hidden; ++i) {
      put(a.y, r * hidden + i, xhat(at(a.x, r * hidden + i), rstd, a.casting, a.x.dtype()) * scale[i]);
    }
    put(a.rstd, r, rstd);
  }
}

void rms_norm_bwd(const opreg::RmsNormBwdArgs& a, const opreg::KernelContext& ctx) {
  const auto [rows, hidden] = opreg::rows_hidden(a.x.shape());
  opreg::Workspace::Lease scale_lease;
  const double* scale = scales(a.weight, hidden, a.offset, a.casting, scale_lease, ctx);
  opreg::Workspace::Lease dw_lease = opreg::acquire_scratch(ctx, static_cast<std::size_t>(hidden) * sizeof(double));
  auto* dw = static_cast<double*>(dw_lease.data());
  std::fill(dw, dw + hidden, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t row = r * hidden;
    const double rstd = at(a.rstd, r);
    double dot = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) dot += at(a.dy, row + i) * scale[i] * at(a.x, row + i);
    const double coeff = hidden > 0 ? rstd * rstd * rstd * dot / static_cast<double>(hidden) : 0.0;
    // Each element's dy and x are read before its dx is written: dx may be dy itself.
    for (std::int64_t i = 0; i < hidden; ++i) {
      const double dy = at(a.dy, row + i);
      const double x = at(a.x, row + i);
      dw[i] += dy * xhat(x, rstd, a.casting, a.x.dtype());
      put(a.dx, row + i, rstd * dy * scale[i] - coeff * x);
    }
  }
  if (a.dweight.defined()) {
    for (std::int64_t i = 0; i < hidden; ++i) put(a.dweight, i, dw[i]);
  }
}

// The toy's one limit, said through supports(): the registry then falls back (the toy's policy is
// warn) or, for call_variant, reports the reason.
template <class Args>
opreg::Verdict row_fits(const Args& a, const opreg::DeviceProps&) {
  const std::int64_t hidden = opreg::rows_hidden(a.x.shape()).hidden;
  if (hidden <= kMaxHidden) return opreg::Verdict::accept();
  return opreg::Verdict::reject("a row of " + std::to_string(hidden) + " elements is longer than the toy's " +
                                std::to_string(kMaxHidden));
}

}  // namespace

std::vector<opreg::Registration> register_toy(opreg::Registry& registry) {
  std::vector<opreg::Registration> handles;
  handles.push_back(registry.add_backend(std::make_shared<ToyBackend>()));
  handles.push_back(registry.add_variant(opreg::rms_norm_fwd_op(),
                                         opreg::VariantSpec<opreg::RmsNormFwdArgs>{
                                             .backend = "toy",
                                             .impl = "simple",
                                             .priority = 10,
                                             .supports = &row_fits<opreg::RmsNormFwdArgs>,
                                             .run = &rms_norm_fwd,
                                             .tunables = {{"accumulate", "f64"}}}));
  handles.push_back(registry.add_variant(opreg::rms_norm_bwd_op(),
                                         opreg::VariantSpec<opreg::RmsNormBwdArgs>{
                                             .backend = "toy",
                                             .impl = "simple",
                                             .priority = 10,
                                             .supports = &row_fits<opreg::RmsNormBwdArgs>,
                                             .run = &rms_norm_bwd,
                                             .tunables = {{"accumulate", "f64"}}}));
  return handles;
}

}  // namespace toy
