// The OPREG_* configuration: every bad value is an invalid_argument error naming the variable and
// the value and leaves the previous configuration in force; good values parse into Config;
// set_config validates like reload_config; unknown OPREG_* variables are warned about.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/builtin.h"
#include "opreg/error.h"
#include "opreg/registry.h"
#include "support/host_backend.h"
#include "support/throws_error.h"
#include "support/test_op.h"

namespace {

namespace ot = opreg::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using opreg::ErrorKind;

using opreg::testing::ThrowsError;

std::shared_ptr<ot::HostBackend> host(ot::HostBackendSpec spec) {
  return std::make_shared<ot::HostBackend>(std::move(spec));
}

// A test backend that declares a variable of its own.
class BackendWithVariable : public ot::HostBackend {
 public:
  BackendWithVariable() : HostBackend({.name = "gpu", .priority = 400}) {}
  std::vector<std::string> env_vars() const override { return {"OPREG_GPU_FOO"}; }
};

void expect_default(const opreg::Config& c) {
  EXPECT_EQ(c.device, "");
  EXPECT_TRUE(c.backend_order.empty());
  EXPECT_TRUE(c.disable.empty());
  EXPECT_TRUE(c.force_variants.empty());
  EXPECT_FALSE(c.fallback.has_value());
  EXPECT_EQ(c.verbose, 0);
  EXPECT_EQ(c.num_threads, 0);
}

// A registry with cpu, a gpu test backend and two gpu variants of the test op; every variable the
// registry reads is unset for the duration of a test (and restored after).
class ConfigFixture : public ::testing::Test {
 protected:
  ot::CleanRegistryEnv clean_env_;
  opreg::Registry reg;
  ::testing::NiceMock<ot::MockKernel> fast_mock;
  ::testing::NiceMock<ot::MockKernel> slow_mock;
  opreg::Registration gpu;
  opreg::Registration fast;
  opreg::Registration slow;

  void SetUp() override {
    opreg::register_cpu(reg);
    gpu = reg.add_backend(host({.name = "gpu", .priority = 400}));
    fast = reg.add_variant(ot::scale_op(), ot::mock_variant("gpu", "fast", 10, fast_mock));
    slow = reg.add_variant(ot::scale_op(), ot::mock_variant("gpu", "slow", 5, slow_mock));
  }

