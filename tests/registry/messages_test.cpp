// What a hostile tester found in the registry's handling of names and values (issue 14), one
// test each: the documented default backend order in a build without every backend, words in
// OPREG_DISABLE, one rule for device indices, and one-line messages that echo values quoted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "opreg/registry.h"
#include "registry/quote.h"
#include "support/host_backend.h"
#include "support/test_op.h"
#include "support/throws_error.h"

namespace opreg::testing {
namespace {

using ::testing::HasSubstr;

// cpu and gpu registered, the test op with one variant each; cuda, npu and xpu declared absent
// (a build without them); every variable the registry reads unset.
class Messages : public ::testing::Test {
 protected:
  CleanRegistryEnv clean_env_;
  Registry reg;
  Registration cpu = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "cpu", .priority = 0}));
  Registration gpu = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "gpu", .priority = 50}));
  Registration cpu_v = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "cpu", .impl = "a",
                                                                          .run = &scale_on_host});
  Registration gpu_v = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "gpu", .impl = "a",
                                                                          .run = &scale_on_host});
  std::vector<std::string> log;

  void SetUp() override {
    reg.declare_absent_backend("cuda", "built without a CUDA toolkit");
    reg.declare_absent_backend("npu", "built with OPREG_WITH_NPU=OFF");
    reg.declare_absent_backend("xpu", "not built in this version");
    reg.set_log_sink([this](std::string_view line) { log.emplace_back(line); });
  }
  void expect_one_line_each() const {
    for (const auto& l : log) EXPECT_EQ(l.find('\n'), std::string::npos) << l;
  }
};

// ---- (b) the documented default order names backends this build lacks

TEST_F(Messages, BackendOrderSkipsBuiltInBackendsThisBuildLacks) {
  ScopedEnv env{{"OPREG_BACKEND_ORDER", "cuda,npu,xpu,cpu"}};
  ASSERT_NO_THROW(reg.reload_config());
  const Inference inferred = reg.infer_device();
  EXPECT_EQ(inferred.device, Device{});
  EXPECT_THAT(inferred.why, HasSubstr("OPREG_BACKEND_ORDER order cuda,npu,xpu,cpu"));
  EXPECT_THAT(inferred.why, HasSubstr("skipped cuda (not built: built without a CUDA toolkit), npu (not built: "));
  EXPECT_THAT(inferred.why, HasSubstr("xpu (not built: not built in this version)"));
  EXPECT_TRUE(log.empty()) << log.front();
}

TEST_F(Messages, BackendOrderStillRefusesANameNoBackendHas) {
  ScopedEnv env{{"OPREG_BACKEND_ORDER", "xpu,nosuch,cpu"}};
  ASSERT_NO_THROW(reg.reload_config());  // a custom backend of that name may register later
  EXPECT_TRUE(log.empty());
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::invalid_argument,
                          {"OPREG_BACKEND_ORDER", "'nosuch'", "not built: cuda, npu, xpu"}));
}

// ---- (c) OPREG_DISABLE takes backend names and variant names of defined ops, nothing else

TEST_F(Messages, DisableRefusesWhatIsNeitherABackendNorAVariantOfADefinedOp) {
  for (const char* bad : {"gpu.test_scale", "a.b.c.d", "gpu.nosuch.fwd.x", "mine.nosuch.fwd.x",
                          "gpu.test_scale.sideways.a", "gpu.test_scale.fwd.nosuch", "GPU", "gpu:0", "cpu"}) {
    SCOPED_TRACE(bad);
    ScopedEnv env{{"OPREG_DISABLE", bad}};
    EXPECT_TRUE(ThrowsError([&] { reg.reload_config(); }, ErrorKind::invalid_argument,
                            {"OPREG_DISABLE", std::string(bad)}));
    EXPECT_TRUE(reg.config().disable.empty());
  }
  EXPECT_TRUE(log.empty());
}

TEST_F(Messages, DisableAcceptsBackendsRegisteredAbsentOrLaterWithOneWarningForLater) {
  ScopedEnv env{{"OPREG_DISABLE", "gpu,xpu,xpu.test_scale.fwd.a,gpu.test_scale.fwd.a,mine,mine.test_scale.fwd.a"}};
  ASSERT_NO_THROW(reg.reload_config());
  ASSERT_EQ(log.size(), 2U);
  EXPECT_EQ(log[0], "opreg: warning: OPREG_DISABLE entry 'mine' names a backend that is not registered (yet); it "
                    "takes effect when a backend of that name registers");
  EXPECT_THAT(log[1], HasSubstr("OPREG_DISABLE entry 'mine.test_scale.fwd.a' names a backend"));
}

TEST_F(Messages, ForceVariantRefusesVariantsOfUndefinedOpsAndOfBackendsNotBuilt) {
  {
    ScopedEnv env{{"OPREG_FORCE_VARIANT", "mine.nosuch.fwd.x"}};
    EXPECT_TRUE(ThrowsError([&] { reg.reload_config(); }, ErrorKind::invalid_argument,
                            {"OPREG_FORCE_VARIANT", "'mine.nosuch.fwd.x'", "test_scale.fwd"}));
  }
  {
    ScopedEnv env{{"OPREG_FORCE_VARIANT", "xpu.test_scale.fwd.a"}};
    EXPECT_TRUE(ThrowsError([&] { reg.reload_config(); }, ErrorKind::unsupported, {"xpu", "not built"}));
  }
  EXPECT_TRUE(log.empty());
}

// ---- (d) one rule for device indices: malformed is invalid (exit 2), beyond the count is a
// device error (exit 3) whatever its size

