#include "opreg/tensor.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <vector>

#include "opreg/error.h"
#include "opreg/registry.h"
#include "registry/admission.h"
#include "registry/fail.h"

namespace opreg {

// ---------------------------------------------------------------------------------------------
// Shape

Shape::Shape(std::initializer_list<std::int64_t> dims)
    : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const std::int64_t> dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxDims)) {
    fail(ErrorKind::invalid_argument, "shape has {} dims; at most {} are supported", dims.size(), kMaxDims);
  }
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) fail(ErrorKind::invalid_argument, "shape dim {} is {}: extents must be >= 0", i, dims[i]);
    dims_[i] = dims[i];
  }
  ndim_ = static_cast<int>(dims.size());
  numel();  // every product of extents must be representable, zero extents included
}

std::int64_t Shape::numel() const {
  // The extents other than 0 must multiply without overflow even when a 0 makes the element
  // count 0: rows x hidden, statistics shapes and strides are products of them too
  // (4294967296x4294967296x0 has 0 elements and 2^64 rows).
  std::int64_t n = 1;
  bool empty = false;
  for (int i = 0; i < ndim_; ++i) {
    empty |= (*this)[i] == 0;
    if (__builtin_mul_overflow(n, std::max<std::int64_t>((*this)[i], 1), &n)) {
      fail(ErrorKind::invalid_argument, "shape [{}]: the product of its extents (zero extents aside) exceeds {}",
           str(), std::numeric_limits<std::int64_t>::max());
    }
  }
  return empty ? 0 : n;
}

std::string Shape::str() const {
  std::string s;
  for (int i = 0; i < ndim_; ++i) {
    if (i > 0) s += 'x';
    s += std::to_string((*this)[i]);
  }
  return s;
}

Shape Shape::parse(std::string_view text) {
  auto bad = [&](std::string_view why) {
    fail(ErrorKind::invalid_argument,
         "invalid shape '{}': {}; expected extents >= 0 separated by 'x', e.g. 4096x4096 or 4096 (at most {} dims)",
         text, why, kMaxDims);
  };
  if (text.empty()) bad("empty");
  std::array<std::int64_t, kMaxDims> dims{};
  std::size_t n = 0;
  std::string_view rest = text;
  for (;;) {
    const auto at = rest.find('x');
    const std::string_view part = rest.substr(0, at);
    if (n == static_cast<std::size_t>(kMaxDims)) bad(fmt::format("more than {} dims", kMaxDims));
    if (part.empty()) bad("an empty extent");
    if (part.front() == '-') bad(fmt::format("negative extent '{}'", part));
    if (part.find_first_not_of("0123456789") != std::string_view::npos) bad(fmt::format("'{}' is not a number", part));
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc{} || end != part.data() + part.size())
      bad(fmt::format("extent '{}' does not fit in int64", part));
    dims[n++] = value;
    if (at == std::string_view::npos) break;
    rest.remove_prefix(at + 1);
  }
  return Shape(std::span<const std::int64_t>(dims.data(), n));
}



// ---------------------------------------------------------------------------------------------
// Tensor

