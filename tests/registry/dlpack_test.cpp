// DLPack exchange: import and export share memory (same data pointer), keep it alive exactly as
// long as needed, run each deleter exactly once, and refuse what opreg cannot map.
#include "opreg/dlpack.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "opreg/ops.h"
#include "opreg/registry.h"
#include "support/throws_error.h"

namespace opreg {
namespace {

using testing::ThrowsError;

// A producer's tensor: host floats with a deleter that counts its calls.
struct Producer {
  std::vector<float> data;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  int deleted = 0;
  DLManagedTensor managed{};

  Producer(std::vector<std::int64_t> dims, std::vector<std::int64_t> st = {}) : shape(std::move(dims)), strides(std::move(st)) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    data.resize(static_cast<std::size_t>(n) + 8);
    std::iota(data.begin(), data.end(), 1.0f);
    DLTensor& t = managed.dl_tensor;
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<std::int32_t>(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<Producer*>(self->manager_ctx)->deleted; };
  }
};

TEST(DLPack, ImportSharesMemoryAndDeletesOnceWhenTheLastTensorGoes) {
  Producer p({3, 5});
  {
    Tensor a = from_dlpack(&p.managed);
    EXPECT_EQ(a.data(), p.data.data());
    EXPECT_EQ(a.shape(), (Shape{3, 5}));
    EXPECT_EQ(a.dtype(), DType::f32);
    EXPECT_TRUE(a.is_contiguous());
    EXPECT_EQ(a.device(), Device{});
    Tensor b = a;  // a copy shares the producer's memory
    a = Tensor();
    EXPECT_EQ(p.deleted, 0);
    EXPECT_EQ(b.data_as<float>()[7], 8.0f);
  }
  EXPECT_EQ(p.deleted, 1);
}

TEST(DLPack, ImportHonoursStridesAndByteOffset) {
  Producer p({2, 3}, {1, 2});  // a transposed 3x2 buffer
  p.managed.dl_tensor.byte_offset = 4 * sizeof(float);
  Tensor t = from_dlpack(&p.managed);
  EXPECT_EQ(t.data(), p.data.data() + 4);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.stride(0), 1);
  EXPECT_EQ(t.stride(1), 2);
  t = Tensor();
  EXPECT_EQ(p.deleted, 1);
}

TEST(DLPack, RefusesWhatItCannotMapAndLeavesTheTensorToTheCaller) {
  Producer p({4});
  p.managed.dl_tensor.dtype = {kDLFloat, 8, 1};
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(&p.managed); }, ErrorKind::invalid_argument,
                          {"DLPack dtype {code 2, bits 8, lanes 1}", "accepted"}));
  p.managed.dl_tensor.dtype = {kDLFloat, 32, 4};
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(&p.managed); }, ErrorKind::invalid_argument, {"lanes 4"}));
  p.managed.dl_tensor.dtype = {kDLFloat, 32, 1};
  p.managed.dl_tensor.device = {kDLVulkan, 0};
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(&p.managed); }, ErrorKind::unsupported,
                          {"DLPack device type 7", "has no backend"}));
  p.managed.dl_tensor.device = {kDLCPU, 3};
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(&p.managed); }, ErrorKind::device, {"cpu:3"}));
  p.managed.dl_tensor.device = {kDLCPU, 0};
  p.managed.dl_tensor.byte_offset = 1;  // misaligned for f32
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(&p.managed); }, ErrorKind::invalid_argument, {"not aligned"}));
  p.managed.dl_tensor.byte_offset = UINT64_MAX - 3;  // past the address space's end (was pointer overflow)
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(&p.managed); }, ErrorKind::invalid_argument,
                          {"byte_offset 18446744073709551612", "past the end of the address space"}));
  p.managed.dl_tensor.byte_offset = 0;
  std::int64_t reversed[] = {-(std::int64_t{1} << 60)};  // elements below address 0
  p.managed.dl_tensor.shape = p.shape.data();
  p.managed.dl_tensor.ndim = 1;
  p.managed.dl_tensor.shape[0] = 2;
  p.managed.dl_tensor.strides = reversed;
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(&p.managed); }, ErrorKind::invalid_argument,
                          {"reaches outside the address space"}));
  EXPECT_TRUE(ThrowsError([&] { from_dlpack(static_cast<DLManagedTensor*>(nullptr)); },
                          ErrorKind::invalid_argument, {"null"}));
  EXPECT_EQ(p.deleted, 0);
}

