// The plugin loader with the example plugin (examples/plugin_backend, in C) and the bad plugins of
// bad_plugin.cpp: the example's kernel against the reference through the conformance harness,
// loaded through load_plugin (this program's main) or OPREG_PLUGINS (ctest runs it so too); its
// backend, sites and log lines; loading while other threads dispatch; and every error case, each
// leaving nothing registered.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backends/builtin.h"
#include "conformance/harness.h"
#include "opreg/ops.h"
#include "support/throws_error.h"

#ifndef OPREG_TOY_PLUGIN
#error "OPREG_TOY_PLUGIN must name the example plugin's path"
#endif
#ifndef OPREG_BAD_PLUGIN_DIR
#error "OPREG_BAD_PLUGIN_DIR must name the bad plugins' directory"
#endif

namespace opreg::conformance {
namespace {

using ::testing::HasSubstr;
using opreg::testing::ThrowsError;

const std::string kToy = OPREG_TOY_PLUGIN;
std::string bad(const char* name) { return std::string(OPREG_BAD_PLUGIN_DIR) + "/libopreg_bad_" + name + ".so"; }

Grid toy_grid() {
  Grid g;
  g.variants = variants_of("ctoy");
  g.dtypes = {{DType::f32, DType::f32}};  // what the C kernel takes (its supports() refuses the rest)
  g.shapes = standard_shapes();
  g.rms_modes = {{Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};
  g.affine = {{true, false}, {false, false}};
  g.seed = 13;
  return g;
}

INSTANTIATE_TEST_SUITE_P(ctoy, ConformanceTest, ::testing::ValuesIn(expand(toy_grid(), "ctoy")), case_name);

TEST(PluginExample, IsLoadedIntoTheDefaultRegistry) {
  Registry& reg = default_registry();
  EXPECT_THAT(reg.plugins(), ::testing::Contains(HasSubstr("libopreg_toy_plugin.so")));
  EXPECT_EQ(variants_of("ctoy"), std::vector<std::string>{"ctoy.rms_norm.fwd.c"});
  const Device device = reg.parse_device("ctoy");
  EXPECT_TRUE(reg.device_props(device).emulated);
  EXPECT_EQ(reg.device_props(device).get("lanes"), "8");
}

// A fresh registry with the cpu backend, for what the tests below change.
class Plugins : public ::testing::Test {
 protected:
  Registry reg;
  std::vector<std::string> log;
  void SetUp() override {
    register_cpu(reg);
    reg.set_log_sink([this](std::string_view line) { log.emplace_back(line); });
  }
  std::vector<std::string> backend_names() const {
    std::vector<std::string> out;
    for (const auto& b : reg.backends()) out.push_back(b.name);
    return out;
  }
  std::vector<std::string> variant_names() const {
    std::vector<std::string> out;
    for (const auto& v : reg.variants("rms_norm.fwd")) out.push_back(v.name);
    return out;
  }
  RmsNormFwdArgs problem(Device device, std::int64_t rows, std::int64_t hidden) {
    RmsNormFwdArgs a;
    a.x = Tensor::empty({rows, hidden}, DType::f32, device, reg);
    a.weight = Tensor::empty({hidden}, DType::f32, device, reg);
    a.y = Tensor::empty({rows, hidden}, DType::f32, device, reg);
    a.rstd = Tensor::empty({rows}, DType::f32, device, reg);
    a.x.fill(2.0, reg);
    a.weight.fill(0.5, reg);
    return a;
  }
};

TEST_F(Plugins, LoadedVariantsAreSitedAtThePluginAndChosenByName) {
  reg.load_plugin(kToy);
  const std::vector<std::string> names = backend_names();
  EXPECT_THAT(names, ::testing::Contains("ctoy"));
  bool found = false;
  for (const auto& v : reg.variants("rms_norm.fwd")) {
    if (v.name != "ctoy.rms_norm.fwd.c") continue;
    found = true;
    EXPECT_EQ(v.site, kToy);
    EXPECT_EQ(v.plugin, kToy);
    EXPECT_TRUE(v.has_supports);
    EXPECT_EQ(v.tunables_str(), "accumulate=f64");
  }
  EXPECT_TRUE(found);
  for (const auto& b : reg.backends()) {
    if (b.name == "ctoy") {
      EXPECT_EQ(b.site, kToy);
    }
  }
}

TEST_F(Plugins, ItsKernelRunsAndVerboseLogNamesThePlugin) {
  reg.load_plugin(kToy);
  Config c;
  c.verbose = 1;
  reg.set_config(c);
  RmsNormFwdArgs a = problem(reg.parse_device("ctoy"), 3, 5);
  const DispatchResult r = reg.call(rms_norm_fwd_op(), a);
  ASSERT_NE(r.variant, nullptr);
  EXPECT_EQ(r.variant->name, "ctoy.rms_norm.fwd.c");
  EXPECT_FALSE(r.fell_back);
  std::vector<float> y(15);
  Tensor::wrap(y.data(), {3, 5}, DType::f32).copy_from(a.y, reg);
  EXPECT_NEAR(y[0], 0.5F, 1e-6F);
  ASSERT_EQ(log.size(), 1U);
  EXPECT_THAT(log[0], HasSubstr("-> ctoy.rms_norm.fwd.c [accumulate=f64] from plugin '" + kToy + "'"));
}

// An rms_norm.fwd on the toy plugin's device with bf16 activations (its kernel takes f32 only).
RmsNormFwdArgs bf16_rms_norm_on_ctoy(Registry& reg, std::int64_t rows, std::int64_t hidden) {
  RmsNormFwdArgs a;
  const Device device = reg.parse_device("ctoy");
  a.x = Tensor::empty({rows, hidden}, DType::bf16, device, reg);
  a.y = Tensor::empty({rows, hidden}, DType::bf16, device, reg);
  a.rstd = Tensor::empty({rows}, DType::f32, device, reg);
  a.x.fill(1.0, reg);
  return a;
}

TEST_F(Plugins, ARefusedProblemFallsBackWithThePluginsReason) {
  reg.load_plugin(kToy);
  const RmsNormFwdArgs a = bf16_rms_norm_on_ctoy(reg, 2, 3);
  const DispatchResult r = reg.call(rms_norm_fwd_op(), a);
  EXPECT_TRUE(r.fell_back);  // ctoy's policy: warn
  ASSERT_EQ(log.size(), 1U);
  EXPECT_THAT(log[0], HasSubstr("ctoy.rms_norm.fwd.c: the C kernel takes f32 activations only"));
}

// A plugin is never handed a problem it refused: forcing its variant past the refusal is an error
// naming the variant and its reason (before, the kernel ran on bf16 data as if it were f32).
TEST_F(Plugins, ForcingAVariantPastItsRefusalIsAnErrorNamingItAndTheReason) {
  reg.load_plugin(kToy);
  Config c;
  c.force_variants = {"ctoy.rms_norm.fwd.c"};
  reg.set_config(c);
  const RmsNormFwdArgs a = bf16_rms_norm_on_ctoy(reg, 64, 5000);
  EXPECT_TRUE(ThrowsError([&] { reg.call(rms_norm_fwd_op(), a); }, ErrorKind::unsupported,
                          {"ctoy.rms_norm.fwd.c is forced by OPREG_FORCE_VARIANT but refuses this problem",
                           "the C kernel takes f32 activations only"}));
  std::string why;
  EXPECT_EQ(reg.choose(rms_norm_fwd_op(), a, &why), nullptr);
  EXPECT_THAT(why, HasSubstr("refuses this problem"));
  // An f32 problem it accepts still runs, forced.
  RmsNormFwdArgs f = problem(reg.parse_device("ctoy"), 3, 5);
  EXPECT_EQ(reg.call(rms_norm_fwd_op(), f).variant->name, "ctoy.rms_norm.fwd.c");
}

TEST_F(Plugins, LoadsWhileOtherThreadsDispatch) {
  std::atomic<bool> stop{false};
  std::atomic<long> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      RmsNormFwdArgs a = problem(Device{}, 2, 8);
      while (!stop.load()) {
        reg.call(rms_norm_fwd_op(), a);
        calls.fetch_add(1);
      }
    });
  }
  while (calls.load() < 100) std::this_thread::yield();
  reg.load_plugin(kToy);
  RmsNormFwdArgs on_toy = problem(reg.parse_device("ctoy"), 2, 8);
  EXPECT_EQ(reg.call(rms_norm_fwd_op(), on_toy).variant->name, "ctoy.rms_norm.fwd.c");
  stop.store(true);
  for (auto& t : threads) t.join();
}

