// Devices and backends of one Registry: printing and parsing device names, checking devices,
// device inference under the OPREG_* variables, backend registration (ids, limits, names) and
// what backends() reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "opreg/device.h"
#include "opreg/error.h"
#include "opreg/registry.h"
#include "support/host_backend.h"
#include "support/throws_error.h"
#include "support/test_op.h"
#include "registry/fail.h"

namespace {

namespace ot = opreg::testing;
using ::testing::HasSubstr;
using opreg::Device;
using opreg::ErrorKind;

using opreg::testing::ThrowsError;

std::shared_ptr<ot::HostBackend> host(ot::HostBackendSpec spec) {
  return std::make_shared<ot::HostBackend>(std::move(spec));
}

// Every variable the registry reads, unset for the duration of a test (restored after).
class RegistryTest : public ::testing::Test {
 protected:
  ot::CleanRegistryEnv clean_env_;
  opreg::Registry reg;

  opreg::BackendId id_of(const std::string& name) const {
    auto id = reg.find_backend(name);
    EXPECT_TRUE(id.has_value()) << "backend " << name << " is not registered";
    return id.value_or(opreg::BackendId{255});
  }
};

class DeviceName : public RegistryTest {};
class DeviceCheck : public RegistryTest {};
class Inference : public RegistryTest {};
class BackendRegistration : public RegistryTest {};
class BackendInfo : public RegistryTest {};
class BackendProbe : public RegistryTest {};

// ---------------------------------------------------------------------------------------------
// device_name / parse_device

TEST_F(DeviceName, CpuRoundTrips) {
  opreg::register_cpu(reg);
  EXPECT_EQ(reg.parse_device("cpu"), (Device{opreg::kCpuBackendId, 0}));
  EXPECT_EQ(reg.parse_device("cpu:0"), (Device{opreg::kCpuBackendId, 0}));
  EXPECT_EQ(reg.device_name(Device{opreg::kCpuBackendId, 0}), "cpu");
  EXPECT_EQ(reg.device_name(reg.parse_device("cpu:0")), "cpu");
  EXPECT_EQ(reg.parse_device(reg.device_name(Device{})), Device{});
}

TEST_F(DeviceName, CustomNpuRoundTrips) {
  opreg::register_cpu(reg);
  auto npu = reg.add_backend(host({.name = "npu", .priority = 300}));
  const auto id = npu.backend_id();
  EXPECT_NE(id, opreg::kCpuBackendId);
  EXPECT_EQ(reg.parse_device("npu:0"), (Device{id, 0}));
  EXPECT_EQ(reg.parse_device("npu"), (Device{id, 0}));
  EXPECT_EQ(reg.device_name(Device{id, 0}), "npu:0");
  EXPECT_EQ(reg.parse_device(reg.device_name(Device{id, 0})), (Device{id, 0}));
}

TEST_F(DeviceName, SecondDeviceRoundTrips) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .device_count = 2}));
  const Device d = reg.parse_device("gpu:1");
  EXPECT_EQ(d, (Device{gpu.backend_id(), 1}));
  EXPECT_EQ(reg.device_name(d), "gpu:1");
  EXPECT_EQ(reg.parse_device("gpu:0"), (Device{gpu.backend_id(), 0}));
  EXPECT_EQ(reg.device_name(Device{gpu.backend_id(), 0}), "gpu:0");
  EXPECT_NO_THROW(reg.check_device(d));
}

TEST_F(DeviceName, CustomBackendNamesRoundTrip) {
  opreg::register_cpu(reg);
  std::vector<opreg::Registration> regs;
  for (const char* name : {"my_accel", "x1", "dsp_2", "a"}) {
    regs.push_back(reg.add_backend(host({.name = name, .device_count = 3})));
  }
  for (std::size_t i = 0; i < regs.size(); ++i) {
    const auto id = regs[i].backend_id();
    for (std::int16_t index = 0; index < 3; ++index) {
      const Device d{id, index};
      const std::string text = reg.device_name(d);
      SCOPED_TRACE(text);
      EXPECT_EQ(reg.parse_device(text), d);
    }
  }
  EXPECT_EQ(reg.device_name(reg.parse_device("my_accel:2")), "my_accel:2");
  EXPECT_EQ(reg.device_name(reg.parse_device("dsp_2")), "dsp_2:0");
}