TEST_F(Messages, AnIndexBeyondTheDeviceCountIsADeviceErrorWhateverItsSize) {
  EXPECT_TRUE(ThrowsError([&] { reg.check_device(reg.parse_device("gpu:1")); }, ErrorKind::device,
                          {"device gpu:1 does not exist: gpu has 1 device(s) (gpu:0)"}));
  for (const char* text : {"gpu:32767", "gpu:32768", "gpu:99999", "gpu:99999999999999999999999999"}) {
    SCOPED_TRACE(text);
    EXPECT_TRUE(ThrowsError([&] { reg.check_device(reg.parse_device(text)); }, ErrorKind::device,
                            {"does not exist: gpu has 1 device(s) (gpu:0)"}));
  }
  EXPECT_EQ(reg.parse_device("gpu:000"), reg.parse_device("gpu"));
  for (const char* text : {"gpu:-1", "gpu:+1", "gpu:", "gpu:1x", "gpu: 1"}) {
    SCOPED_TRACE(text);
    EXPECT_TRUE(ThrowsError([&] { (void)reg.parse_device(text); }, ErrorKind::invalid_argument,
                            {quote(text), "accepted devices are cpu, gpu"}));
  }
}

TEST_F(Messages, OpregDeviceWithAnIndexBeyondTheCountIsRefusedWhereItIsUsed) {
  for (const char* value : {"gpu:7", "gpu:99999", "gpu:123456789012345678901234567890"}) {
    SCOPED_TRACE(value);
    ScopedEnv env{{"OPREG_DEVICE", value}};
    ASSERT_NO_THROW(reg.reload_config());
    EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::device, {"does not exist"}));
  }
}

// ---- (e) no warning before an error; one line each; values quoted and escaped

TEST_F(Messages, AnUnknownDeviceNameIsOneErrorWithoutAWarningBeforeIt) {
  ScopedEnv env{{"OPREG_DEVICE", "nonsense"}};
  ASSERT_NO_THROW(reg.reload_config());  // a custom backend of that name may register later
  EXPECT_TRUE(log.empty()) << log.front();
  EXPECT_TRUE(ThrowsError([&] { (void)reg.infer_device(); }, ErrorKind::invalid_argument,
                          {"OPREG_DEVICE='nonsense': invalid device 'nonsense'"}));
  EXPECT_TRUE(log.empty());
}

TEST_F(Messages, ControlCharactersInValuesAreEscapedAndMessagesStayOneLine) {
  const struct {
    const char* var;
    const char* value;
    ErrorKind kind;
    const char* shown;
  } cases[] = {
      {"OPREG_DEVICE", "cpu\nX", ErrorKind::invalid_argument, "'cpu\\nX'"},
      {"OPREG_DEVICE", "gpu:1\x1b[31m", ErrorKind::invalid_argument, "'gpu:1\\x1b[31m'"},
      {"OPREG_DISABLE", "gpu\r", ErrorKind::invalid_argument, "'gpu\\r'"},
      {"OPREG_BACKEND_ORDER", "cpu,it's", ErrorKind::invalid_argument, "'it\\'s'"},
      {"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.a\n", ErrorKind::invalid_argument, "'gpu.test_scale.fwd.a\\n'"},
      {"OPREG_FALLBACK", "warn\nerror", ErrorKind::invalid_argument, "'warn\\nerror'"},
      {"OPREG_VERBOSE", "1\t2", ErrorKind::invalid_argument, "'1\\t2'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.var);
    ScopedEnv env{{c.var, c.value}};
    std::string message;
    EXPECT_TRUE(ThrowsError([&] { reg.reload_config(); }, c.kind, {c.var, c.shown}, &message));
    EXPECT_EQ(message.find_first_of("\n\r\x1b"), std::string::npos) << message;
  }
  {
    ScopedEnv env{{"OPREG_DEVICE", "cpu\n"}};  // blanks around a value are trimmed, a newline is not
    EXPECT_TRUE(ThrowsError([&] { reg.reload_config(); }, ErrorKind::invalid_argument, {"'cpu\\n'"}));
  }
  EXPECT_TRUE(ThrowsError([&] { (void)reg.parse_device("cpu\nX"); }, ErrorKind::invalid_argument, {"'cpu\\nX'"}));
  {
    ScopedEnv env{{"OPREG_DISABLE", "mine\x01"}};
    EXPECT_TRUE(ThrowsError([&] { reg.reload_config(); }, ErrorKind::invalid_argument, {"'mine\\x01'"}));
  }
  {
    ScopedEnv env{{"OPREG_NO\nSUCH", "1"}};
    ASSERT_NO_THROW(reg.reload_config());
    ASSERT_EQ(log.size(), 1U);
    EXPECT_THAT(log[0], HasSubstr("warning: 'OPREG_NO\\nSUCH' is not a variable"));
  }
  expect_one_line_each();
}

TEST(Quote, EscapesWhatWouldBreakALineOrHideACharacter) {
  EXPECT_EQ(quote("cpu"), "'cpu'");
  EXPECT_EQ(quote(""), "''");
  EXPECT_EQ(quote("a\nb\tc\rd"), "'a\\nb\\tc\\rd'");
  EXPECT_EQ(quote("it's \\ ok"), "'it\\'s \\\\ ok'");
  EXPECT_EQ(quote(std::string("\x00\x1f\x7f", 3)), "'\\x00\\x1f\\x7f'");
  EXPECT_EQ(quote("caf\xc3\xa9"), "'caf\xc3\xa9'");  // UTF-8 passes through
}

}  // namespace
}  // namespace opreg::testing
