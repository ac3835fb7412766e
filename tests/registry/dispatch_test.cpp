// Dispatch through mock backends and GoogleMock kernels: which variant runs, and only it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "backends/builtin.h"
#include "support/host_backend.h"
#include "support/test_op.h"
#include "support/throws_error.h"
#include "registry/fail.h"

namespace opreg::testing {
namespace {

using ::testing::_;
using ::testing::HasSubstr;
using ::testing::NiceMock;
using ::testing::Return;
using ::testing::StrictMock;

// A second op, to show forcing is scoped to its own op.
struct OtherArgs {
  Tensor x;
};
void other_check(const OtherArgs&) {}
void other_tensors(OtherArgs& a, TensorList& l) { l.add("x", a.x, Role::inout); }
const Op<OtherArgs>& other_op() {
  static const Op<OtherArgs> op(OpSpec<OtherArgs>{"test_other.fwd", &other_check, &other_tensors, nullptr});
  return op;
}

class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_cpu(reg);
    gpu = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "gpu", .priority = 400}));
    npu = reg.add_backend(std::make_shared<HostBackend>(
        HostBackendSpec{.name = "npu", .priority = 300, .emulated = true, .fallback = FallbackPolicy::warn}));
    reg.set_log_sink([this](std::string_view line) { log.emplace_back(line); });
  }

  Device dev(const char* name) { return reg.parse_device(name); }

  // x filled with 1..n, y poisoned.
  ScaleArgs args_on(Device d, Shape shape = {3, 5}, float alpha = 2.0F) {
    ScaleArgs a;
    a.x = Tensor::empty(shape, DType::f32, d, reg);
    a.y = Tensor::empty(shape, DType::f32, d, reg);
    std::vector<float> host(static_cast<std::size_t>(shape.numel()));
    std::iota(host.begin(), host.end(), 1.0F);
    a.x.copy_from(Tensor::wrap(host.data(), shape, DType::f32), reg);
    a.y.fill(-7.0, reg);
    a.alpha = alpha;
    return a;
  }

  std::vector<float> read(const Tensor& t) {
    std::vector<float> host(static_cast<std::size_t>(t.numel()));
    Tensor::wrap(host.data(), t.shape(), DType::f32).copy_from(t, reg);
    return host;
  }

  void configure(std::initializer_list<std::pair<const char*, const char*>> vars) {
    ScopedEnv env(vars);
    reg.reload_config();
  }

  Registry reg;
  Registration gpu;
  Registration npu;
  std::vector<std::string> log;
};

TEST_F(DispatchTest, CustomBackendReceivesItsCallsAndOnlyItsChosenVariantRuns) {
  StrictMock<MockKernel> high;
  StrictMock<MockKernel> low;
  StrictMock<MockKernel> other_backend;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "high", 20, high));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "low", 10, low));
  auto r3 = reg.add_variant(scale_op(), mock_variant("npu", "any", 99, other_backend));
  ScaleArgs a = args_on(dev("gpu"));
  EXPECT_CALL(high, Run(_, _)).Times(1);
  auto result = reg.call(scale_op(), a);
  ASSERT_NE(result.variant, nullptr);
  EXPECT_EQ(result.variant->name, "gpu.test_scale.fwd.high");
  EXPECT_FALSE(result.fell_back);
}

TEST_F(DispatchTest, PriorityOrderIsIndependentOfRegistrationOrder) {
  StrictMock<MockKernel> low;
  StrictMock<MockKernel> high;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "low", 1, low));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "high", 2, high));
  EXPECT_CALL(high, Run(_, _)).Times(1);
  reg.call(scale_op(), args_on(dev("gpu")));
}

TEST_F(DispatchTest, KernelContextCarriesDeviceStreamPropsAndUserPointer) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, k));
  int stream_token = 0;
  ExecContext ctx{&stream_token};
  EXPECT_CALL(k, Run(_, _)).WillOnce([&](const ScaleArgs&, const KernelContext& c) {
    EXPECT_EQ(c.registry, &reg);
    EXPECT_EQ(c.device, dev("gpu"));
    EXPECT_EQ(c.stream, &stream_token);
    EXPECT_EQ(c.user, &k);
    ASSERT_NE(c.props, nullptr);
    EXPECT_EQ(c.props->name, "gpu test device 0");
    ASSERT_NE(c.variant, nullptr);
    EXPECT_EQ(c.variant->name, "gpu.test_scale.fwd.k");
  });
  reg.call(scale_op(), args_on(dev("gpu")), &ctx);
}