struct ParseCase {
  const char* label;
  const char* text;
};
// Printed by name, so ctest lists the case rather than its bytes.
void PrintTo(const ParseCase& c, std::ostream* os) { *os << '"' << c.text << '"'; }

class DeviceParseError : public RegistryTest, public ::testing::WithParamInterface<ParseCase> {};

TEST_P(DeviceParseError, IsInvalidArgumentListingAcceptedDevices) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  const std::string text = GetParam().text;
  EXPECT_TRUE(ThrowsError([&] { (void)reg.parse_device(text); }, ErrorKind::invalid_argument,
                          {"'" + text + "'", "cpu", "gpu"}));
}

INSTANTIATE_TEST_SUITE_P(DeviceParse, DeviceParseError,
                         ::testing::Values(ParseCase{"nonsense", "nonsense"}, ParseCase{"empty", ""},
                                           ParseCase{"no_index", "cpu:"}, ParseCase{"letter_index", "cpu:x"},
                                           ParseCase{"negative_index", "gpu:-1"},
                                           ParseCase{"three_parts", "a:b:c"},
                                           ParseCase{"upper_case", "GPU"},
                                           ParseCase{"leading_colon", ":0"},
                                           ParseCase{"index_with_sign", "gpu:+1"}),
                         [](const ::testing::TestParamInfo<ParseCase>& info) { return std::string(info.param.label); });

// ---------------------------------------------------------------------------------------------
// check_device

TEST_F(DeviceCheck, ExistingDevicePasses) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .device_count = 2}));
  EXPECT_NO_THROW(reg.check_device(Device{}));
  EXPECT_NO_THROW(reg.check_device(Device{gpu.backend_id(), 1}));
  EXPECT_EQ(reg.device_props(Device{gpu.backend_id(), 1}).name, "gpu test device 1");
}

TEST_F(DeviceCheck, IndexOutOfRangeIsDeviceError) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .device_count = 2}));
  EXPECT_TRUE(ThrowsError([&] { reg.check_device(Device{gpu.backend_id(), 2}); }, ErrorKind::device, {"gpu:2"}));
  EXPECT_TRUE(ThrowsError([&] { reg.check_device(Device{gpu.backend_id(), -1}); }, ErrorKind::device, {"gpu:-1"}));
  EXPECT_TRUE(ThrowsError([&] { reg.check_device(Device{opreg::kCpuBackendId, 1}); }, ErrorKind::device, {"cpu:1"}));
  EXPECT_TRUE(ThrowsError([&] { (void)reg.device_props(Device{gpu.backend_id(), 2}); }, ErrorKind::device, {"gpu:2"}));
}

TEST_F(DeviceCheck, UnavailableBackendIsDeviceErrorWithReason) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .available = false, .reason = "no driver"}));
  // The name parses (the backend is registered); using it is the error.
  const Device d = reg.parse_device("gpu");
  EXPECT_EQ(d.backend, gpu.backend_id());
  EXPECT_TRUE(ThrowsError([&] { reg.check_device(d); }, ErrorKind::device, {"gpu", "no driver"}));
  EXPECT_TRUE(ThrowsError([&] { (void)reg.device_props(d); }, ErrorKind::device, {"no driver"}));
}

TEST_F(DeviceCheck, UnregisteredBackendIdIsDeviceError) {
  opreg::register_cpu(reg);
  EXPECT_TRUE(ThrowsError([&] { reg.check_device(Device{7, 0}); }, ErrorKind::device, {}));
  EXPECT_TRUE(ThrowsError([&] { reg.check_device(Device{200, 0}); }, ErrorKind::device, {}));
}

// ---------------------------------------------------------------------------------------------
// infer_device

