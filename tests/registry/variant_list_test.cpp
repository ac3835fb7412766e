// Ordered variant lists (opreg/variants.h) through a mock backend: list order as priority beside
// numeric ones, typed device facts reaching supports(), a plan made once per problem and handed
// to the kernel from the cache, and what forcing does to each kind of variant.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "backends/builtin.h"
#include "opreg/variants.h"
#include "support/host_backend.h"
#include "support/test_op.h"
#include "support/throws_error.h"

namespace opreg::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A backend whose devices carry typed facts.
struct GpuFacts {
  std::int64_t max_elements = 0;
};

class FactsBackend : public HostBackend {
 public:
  FactsBackend(HostBackendSpec spec, GpuFacts facts) : HostBackend(std::move(spec)), facts_(facts) {}
  DeviceProps properties(int index) const override {
    DeviceProps props = HostBackend::properties(index);
    props.facts = &facts_;
    return props;
  }

 private:
  GpuFacts facts_;
};

// What the planned entries below decide, and what their kernels saw.
struct TilePlan {
  std::int64_t tile = 0;
  bool refused = false;
};
int g_supports_calls = 0;
std::vector<TilePlan> g_runs;
std::vector<std::string> g_ran;

Verdict tiled_supports(const ScaleArgs& a, const GpuFacts& facts, TilePlan& plan) {
  ++g_supports_calls;
  plan.tile = a.x.numel() / 2 + 1;
  if (a.x.numel() > facts.max_elements) {
    plan.refused = true;
    return Verdict::reject("more elements than the device's facts allow");
  }
  return {true, "tile " + std::to_string(plan.tile)};
}
void tiled_run(const ScaleArgs& a, const TilePlan& plan, const KernelContext& ctx) {
  g_runs.push_back(plan);
  g_ran.push_back(ctx.variant->name);
  scale_on_host(a, ctx);
}
void plain_run(const ScaleArgs& a, const KernelContext& ctx) {
  g_ran.push_back(ctx.variant->name);
  scale_on_host(a, ctx);
}
void plan_only(const ScaleArgs& a, const GpuFacts&, TilePlan& plan) { plan.tile = a.x.numel(); }
Verdict small_only(const ScaleArgs& a, const DeviceProps&) {
  return a.x.numel() <= 4 ? Verdict::accept() : Verdict::reject("not small");
}

class VariantListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_cpu(reg);
    gpu = reg.add_backend(
        std::make_shared<FactsBackend>(HostBackendSpec{.name = "gpu", .priority = 400}, GpuFacts{.max_elements = 20}));
    bare = reg.add_backend(std::make_shared<HostBackend>(HostBackendSpec{.name = "bare", .priority = 300}));
    g_supports_calls = 0;
    g_runs.clear();
    g_ran.clear();
  }
  ScaleArgs args_on(const char* device, Shape shape) {
    ScaleArgs a;
    a.x = Tensor::empty(shape, DType::f32, reg.parse_device(device), reg);
    a.y = Tensor::empty(shape, DType::f32, reg.parse_device(device), reg);
    a.x.fill(1.0, reg);
    return a;
  }
  void force(std::vector<std::string> names) {
    Config c = reg.config();
    c.force_variants = std::move(names);
    reg.set_config(c);
  }
  Registry reg;
  Registration gpu;
  Registration bare;
};

TEST_F(VariantListTest, ListOrderIsThePriorityAndNumericPrioritiesSlotInBetween) {
  register_list(reg, scale_op(), "gpu",
                {{"tiled", &tiled_supports, &tiled_run}, {"small", &small_only, &plain_run}, {"any", &plain_run}});
  ::testing::StrictMock<MockKernel> kernel;  // listed, never run
  auto custom = reg.add_variant(scale_op(), mock_variant("gpu", "custom", 150, kernel));
  std::vector<std::string> names;
  std::vector<int> priorities;
  for (const auto& v : reg.variants("test_scale.fwd")) {
    if (v.backend != "gpu") continue;
    names.push_back(v.impl);
    priorities.push_back(v.priority);
  }
  EXPECT_THAT(names, ElementsAre("tiled", "small", "custom", "any"));
  EXPECT_THAT(priorities, ElementsAre(300, 200, 150, 100));
}