TEST_F(DispatchTest, SupportsRejectionMovesToTheNextVariantAndReasonsAreExplained) {
  StrictMock<MockKernel> picky;
  StrictMock<MockKernel> general;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "picky", 20, picky, /*with_supports=*/true));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "general", 10, general));
  EXPECT_CALL(picky, Supports(_, _)).WillRepeatedly(Return(Verdict::reject("hidden 5 is not a multiple of 8")));
  EXPECT_CALL(general, Run(_, _)).Times(1);
  ScaleArgs a = args_on(dev("gpu"));
  reg.call(scale_op(), a);
  std::string why;
  const VariantInfo* chosen = reg.choose(scale_op(), a, &why);
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->name, "gpu.test_scale.fwd.general");
  EXPECT_THAT(why, HasSubstr("gpu.test_scale.fwd.picky: hidden 5 is not a multiple of 8"));
}

TEST_F(DispatchTest, SupportsSeesTheDevicePropertiesAndTheArguments) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, k, true));
  EXPECT_CALL(k, Supports(_, _)).WillOnce([](const ScaleArgs& a, const DeviceProps& p) {
    EXPECT_EQ(p.compute_units, 4);
    EXPECT_EQ(a.x.size(1), 5);
    return Verdict::accept();
  });
  EXPECT_CALL(k, Run(_, _)).Times(1);
  reg.call(scale_op(), args_on(dev("gpu")));
}

TEST_F(DispatchTest, ChoiceIsCachedPerProblemAndInvalidatedByRegistration) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 10, k, true));
  ScaleArgs small = args_on(dev("gpu"), {3, 5});
  ScaleArgs large = args_on(dev("gpu"), {4, 7});
  EXPECT_CALL(k, Run(_, _)).Times(5);
  {
    ::testing::InSequence seq;
    EXPECT_CALL(k, Supports(_, _)).WillOnce(Return(Verdict::accept()));  // small: miss
    EXPECT_CALL(k, Supports(_, _)).WillOnce(Return(Verdict::accept()));  // large: miss
    EXPECT_CALL(k, Supports(_, _)).WillOnce(Return(Verdict::accept()));  // small after registration
  }
  const auto misses0 = reg.cache_misses();
  reg.call(scale_op(), small);
  reg.call(scale_op(), small);  // hit: Supports not asked again
  reg.call(scale_op(), large);  // another shape: asked
  EXPECT_EQ(reg.cache_misses() - misses0, 2U);
  NiceMock<MockKernel> unrelated;
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "lower", 1, unrelated));  // republishes
  reg.call(scale_op(), small);  // asked again: the cache was invalidated
  reg.call(scale_op(), small);
  EXPECT_EQ(reg.cache_misses() - misses0, 3U);
}

TEST_F(DispatchTest, ForcedVariantSkipsSupportsForItsOwnOpAndBackendOnly) {
  StrictMock<MockKernel> preferred;
  StrictMock<MockKernel> forced;
  StrictMock<MockKernel> npu_kernel;
  StrictMock<MockKernel> other_kernel;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "preferred", 20, preferred, true));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "forced", 10, forced, true));
  auto r3 = reg.add_variant(scale_op(), mock_variant("npu", "only", 10, npu_kernel, true));
  auto r4 = reg.add_variant(other_op(), VariantSpec<OtherArgs>{
                                            .backend = "gpu",
                                            .impl = "plain",
                                            .run = [&](const OtherArgs&, const KernelContext& c) {
                                              other_kernel.Run(ScaleArgs{}, c);
                                            }});
  configure({{"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.forced"}});
  // The forced variant's supports() is never asked; the preferred one never runs.
  EXPECT_CALL(forced, Run(_, _)).Times(1);
  reg.call(scale_op(), args_on(dev("gpu")));
  // Another backend still asks its own supports().
  EXPECT_CALL(npu_kernel, Supports(_, _)).WillOnce(Return(Verdict::accept()));
  EXPECT_CALL(npu_kernel, Run(_, _)).Times(1);
  reg.call(scale_op(), args_on(dev("npu:0")));
  // Another op on the same backend is unaffected.
  EXPECT_CALL(other_kernel, Run(_, _)).Times(1);
  OtherArgs o{Tensor::empty({2}, DType::f32, dev("gpu"), reg)};
  reg.call(other_op(), o);
  EXPECT_TRUE(reg.is_forced(*reg.choose(scale_op(), args_on(dev("gpu")))));
}