TEST_F(Inference, HighestPriorityAvailableBackendWins) {
  opreg::register_cpu(reg);
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300}));
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto low = reg.add_backend(host({.name = "low", .priority = 10}));
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, (Device{gpu.backend_id(), 0}));
  EXPECT_THAT(inf.why, HasSubstr("priority"));
  EXPECT_THAT(inf.why, HasSubstr("gpu"));
}

TEST_F(Inference, CpuAloneIsInferred) {
  opreg::register_cpu(reg);
  reg.reload_config();
  EXPECT_EQ(reg.infer_device().device, Device{});
}

TEST_F(Inference, DeviceVariableNamingALowerBackendWins) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300, .device_count = 2}));
  {
    ot::ScopedEnv env{{"OPREG_DEVICE", "acc"}};
    reg.reload_config();
    const auto inf = reg.infer_device();
    EXPECT_EQ(inf.device, (Device{acc.backend_id(), 0}));
    EXPECT_THAT(inf.why, HasSubstr("OPREG_DEVICE"));
  }
  {
    ot::ScopedEnv env{{"OPREG_DEVICE", "acc:1"}};
    reg.reload_config();
    EXPECT_EQ(reg.infer_device().device, (Device{acc.backend_id(), 1}));
  }
  {
    ot::ScopedEnv env{{"OPREG_DEVICE", "cpu"}};
    reg.reload_config();
    EXPECT_EQ(reg.infer_device().device, Device{});
  }
}

TEST_F(Inference, NamedEmulatedBackendIsHonoured) {
  opreg::register_cpu(reg);
  auto emu = reg.add_backend(host({.name = "emu", .priority = 500, .emulated = true}));
  ot::ScopedEnv env{{"OPREG_DEVICE", "emu"}};
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, (Device{emu.backend_id(), 0}));
  EXPECT_THAT(inf.why, HasSubstr("emulated"));
}

TEST_F(Inference, EmulatedBackendIsNeverInferred) {
  opreg::register_cpu(reg);
  auto emu = reg.add_backend(host({.name = "emu", .priority = 500, .emulated = true}));
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  reg.reload_config();
  auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, (Device{gpu.backend_id(), 0}));
  EXPECT_THAT(inf.why, HasSubstr("emu (emulated"));

  gpu.reset();
  inf = reg.infer_device();
  EXPECT_EQ(inf.device, Device{});
  EXPECT_THAT(inf.why, HasSubstr("emu (emulated"));
}

TEST_F(Inference, EmulatedBackendIsNotInferredFromBackendOrder) {
  opreg::register_cpu(reg);
  auto emu = reg.add_backend(host({.name = "emu", .priority = 500, .emulated = true}));
  ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", "emu,cpu"}};
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, Device{});
  EXPECT_THAT(inf.why, HasSubstr("emulated"));
}

TEST_F(Inference, UnavailableBackendIsSkippedWithItsReason) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .available = false, .reason = "no driver"}));
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300}));
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, (Device{acc.backend_id(), 0}));
  EXPECT_THAT(inf.why, HasSubstr("gpu"));
  EXPECT_THAT(inf.why, HasSubstr("no driver"));
}

TEST_F(Inference, DisabledBackendIsSkipped) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300}));
  ot::ScopedEnv env{{"OPREG_DISABLE", "gpu"}};
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, (Device{acc.backend_id(), 0}));
  EXPECT_THAT(inf.why, HasSubstr("OPREG_DISABLE"));
}

TEST_F(Inference, BackendOrderChangesTheOrder) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300}));
  {
    ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", "acc,gpu,cpu"}};
    reg.reload_config();
    const auto inf = reg.infer_device();
    EXPECT_EQ(inf.device, (Device{acc.backend_id(), 0}));
    EXPECT_THAT(inf.why, HasSubstr("OPREG_BACKEND_ORDER"));
  }
  {
    ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", "cpu,gpu"}};
    reg.reload_config();
    EXPECT_EQ(reg.infer_device().device, Device{});
  }
}

TEST_F(Inference, BackendsNotInTheOrderAreNotInferred) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300, .available = false, .reason = "no driver"}));
  ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", "acc,cpu"}};
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, Device{});  // gpu is available and first by priority, but not listed
  EXPECT_THAT(inf.why, HasSubstr("no driver"));
}

