// A backend registered while OPREG_DISABLE names it is not probed (probing may load its runtime:
// OpenCL for xpu), until a configuration enables it or one of its devices is named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/host_backend.h"
#include "backends/builtin.h"
#include "registry/dispatch.h"
#include "registry/state.h"

namespace opreg::testing {
namespace {

using ::testing::HasSubstr;

class CountingBackend : public HostBackend {
 public:
  explicit CountingBackend(int* probes) : HostBackend(HostBackendSpec{.name = "gpu"}), probes_(probes) {}
  Availability probe() override {
    ++*probes_;
    return HostBackend::probe();
  }

 private:
  int* probes_;
};

const BackendInfo& info_of(const std::vector<BackendInfo>& all, std::string_view name) {
  for (const auto& b : all) {
    if (b.name == name) return b;
  }
  throw std::runtime_error("no backend " + std::string(name));
}

class DeferredProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    register_cpu(reg);
    detail::preset_disable(reg, {"gpu"});
    gpu = reg.add_backend(std::make_shared<CountingBackend>(&probes));
  }
  Registry reg;
  int probes = 0;
  Registration gpu;
};

TEST_F(DeferredProbe, ADisabledBackendIsListedUnprobed) {
  EXPECT_EQ(probes, 0);
  const auto all = reg.backends();
  const BackendInfo& b = info_of(all, "gpu");
  EXPECT_FALSE(b.availability.available);
  EXPECT_THAT(b.availability.reason, HasSubstr("not probed"));
  EXPECT_TRUE(b.devices.empty());
}

TEST_F(DeferredProbe, AConfigurationThatEnablesItProbesIt) {
  Config c;
  c.disable = {"gpu"};
  reg.set_config(c);
  EXPECT_EQ(probes, 0);
  reg.set_config(Config{});
  EXPECT_EQ(probes, 1);
  EXPECT_TRUE(info_of(reg.backends(), "gpu").availability.available);
  reg.set_config(c);
  reg.set_config(Config{});
  EXPECT_EQ(probes, 1);  // once
}

TEST_F(DeferredProbe, NamingOneOfItsDevicesProbesItAndItStaysDisabled) {
  Config c;
  c.disable = {"gpu"};
  reg.set_config(c);
  const Device d = reg.parse_device("gpu:0");
  EXPECT_EQ(probes, 1);
  Tensor t = Tensor::empty({2, 3}, DType::f32, d, reg);
  EXPECT_TRUE(t.defined());
  EXPECT_TRUE(info_of(reg.backends(), "gpu").disabled);
}

}  // namespace
}  // namespace opreg::testing