TEST_F(DispatchTest, ForcingAVariantThatCannotHandleTheProblemShowsItsOwnFailure) {
  StrictMock<MockKernel> narrow;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "narrow", 10, narrow, true));
  configure({{"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.narrow"}});
  EXPECT_CALL(narrow, Run(_, _)).WillOnce([](const ScaleArgs&, const KernelContext&) {
    fail(ErrorKind::unsupported, "narrow: hidden too large");
  });
  try {
    reg.call(scale_op(), args_on(dev("gpu")));
    FAIL() << "expected the forced variant's own error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("narrow: hidden too large"));
  }
}

TEST_F(DispatchTest, DisabledVariantIsSkipped) {
  StrictMock<MockKernel> best;
  StrictMock<MockKernel> next;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "best", 20, best));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "next", 10, next));
  configure({{"OPREG_DISABLE", "gpu.test_scale.fwd.best"}});
  EXPECT_CALL(next, Run(_, _)).Times(1);
  reg.call(scale_op(), args_on(dev("gpu")));
  for (const auto& v : reg.variants("test_scale.fwd")) {
    EXPECT_EQ(reg.is_disabled(v), v.impl == "best") << v.name;
  }
}

TEST_F(DispatchTest, DisabledBackendFollowsTheFallbackPolicy) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 20, k));
  auto cpu = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "cpu", .impl = "host", .run = scale_on_host});
  configure({{"OPREG_DISABLE", "gpu"}, {"OPREG_FALLBACK", "silent"}});
  ScaleArgs a = args_on(dev("gpu"));
  auto result = reg.call(scale_op(), a);  // k never runs
  EXPECT_TRUE(result.fell_back);
  EXPECT_EQ(result.variant->name, "cpu.test_scale.fwd.host");
}

TEST_F(DispatchTest, FallbackErrorPolicyNamesOpDeviceAndReasons) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, k, true));
  EXPECT_CALL(k, Supports(_, _)).WillRepeatedly(Return(Verdict::reject("needs 16-byte alignment")));
  EXPECT_TRUE(ThrowsError([&] { reg.call(scale_op(), args_on(dev("gpu"))); }, ErrorKind::unsupported,
                          {"test_scale.fwd on gpu:0", "gpu.test_scale.fwd.k: needs 16-byte alignment",
                           "fallback policy of gpu is error"}));
  EXPECT_EQ(reg.fallback_count(), 0U);
}

TEST_F(DispatchTest, FallbackWarnRunsOnCpuThroughHostCopiesWarnsOnceAndCounts) {
  // npu's default policy is warn; it has no variant of this op.
  auto cpu = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "cpu", .impl = "host", .run = scale_on_host});
  ScaleArgs a = args_on(dev("npu:0"), {3, 5}, 3.0F);
  auto result = reg.call(scale_op(), a);
  EXPECT_TRUE(result.fell_back);
  EXPECT_EQ(result.variant->name, "cpu.test_scale.fwd.host");
  auto y = read(a.y);
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], 3.0F * static_cast<float>(i + 1)) << i;
  reg.call(scale_op(), a);
  EXPECT_EQ(reg.fallback_count(), 2U);
  EXPECT_EQ(reg.fallback_count("test_scale.fwd", "npu"), 2U);
  EXPECT_EQ(reg.fallback_count("test_scale.fwd", "gpu"), 0U);
  ASSERT_EQ(log.size(), 1U) << "one warning per (op, backend)";
  EXPECT_THAT(log[0], HasSubstr("warning: test_scale.fwd on npu:0 (emulated) falls back to the cpu"));
}