TEST_F(Inference, NothingUsableInBackendOrderIsDeviceError) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300, .available = false, .reason = "no driver"}));
  auto emu = reg.add_backend(host({.name = "emu", .priority = 200, .emulated = true}));
  ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", "acc,emu"}};
  reg.reload_config();
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::device, {"acc", "no driver", "emu"}));
}

TEST_F(Inference, NothingUsableAtAllIsDeviceError) {
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300, .available = false, .reason = "no driver"}));
  auto emu = reg.add_backend(host({.name = "emu", .priority = 200, .emulated = true}));
  reg.reload_config();
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::device, {"no driver", "emu"}));
}

TEST_F(Inference, DeviceVariableNamingUnavailableBackendIsDeviceError) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .available = false, .reason = "no driver"}));
  ot::ScopedEnv env{{"OPREG_DEVICE", "gpu"}};
  EXPECT_NO_THROW(reg.reload_config());  // a known backend: the value is well-formed
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::device, {"gpu", "no driver"}));
}

TEST_F(Inference, DeviceVariableIndexOutOfRangeIsDeviceError) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .device_count = 1}));
  ot::ScopedEnv env{{"OPREG_DEVICE", "gpu:5"}};
  EXPECT_NO_THROW(reg.reload_config());
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::device, {"gpu:5"}));
}

TEST_F(Inference, DeviceVariableNamingDisabledBackendIsDeviceError) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  ot::ScopedEnv env{{"OPREG_DEVICE", "gpu"}, {"OPREG_DISABLE", "gpu"}};
  reg.reload_config();
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::device, {"gpu", "OPREG_DISABLE"}));
}

// docs/env.md: "a known but unavailable or missing device is a *device* error". An index that
// is too large to be any device must either be refused with the variable (invalid_argument at
// reload) or be reported as a missing device when it is used.
TEST_F(Inference, DeviceVariableWithHugeIndexIsRefusedConsistently) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  ot::ScopedEnv env{{"OPREG_DEVICE", "gpu:40000"}};
  std::string message;
  bool refused_at_reload = false;
  try {
    reg.reload_config();
  } catch (const opreg::Error& e) {
    refused_at_reload = true;
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("OPREG_DEVICE"));
  }
  if (!refused_at_reload) {
    EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::device, {"gpu:40000"}));
  }
}

// A backend that says it is available but has no device is not emulated: the reason given for
// skipping it must not claim it is.
TEST_F(Inference, AvailableBackendWithoutDevicesIsNotCalledEmulated) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .available = true, .device_count = 0}));
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, Device{});
  EXPECT_THAT(inf.why, HasSubstr("gpu"));
  EXPECT_THAT(inf.why, ::testing::Not(HasSubstr("gpu (emulated")));
}

// OPREG_BACKEND_ORDER was validated against the backends registered at the time; a backend it
// lists may be unregistered later. Inference must then skip it (or report it as an opreg::Error),
// never read a backend that is not there. Run in a child process: the failure mode is a crash.
class InferenceDeathTest : public RegistryTest {};

TEST_F(InferenceDeathTest, BackendOrderNamingAnUnregisteredBackendIsHandled) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", "gpu,cpu"}};
  reg.reload_config();
  ASSERT_EQ(reg.infer_device().device, (Device{gpu.backend_id(), 0}));
  gpu.reset();
  EXPECT_EXIT(
      {
        int code = 0;
        try {
          const auto inf = reg.infer_device();
          if (!(inf.device == Device{})) code = 1;                    // cpu is the only listed backend left
          if (inf.why.find("cpu,cpu") != std::string::npos) code = 2;  // the missing gpu read as another backend
        } catch (const opreg::Error&) {
          code = 0;  // refusing the stale order is acceptable
        }
        std::exit(code);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------------------------
// Backend registration

TEST_F(BackendRegistration, CpuGetsIdZeroEvenWhenRegisteredLast) {
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300}));
  EXPECT_EQ(gpu.backend_id(), 1);
  EXPECT_EQ(acc.backend_id(), 2);
  opreg::register_cpu(reg);
  EXPECT_EQ(reg.find_backend("cpu"), std::optional<opreg::BackendId>(opreg::kCpuBackendId));
  EXPECT_EQ(reg.backend(opreg::kCpuBackendId).name(), "cpu");
  EXPECT_EQ(reg.find_backend("gpu"), std::optional<opreg::BackendId>(1));
}