  std::optional<opreg::VariantInfo> variant(std::string_view name) const {
    for (const auto& v : reg.variants("test_scale.fwd")) {
      if (v.name == name) return v;
    }
    ADD_FAILURE() << "no variant " << name;
    return std::nullopt;
  }
};

class Config : public ConfigFixture {};
class ConfigGood : public ConfigFixture {};
class ConfigSetConfig : public ConfigFixture {};
class ConfigWarning : public ConfigFixture {};

// ---------------------------------------------------------------------------------------------
// Bad values

struct BadCase {
  const char* label;
  const char* var;
  const char* value;
  const char* var2;  // a second variable, or nullptr
  const char* value2;
  std::vector<std::string> needles;  // besides the variable and the value
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.var << "=" << c.value; }

class ConfigBadValue : public ConfigFixture, public ::testing::WithParamInterface<BadCase> {};

TEST_P(ConfigBadValue, ReloadThrowsInvalidArgumentNamingVariableAndValue) {
  const BadCase& c = GetParam();
  std::optional<ot::ScopedEnv> env;
  if (c.var2 == nullptr) {
    env.emplace(std::initializer_list<std::pair<const char*, const char*>>{{c.var, c.value}});
  } else {
    env.emplace(std::initializer_list<std::pair<const char*, const char*>>{{c.var, c.value}, {c.var2, c.value2}});
  }
  std::vector<std::string> needles = c.needles;
  needles.emplace_back(c.var);
  EXPECT_TRUE(ThrowsError([&] { reg.reload_config(); }, ErrorKind::invalid_argument, needles));
  expect_default(reg.config());
}

const BadCase kBadCases[] = {
    {"device_bad_index", "OPREG_DEVICE", "cpu:x", nullptr, nullptr, {"cpu:x"}},
    {"device_empty_index", "OPREG_DEVICE", "gpu:", nullptr, nullptr, {"gpu:"}},
    {"device_upper_case", "OPREG_DEVICE", "GPU", nullptr, nullptr, {"GPU"}},
    {"device_three_parts", "OPREG_DEVICE", "gpu:0:1", nullptr, nullptr, {"gpu:0:1"}},
    {"order_malformed", "OPREG_BACKEND_ORDER", "gpu,No-Such", nullptr, nullptr, {"No-Such"}},
    {"order_empty_entry", "OPREG_BACKEND_ORDER", "gpu,,cpu", nullptr, nullptr, {"gpu,,cpu", "empty"}},
    {"order_trailing_comma", "OPREG_BACKEND_ORDER", "gpu,cpu,", nullptr, nullptr, {"gpu,cpu,"}},
    {"order_duplicate", "OPREG_BACKEND_ORDER", "gpu,gpu", nullptr, nullptr, {"gpu"}},
    {"disable_unknown", "OPREG_DISABLE", "gpu.test_scale.fwd.nosuch", nullptr, nullptr, {"nosuch"}},
    {"disable_cpu", "OPREG_DISABLE", "cpu", nullptr, nullptr, {"cpu"}},
    {"force_unknown", "OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.nosuch", nullptr, nullptr,
     {"gpu.test_scale.fwd.nosuch"}},
    {"force_two_for_one_op", "OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.fast,gpu.test_scale.fwd.slow", nullptr,
     nullptr, {"gpu.test_scale.fwd.fast", "gpu.test_scale.fwd.slow"}},
    {"force_and_disable", "OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.fast", "OPREG_DISABLE",
     "gpu.test_scale.fwd.fast", {"gpu.test_scale.fwd.fast", "OPREG_DISABLE"}},
    {"fallback_maybe", "OPREG_FALLBACK", "maybe", nullptr, nullptr, {"maybe"}},
    {"verbose_3", "OPREG_VERBOSE", "3", nullptr, nullptr, {"'3'"}},
    {"verbose_minus_1", "OPREG_VERBOSE", "-1", nullptr, nullptr, {"-1"}},
    {"verbose_x", "OPREG_VERBOSE", "x", nullptr, nullptr, {"'x'"}},
    {"threads_0", "OPREG_NUM_THREADS", "0", nullptr, nullptr, {"'0'"}},
    {"threads_abc", "OPREG_NUM_THREADS", "abc", nullptr, nullptr, {"abc"}},
    {"threads_5000", "OPREG_NUM_THREADS", "5000", nullptr, nullptr, {"5000"}},
    {"threads_trailing_junk", "OPREG_NUM_THREADS", "4x", nullptr, nullptr, {"4x"}},
};

INSTANTIATE_TEST_SUITE_P(ConfigBad, ConfigBadValue, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.label); });

// ---------------------------------------------------------------------------------------------
// Good values

TEST_F(ConfigGood, EveryVariableParsesIntoConfig) {
  ot::ScopedEnv env{{"OPREG_DEVICE", "gpu:0"},
                    {"OPREG_BACKEND_ORDER", "gpu,cpu"},
                    {"OPREG_DISABLE", "gpu.test_scale.fwd.slow"},
                    {"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.fast"},
                    {"OPREG_FALLBACK", "warn"},
                    {"OPREG_VERBOSE", "2"},
                    {"OPREG_NUM_THREADS", "8"}};
  ASSERT_NO_THROW(reg.reload_config());
  const opreg::Config c = reg.config();
  EXPECT_EQ(c.device, "gpu:0");
  EXPECT_THAT(c.backend_order, ElementsAre("gpu", "cpu"));
  EXPECT_THAT(c.disable, ElementsAre("gpu.test_scale.fwd.slow"));
  EXPECT_THAT(c.force_variants, ElementsAre("gpu.test_scale.fwd.fast"));
  ASSERT_TRUE(c.fallback.has_value());
  EXPECT_EQ(*c.fallback, opreg::FallbackPolicy::warn);
  EXPECT_EQ(c.verbose, 2);
  EXPECT_EQ(c.num_threads, 8);

  // And it is in force.
  EXPECT_EQ(reg.infer_device().device, (opreg::Device{gpu.backend_id(), 0}));
  if (const auto v = variant("gpu.test_scale.fwd.slow")) {
    EXPECT_TRUE(reg.is_disabled(*v));
  }
  if (const auto v = variant("gpu.test_scale.fwd.fast")) {
    EXPECT_TRUE(reg.is_forced(*v));
    EXPECT_FALSE(reg.is_disabled(*v));
  }
  for (const auto& b : reg.backends()) EXPECT_EQ(b.fallback, opreg::FallbackPolicy::warn) << b.name;
}