TEST_F(DispatchTest, FallbackSilentDoesNotLogUnlessVerbose) {
  auto cpu = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "cpu", .impl = "host", .run = scale_on_host});
  configure({{"OPREG_FALLBACK", "silent"}});
  ScaleArgs a = args_on(dev("gpu"));  // gpu's own policy (error) is overridden
  EXPECT_TRUE(reg.call(scale_op(), a).fell_back);
  EXPECT_TRUE(log.empty());
  configure({{"OPREG_FALLBACK", "silent"}, {"OPREG_VERBOSE", "1"}});
  reg.call(scale_op(), a);
  reg.call(scale_op(), a);
  const auto fallback_lines =
      std::count_if(log.begin(), log.end(), [](const std::string& l) { return l.find("falls back") != l.npos; });
  EXPECT_EQ(fallback_lines, 2) << "every fallback is logged at OPREG_VERBOSE >= 1";
  EXPECT_EQ(reg.fallback_count(), 3U);
}

TEST_F(DispatchTest, CpuWithoutAnAcceptedVariantIsAnErrorNotAFallback) {
  configure({{"OPREG_FALLBACK", "warn"}});
  EXPECT_TRUE(
      ThrowsError([&] { reg.call(scale_op(), args_on(Device{})); }, ErrorKind::unsupported, {"test_scale.fwd on cpu"}));
}

TEST_F(DispatchTest, DuplicateNameIsAnErrorNamingBothSites) {
  NiceMock<MockKernel> k;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, k));
  try {
    auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "k", 2, k));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    const std::string msg = e.what();
    EXPECT_THAT(msg, HasSubstr("gpu.test_scale.fwd.k"));
    // Both registration sites are in this file, on different lines.
    const auto first = msg.find("dispatch_test.cpp:");
    ASSERT_NE(first, std::string::npos);
    EXPECT_NE(msg.find("dispatch_test.cpp:", first + 1), std::string::npos) << msg;
  }
}

TEST_F(DispatchTest, OverrideReplacesAndUnregisteringRestoresThePrevious) {
  StrictMock<MockKernel> original;
  StrictMock<MockKernel> replacement;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, original));
  ScaleArgs a = args_on(dev("gpu"));
  {
    auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, replacement), RegisterOptions{true});
    auto listed = reg.variants("test_scale.fwd");
    ASSERT_EQ(listed.size(), 1U);
    EXPECT_TRUE(listed[0].is_override);
    EXPECT_CALL(replacement, Run(_, _)).Times(1);
    reg.call(scale_op(), a);
  }
  EXPECT_CALL(original, Run(_, _)).Times(1);
  reg.call(scale_op(), a);
}

TEST_F(DispatchTest, UnregisteringRemovesTheVariant) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, k));
  EXPECT_EQ(reg.variants("test_scale.fwd").size(), 1U);
  r.reset();
  EXPECT_FALSE(r.active());
  EXPECT_TRUE(reg.variants("test_scale.fwd").empty());
  EXPECT_THROW(reg.call(scale_op(), args_on(dev("gpu"))), Error);  // gpu's policy is error
}

TEST_F(DispatchTest, RegistrationMayOutliveItsRegistry) {
  auto other = std::make_unique<Registry>();
  register_cpu(*other);
  NiceMock<MockKernel> k;
  auto r = other->add_variant(scale_op(), mock_variant("cpu", "k", 1, k));
  other.reset();
  EXPECT_FALSE(r.active());
  r.reset();  // no effect, no crash
}

TEST_F(DispatchTest, VariantNamesAreValidated) {
  NiceMock<MockKernel> k;
  EXPECT_THROW(auto r = reg.add_variant(scale_op(), mock_variant("nosuch", "k", 1, k)), Error);
  EXPECT_THROW(auto r = reg.add_variant(scale_op(), mock_variant("gpu", "Bad-Name", 1, k)), Error);
  EXPECT_THROW(auto r = reg.add_variant(scale_op(), mock_variant("gpu", "ref", 1, k)), Error);  // reserved
  auto ok = reg.add_variant(scale_op(), mock_variant("cpu", "ref", 1, k));
  EXPECT_TRUE(ThrowsError([&] { auto r = reg.add_variant(scale_op(), mock_variant("nosuch", "k", 1, k)); },
                          ErrorKind::invalid_argument,
                          {"backend 'nosuch' is not registered (registered: cpu, gpu, npu)"}));
}

TEST_F(DispatchTest, MixedDeviceArgumentsAreRefusedNamingEachTensorsDevice) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, k));
  ScaleArgs a = args_on(dev("gpu"));
  a.y = Tensor::empty(a.x.shape(), DType::f32, Device{}, reg);
  EXPECT_TRUE(ThrowsError([&] { reg.call(scale_op(), a); }, ErrorKind::invalid_argument, {"x on gpu:0, y on cpu"}));
}