TEST_F(BackendRegistration, BackendNamedCpuGetsIdZero) {
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  auto cpu = reg.add_backend(host({.name = "cpu", .priority = 0}));
  EXPECT_EQ(cpu.backend_id(), opreg::kCpuBackendId);
  EXPECT_EQ(gpu.backend_id(), 1);
}

TEST_F(BackendRegistration, OthersGetTheLowestFreeIdFromOne) {
  auto a = reg.add_backend(host({.name = "a"}));
  auto b = reg.add_backend(host({.name = "b"}));
  auto c = reg.add_backend(host({.name = "c"}));
  EXPECT_EQ(a.backend_id(), 1);  // id 0 stays reserved for cpu
  EXPECT_EQ(b.backend_id(), 2);
  EXPECT_EQ(c.backend_id(), 3);
  b.reset();
  EXPECT_FALSE(b.active());
  EXPECT_FALSE(reg.find_backend("b").has_value());
  auto d = reg.add_backend(host({.name = "d"}));
  EXPECT_EQ(d.backend_id(), 2);
  auto e = reg.add_backend(host({.name = "e"}));
  EXPECT_EQ(e.backend_id(), 4);
}

TEST_F(BackendRegistration, UnregisteredBackendNoLongerParses) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
  EXPECT_NO_THROW((void)reg.parse_device("gpu"));
  gpu.reset();
  EXPECT_TRUE(ThrowsError([&] { (void)reg.parse_device("gpu"); }, ErrorKind::invalid_argument, {"cpu"}));
  EXPECT_THROW((void)reg.backend(1), opreg::Error);
}

TEST_F(BackendRegistration, DuplicateNameNamesBothRegistrationSites) {
  opreg::register_cpu(reg);
  const int first_line = __LINE__ + 1;
  auto first = reg.add_backend(host({.name = "gpu", .priority = 400}));
  std::string message;
  const int second_line = __LINE__ + 2;
  try {  // the call stands on its own line: inside a macro, clang reports the macro's last line
    auto again = reg.add_backend(host({.name = "gpu", .priority = 1}));
    ADD_FAILURE() << "a duplicate backend name was accepted";
  } catch (const opreg::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    message = e.what();
  }
  EXPECT_THAT(message, HasSubstr("device_test.cpp:" + std::to_string(first_line)));
  EXPECT_THAT(message, HasSubstr("device_test.cpp:" + std::to_string(second_line)));
  // The first registration is untouched.
  EXPECT_EQ(reg.find_backend("gpu"), std::optional<opreg::BackendId>(first.backend_id()));
  EXPECT_EQ(reg.backends().size(), 2U);
}

TEST_F(BackendRegistration, SixteenFitAndTheSeventeenthIsRefused) {
  static_assert(opreg::kMaxBackends == 16);
  opreg::register_cpu(reg);
  std::vector<opreg::Registration> regs;
  std::vector<bool> seen(opreg::kMaxBackends, false);
  seen[opreg::kCpuBackendId] = true;
  for (int i = 1; i < opreg::kMaxBackends; ++i) {
    regs.push_back(reg.add_backend(host({.name = fmt::format("b{}", i)})));  // not "b" + string: g++ 12 -O3 -Wrestrict false positive
    const auto id = regs.back().backend_id();
    ASSERT_LT(id, opreg::kMaxBackends);
    EXPECT_FALSE(seen[id]) << "id " << int{id} << " given twice";
    seen[id] = true;
  }
  EXPECT_EQ(reg.backends().size(), 16U);
  EXPECT_TRUE(ThrowsError([&] { auto extra = reg.add_backend(host({.name = "extra"})); }, ErrorKind::unsupported,
                          {"extra", "16"}));
  EXPECT_FALSE(reg.find_backend("extra").has_value());

  // Freeing one id makes room for exactly one more, under that id.
  const auto freed = regs[6].backend_id();
  regs[6].reset();
  auto extra = reg.add_backend(host({.name = "extra"}));
  EXPECT_EQ(extra.backend_id(), freed);
  EXPECT_EQ(reg.find_backend("extra"), std::optional<opreg::BackendId>(freed));
  EXPECT_TRUE(ThrowsError([&] { auto more = reg.add_backend(host({.name = "more"})); }, ErrorKind::unsupported,
                          {"16"}));
}