TEST_F(ConfigGood, BoundaryValuesAreAccepted) {
  {
    ot::ScopedEnv env{{"OPREG_VERBOSE", "0"}, {"OPREG_NUM_THREADS", "1"}, {"OPREG_FALLBACK", "error"}};
    ASSERT_NO_THROW(reg.reload_config());
    EXPECT_EQ(reg.config().verbose, 0);
    EXPECT_EQ(reg.config().num_threads, 1);
    EXPECT_EQ(reg.config().fallback, std::optional<opreg::FallbackPolicy>(opreg::FallbackPolicy::error));
  }
  {
    ot::ScopedEnv env{{"OPREG_VERBOSE", "1"}, {"OPREG_NUM_THREADS", "4096"}, {"OPREG_FALLBACK", "silent"}};
    ASSERT_NO_THROW(reg.reload_config());
    EXPECT_EQ(reg.config().verbose, 1);
    EXPECT_EQ(reg.config().num_threads, 4096);
    EXPECT_EQ(reg.config().fallback, std::optional<opreg::FallbackPolicy>(opreg::FallbackPolicy::silent));
  }
}

TEST_F(ConfigGood, DisableTakesBackendsAndVariantsTogether) {
  auto acc = reg.add_backend(host({.name = "acc", .priority = 300}));
  ot::ScopedEnv env{{"OPREG_DISABLE", "acc,gpu.test_scale.fwd.fast"}};
  ASSERT_NO_THROW(reg.reload_config());
  EXPECT_THAT(reg.config().disable, ElementsAre("acc", "gpu.test_scale.fwd.fast"));
  for (const auto& b : reg.backends()) EXPECT_EQ(b.disabled, b.name == "acc") << b.name;
}

TEST_F(ConfigGood, WhitespaceAroundCommasIsTrimmed) {
  ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", " gpu ,\tcpu "},
                    {"OPREG_DISABLE", "gpu.test_scale.fwd.slow "},
                    {"OPREG_FORCE_VARIANT", "  gpu.test_scale.fwd.fast"},
                    {"OPREG_DEVICE", " gpu "},
                    {"OPREG_FALLBACK", " silent"},
                    {"OPREG_VERBOSE", "1 "}};
  ASSERT_NO_THROW(reg.reload_config());
  const opreg::Config c = reg.config();
  EXPECT_THAT(c.backend_order, ElementsAre("gpu", "cpu"));
  EXPECT_THAT(c.disable, ElementsAre("gpu.test_scale.fwd.slow"));
  EXPECT_THAT(c.force_variants, ElementsAre("gpu.test_scale.fwd.fast"));
  EXPECT_EQ(c.device, "gpu");
  EXPECT_EQ(c.fallback, std::optional<opreg::FallbackPolicy>(opreg::FallbackPolicy::silent));
  EXPECT_EQ(c.verbose, 1);
}

TEST_F(ConfigGood, EmptyVariableCountsAsUnset) {
  {
    ot::ScopedEnv env{{"OPREG_DEVICE", "gpu"}, {"OPREG_VERBOSE", "1"}};
    reg.reload_config();
    EXPECT_EQ(reg.config().device, "gpu");
  }
  ot::ScopedEnv env{{"OPREG_DEVICE", ""},          {"OPREG_BACKEND_ORDER", ""}, {"OPREG_DISABLE", ""},
                    {"OPREG_FORCE_VARIANT", ""},   {"OPREG_FALLBACK", ""},      {"OPREG_VERBOSE", ""},
                    {"OPREG_NUM_THREADS", ""}};
  ASSERT_NO_THROW(reg.reload_config());
  expect_default(reg.config());
  EXPECT_EQ(reg.infer_device().device, (opreg::Device{gpu.backend_id(), 0}));
}

TEST_F(ConfigGood, FromEnvWithNothingSetGivesDefaults) {
  expect_default(opreg::Config::from_env());
  std::vector<std::string> unknown;
  expect_default(opreg::Config::from_env(&unknown));
  for (const auto& name : unknown) {
    const auto& known = opreg::Config::variables();
    EXPECT_EQ(std::find(known.begin(), known.end(), name), known.end()) << name;
  }
  // A fresh registry has the default configuration without reading anything.
  opreg::Registry fresh;
  expect_default(fresh.config());
}