TEST_F(DispatchTest, CheckFunctionRunsBeforeAnyVariant) {
  StrictMock<MockKernel> k;
  auto r = reg.add_variant(scale_op(), mock_variant("gpu", "k", 1, k, true));
  ScaleArgs a = args_on(dev("gpu"));
  a.y = Tensor::empty({2, 2}, DType::f32, dev("gpu"), reg);
  EXPECT_THROW(reg.call(scale_op(), a), Error);  // neither Supports nor Run is called
}

TEST_F(DispatchTest, VerboseOneLogsTheFirstDispatchOfEachProblemOnce) {
  NiceMock<MockKernel> k;
  VariantSpec<ScaleArgs> spec = mock_variant("gpu", "k", 1, k);
  spec.tunables = {{"threads", "8"}};
  auto r = reg.add_variant(scale_op(), spec);
  configure({{"OPREG_VERBOSE", "1"}});
  reg.call(scale_op(), args_on(dev("gpu"), {3, 5}));
  reg.call(scale_op(), args_on(dev("gpu"), {3, 5}));
  reg.call(scale_op(), args_on(dev("gpu"), {6, 5}));
  ASSERT_EQ(log.size(), 2U);
  EXPECT_THAT(log[0], HasSubstr("dispatch test_scale.fwd on gpu:0 -> gpu.test_scale.fwd.k [threads=8] (the only variant)"));
  EXPECT_THAT(log[0], HasSubstr("x=f32[3x5]"));
  EXPECT_THAT(log[1], HasSubstr("x=f32[6x5]"));
}

TEST_F(DispatchTest, VerboseTwoAlsoLogsEachRejectedVariantWithItsReason) {
  NiceMock<MockKernel> picky;
  NiceMock<MockKernel> general;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "picky", 2, picky, true));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "general", 1, general));
  ON_CALL(picky, Supports(_, _)).WillByDefault(Return(Verdict::reject("rows < 64")));
  configure({{"OPREG_VERBOSE", "2"}});
  reg.call(scale_op(), args_on(dev("gpu")));
  ASSERT_EQ(log.size(), 2U);
  EXPECT_THAT(log[0], HasSubstr("-> gpu.test_scale.fwd.general (first accepted of 2 by priority)"));
  EXPECT_THAT(log[1], HasSubstr("rejected gpu.test_scale.fwd.picky: rows < 64"));
}

TEST_F(DispatchTest, UnregisteredBackendsVariantsLeaveTheTable) {
  NiceMock<MockKernel> k;
  auto extra = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "extra"}));
  auto r = reg.add_variant(scale_op(), mock_variant("extra", "k", 1, k));
  EXPECT_EQ(reg.variants("test_scale.fwd").size(), 1U);
  extra.reset();
  EXPECT_TRUE(reg.variants("test_scale.fwd").empty());
}

// Regression tests for what review found: each failed before its fix.
class DispatchRegressionTest : public DispatchTest {};

TEST_F(DispatchRegressionTest, AnIdIsNotReusedWhileTensorsOfItsPreviousBackendLive) {
  auto alpha = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "alpha"}));
  const BackendId alpha_id = alpha.backend_id();
  Tensor kept = Tensor::empty({4}, DType::f32, dev("alpha"), reg);
  alpha.reset();
  auto beta = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "beta"}));
  EXPECT_NE(beta.backend_id(), alpha_id) << "alpha's tensor would be taken for beta's";
  {
    ScaleArgs on_alpha;
    on_alpha.x = kept;
    on_alpha.y = kept;
    EXPECT_THROW(reg.call(scale_op(), on_alpha), Error);  // alpha's device is gone
  }
  beta.reset();
  kept = Tensor();  // the last alpha tensor dies: its id is free again
  auto gamma = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "gamma"}));
  EXPECT_EQ(gamma.backend_id(), alpha_id);
}