TEST_F(BackendRegistration, MalformedNamesAreInvalidArgument) {
  opreg::register_cpu(reg);
  for (const char* name : {"GPU", "1x", "a-b", "", "gpu:0", "g pu", "_gpu"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(ThrowsError([&] { auto r = reg.add_backend(host({.name = name})); }, ErrorKind::invalid_argument,
                            {fmt::format("'{}'", name)}));
  }
  EXPECT_EQ(reg.backends().size(), 1U);
}

TEST_F(BackendRegistration, NullBackendIsInvalidArgument) {
  EXPECT_TRUE(ThrowsError([&] { auto r = reg.add_backend(nullptr); }, ErrorKind::invalid_argument, {}));
}

TEST_F(BackendRegistration, ReleasedRegistrationKeepsTheBackend) {
  opreg::register_cpu(reg);
  {
    auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
    gpu.release();
    EXPECT_FALSE(gpu.active());
  }
  EXPECT_TRUE(reg.find_backend("gpu").has_value());
}

// ---------------------------------------------------------------------------------------------
// backends()

TEST_F(BackendInfo, ReportsAvailabilityDevicesPriorityAndFlags) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .device_count = 2,
                                   .fallback = opreg::FallbackPolicy::warn, .reason = "found 2"}));
  auto emu = reg.add_backend(host({.name = "emu", .priority = 300, .emulated = true}));
  auto off = reg.add_backend(host({.name = "off", .priority = 200, .available = false, .reason = "no driver"}));
  const auto infos = reg.backends();
  ASSERT_EQ(infos.size(), 4U);
  // In id order.
  EXPECT_EQ(infos[0].name, "cpu");
  EXPECT_EQ(infos[0].id, opreg::kCpuBackendId);
  EXPECT_EQ(infos[0].priority, 0);
  EXPECT_TRUE(infos[0].availability.available);
  ASSERT_EQ(infos[0].devices.size(), 1U);
  EXPECT_FALSE(infos[0].devices[0].emulated);

  const auto& g = infos[1];
  EXPECT_EQ(g.name, "gpu");
  EXPECT_EQ(g.id, gpu.backend_id());
  EXPECT_EQ(g.priority, 400);
  EXPECT_EQ(g.fallback, opreg::FallbackPolicy::warn);
  EXPECT_FALSE(g.disabled);
  EXPECT_TRUE(g.availability.available);
  EXPECT_EQ(g.availability.device_count, 2);
  EXPECT_EQ(g.availability.reason, "found 2");
  ASSERT_EQ(g.devices.size(), 2U);
  EXPECT_EQ(g.devices[1].name, "gpu test device 1");
  EXPECT_EQ(g.devices[1].compute_units, 4);
  EXPECT_EQ(g.devices[1].memory_bytes, 1ULL << 30);
  EXPECT_FALSE(g.devices[1].emulated);
  EXPECT_THAT(g.site, HasSubstr("device_test.cpp:"));

  const auto& e = infos[2];
  EXPECT_EQ(e.name, "emu");
  EXPECT_EQ(e.priority, 300);
  EXPECT_TRUE(e.availability.available);
  ASSERT_EQ(e.devices.size(), 1U);
  EXPECT_TRUE(e.devices[0].emulated);

  const auto& o = infos[3];
  EXPECT_EQ(o.name, "off");
  EXPECT_FALSE(o.availability.available);
  EXPECT_EQ(o.availability.device_count, 0);
  EXPECT_EQ(o.availability.reason, "no driver");
  EXPECT_TRUE(o.devices.empty());
}

