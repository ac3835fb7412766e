// The harness's one test body and its grid expansion (see harness.h).
#include "conformance/harness.h"

#include <fmt/format.h>

#include <algorithm>
#include "registry/fail.h"

namespace opreg::conformance {
namespace {

std::string op_of(const std::string& variant) {
  // <backend>.<op>.<dir>.<impl>
  const auto first = variant.find('.');
  const auto last = variant.rfind('.');
  return variant.substr(first + 1, last - first - 1);
}

std::string offset_str(double offset) {
  std::string s = fmt::format("{}", offset);
  for (char& c : s) {
    if (c == '.' || c == '-') c = 'p';
  }
  return s;
}

}  // namespace

std::vector<Shape> standard_shapes() {
  return {Shape{1, 1}, Shape{3, 5}, Shape{127, 4099}, Shape{2, 200003}, Shape{2, 3, 5, 7}, Shape{0, 7}, Shape{4, 0}};
}

std::vector<GroupShape> standard_group_shapes() {
  return {{Shape{1, 1}, 1},       {Shape{3, 5}, 5},      {Shape{127, 4099}, 1}, {Shape{2, 200003}, 1},
          {Shape{2, 6, 5, 7}, 3}, {Shape{4, 32, 9, 7}, 8}, {Shape{0, 6, 5}, 3},  {Shape{2, 6, 0}, 2}};
}

std::vector<std::string> variants_of(const std::string& backend, const std::string& impl) {
  std::vector<std::string> out;
  for (const auto& op : problem_ops()) {
    for (const auto& v : default_registry().variants(op)) {
      if (v.backend == backend && (impl.empty() || v.impl == impl)) out.push_back(v.name);
    }
  }
  return out;
}

std::vector<Case> expand(const Grid& grid, const std::string& device) {
  std::vector<Case> cases;
  for (const auto& variant : grid.variants) {
    const std::string op = op_of(variant);
    const ProblemOptions o = problem_options(op);
    std::vector<std::pair<Shape, std::int64_t>> shapes;
    if (o.groups) {
      for (const auto& g : grid.group_shapes) shapes.emplace_back(g.shape, g.groups);
    } else {
      for (const auto& s : grid.shapes) shapes.emplace_back(s, 1);
    }
    std::vector<std::pair<Casting, double>> modes{{Casting::llama, 0.0}};
    if (o.casting) modes = grid.rms_modes;
    std::vector<bool> in_place{false};
    if (o.in_place && grid.in_place_too) in_place.push_back(true);
    // The parameter combinations this op has, each once.
    std::vector<std::pair<bool, bool>> affine;
    for (auto [w, b] : grid.affine) {
      const std::pair<bool, bool> p{w || !o.weight, b || !o.bias};
      if (std::find(affine.begin(), affine.end(), p) == affine.end()) affine.push_back(p);
    }
    for (const auto& [dtype, wdtype] : grid.dtypes) {
      if (!o.wdtype && wdtype != dtype) continue;
      for (const auto& [shape, groups] : shapes) {
        for (const auto& [casting, offset] : modes) {
          for (const auto& [has_weight, has_bias] : affine) {
          for (Values values : grid.values) {
          for (bool ip : in_place) {
            // Without a weight there is no scale, so no offset (the op's check refuses one).
            if (!has_weight && offset != 0.0) continue;
            Case c;
            c.variant = variant;
            c.device = device;
            c.spec.op = op;
            c.spec.dtype = dtype;
            c.spec.wdtype = o.wdtype ? wdtype : dtype;
            c.spec.shape = shape;
            c.spec.groups = groups;
            c.spec.casting = casting;
            c.spec.offset = offset;
            c.spec.in_place = ip;
            c.spec.has_weight = has_weight;
            c.spec.has_bias = has_bias;
            c.spec.values = values;
            c.spec.seed = grid.seed;
            cases.push_back(std::move(c));
          }
          }
          }
        }
      }
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const ProblemOptions o = problem_options(c.spec.op);
  // fmt rather than string + string: g++ 12 at -O3 warns (-Wrestrict) inside std::string's
  // operator+ there, a false positive (GCC PR 105329).
  std::string name = fmt::format("{}__{}", c.variant, to_string(c.spec.dtype));
  if (o.wdtype) name += fmt::format("_{}", to_string(c.spec.wdtype));
  name += fmt::format("__{}", c.spec.shape.str());
  if (o.groups) name += fmt::format("_g{}", c.spec.groups);
  if (o.casting) name += fmt::format("__{}_off{}", to_string(c.spec.casting), offset_str(c.spec.offset));
  if (!c.spec.has_weight) name += "__noweight";
  if (!c.spec.has_bias) name += "__nobias";
  if (c.spec.values != Values::random) name += fmt::format("__{}", to_string(c.spec.values));
  if (c.spec.in_place) name += "__inplace";
  for (char& ch : name) {
    if (ch == '.') ch = '_';
  }
  return name;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.variant << " on " << c.spec.cli_args(c.device); }

TEST_P(ConformanceTest, MatchesReference) {
  const Case& c = GetParam();
  Registry& registry = default_registry();
  const Device device = registry.parse_device(c.device);
  Problem problem(registry, c.spec, device);
  problem.poison();
  const Verdict verdict = problem.run_variant(c.variant);
  if (!verdict.ok) GTEST_SKIP() << c.variant << " does not take this problem: " << verdict.reason;
  const CheckReport report = problem.check();
  RecordProperty("err", fmt::format("{:.3g}", report.err));
  EXPECT_TRUE(report.pass()) << c.variant << ": " << report.summary() << "\n  reproduce: OPREG_FORCE_VARIANT="
                             << c.variant << " opreg run " << c.spec.cli_args(c.device);
}

}  // namespace opreg::conformance