TEST_F(DispatchRegressionTest, TheCachedChoiceDependsOnStrides) {
  // A variant that needs unit stride in the last dim must not be reused for a transposed view.
  StrictMock<MockKernel> rowwise;
  StrictMock<MockKernel> general;
  auto strided = [](VariantSpec<ScaleArgs> spec) {
    spec.strided = true;
    return spec;
  };
  auto r1 = reg.add_variant(scale_op(), strided(mock_variant("gpu", "rowwise", 2, rowwise, true)));
  auto r2 = reg.add_variant(scale_op(), strided(mock_variant("gpu", "general", 1, general)));
  ON_CALL(rowwise, Supports(_, _)).WillByDefault([](const ScaleArgs& a, const DeviceProps&) {
    return a.x.stride(1) == 1 ? Verdict::accept() : Verdict::reject("needs stride(1) == 1");
  });
  EXPECT_CALL(rowwise, Supports(_, _)).Times(2);
  std::vector<float> host(32, 1.0F);
  const std::int64_t row_strided[] = {8, 1};  // rows 8 apart: not contiguous, unit inner stride
  const std::int64_t transposed[] = {1, 8};
  ScaleArgs a;
  a.x = Tensor::wrap(host.data(), {4, 4}, DType::f32, dev("gpu"), row_strided);
  a.y = Tensor::empty({4, 4}, DType::f32, dev("gpu"), reg);
  EXPECT_CALL(rowwise, Run(_, _)).Times(1);
  reg.call(scale_op(), a);
  a.x = Tensor::wrap(host.data(), {4, 4}, DType::f32, dev("gpu"), transposed);
  EXPECT_CALL(general, Run(_, _)).Times(1);
  reg.call(scale_op(), a);
}

TEST_F(DispatchRegressionTest, OnlyStridedVariantsSeeNonContiguousTensors) {
  StrictMock<MockKernel> dense;
  StrictMock<MockKernel> general;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "dense", 2, dense));
  std::vector<float> host(32, 1.0F);
  const std::int64_t transposed[] = {1, 8};
  ScaleArgs a;
  a.x = Tensor::wrap(host.data(), {4, 4}, DType::f32, dev("gpu"), transposed);
  a.y = Tensor::empty({4, 4}, DType::f32, dev("gpu"), reg);
  // Only a variant that cannot take strides: refused with the reason, never run. The message
  // names the op, the tensor and its strides, and says that a contiguous copy fixes it.
  EXPECT_TRUE(
      ThrowsError([&] { reg.call(scale_op(), a); }, ErrorKind::unsupported,
                  {"test_scale.fwd on gpu", "gpu.test_scale.fwd.dense: needs contiguous tensors",
                   "x is not contiguous: shape [4x4], strides [1, 8]", "make a contiguous copy of x on gpu:0 first"}));
  // Forcing it does not lift the rule: the kernel would read the wrong elements.
  Config cfg;
  cfg.force_variants = {"gpu.test_scale.fwd.dense"};
  reg.set_config(cfg);
  EXPECT_TRUE(ThrowsError([&] { reg.call(scale_op(), a); }, ErrorKind::unsupported, {"needs contiguous"}));
  reg.set_config(Config{});
  // A strided variant below it takes the strided call; the dense one keeps the contiguous one.
  auto spec = mock_variant("gpu", "general", 1, general);
  spec.strided = true;
  auto r2 = reg.add_variant(scale_op(), std::move(spec));
  EXPECT_CALL(general, Run(_, _)).Times(1);
  reg.call(scale_op(), a);
  a.x = Tensor::wrap(host.data(), {4, 4}, DType::f32, dev("gpu"));
  EXPECT_CALL(dense, Run(_, _)).Times(1);
  reg.call(scale_op(), a);
  // call_variant applies the same rule and says why.
  a.x = Tensor::wrap(host.data(), {4, 4}, DType::f32, dev("gpu"), transposed);
  const Verdict v = reg.call_variant(scale_op(), "gpu.test_scale.fwd.dense", a);
  EXPECT_FALSE(v.ok);
  EXPECT_THAT(v.reason, HasSubstr("x is not contiguous: shape [4x4], strides [1, 8]"));
  EXPECT_THAT(v.reason, HasSubstr("make a contiguous copy of x on gpu:0 first"));
}