namespace {

std::string describe(const Tensor& t) { return fmt::format("{} [{}]", to_string(t.dtype()), t.shape().str()); }

void require_defined(const Tensor& t, std::string_view what) {
  if (!t.defined()) fail(ErrorKind::invalid_argument, "{}: the tensor is undefined", what);
}

void require_writable(const Tensor& t, std::string_view what) {
  if (t.read_only()) {
    fail(ErrorKind::invalid_argument, "{}: the {} tensor is a read-only view (Tensor::wrap of const memory)", what,
         describe(t));
  }
}

// Copies the elements of a strided host tensor into contiguous host memory, in row-major
// order. Offsets are signed so negative strides work.
void gather_host(const Tensor& src, void* dst) {
  const std::int64_t esize = static_cast<std::int64_t>(element_size(src.dtype()));
  const int nd = src.ndim();
  const auto* base = static_cast<const unsigned char*>(src.data());
  auto* out = static_cast<unsigned char*>(dst);
  std::array<std::int64_t, kMaxDims> idx{};
  std::int64_t offset = 0;  // in elements, = sum idx[d] * stride[d]
  for (std::int64_t n = src.numel(); n > 0; --n) {
    std::memcpy(out, base + offset * esize, static_cast<std::size_t>(esize));
    out += esize;
    // Odometer step: bump the last dim, carrying into earlier ones.
    for (int d = nd - 1; d >= 0; --d) {
      const auto ud = static_cast<std::size_t>(d);
      ++idx[ud];
      offset += src.stride(d);
      if (idx[ud] < src.size(d)) break;
      offset -= idx[ud] * src.stride(d);
      idx[ud] = 0;
    }
  }
}

// dst: contiguous, defined, same shape and dtype as src; both devices checked.
void copy_tensor(const Tensor& dst, const Tensor& src, Registry& registry) {
  if (src.numel() == 0) return;
  const std::size_t bytes = dst.nbytes();
  const Device from = src.device();
  const Device to = dst.device();
  Backend& source = registry.backend(from.backend);
  Backend& target = registry.backend(to.backend);

  if (!src.is_contiguous()) {
    // Only host memory can be walked element by element from here; a strided device tensor
    // would need a kernel of its backend.
    if (from.backend != kCpuBackendId) {
      fail(ErrorKind::unsupported, "copying a non-contiguous {} tensor on {}: only cpu tensors may be non-contiguous",
           describe(src), registry.device_name(from));
    }
    if (to.backend == kCpuBackendId) {
      gather_host(src, dst.data());
      return;
    }
    std::vector<unsigned char> staging(bytes);
    gather_host(src, staging.data());
    target.copy_from_host(to.index, dst.data(), staging.data(), bytes, nullptr);
    return;
  }
  if (from == to) {
    source.copy_on_device(from.index, dst.data(), src.data(), bytes, nullptr);
  } else if (from.backend == kCpuBackendId) {
    target.copy_from_host(to.index, dst.data(), src.data(), bytes, nullptr);
  } else if (to.backend == kCpuBackendId) {
    source.copy_to_host(from.index, dst.data(), src.data(), bytes, nullptr);
  } else {
    // Two devices (of one backend or two) share no copy path but the host.
    std::vector<unsigned char> staging(bytes);
    source.copy_to_host(from.index, staging.data(), src.data(), bytes, nullptr);
    target.copy_from_host(to.index, dst.data(), staging.data(), bytes, nullptr);
  }
}

}  // namespace

