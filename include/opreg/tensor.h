// Tensor: dtype, shape, strides, device, and shared ownership of a backend allocation (or a
// non-owning view of caller memory).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "opreg/device.h"
#include "opreg/dtype.h"

namespace opreg {

class Registry;

inline constexpr int kMaxDims = 8;

// A fixed-capacity list of extents (no heap), so tensors are cheap to copy and inspect.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::span<const std::int64_t> dims);

  int ndim() const { return ndim_; }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return dims_[static_cast<std::size_t>(i)]; }
  std::span<const std::int64_t> dims() const { return {dims_.data(), static_cast<std::size_t>(ndim_)}; }
  // Product of the extents; an opreg::Error if it overflows int64.
  std::int64_t numel() const;
  // "4096x4096"; "" for a 0-d shape.
  std::string str() const;
  // Parses "4096x4096" (also "4096"); extents >= 0, at most kMaxDims of them.
  static Shape parse(std::string_view text);

  // Inline: every op's check compares shapes on the dispatch path.
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.ndim_ != b.ndim_) return false;
    for (int i = 0; i < a.ndim_; ++i) {
      if (a.dims_[static_cast<std::size_t>(i)] != b.dims_[static_cast<std::size_t>(i)]) return false;
    }
    return true;
  }

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false (an optional argument left out)

  // Contiguous, uninitialised storage from the device's backend.
  static Tensor empty(const Shape& shape, DType dtype, Device device, Registry& registry);
  static Tensor empty(const Shape& shape, DType dtype, Device device = {});
  // Non-owning view of caller memory on `device` (the host for cpu). Strides in elements;
  // empty strides mean contiguous. `data` must be aligned to the dtype's element size (kernels
  // load whole elements); a misaligned pointer is an opreg::Error.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device = {},
                     std::span<const std::int64_t> strides = {});
  // A read-only view: any op takes it as an input and refuses it as an output, and fill() and
  // copy_from() refuse it too.
  static Tensor wrap(const void* data, const Shape& shape, DType dtype, Device device = {},
                     std::span<const std::int64_t> strides = {});
  // (nullptr: only for a shape with no elements.)
  static Tensor wrap(std::nullptr_t, const Shape& shape, DType dtype, Device device = {},
                     std::span<const std::int64_t> strides = {}) {
    return wrap(static_cast<void*>(nullptr), shape, dtype, device, strides);
  }
  // Typed views: the dtype comes from the element type (see dtype_of), and a pointer to const
  // gives a read-only view.
  template <Element T>
  static Tensor wrap(T* data, const Shape& shape, Device device = {}, std::span<const std::int64_t> strides = {}) {
    return wrap(data, shape, dtype_of<std::remove_const_t<T>>::value, device, strides);
  }
  // A contiguous view of a span, which must hold exactly shape.numel() elements.
  template <Element T>
  static Tensor wrap(std::span<T> data, const Shape& shape, Device device = {}) {
    check_span_size(data.size(), shape);
    return wrap(data.data(), shape, device);
  }

  bool defined() const { return dtype_set_; }
  // A view made by the const forms of wrap(): never written by opreg.
  bool read_only() const { return read_only_; }
  // Keeps `owner` alive as long as this tensor or a copy of it lives: for a view of memory that
  // another object owns (DLPack import does this with the producer's DLManagedTensor).
  Tensor& keep_alive(std::shared_ptr<void> owner);
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  std::int64_t size(int dim) const { return shape_[dim]; }
  std::int64_t stride(int dim) const { return strides_[static_cast<std::size_t>(dim)]; }
  std::span<const std::int64_t> strides() const {
    return {strides_.data(), static_cast<std::size_t>(shape_.ndim())};
  }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return nbytes_; }
  // Row-major without gaps (computed once, when the geometry is set).
  bool is_contiguous() const { return contiguous_; }
  void* data() const { return data_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  // A contiguous copy on `device` (shares storage when already there and contiguous).
  Tensor to(Device device, Registry& registry) const;
  Tensor to(Device device) const;
  // Copies src (same shape and dtype, any device) into this tensor's memory.
  void copy_from(const Tensor& src, Registry& registry);
  void copy_from(const Tensor& src);
  // Sets every element to `value`, converted to the dtype.
  void fill(double value, Registry& registry);
  void fill(double value);

  // Same memory, new shape (contiguous tensors only; element counts must match).
  Tensor reshape(const Shape& shape) const;

 private:
  static void check_span_size(std::size_t size, const Shape& shape);
  void set_geometry(const Shape& shape, std::span<const std::int64_t> strides);
  std::shared_ptr<void> storage_;  // keeps the allocation (and its backend) alive; empty for views
  void* data_ = nullptr;
  Shape shape_;
  std::array<std::int64_t, kMaxDims> strides_{};
  std::int64_t numel_ = 0;
  std::size_t nbytes_ = 0;
  Device device_;
  DType dtype_ = DType::f32;
  bool dtype_set_ = false;
  bool contiguous_ = true;
  bool read_only_ = false;
};

}  // namespace opreg