TEST_F(ConfigGood, FromEnvChecksSyntaxOnly) {
  // Names are checked against a registry when applied, not by from_env.
  ot::ScopedEnv env{{"OPREG_DEVICE", "nosuch"}, {"OPREG_DISABLE", "nosuch"}};
  opreg::Config c;
  ASSERT_NO_THROW(c = opreg::Config::from_env());
  EXPECT_EQ(c.device, "nosuch");
  EXPECT_THAT(c.disable, ElementsAre("nosuch"));
  // Names of backends that are not registered wait for one to register (custom backends come
  // after the environment is read): a device is refused where it is used (so it draws no warning
  // before that error), a disabled name is applied with a warning.
  std::vector<std::string> lines;
  reg.set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_NO_THROW(reg.set_config(c));
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_THAT(lines[0], HasSubstr("OPREG_DISABLE entry 'nosuch' names a backend that is not registered"));
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::invalid_argument,
                          {"OPREG_DEVICE='nosuch'", "accepted devices are cpu"}));
}

TEST_F(ConfigGood, NamesOfBackendsRegisteredLaterTakeEffectWhenTheyRegister) {
  ot::ScopedEnv env{{"OPREG_DEVICE", "late"}, {"OPREG_BACKEND_ORDER", "late,cpu"}};
  ASSERT_NO_THROW(reg.reload_config());
  EXPECT_THROW((void)reg.infer_device(), opreg::Error);
  auto late = reg.add_backend(host({.name = "late", .priority = 1}));
  EXPECT_EQ(reg.infer_device().device, (opreg::Device{late.backend_id(), 0}));
}

TEST_F(ConfigGood, BackendOrderNamingAnUnregisteredBackendIsRefusedWhenInferring) {
  ot::ScopedEnv env{{"OPREG_BACKEND_ORDER", "gpu,nosuch"}};
  ASSERT_NO_THROW(reg.reload_config());
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::invalid_argument,
                          {"OPREG_BACKEND_ORDER", "nosuch"}));
}

TEST_F(ConfigGood, VariablesListsWhatTheRegistryReads) {
  EXPECT_THAT(opreg::Config::variables(),
              ::testing::UnorderedElementsAre("OPREG_DEVICE", "OPREG_BACKEND_ORDER", "OPREG_DISABLE",
                                              "OPREG_FORCE_VARIANT", "OPREG_FALLBACK", "OPREG_VERBOSE",
                                              "OPREG_NUM_THREADS", "OPREG_PLUGINS"));
}

// ---------------------------------------------------------------------------------------------
// A failed reload leaves the previous configuration in force

TEST_F(Config, FailedReloadKeepsThePreviousConfiguration) {
  {
    ot::ScopedEnv env{{"OPREG_DEVICE", "gpu"},
                      {"OPREG_VERBOSE", "1"},
                      {"OPREG_DISABLE", "gpu.test_scale.fwd.slow"},
                      {"OPREG_FALLBACK", "warn"}};
    ASSERT_NO_THROW(reg.reload_config());
  }
  auto expect_previous = [&] {
    const opreg::Config c = reg.config();
    EXPECT_EQ(c.device, "gpu");
    EXPECT_EQ(c.verbose, 1);
    EXPECT_THAT(c.disable, ElementsAre("gpu.test_scale.fwd.slow"));
    EXPECT_EQ(c.fallback, std::optional<opreg::FallbackPolicy>(opreg::FallbackPolicy::warn));
    EXPECT_EQ(reg.infer_device().device, (opreg::Device{gpu.backend_id(), 0}));
    for (const auto& b : reg.backends()) EXPECT_EQ(b.fallback, opreg::FallbackPolicy::warn) << b.name;
  };
  {
    // A syntax error in one variable, good values in others.
    SCOPED_TRACE("syntax");
    ot::ScopedEnv env{{"OPREG_DEVICE", "cpu"}, {"OPREG_VERBOSE", "x"}};
    EXPECT_THROW(reg.reload_config(), opreg::Error);
    expect_previous();
  }
  {
    // Well-formed, but a variant of a registered backend that the registry does not know.
    SCOPED_TRACE("names");
    ot::ScopedEnv env{{"OPREG_DEVICE", "cpu"}, {"OPREG_VERBOSE", "2"}, {"OPREG_DISABLE", "gpu.test_scale.fwd.nosuch"}};
    EXPECT_THROW(reg.reload_config(), opreg::Error);
    expect_previous();
  }
  {
    SCOPED_TRACE("force and disable");
    ot::ScopedEnv env{{"OPREG_DEVICE", "cpu"}, {"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.slow"},
                      {"OPREG_DISABLE", "gpu.test_scale.fwd.slow"}};
    EXPECT_THROW(reg.reload_config(), opreg::Error);
    expect_previous();
  }
}