void Tensor::set_geometry(const Shape& shape, std::span<const std::int64_t> strides) {
  const std::int64_t numel = shape.numel();
  std::int64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<std::int64_t>(element_size(dtype_)), &nbytes)) {
    fail(ErrorKind::invalid_argument, "a {} tensor of shape [{}] needs more than {} bytes", to_string(dtype_),
         shape.str(), std::numeric_limits<std::int64_t>::max());
  }
  std::array<std::int64_t, kMaxDims> st{};
  if (strides.empty()) {
    std::int64_t step = 1;
    for (int d = shape.ndim() - 1; d >= 0; --d) {
      st[static_cast<std::size_t>(d)] = step;
      // Only a zero-sized shape can get here with a product that overflows (numel() passed).
      if (__builtin_mul_overflow(step, std::max<std::int64_t>(shape[d], 1), &step) && d > 0) {
        fail(ErrorKind::invalid_argument, "shape [{}]: its contiguous strides overflow int64", shape.str());
      }
    }
  } else {
    if (strides.size() != static_cast<std::size_t>(shape.ndim())) {
      fail(ErrorKind::invalid_argument, "{} strides given for shape [{}] of {} dims", strides.size(), shape.str(),
           shape.ndim());
    }
    // Every element offset must be representable: offsets span sum((extent - 1) * stride) over
    // the positive strides upward and over the negative ones (reversed views) downward.
    std::int64_t high = 0;
    std::int64_t low = 0;
    for (std::size_t d = 0; d < strides.size(); ++d) {
      st[d] = strides[d];
      std::int64_t span = 0;
      const std::int64_t steps = shape[static_cast<int>(d)] > 0 ? shape[static_cast<int>(d)] - 1 : 0;
      std::int64_t& side = strides[d] < 0 ? low : high;
      if (__builtin_mul_overflow(steps, strides[d], &span) || __builtin_add_overflow(side, span, &side)) {
        fail(ErrorKind::invalid_argument, "shape [{}] with these strides reaches past the int64 range", shape.str());
      }
    }
    // In bytes too, one past the highest element included (the overlap rule works in bytes).
    const auto es = static_cast<std::int64_t>(element_size(dtype_));
    std::int64_t bytes = 0;
    if (__builtin_add_overflow(high, 1, &bytes) || __builtin_mul_overflow(bytes, es, &bytes) ||
        __builtin_mul_overflow(low, es, &bytes)) {
      fail(ErrorKind::invalid_argument, "shape [{}] with these strides reaches past the int64 range of {} bytes",
           shape.str(), to_string(dtype_));
    }
  }
  shape_ = shape;
  strides_ = st;
  numel_ = numel;
  nbytes_ = static_cast<std::size_t>(nbytes);
  contiguous_ = true;
  std::int64_t expected = 1;
  for (int d = shape.ndim() - 1; d >= 0 && numel != 0; --d) {
    // An extent of 1 is never stepped over, so its stride says nothing about the layout.
    if (shape[d] != 1 && st[static_cast<std::size_t>(d)] != expected) contiguous_ = false;
    expected *= shape[d];
  }
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, Registry& registry) {
  registry.check_device(device);
  Tensor t;
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  t.device_ = device;
  t.set_geometry(shape, {});
  if (t.nbytes_ == 0) return t;
  // The deleter owns a reference to the backend, so memory handed out by a backend can be
  // given back to it even after the backend has been unregistered.
  std::shared_ptr<Backend> backend = registry.backend(device.backend).shared_from_this();
  const int index = device.index;
  const std::size_t bytes = t.nbytes_;
  if (bytes >= kAdmissionThreshold) {
    admit(*backend, index, registry.device_props(device).memory_bytes, bytes, registry.device_name(device),
          fmt::format("a {} tensor of [{}]", to_string(dtype), shape.str()));
  }
  void* p = backend->allocate(index, bytes);
  backend->count_tensor(1);
  // If the control block cannot be allocated, shared_ptr calls the deleter itself.
  t.storage_ = std::shared_ptr<void>(p, [backend, index, bytes](void* q) {
    backend->deallocate(index, q, bytes);
    backend->count_tensor(-1);
  });
  t.data_ = p;
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, device, default_registry());
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device, std::span<const std::int64_t> strides) {
  Tensor t;
  t.dtype_ = dtype;
  t.dtype_set_ = true;
  t.device_ = device;
  t.set_geometry(shape, strides);
  if (data == nullptr && t.numel_ != 0) {
    fail(ErrorKind::invalid_argument, "wrap: null data for a {} tensor", describe(t));
  }
  const std::size_t align = element_size(dtype);
  if (reinterpret_cast<std::uintptr_t>(data) % align != 0) {
    fail(ErrorKind::invalid_argument, "wrap: data at {} is not aligned for {} (a multiple of {} bytes is needed: "
         "kernels load whole elements); copy it into an aligned buffer", data, describe(t), align);
  }
  // The elements must lie inside the address space: a view reaching below address 0 or past the
  // top describes no memory, and the overlap rule's pointer arithmetic over it would overflow.
  // set_geometry() has checked that both reaches fit int64 in bytes.
  if (t.numel_ != 0) {
    std::int64_t low = 0;
    std::int64_t high = 0;
    for (int d = 0; d < t.ndim(); ++d) {
      const std::int64_t reach = (t.size(d) - 1) * t.stride(d);
      (reach < 0 ? low : high) += reach;
    }
    const auto es = static_cast<std::int64_t>(align);
    const std::uint64_t below = std::uint64_t{0} - static_cast<std::uint64_t>(low * es);
    const auto above = static_cast<std::uint64_t>((high + 1) * es);
    const auto at = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(data));
    if (at < below || at > std::numeric_limits<std::uintptr_t>::max() - above) {
      fail(ErrorKind::invalid_argument, "wrap: a {} view with strides [{}] at {} reaches outside the address space "
           "({} bytes below it, {} from it upward)", describe(t), fmt::join(t.strides(), ", "), data, below, above);
    }
  }
  t.data_ = data;
  return t;
}

