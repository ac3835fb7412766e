// The memory services of every available device of the built-in backends (cpu, npu, and cuda
// where a GPU is present): allocation, copies both ways and between devices, fill, workspace.
// Data is random and outputs are poisoned first, so an unwritten byte cannot pass.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "opreg/registry.h"

namespace opreg {
namespace {

std::vector<Device> available_devices() {
  std::vector<Device> out;
  for (const auto& b : default_registry().backends()) {
    for (std::size_t i = 0; i < b.devices.size(); ++i) out.push_back({b.id, static_cast<std::int16_t>(i)});
  }
  return out;
}

class BackendMemory : public ::testing::TestWithParam<Device> {
 protected:
  Registry& reg = default_registry();
  std::mt19937 rng{12345};

  std::vector<float> random_floats(std::size_t n) {
    std::uniform_real_distribution<float> dist(-4.0F, 4.0F);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
  }
};

TEST_P(BackendMemory, RoundTripThroughTheDeviceKeepsEveryByte) {
  const Device device = GetParam();
  for (const Shape& shape : {Shape{1}, Shape{3, 5}, Shape{127, 4099}, Shape{2, 0, 3}}) {
    auto host = random_floats(static_cast<std::size_t>(shape.numel()));
    Tensor src = Tensor::wrap(host.data(), shape, DType::f32);
    Tensor on_device = src.to(device, reg);
    EXPECT_EQ(on_device.device(), device);
    std::vector<float> back(host.size(), -1.0F);
    Tensor::wrap(back.data(), shape, DType::f32).copy_from(on_device, reg);
    EXPECT_EQ(back, host) << reg.device_name(device) << " shape " << shape.str();
  }
}

TEST_P(BackendMemory, FillWritesEveryElementInTheDtype) {
  const Device device = GetParam();
  Tensor t = Tensor::empty({7, 13}, DType::bf16, device, reg);
  t.fill(1.5, reg);
  std::vector<std::uint16_t> back(7 * 13, 0);
  Tensor::wrap(back.data(), {7, 13}, DType::bf16).copy_from(t, reg);
  for (auto bits : back) ASSERT_EQ(bits, to_bfloat16(1.5).bits);
  Tensor f = Tensor::empty({5, 3}, DType::f32, device, reg);
  f.fill(-2.25, reg);
  std::vector<float> fb(15, 0.0F);
  Tensor::wrap(fb.data(), {5, 3}, DType::f32).copy_from(f, reg);
  for (float v : fb) ASSERT_EQ(v, -2.25F);
}

TEST_P(BackendMemory, CopiesBetweenThisDeviceAndEveryOther) {
  const Device device = GetParam();
  auto host = random_floats(33 * 17);
  Tensor src = Tensor::wrap(host.data(), {33, 17}, DType::f32).to(device, reg);
  for (const Device other : available_devices()) {
    Tensor there = src.to(other, reg);
    Tensor back = Tensor::empty({33, 17}, DType::f32, device, reg);
    back.fill(0.0, reg);
    back.copy_from(there, reg);
    std::vector<float> out(host.size(), 0.0F);
    Tensor::wrap(out.data(), {33, 17}, DType::f32).copy_from(back, reg);
    EXPECT_EQ(out, host) << reg.device_name(device) << " -> " << reg.device_name(other) << " -> back";
  }
}

TEST_P(BackendMemory, WorkspaceReusesItsBlocksOnOneStream) {
  const Device device = GetParam();
  Workspace& ws = reg.backend(device.backend).workspace(device.index);
  const auto before = ws.allocations();
  void* first = nullptr;
  {
    auto lease = ws.acquire(1000);
    ASSERT_NE(lease.data(), nullptr);
    EXPECT_GE(lease.bytes(), 1000U);
    first = lease.data();
  }
  auto again = ws.acquire(1000);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(ws.allocations(), before + 1);
}

std::string device_label(const ::testing::TestParamInfo<Device>& info) {
  std::string name = default_registry().device_name(info.param);
  for (auto& c : name) {
    if (c == ':') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(AvailableDevices, BackendMemory, ::testing::ValuesIn(available_devices()), device_label);

}  // namespace
}  // namespace opreg
