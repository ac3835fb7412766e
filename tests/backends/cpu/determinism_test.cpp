// Reproducibility of the fast cpu variants: for a given thread count, every output (dweight and
// dbias included, which are summed across rows) comes out bit for bit the same on every run,
// whether the pool's workers took part or not: a call made while another thread's call holds the
// pool runs all its items on its own thread and must match.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "op_case.h"

namespace opreg::cpu_test {
namespace {

class Determinism : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    saved_ = default_registry().config();
    Config c = saved_;
    c.num_threads = 2;
    default_registry().set_config(c);
  }
  void TearDown() override { default_registry().set_config(saved_); }

 private:
  Config saved_;
};

// Enough rows (or sets) for several items and row blocks at two threads, bf16 with f32
// parameters (their gradients are the sums that could drift).
CaseSpec spec_for(const std::string& variant) {
  CaseSpec s;
  s.op = op_of(variant);
  s.dtype = DType::bf16;
  s.wdtype = DType::f32;
  s.shape = Shape{300, 1031};
  if (s.op.starts_with("group_norm")) {
    s.shape = Shape{4, 64, 1031};
    s.groups = 8;
  }
  if (s.op.starts_with("rope")) s.shape = Shape{3, 8, 100, 130};
  return s;
}

double pattern(std::string_view tensor, std::int64_t i) {
  const double u = std::fmod(0.7548776662 * static_cast<double>(i + 1) + 0.05 * static_cast<double>(tensor.size()), 1.0);
  return 4.0 * u - 2.0;
}

bool same_bits(const std::vector<Output>& a, const std::vector<Output>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k].value.nbytes() != b[k].value.nbytes() ||
        std::memcmp(a[k].value.data(), b[k].value.data(), a[k].value.nbytes()) != 0) {
      return false;
    }
  }
  return true;
}

TEST_P(Determinism, SameBitsEveryRun) {
  const std::string& variant = GetParam();
  const CaseSpec s = spec_for(variant);
  const OpCase problem(s, pattern);
  bool ok = false;
  const std::vector<Output> first = problem.run(variant, &ok);
  if (!ok) GTEST_SKIP() << variant << " does not run here (OPREG_CPU_ISA, or the CPU)";
  EXPECT_TRUE(same_bits(first, problem.run(variant))) << variant << ": a second run differs";
  // Two callers at once: one of them runs without the pool's workers.
  std::vector<Output> a;
  std::vector<Output> b;
  std::thread other([&] { a = problem.run(variant); });
  b = problem.run(variant);
  other.join();
  EXPECT_TRUE(same_bits(first, a)) << variant << ": a concurrent run differs";
  EXPECT_TRUE(same_bits(first, b)) << variant << ": a concurrent run differs";
}

std::vector<std::string> fast_variants() {
  std::vector<std::string> v = variants("generic");
  for (auto& name : variants("avx2")) v.push_back(name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(cpu, Determinism, ::testing::ValuesIn(fast_variants()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '.') ch = '_';
                           }
                           return n;
                         });

// group_norm with one (n, group): its set is split into parts across the team, and the parts'
// sums are merged in part order.
TEST(DeterminismSplitSets, SameBitsEveryRun) {
  const Config saved = default_registry().config();
  Config c = saved;
  c.num_threads = 2;
  default_registry().set_config(c);
  for (const std::string_view dir : {"fwd", "bwd"}) {
    CaseSpec s;
    s.op = "group_norm." + std::string(dir);
    s.dtype = DType::f32;
    s.shape = Shape{1, 4, 100, 100};
    s.groups = 1;
    const OpCase problem(s, pattern);
    const std::string variant = "cpu.group_norm." + std::string(dir) + ".generic";
    const std::vector<Output> first = problem.run(variant);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(first, problem.run(variant))) << variant;
  }
  default_registry().set_config(saved);
}

}  // namespace
}  // namespace opreg::cpu_test