TEST_F(VariantListTest, APlanIsMadeOncePerProblemAndEveryCallRunsIt) {
  register_list(reg, scale_op(), "gpu", {{"tiled", &tiled_supports, &tiled_run}, {"any", &plain_run}});
  ScaleArgs a = args_on("gpu", {3, 5});
  for (int i = 0; i < 3; ++i) reg.call(scale_op(), a);
  EXPECT_EQ(g_supports_calls, 1);  // the cache keeps the plan beside the choice
  ASSERT_EQ(g_runs.size(), 3U);
  for (const TilePlan& p : g_runs) EXPECT_EQ(p.tile, 8);
  ScaleArgs b = args_on("gpu", {2, 3});
  reg.call(scale_op(), b);
  EXPECT_EQ(g_supports_calls, 2);
  EXPECT_EQ(g_runs.back().tile, 4);
  // Too large for the device's facts: refused, the next entry runs.
  ScaleArgs c = args_on("gpu", {5, 5});
  reg.call(scale_op(), c);
  EXPECT_EQ(g_ran.back(), "gpu.test_scale.fwd.any");
}

TEST_F(VariantListTest, CallVariantAndChooseUseTheSamePlan) {
  register_list(reg, scale_op(), "gpu", {{"tiled", &tiled_supports, &tiled_run}});
  ScaleArgs a = args_on("gpu", {4, 4});
  EXPECT_TRUE(reg.call_variant(scale_op(), "gpu.test_scale.fwd.tiled", a).ok);
  ASSERT_EQ(g_runs.size(), 1U);
  EXPECT_EQ(g_runs[0].tile, 9);
  std::string why;
  ASSERT_NE(reg.choose(scale_op(), a, &why), nullptr);
  EXPECT_THAT(why, HasSubstr("tile 9"));  // what supports() said it planned
}

TEST_F(VariantListTest, AForcedListedVariantRunsThePlanItRefused) {
  register_list(reg, scale_op(), "gpu", {{"tiled", &tiled_supports, &tiled_run}, {"any", &plain_run}});
  force({"gpu.test_scale.fwd.tiled"});
  ScaleArgs a = args_on("gpu", {5, 5});
  reg.call(scale_op(), a);
  ASSERT_EQ(g_runs.size(), 1U);
  EXPECT_TRUE(g_runs[0].refused);
  EXPECT_EQ(g_runs[0].tile, 13);
  EXPECT_EQ(g_ran.back(), "gpu.test_scale.fwd.tiled");
}

TEST_F(VariantListTest, AnEntryReadingFactsRefusesADeviceWithout) {
  register_list(reg, scale_op(), "bare", {{"tiled", &tiled_supports, &tiled_run}});
  ScaleArgs a = args_on("bare", {2, 2});
  const Verdict v = reg.call_variant(scale_op(), "bare.test_scale.fwd.tiled", a);
  EXPECT_FALSE(v.ok);
  EXPECT_THAT(v.reason, HasSubstr("no facts"));
}

TEST_F(VariantListTest, APlanOnlyEntryAcceptsEverythingAndStillPlans) {
  register_list(reg, scale_op(), "gpu", {{"planned", &plan_only, &tiled_run}});
  for (const auto& v : reg.variants("test_scale.fwd")) {
    if (v.backend == "gpu") {
      EXPECT_FALSE(v.has_supports);  // `opreg ops`: [accepts all]
    }
  }
  ScaleArgs a = args_on("gpu", {6, 7});
  reg.call(scale_op(), a);
  ASSERT_EQ(g_runs.size(), 1U);
  EXPECT_EQ(g_runs[0].tile, 42);
}

TEST_F(VariantListTest, EntriesAreSitedAtTheirList) {
  const int line = __LINE__ + 1;
  register_list(reg, scale_op(), "gpu", {{"tiled", &tiled_supports, &tiled_run}, {"any", &plain_run}});
  std::vector<std::string> sites;
  for (const auto& v : reg.variants("test_scale.fwd")) {
    if (v.backend == "gpu") sites.push_back(v.site);
  }
  EXPECT_THAT(sites, ElementsAre("tests/registry/variant_list_test.cpp:" + std::to_string(line),
                                 "tests/registry/variant_list_test.cpp:" + std::to_string(line)));
}

}  // namespace
}  // namespace opreg::testing