// ---- Every error: an opreg::Error naming the file and the reason, and nothing left behind.

struct BadCase {
  const char* label;
  std::string path;
  ErrorKind kind;
  std::vector<std::string> needles;
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.label; }

class BadPlugin : public Plugins, public ::testing::WithParamInterface<BadCase> {};

TEST_P(BadPlugin, IsRefusedNamingFileAndReasonWithNothingRegistered) {
  const BadCase& c = GetParam();
  const auto backends_before = backend_names();
  const auto variants_before = variant_names();
  std::vector<std::string> needles = c.needles;
  needles.push_back("plugin '" + c.path + "'");
  std::string message;
  EXPECT_TRUE(ThrowsError([&] { reg.load_plugin(c.path); }, c.kind, needles, &message));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(backend_names(), backends_before);
  EXPECT_EQ(variant_names(), variants_before);
  EXPECT_TRUE(reg.plugins().empty());
  // The registry works as before, and the good plugin still loads.
  EXPECT_NO_THROW(reg.load_plugin(kToy));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadPlugin,
    ::testing::Values(
        BadCase{"missing_file", "/nonexistent/x.so", ErrorKind::invalid_argument,
                {"cannot load: No such file or directory"}},
        BadCase{"not_a_library", std::string(OPREG_BAD_PLUGIN_DIR) + "/not_a_library.so", ErrorKind::invalid_argument,
                {"cannot load:"}},
        BadCase{"directory", std::string(OPREG_BAD_PLUGIN_DIR), ErrorKind::invalid_argument,
                {"cannot load: it is a directory"}},
        BadCase{"character_device", "/dev/zero", ErrorKind::invalid_argument,
                {"cannot load: it is a character device"}},
        BadCase{"no_entry", bad("no_entry"), ErrorKind::invalid_argument, {"no entry function opreg_plugin_init"}},
        BadCase{"older_version", bad("old_version"), ErrorKind::invalid_argument,
                {"opreg_backend_desc is written against plugin API version 0, older than this opreg accepts (1 to 3)"}},
        BadCase{"newer_version", bad("new_version"), ErrorKind::invalid_argument,
                {"opreg_backend_desc is written against plugin API version 4, newer than this opreg's 3"}},
        BadCase{"struct_size", bad("struct_size"), ErrorKind::invalid_argument,
                {"opreg_backend_desc has struct_size", "another plugin.h"}},
        BadCase{"device_struct_size", bad("device_struct_size"), ErrorKind::invalid_argument,
                {"opreg_backend_desc.devices[0] has struct_size"}},
        BadCase{"missing_service", bad("missing_service"), ErrorKind::invalid_argument,
                {"backend 'badtoy': memory services missing (NULL): copy_on_device, synchronize"}},
        BadCase{"backend_taken", bad("backend_taken"), ErrorKind::invalid_argument,
                {"backend 'cpu' is already registered"}},
        BadCase{"variant_taken", bad("variant_taken"), ErrorKind::invalid_argument,
                {"variant 'badtoy.rms_norm.fwd.a' is already registered"}},
        BadCase{"ignored_error", bad("ignores_error"), ErrorKind::invalid_argument,
                {"op 'nosuch.fwd' has no C argument struct"}},
        BadCase{"entry_fails", bad("entry_fails"), ErrorKind::device,
                {"its entry function failed: no badtoy device answered\\non the bus"}}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.label); });