Tensor Tensor::wrap(const void* data, const Shape& shape, DType dtype, Device device,
                    std::span<const std::int64_t> strides) {
  Tensor t = wrap(const_cast<void*>(data), shape, dtype, device, strides);
  t.read_only_ = true;
  return t;
}

void Tensor::check_span_size(std::size_t size, const Shape& shape) {
  if (static_cast<std::uint64_t>(shape.numel()) != size) {
    fail(ErrorKind::invalid_argument, "wrap: a span of {} elements cannot be viewed as [{}] ({} elements)", size,
         shape.str(), shape.numel());
  }
}

Tensor& Tensor::keep_alive(std::shared_ptr<void> owner) {
  require_defined(*this, "keep_alive()");
  if (storage_) {
    // Already owning: keep both alive through one control block.
    owner = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(std::move(storage_),
                                                                                       std::move(owner));
  }
  storage_ = std::move(owner);
  return *this;
}

Tensor Tensor::to(Device device, Registry& registry) const {
  require_defined(*this, "to()");
  if (device == device_ && is_contiguous()) return *this;
  registry.check_device(device_);
  Tensor out = empty(shape_, dtype_, device, registry);
  copy_tensor(out, *this, registry);
  return out;
}

Tensor Tensor::to(Device device) const { return to(device, default_registry()); }

void Tensor::copy_from(const Tensor& src, Registry& registry) {
  require_defined(*this, "copy_from()");
  require_defined(src, "copy_from()");
  require_writable(*this, "copy_from()");
  if (src.dtype_ != dtype_ || !(src.shape_ == shape_)) {
    fail(ErrorKind::invalid_argument, "copy_from(): source is {} but destination is {}", describe(src),
         describe(*this));
  }
  if (!is_contiguous()) {
    fail(ErrorKind::unsupported, "copy_from(): the destination {} on {} is not contiguous", describe(*this),
         registry.device_name(device_));
  }
  registry.check_device(device_);
  registry.check_device(src.device_);
  copy_tensor(*this, src, registry);
}

void Tensor::copy_from(const Tensor& src) { copy_from(src, default_registry()); }

void Tensor::fill(double value, Registry& registry) {
  require_defined(*this, "fill()");
  require_writable(*this, "fill()");
  if (!is_contiguous()) {
    fail(ErrorKind::unsupported, "fill(): the {} tensor on {} is not contiguous", describe(*this),
         registry.device_name(device_));
  }
  registry.check_device(device_);
  if (numel_ == 0) return;
  alignas(8) unsigned char pattern[8] = {};
  store_from_double(pattern, dtype_, 0, value);
  registry.backend(device_.backend).fill(device_.index, data_, nbytes_, pattern, element_size(dtype_), nullptr);
}

void Tensor::fill(double value) { fill(value, default_registry()); }

Tensor Tensor::reshape(const Shape& shape) const {
  require_defined(*this, "reshape()");
  if (!is_contiguous()) fail(ErrorKind::unsupported, "reshape(): the {} tensor is not contiguous", describe(*this));
  if (shape.numel() != numel_) {
    fail(ErrorKind::invalid_argument, "reshape(): cannot view {} ({} elements) as [{}] ({} elements)", describe(*this),
         numel_, shape.str(), shape.numel());
  }
  Tensor t = *this;
  t.set_geometry(shape, {});
  return t;
}

}  // namespace opreg