// ---------------------------------------------------------------------------------------------
// set_config

TEST_F(ConfigSetConfig, GoodConfigIsApplied) {
  opreg::Config c;
  c.device = "cpu";
  c.backend_order = {"cpu", "gpu"};
  c.disable = {"gpu.test_scale.fwd.fast"};
  c.force_variants = {"gpu.test_scale.fwd.slow"};
  c.fallback = opreg::FallbackPolicy::silent;
  c.verbose = 1;
  c.num_threads = 3;
  ASSERT_NO_THROW(reg.set_config(c));
  const opreg::Config got = reg.config();
  EXPECT_EQ(got.device, "cpu");
  EXPECT_THAT(got.backend_order, ElementsAre("cpu", "gpu"));
  EXPECT_THAT(got.disable, ElementsAre("gpu.test_scale.fwd.fast"));
  EXPECT_THAT(got.force_variants, ElementsAre("gpu.test_scale.fwd.slow"));
  EXPECT_EQ(got.fallback, std::optional<opreg::FallbackPolicy>(opreg::FallbackPolicy::silent));
  EXPECT_EQ(got.verbose, 1);
  EXPECT_EQ(got.num_threads, 3);
  EXPECT_EQ(reg.infer_device().device, opreg::Device{});
}

TEST_F(ConfigSetConfig, RejectsUnknownNamesLikeReload) {
  opreg::Config good;
  good.device = "gpu";
  ASSERT_NO_THROW(reg.set_config(good));

  auto bad = [&](auto edit, std::vector<std::string> needles) {
    opreg::Config c;
    edit(c);
    EXPECT_TRUE(ThrowsError([&] { reg.set_config(c); }, ErrorKind::invalid_argument, needles));
    EXPECT_EQ(reg.config().device, "gpu");  // unchanged
  };
  bad([](opreg::Config& c) { c.device = "gpu:x"; }, {"OPREG_DEVICE", "gpu:x", "cpu"});
  bad([](opreg::Config& c) { c.backend_order = {"gpu", "No-Such"}; }, {"OPREG_BACKEND_ORDER", "No-Such"});
  bad([](opreg::Config& c) { c.backend_order = {"gpu", "gpu"}; }, {"OPREG_BACKEND_ORDER", "gpu"});
  bad([](opreg::Config& c) { c.disable = {"gpu.test_scale.fwd.nosuch"}; }, {"OPREG_DISABLE", "nosuch"});
  bad([](opreg::Config& c) { c.disable = {"cpu"}; }, {"OPREG_DISABLE", "cpu"});
  bad([](opreg::Config& c) { c.force_variants = {"gpu.test_scale.fwd.nosuch"}; },
      {"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.nosuch"});
  bad([](opreg::Config& c) { c.force_variants = {"gpu.test_scale.fwd.fast", "gpu.test_scale.fwd.slow"}; },
      {"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.fast", "gpu.test_scale.fwd.slow"});
  bad(
      [](opreg::Config& c) {
        c.force_variants = {"gpu.test_scale.fwd.fast"};
        c.disable = {"gpu.test_scale.fwd.fast"};
      },
      {"OPREG_FORCE_VARIANT", "OPREG_DISABLE", "gpu.test_scale.fwd.fast"});
}

// Values that reload_config refuses by syntax must be refused by set_config too ("validates
// like reload_config"), not accepted and then failing later.
TEST_F(ConfigSetConfig, RejectsMalformedDeviceLikeReload) {
  for (const char* device : {"cpu:x", "gpu:", "gpu:0:1", "GPU"}) {
    SCOPED_TRACE(device);
    reg.set_config(opreg::Config{});  // a known starting point for each value
    opreg::Config c;
    c.device = device;
    EXPECT_TRUE(ThrowsError([&] { reg.set_config(c); }, ErrorKind::invalid_argument, {"OPREG_DEVICE", device}));
    EXPECT_EQ(reg.config().device, "");
  }
}

