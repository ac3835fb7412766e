// DLPack import and export (include/opreg/dlpack.h).
#include "opreg/dlpack.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "opreg/registry.h"
#include "registry/fail.h"

namespace opreg {
namespace {

struct DTypeCode {
  DType dtype;
  DLDataType dl;
};
constexpr DTypeCode kDTypes[] = {
    {DType::f32, {kDLFloat, 32, 1}}, {DType::f16, {kDLFloat, 16, 1}}, {DType::bf16, {kDLBfloat, 16, 1}},
    {DType::f64, {kDLFloat, 64, 1}}, {DType::i32, {kDLInt, 32, 1}},   {DType::i64, {kDLInt, 64, 1}},
};

std::string describe(DLDataType t) {
  return fmt::format("{{code {}, bits {}, lanes {}}}", static_cast<int>(t.code), static_cast<int>(t.bits),
                     static_cast<int>(t.lanes));
}

// The checks both import paths share; returns the (read-only or writable) view, without owner.
Tensor view_of(const DLTensor& t, Device device, Registry& registry, bool read_only) {
  const DType dtype = from_dlpack_dtype(t.dtype);
  if (t.ndim < 0 || t.ndim > kMaxDims) {
    fail(ErrorKind::invalid_argument, "from_dlpack: ndim {} is not accepted; accepted: 0 to {}", t.ndim, kMaxDims);
  }
  const auto ndim = static_cast<std::size_t>(t.ndim);
  if (ndim > 0 && t.shape == nullptr) fail(ErrorKind::invalid_argument, "from_dlpack: shape is null for ndim {}", ndim);
  const Shape shape(std::span<const std::int64_t>(t.shape, ndim));
  std::span<const std::int64_t> strides;
  if (t.strides != nullptr) strides = std::span<const std::int64_t>(t.strides, ndim);
  registry.check_device(device);
  // As an address: a byte_offset past the top of the address space is refused, not wrapped.
  void* data = nullptr;
  if (t.data != nullptr) {
    const auto base = reinterpret_cast<std::uintptr_t>(t.data);
    if (t.byte_offset > std::numeric_limits<std::uintptr_t>::max() - base) {
      fail(ErrorKind::invalid_argument, "from_dlpack: byte_offset {} from data at {} is past the end of the address "
           "space", t.byte_offset, t.data);
    }
    data = reinterpret_cast<void*>(base + t.byte_offset);
  }
  if (read_only) return Tensor::wrap(static_cast<const void*>(data), shape, dtype, device, strides);
  return Tensor::wrap(data, shape, dtype, device, strides);
}

// Everything an exported tensor needs, in one allocation that the deleter frees.
template <class Managed>
struct Export {
  Managed managed{};
  Tensor tensor;  // keeps the memory alive
  std::array<std::int64_t, kMaxDims> shape{};
  std::array<std::int64_t, kMaxDims> strides{};
};

template <class Managed>
Managed* export_tensor(const Tensor& tensor, const Registry& registry) {
  if (!tensor.defined()) fail(ErrorKind::invalid_argument, "to_dlpack: the tensor is undefined");
  auto e = std::make_unique<Export<Managed>>();
  e->tensor = tensor;
  for (int d = 0; d < tensor.ndim(); ++d) {
    e->shape[static_cast<std::size_t>(d)] = tensor.size(d);
    e->strides[static_cast<std::size_t>(d)] = tensor.stride(d);
  }
  DLTensor& t = e->managed.dl_tensor;
  t.data = tensor.data();
  t.device = to_dlpack_device(tensor.device(), registry);
  t.ndim = tensor.ndim();
  t.dtype = to_dlpack_dtype(tensor.dtype());
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  e->managed.manager_ctx = e.get();
  e->managed.deleter = [](Managed* self) { delete static_cast<Export<Managed>*>(self->manager_ctx); };
  return &e.release()->managed;
}

// The owner a view keeps alive: calls the producer's deleter once, when the last tensor goes.
template <class Managed>
std::shared_ptr<void> owner_of(Managed* managed) {
  return std::shared_ptr<void>(managed, [](void* p) {
    auto* m = static_cast<Managed*>(p);
    if (m->deleter != nullptr) m->deleter(m);
  });
}

}  // namespace

DLDataType to_dlpack_dtype(DType dtype) {
  for (const auto& c : kDTypes) {
    if (c.dtype == dtype) return c.dl;
  }
  fail(ErrorKind::invalid_argument, "to_dlpack: dtype {} has no DLPack code", static_cast<int>(dtype));
}

DType from_dlpack_dtype(DLDataType dtype) {
  for (const auto& c : kDTypes) {
    if (c.dl.code == dtype.code && c.dl.bits == dtype.bits && c.dl.lanes == dtype.lanes) return c.dtype;
  }
  fail(ErrorKind::invalid_argument, "from_dlpack: DLPack dtype {} has no opreg dtype; accepted: float 16/32/64, "
       "bfloat 16, int 32/64, one lane", describe(dtype));
}

Device from_dlpack_device(DLDevice device, const Registry& registry) {
  // The raw value: a producer may send a device type this header's enum does not have, and
  // reading that through the enum type is undefined.
  std::int32_t wanted = 0;
  static_assert(sizeof wanted == sizeof device.device_type);
  std::memcpy(&wanted, &device.device_type, sizeof wanted);
  std::vector<std::string> matches;
  std::vector<std::string> known;
  Device found;
  for (const auto& b : registry.backends()) {
    const int type = registry.backend(b.id).dlpack_device_type();
    known.push_back(fmt::format("{} ({})", b.name, type));
    if (type != wanted) continue;
    matches.push_back(b.name);
    found = Device{b.id, static_cast<std::int16_t>(device.device_id)};
  }
  if (matches.size() != 1) {
    fail(ErrorKind::unsupported, "from_dlpack: DLPack device type {} {}; backends and their DLPack types: {}{}",
         wanted,
         matches.empty() ? std::string("has no backend in this process")
                         : fmt::format("is ambiguous (backends {})", fmt::join(matches, ", ")),
         fmt::join(known, ", "), matches.empty() ? "" : "; pass the device explicitly");
  }
  if (device.device_id < 0 || device.device_id > INT16_MAX) {
    fail(ErrorKind::invalid_argument, "from_dlpack: device_id {} is out of range", device.device_id);
  }
  return found;
}

DLDevice to_dlpack_device(Device device, const Registry& registry) {
  DLDevice out{};
  out.device_type = static_cast<DLDeviceType>(registry.backend(device.backend).dlpack_device_type());
  out.device_id = device.index;
  return out;
}

Tensor from_dlpack(DLManagedTensor* managed, Device device, Registry& registry) {
  if (managed == nullptr) fail(ErrorKind::invalid_argument, "from_dlpack: the DLManagedTensor is null");
  Tensor t = view_of(managed->dl_tensor, device, registry, false);
  return std::move(t.keep_alive(owner_of(managed)));
}

Tensor from_dlpack(DLManagedTensor* managed, Registry& registry) {
  if (managed == nullptr) fail(ErrorKind::invalid_argument, "from_dlpack: the DLManagedTensor is null");
  return from_dlpack(managed, from_dlpack_device(managed->dl_tensor.device, registry), registry);
}

Tensor from_dlpack(DLManagedTensor* managed) { return from_dlpack(managed, default_registry()); }

DLManagedTensor* to_dlpack(const Tensor& tensor, const Registry& registry) {
  return export_tensor<DLManagedTensor>(tensor, registry);
}

DLManagedTensor* to_dlpack(const Tensor& tensor) { return to_dlpack(tensor, default_registry()); }

#ifdef DLPACK_MAJOR_VERSION
Tensor from_dlpack(DLManagedTensorVersioned* managed, Registry& registry) {
  if (managed == nullptr) fail(ErrorKind::invalid_argument, "from_dlpack: the DLManagedTensorVersioned is null");
  if (managed->version.major != DLPACK_MAJOR_VERSION) {
    fail(ErrorKind::unsupported, "from_dlpack: DLPack version {}.{}; accepted: major version {}",
         managed->version.major, managed->version.minor, DLPACK_MAJOR_VERSION);
  }
  const bool read_only = (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  const Device device = from_dlpack_device(managed->dl_tensor.device, registry);
  Tensor t = view_of(managed->dl_tensor, device, registry, read_only);
  return std::move(t.keep_alive(owner_of(managed)));
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor, const Registry& registry) {
  DLManagedTensorVersioned* m = export_tensor<DLManagedTensorVersioned>(tensor, registry);
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION;
  m->flags = tensor.read_only() ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return m;
}
#endif

DLTensor dlpack_view(const Tensor& tensor, const Registry& registry) {
  if (!tensor.defined()) fail(ErrorKind::invalid_argument, "dlpack_view: the tensor is undefined");
  DLTensor t{};
  t.data = tensor.data();
  t.device = to_dlpack_device(tensor.device(), registry);
  t.ndim = tensor.ndim();
  t.dtype = to_dlpack_dtype(tensor.dtype());
  // DLTensor's fields are not const; nothing writes through them.
  t.shape = const_cast<std::int64_t*>(tensor.shape().dims().data());
  t.strides = const_cast<std::int64_t*>(tensor.strides().data());
  t.byte_offset = 0;
  return t;
}

}  // namespace opreg