TEST_F(BackendInfo, ReportsEffectiveFallbackAndDisabledFlag) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .fallback = opreg::FallbackPolicy::warn}));
  ot::ScopedEnv env{{"OPREG_FALLBACK", "silent"}, {"OPREG_DISABLE", "gpu"}};
  reg.reload_config();
  for (const auto& info : reg.backends()) {
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.fallback, opreg::FallbackPolicy::silent);
    EXPECT_EQ(info.disabled, info.name == "gpu");
  }
}

TEST_F(BackendInfo, DevicePropsGetReadsExtraKeys) {
  opreg::register_cpu(reg);
  auto gpu = reg.add_backend(host({.name = "gpu", .priority = 400, .device_count = 2}));
  const auto& props = reg.device_props(Device{gpu.backend_id(), 1});
  EXPECT_EQ(props.get("index"), "1");
  EXPECT_EQ(props.get("nosuch"), "");
  EXPECT_EQ(reg.device_props(Device{gpu.backend_id(), 0}).get("index"), "0");

  opreg::DeviceProps p;
  p.extra = {{"ub_bytes", "196608"}, {"sm_count", "132"}};
  EXPECT_EQ(p.get("ub_bytes"), "196608");
  EXPECT_EQ(p.get("sm_count"), "132");
  EXPECT_TRUE(p.get("sm").empty());
  EXPECT_TRUE(opreg::DeviceProps{}.get("ub_bytes").empty());
}

// ---------------------------------------------------------------------------------------------
// A probe that throws

class ThrowingProbeBackend : public ot::HostBackend {
 public:
  explicit ThrowingProbeBackend(std::string name) : HostBackend({.name = std::move(name), .priority = 450}) {}
  opreg::Availability probe() override { throw std::runtime_error("driver exploded while probing"); }
};

class BadSettingProbeBackend : public ot::HostBackend {
 public:
  BadSettingProbeBackend() : HostBackend({.name = "bad", .priority = 450}) {}
  opreg::Availability probe() override {
    opreg::fail(ErrorKind::invalid_argument, "OPREG_BAD_MODE='x': expected a or b");
  }
};

TEST_F(BackendProbe, ThrowingProbeRegistersAnUnavailableBackend) {
  opreg::register_cpu(reg);
  opreg::Registration boom;
  ASSERT_NO_THROW(boom = reg.add_backend(std::make_shared<ThrowingProbeBackend>("boom")));
  ASSERT_TRUE(reg.find_backend("boom").has_value());
  const auto id = *reg.find_backend("boom");
  EXPECT_EQ(boom.backend_id(), id);

  bool found = false;
  for (const auto& info : reg.backends()) {
    if (info.name != "boom") continue;
    found = true;
    EXPECT_FALSE(info.availability.available);
    EXPECT_EQ(info.availability.device_count, 0);
    EXPECT_THAT(info.availability.reason, HasSubstr("driver exploded while probing"));
    EXPECT_TRUE(info.devices.empty());
  }
  EXPECT_TRUE(found);

  EXPECT_TRUE(ThrowsError([&] { reg.check_device(Device{id, 0}); }, ErrorKind::device,
                          {"driver exploded while probing"}));
  reg.reload_config();
  const auto inf = reg.infer_device();
  EXPECT_EQ(inf.device, Device{});
  EXPECT_THAT(inf.why, HasSubstr("driver exploded while probing"));
}

TEST_F(BackendProbe, ProbeReportingABadSettingIsNotHidden) {
  opreg::register_cpu(reg);
  EXPECT_TRUE(ThrowsError([&] { auto r = reg.add_backend(std::make_shared<BadSettingProbeBackend>()); },
                          ErrorKind::invalid_argument, {"OPREG_BAD_MODE"}));
  EXPECT_FALSE(reg.find_backend("bad").has_value());
}

}  // namespace