TEST_F(ConfigSetConfig, RejectsVerboseAndNumThreadsOutOfRangeLikeReload) {
  struct Case {
    int opreg::Config::*field;
    int value;
    const char* variable;
  };
  for (const Case& k : {Case{&opreg::Config::verbose, 3, "OPREG_VERBOSE"}, Case{&opreg::Config::verbose, -1, "OPREG_VERBOSE"},
                        Case{&opreg::Config::num_threads, 5000, "OPREG_NUM_THREADS"},
                        Case{&opreg::Config::num_threads, -1, "OPREG_NUM_THREADS"}}) {
    SCOPED_TRACE(::testing::Message() << k.variable << " " << k.value);
    reg.set_config(opreg::Config{});  // a known starting point for each value
    opreg::Config c;
    c.*k.field = k.value;
    EXPECT_TRUE(ThrowsError([&] { reg.set_config(c); }, ErrorKind::invalid_argument, {k.variable}));
    EXPECT_EQ(reg.config().*k.field, 0);
  }
}

TEST_F(ConfigSetConfig, RejectsEmptyListEntriesLikeReload) {
  opreg::Config c;
  c.disable = {"gpu.test_scale.fwd.fast", ""};
  EXPECT_TRUE(ThrowsError([&] { reg.set_config(c); }, ErrorKind::invalid_argument, {"OPREG_DISABLE"}));
  EXPECT_TRUE(reg.config().disable.empty());
}

// ---------------------------------------------------------------------------------------------
// Unknown variables

class LogCapture {
 public:
  explicit LogCapture(opreg::Registry& reg) {
    reg.set_log_sink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  std::vector<std::string> mentioning(std::string_view what) const {
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      if (l.find(what) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 private:
  std::vector<std::string> lines_;
};

TEST_F(ConfigWarning, UnknownVariableGivesOneWarningNamingIt) {
  LogCapture log(reg);
  ot::ScopedEnv env{{"OPREG_DEVCE", "cpu"}};
  ASSERT_NO_THROW(reg.reload_config());  // a warning, not an error
  const auto lines = log.mentioning("OPREG_DEVCE");
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_THAT(lines[0], ::testing::StartsWith("opreg:"));
  EXPECT_THAT(lines[0], HasSubstr("warning"));
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  // The unknown variable changes nothing.
  EXPECT_EQ(reg.config().device, "");
}

TEST_F(ConfigWarning, FromEnvReportsUnknownVariables) {
  ot::ScopedEnv env{{"OPREG_DEVCE", "cpu"}, {"OPREG_VERBOSE", "1"}};
  std::vector<std::string> unknown;
  (void)opreg::Config::from_env(&unknown);
  EXPECT_EQ(std::count(unknown.begin(), unknown.end(), "OPREG_DEVCE"), 1);
  EXPECT_EQ(std::count(unknown.begin(), unknown.end(), "OPREG_VERBOSE"), 0);
}

TEST_F(ConfigWarning, BackendDeclaredVariableGivesNoWarning) {
  opreg::Registry own;
  opreg::register_cpu(own);
  auto gpu_with_var = own.add_backend(std::make_shared<BackendWithVariable>());
  LogCapture log(own);
  ot::ScopedEnv env{{"OPREG_GPU_FOO", "1"}};
  ASSERT_NO_THROW(own.reload_config());
  EXPECT_TRUE(log.mentioning("OPREG_GPU_FOO").empty());
}

TEST_F(ConfigWarning, VariableOfUnregisteredBackendWarns) {
  // `reg` has no backend that reads OPREG_GPU_FOO.
  LogCapture log(reg);
  ot::ScopedEnv env{{"OPREG_GPU_FOO", "1"}};
  ASSERT_NO_THROW(reg.reload_config());
  EXPECT_EQ(log.mentioning("OPREG_GPU_FOO").size(), 1U);
}

TEST_F(ConfigWarning, KnownVariablesGiveNoWarning) {
  LogCapture log(reg);
  ot::ScopedEnv env{{"OPREG_DEVICE", "cpu"}, {"OPREG_VERBOSE", "0"}, {"OPREG_NUM_THREADS", "2"}};
  ASSERT_NO_THROW(reg.reload_config());
  EXPECT_TRUE(log.mentioning("OPREG_DEVICE").empty());
  EXPECT_TRUE(log.mentioning("OPREG_VERBOSE").empty());
  EXPECT_TRUE(log.mentioning("OPREG_NUM_THREADS").empty());
}

}  // namespace