TEST_F(DispatchRegressionTest, CallVariantRunsTheNamedVariantOrSaysWhyNot) {
  StrictMock<MockKernel> first;
  StrictMock<MockKernel> second;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "first", 2, first));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "second", 1, second, true));
  ScaleArgs a;
  a.x = Tensor::empty({2, 3}, DType::f32, dev("gpu"), reg);
  a.y = Tensor::empty({2, 3}, DType::f32, dev("gpu"), reg);
  EXPECT_CALL(second, Supports(_, _)).WillOnce(Return(Verdict::accept())).WillOnce(Return(Verdict::reject("no")));
  EXPECT_CALL(second, Run(_, _)).Times(1);
  EXPECT_TRUE(reg.call_variant(scale_op(), "gpu.test_scale.fwd.second", a).ok);
  const Verdict refused = reg.call_variant(scale_op(), "gpu.test_scale.fwd.second", a);
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.reason, "no");
  EXPECT_TRUE(ThrowsError([&] { reg.call_variant(scale_op(), "gpu.test_scale.fwd.third", a); },
                          ErrorKind::invalid_argument, {"no variant named", "gpu.test_scale.fwd.first"}));
}

TEST_F(DispatchRegressionTest, TheCachedChoiceDependsOnAlignment) {
  StrictMock<MockKernel> aligned;
  StrictMock<MockKernel> general;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "aligned", 2, aligned, true));
  auto r2 = reg.add_variant(scale_op(), mock_variant("gpu", "general", 1, general));
  ON_CALL(aligned, Supports(_, _)).WillByDefault([](const ScaleArgs& a, const DeviceProps&) {
    return reinterpret_cast<std::uintptr_t>(a.x.data()) % 16 == 0 ? Verdict::accept()
                                                                  : Verdict::reject("x not 16-byte aligned");
  });
  EXPECT_CALL(aligned, Supports(_, _)).Times(2);
  alignas(64) static float host[64];
  ScaleArgs a;
  a.x = Tensor::wrap(host, {2, 3}, DType::f32, dev("gpu"));
  a.y = Tensor::empty({2, 3}, DType::f32, dev("gpu"), reg);
  EXPECT_CALL(aligned, Run(_, _)).Times(1);
  reg.call(scale_op(), a);
  a.x = Tensor::wrap(host + 1, {2, 3}, DType::f32, dev("gpu"));  // 4-byte aligned only
  EXPECT_CALL(general, Run(_, _)).Times(1);
  reg.call(scale_op(), a);
}

// A backend that records the streams it is asked to synchronise.
class StreamRecordingBackend : public HostBackend {
 public:
  using HostBackend::HostBackend;
  void synchronize(int, void* stream) override { synced.push_back(stream); }
  std::vector<void*> synced;
};

TEST_F(DispatchRegressionTest, FallbackWaitsForTheCallersStreamAndRunsTheHostKernelWithoutIt) {
  auto backend = std::make_shared<StreamRecordingBackend>(
      HostBackendSpec{.name = "acc", .fallback = FallbackPolicy::silent});
  auto acc = reg.add_backend(backend);
  void* host_stream = reinterpret_cast<void*>(0x1);
  auto cpu = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{
                                             .backend = "cpu",
                                             .impl = "host",
                                             .run = [&](const ScaleArgs& a, const KernelContext& c) {
                                               host_stream = c.stream;
                                               scale_on_host(a, c);
                                             }});
  int caller_stream = 0;
  ExecContext ctx{&caller_stream};
  ScaleArgs a = args_on(dev("acc"));
  EXPECT_TRUE(reg.call(scale_op(), a, &ctx).fell_back);
  ASSERT_FALSE(backend->synced.empty());
  EXPECT_EQ(backend->synced.front(), &caller_stream);
  EXPECT_EQ(host_stream, nullptr) << "the caller's device stream must not reach a host kernel";
  EXPECT_EQ(read(a.y)[4], 2.0F * 5.0F);
}

TEST_F(DispatchRegressionTest, UnregisteringTheBackendDuringAFallingBackCallDoesNotCrash) {
  auto gone = reg.add_backend(std::make_shared<HostBackend>(
      HostBackendSpec{.name = "gone", .fallback = FallbackPolicy::silent}));
  NiceMock<MockKernel> k;
  auto v = reg.add_variant(scale_op(), mock_variant("gone", "k", 1, k, true));
  auto cpu = reg.add_variant(scale_op(), VariantSpec<ScaleArgs>{.backend = "cpu", .impl = "host", .run = scale_on_host});
  ScaleArgs a = args_on(dev("gone"));
  // The predicate stands in for another thread unregistering the backend mid-call.
  ON_CALL(k, Supports(_, _)).WillByDefault([&](const ScaleArgs&, const DeviceProps&) {
    gone.reset();
    return Verdict::reject("going away");
  });
  try {
    reg.call(scale_op(), a);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::device) << e.what();  // the device vanished: a clean error
  }
}

