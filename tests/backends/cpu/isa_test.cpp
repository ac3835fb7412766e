// OPREG_CPU_ISA and the cpu backend's default choice. tests/backends/cpu/CMakeLists.txt runs this
// program once per level (OPREG_CPU_ISA=generic, =avx2) and thread count (OPREG_NUM_THREADS=1, 2):
// every op direction in every activation dtype dispatches to a fast variant of the level in force
// (never the reference) and matches the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "backends/builtin.h"
#include "backends/cpu/isa.h"
#include "ops/problem.h"
#include "registry/env.h"

namespace opreg {
namespace {

// Sets an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CpuIsa, BadValueNamesTheVariableTheValueAndWhatIsAccepted) {
  try {
    cpu::parse_isa_cap("avx512");
    FAIL() << "avx512 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    const std::string m = e.what();
    for (const char* part : {"OPREG_CPU_ISA", "'avx512'", "generic", "avx2"}) {
      EXPECT_NE(m.find(part), std::string::npos) << m;
    }
  }
}

TEST(CpuIsa, BadValueFailsTheCpuBackendsRegistration) {
  const ScopedEnv env("OPREG_CPU_ISA", " AVX2 ");
  Registry r;
  try {
    register_cpu(r);
    FAIL() << "a registry came up with OPREG_CPU_ISA=AVX2";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("OPREG_CPU_ISA='AVX2'"), std::string::npos) << e.what();
  }
}

TEST(CpuIsa, BlankIsUnsetAndValuesAreTrimmed) {
  {
    const ScopedEnv env("OPREG_CPU_ISA", "  ");
    EXPECT_EQ(cpu::effective_isa(), cpu::host_isa());
  }
  const ScopedEnv env("OPREG_CPU_ISA", "\tgeneric ");
  EXPECT_EQ(cpu::effective_isa(), cpu::Isa::generic);
}

TEST(CpuIsa, IsAVariableTheCpuBackendReads) {
  const ScopedEnv env("OPREG_CPU_ISA", "generic");
  Registry r;
  register_cpu(r);
  std::string log;
  r.set_log_sink([&](std::string_view line) { log += std::string(line) + "\n"; });
  r.reload_config();
  EXPECT_EQ(log.find("OPREG_CPU_ISA"), std::string::npos) << log;
  EXPECT_EQ(r.device_props(Device{}).get("isa"), "generic");
}

// The level the default registry runs at: what the environment asks, capped by the CPU.
cpu::Isa level() { return cpu::effective_isa(); }

TEST(CpuIsa, VariantsAboveTheLevelRefuseWithTheReason) {
  if (level() == cpu::Isa::avx2) GTEST_SKIP() << "nothing is above avx2";
  const auto listed = default_registry().variants("rms_norm.fwd");
  if (std::none_of(listed.begin(), listed.end(),
                   [](const VariantInfo& v) { return v.name == "cpu.rms_norm.fwd.avx2"; })) {
    GTEST_SKIP() << "no avx2 variants in this build (x86-64 only)";
  }
  ProblemSpec spec;
  spec.op = "rms_norm.fwd";
  Problem p(default_registry(), spec, Device{});
  const Verdict v = p.run_variant("cpu.rms_norm.fwd.avx2");
  EXPECT_FALSE(v.ok);
  const bool capped = cpu::host_isa() == cpu::Isa::avx2;
  EXPECT_NE(v.reason.find(capped ? "OPREG_CPU_ISA" : "AVX2"), std::string::npos) << v.reason;
}

struct OpDtype {
  std::string op;
  DType dtype;
};

class DefaultChoice : public ::testing::TestWithParam<OpDtype> {};

TEST_P(DefaultChoice, IsAFastVariantOfTheLevelAndMatchesTheReference) {
  ProblemSpec spec;
  spec.op = GetParam().op;
  spec.dtype = GetParam().dtype;
  spec.wdtype = DType::f32;  // mixed precision, as the tour runs it
  spec.shape = spec.op.starts_with("group_norm") ? Shape{8, 64, 100}
                : spec.op.starts_with("rope")     ? Shape{2, 8, 32, 130}
                                                  : Shape{64, 1000};
  spec.groups = 8;
  spec.eps = problem_options(spec.op).eps_default;
  Problem p(default_registry(), spec, Device{});
  p.poison();
  const DispatchResult r = p.run();
  ASSERT_NE(r.variant, nullptr);
  EXPECT_EQ(r.variant->impl, cpu::isa_name(level())) << r.variant->name;
  EXPECT_FALSE(r.fell_back);
  const CheckReport report = p.check();
  EXPECT_TRUE(report.pass()) << r.variant->name << ": " << report.summary();
}

std::vector<OpDtype> op_dtypes() {
  std::vector<OpDtype> out;
  for (const auto& op : problem_ops()) {
    for (const DType d : {DType::f32, DType::f16, DType::bf16}) out.push_back({op, d});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(cpu, DefaultChoice, ::testing::ValuesIn(op_dtypes()),
                         [](const ::testing::TestParamInfo<OpDtype>& info) {
                           std::string n = info.param.op + "_" + std::string(to_string(info.param.dtype));
                           for (char& ch : n) {
                             if (ch == '.') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace opreg