TEST(DLPack, ExportKeepsTheMemoryAliveUntilTheConsumerDeletes) {
  Tensor t = Tensor::empty({4, 6}, DType::bf16);
  t.fill(1.5);
  void* const data = t.data();
  DLManagedTensor* m = to_dlpack(t);
  t = Tensor();  // the consumer's reference keeps the allocation
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->dl_tensor.data, data);
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.shape[0], 4);
  EXPECT_EQ(m->dl_tensor.shape[1], 6);
  EXPECT_EQ(m->dl_tensor.strides[0], 6);
  EXPECT_EQ(m->dl_tensor.strides[1], 1);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLBfloat);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 16);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(load_as_double(m->dl_tensor.data, DType::bf16, 23), 1.5);
  m->deleter(m);
}

// Export, then import what was exported: one allocation all the way, freed once at the end.
TEST(DLPack, RoundTripOnEveryAvailableDeviceKeepsThePointer) {
  Registry& reg = default_registry();
  for (const auto& b : reg.backends()) {
    if (!b.availability.available) continue;
    for (int i = 0; i < static_cast<int>(b.devices.size()); ++i) {
      const Device device{b.id, static_cast<std::int16_t>(i)};
      SCOPED_TRACE(reg.device_name(device));
      Tensor t = Tensor::empty({3, 7}, DType::f16, device, reg);
      const std::int64_t before = reg.backend(b.id).live_tensors();
      DLManagedTensor* m = to_dlpack(t, reg);
      EXPECT_EQ(static_cast<int>(m->dl_tensor.device.device_type), reg.backend(b.id).dlpack_device_type());
      EXPECT_EQ(m->dl_tensor.device.device_id, i);
      Tensor back = from_dlpack(m, device, reg);
      EXPECT_EQ(back.data(), t.data());
      EXPECT_EQ(back.device(), device);
      EXPECT_EQ(back.shape(), t.shape());
      t = Tensor();
      back = Tensor();  // the last reference: the consumer-side deleter frees the export
      EXPECT_EQ(reg.backend(b.id).live_tensors(), before - 1);
    }
  }
}

TEST(DLPack, ViewDescribesWithoutOwning) {
  std::vector<std::int32_t> buffer(12, 7);
  const Tensor t = Tensor::wrap(buffer.data(), {3, 4});
  const DLTensor v = dlpack_view(t, default_registry());
  EXPECT_EQ(v.data, buffer.data());
  EXPECT_EQ(v.dtype.code, kDLInt);
  EXPECT_EQ(v.dtype.bits, 32);
  EXPECT_EQ(v.shape[1], 4);
  EXPECT_EQ(v.strides[0], 4);
  EXPECT_EQ(from_dlpack_dtype(to_dlpack_dtype(DType::bf16)), DType::bf16);
}

// A framework's tensor goes through an op without a copy: y is written into the consumer's
// buffer.
TEST(DLPack, ImportedTensorsRunThroughAnOp) {
  Producer x({2, 8});
  Producer y({2, 8});
  Tensor xt = from_dlpack(&x.managed);
  Tensor yt = from_dlpack(&y.managed);
  Tensor rstd = Tensor::empty({2}, DType::f32);
  rms_norm_fwd({.x = xt, .y = yt, .rstd = rstd});
  EXPECT_NE(y.data[0], 1.0f);  // overwritten in place
}

}  // namespace
}  // namespace opreg