TEST_F(DispatchRegressionTest, AnOverrideKeepsThePlaceOfWhatItShadowsAmongEqualPriorities) {
  NiceMock<MockKernel> a_original;
  NiceMock<MockKernel> b;
  StrictMock<MockKernel> a_override;
  auto ra = reg.add_variant(scale_op(), mock_variant("gpu", "a", 5, a_original));
  auto rb = reg.add_variant(scale_op(), mock_variant("gpu", "b", 5, b));
  auto ro = reg.add_variant(scale_op(), mock_variant("gpu", "a", 5, a_override), RegisterOptions{true});
  EXPECT_CALL(a_override, Run(_, _)).Times(1);
  reg.call(scale_op(), args_on(dev("gpu")));
}

TEST_F(DispatchRegressionTest, ForcingDoesNotLeakIntoAnotherOpsChoice) {
  // other_op's variant rejects; if forcing leaked into it, Supports would be skipped.
  StrictMock<MockKernel> forced;
  StrictMock<MockKernel> other_supports;
  auto r1 = reg.add_variant(scale_op(), mock_variant("gpu", "forced", 1, forced, true));
  auto r2 = reg.add_variant(other_op(), VariantSpec<OtherArgs>{
                                            .backend = "gpu",
                                            .impl = "forced",
                                            .supports = [&](const OtherArgs&, const DeviceProps& p) {
                                              return other_supports.Supports(ScaleArgs{}, p);
                                            },
                                            .run = [](const OtherArgs&, const KernelContext&) {}});
  configure({{"OPREG_FORCE_VARIANT", "gpu.test_scale.fwd.forced"}});
  // Asked (at least once: the error message asks again for its reasons), never skipped.
  EXPECT_CALL(other_supports, Supports(_, _)).Times(::testing::AtLeast(1)).WillRepeatedly(Return(Verdict::reject("no")));
  OtherArgs o{Tensor::empty({2}, DType::f32, dev("gpu"), reg)};
  EXPECT_THROW(reg.call(other_op(), o), Error);  // gpu's policy is error
}

TEST_F(DispatchRegressionTest, ErrorsAndLogLinesMarkEmulatedDevices) {
  EXPECT_EQ(reg.device_label(dev("npu:0")), "npu:0 (emulated)");
  EXPECT_EQ(reg.device_label(dev("gpu")), "gpu:0");
  EXPECT_EQ(reg.device_name(dev("npu:0")), "npu:0");  // names stay parseable
}

// Dispatch reads an op's tensors by their offsets in the argument struct, recorded once when the
// op is defined: a `tensors` function that lists anything else is refused there, as is a spec
// with both checks or neither.
TEST(OpDefinition, RefusesTensorsOutsideTheArgumentStructAndAmbiguousChecks) {
  struct StrayArgs {
    Tensor x;
  };
  static Tensor elsewhere;
  OpSpec<StrayArgs> stray{.name = "test_stray.fwd",
                          .check = +[](const StrayArgs&) {},
                          .tensors = +[](StrayArgs&, TensorList& l) { l.add("elsewhere", elsewhere, Role::in); }};
  EXPECT_TRUE(ThrowsError([&] { Op<StrayArgs> op(stray); }, ErrorKind::internal,
                          {"test_stray.fwd", "'elsewhere'", "not a member of the argument struct"}));
  OpSpec<StrayArgs> both{.name = "test_both.fwd",
                         .check = +[](const StrayArgs&) {},
                         .tensors = +[](StrayArgs& a, TensorList& l) { l.add("x", a.x, Role::in); },
                         .check_facts = +[](const StrayArgs&) { return CallFacts{}; }};
  EXPECT_TRUE(ThrowsError([&] { Op<StrayArgs> op(both); }, ErrorKind::internal, {"one of check and check_facts"}));
  both.check = nullptr;
  both.check_facts = nullptr;
  EXPECT_TRUE(ThrowsError([&] { Op<StrayArgs> op(both); }, ErrorKind::internal, {"one of check and check_facts"}));
}

}  // namespace
}  // namespace opreg::testing