// dlopen of a FIFO waits for a writer forever: refused before dlopen (ctest's timeout catches a hang).
TEST_F(Plugins, FifoIsRefusedWithoutBlocking) {
  char dir[] = "/tmp/opreg-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/plugin.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(ThrowsError([&] { reg.load_plugin(fifo); }, ErrorKind::invalid_argument,
                          {"plugin '" + fifo + "': cannot load: it is a FIFO"}));
  EXPECT_TRUE(reg.plugins().empty());
  std::remove(fifo.c_str());
  ::rmdir(dir);
}

TEST_F(Plugins, LoadingOnePluginTwiceIsRefused) {
  reg.load_plugin(kToy);
  const auto before = variant_names();
  EXPECT_TRUE(ThrowsError([&] { reg.load_plugin(kToy); }, ErrorKind::invalid_argument,
                          {"plugin '" + kToy + "': already loaded into this registry"}));
  EXPECT_EQ(variant_names(), before);
}

TEST_F(Plugins, OpregPluginsIsParsedAsAColonList) {
  const char* old = std::getenv("OPREG_PLUGINS");
  const std::string saved = old != nullptr ? old : "";
  setenv("OPREG_PLUGINS", " /a.so : /b.so ", 1);
  EXPECT_EQ(Config::from_env().plugins, (std::vector<std::string>{"/a.so", "/b.so"}));
  setenv("OPREG_PLUGINS", "/a.so::/b.so", 1);
  EXPECT_TRUE(ThrowsError([&] { (void)Config::from_env(); }, ErrorKind::invalid_argument,
                          {"OPREG_PLUGINS='/a.so::/b.so': empty entry"}));
  if (old != nullptr) {
    setenv("OPREG_PLUGINS", saved.c_str(), 1);
  } else {
    unsetenv("OPREG_PLUGINS");
  }
}

}  // namespace
}  // namespace opreg::conformance

// Loads the example plugin before gtest expands the conformance grid (which reads the default
// registry's variants), unless OPREG_PLUGINS already made default_registry() load it.
int main(int argc, char** argv) {
  try {
    if (std::getenv("OPREG_PLUGINS") == nullptr) opreg::load_plugin(OPREG_TOY_PLUGIN);
    opreg::default_registry();
  } catch (const opreg::Error& e) {
    std::fprintf(stderr, "plugin_test: %s\n", e.what());
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
