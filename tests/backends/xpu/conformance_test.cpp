// The xpu backend's instantiation of the conformance harness on the OpenCL CPU device (PoCL):
// every xpu variant of every op, every (x, weight) dtype pair, llama/gemma/none with offsets,
// in place, with and without a weight (and bias), on the shared shapes plus a row of 200,000
// columns and 70,000 short rows (more rows than work-groups, so the groups loop); group_norm on
// the shared group shapes plus one channel per group, one group, and N x groups above 65535;
// rope on its standard edge set and one long case; and the edge-case values. The casting modes
// and offsets meet every shape up to 127 x 4099; the long rows and the many rows run with llama,
// since a mode changes the arithmetic of an element, not how rows and columns are walked, and
// these shapes are most of the label's time (under ASan above all).
#include "conformance/harness.h"
#include "xpu_test_support.h"

namespace opreg::conformance {
namespace {

// Without a weight its dtype plays no part: one pair per x dtype.
const std::vector<std::pair<DType, DType>> kOnePerX{
    {DType::f32, DType::f32}, {DType::f16, DType::f16}, {DType::bf16, DType::bf16}};

std::vector<Shape> up_to_medium() {
  std::vector<Shape> out;
  for (const Shape& s : standard_shapes()) {
    if (s.numel() <= 127 * 4099) out.push_back(s);
  }
  return out;
}

std::vector<Shape> long_and_many() {
  std::vector<Shape> out;
  for (const Shape& s : standard_shapes()) {
    if (s.numel() > 127 * 4099) out.push_back(s);
  }
  out.push_back(Shape{1, 200000});
  out.push_back(Shape{70000, 9});
  return out;
}

// group_norm: the shared group shapes split as the row shapes are, plus one channel per group
// and one group over several channels (small), and 33000 x 2 = 66000 sets (more than 65535,
// each a work-group's share of a team).
std::vector<GroupShape> groups_up_to_medium() {
  std::vector<GroupShape> out;
  for (const GroupShape& s : standard_group_shapes()) {
    if (s.shape.numel() <= 127 * 4099) out.push_back(s);
  }
  out.push_back({Shape{5, 6, 5}, 6});
  out.push_back({Shape{3, 8, 41}, 1});
  return out;
}

std::vector<GroupShape> groups_long_and_many() {
  std::vector<GroupShape> out;
  for (const GroupShape& s : standard_group_shapes()) {
    if (s.shape.numel() > 127 * 4099) out.push_back(s);
  }
  out.push_back({Shape{33000, 4, 3}, 2});
  return out;
}

Grid grid(std::vector<std::pair<DType, DType>> dtypes, std::vector<Shape> shapes,
          std::vector<std::pair<Casting, double>> modes, bool weight) {
  const bool long_shapes = shapes.size() > 0 && shapes.back().numel() > 127 * 4099;
  Grid g;
  g.variants = variants_of("xpu");
  g.dtypes = std::move(dtypes);
  g.shapes = std::move(shapes);
  g.group_shapes = long_shapes ? groups_long_and_many() : groups_up_to_medium();
  g.rms_modes = std::move(modes);
  g.in_place_too = true;
  // With a weight: with and without a bias; without: with a bias.
  g.affine = weight ? std::vector<std::pair<bool, bool>>{{true, true}, {true, false}}
                    : std::vector<std::pair<bool, bool>>{{false, true}};
  // rope (no weight: the grids without one would repeat its cases): the standard edge set with the
  // short shapes; in the long grid 600 positions of 11 heads (the teams striding over them).
  if (!weight) {
    g.rope_cases.clear();
  } else if (long_shapes) {
    g.rope_cases = {{Shape{2, 8, 300, 130}, 3, RopeTable::positions, RopeStyle::interleaved, true}};
  }
  g.seed = 12;
  return g;
}

const std::vector<std::pair<Casting, double>> kModes{{Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};
const std::vector<std::pair<Casting, double>> kNoOffset{{Casting::llama, 0.0}, {Casting::gemma, 0.0}};
const std::vector<std::pair<Casting, double>> kLlama{{Casting::llama, 0.0}};

// The numerical edge cases (problem.h's Values): huge values whose squares overflow an f32 sum,
// rows of one value, NaN and infinities that must propagate.
Grid edge_grid() {
  Grid g = grid(kAllPairs, {Shape{3, 5}, Shape{4, 1}, Shape{5, 4099}}, kModes, true);
  g.group_shapes = {{Shape{3, 6, 5}, 3}, {Shape{2, 4, 1}, 4}, {Shape{2, 4, 4099}, 2}};
  g.values = {Values::large, Values::equal, Values::special};
  return g;
}

// geglu and swiglu with rounding torch, 16-bit, a few shapes (in place too); and the two modes
// told apart (harness.h's GluRoundingTest).
Grid torch_rounding_grid() {
  Grid g = grid(kOnePerX, {Shape{3, 5}, Shape{2, 3, 5, 7}, Shape{37, 1031}}, kLlama, true);
  std::erase_if(g.variants, [](const std::string& v) { return v.find("glu.") == std::string::npos; });
  g.dtypes = {{DType::f16, DType::f16}, {DType::bf16, DType::bf16}};
  g.roundings = {Rounding::torch};
  return g;
}

// A grid's cases on the OpenCL CPU device.
auto on_cpu(const Grid& g) { return ::testing::ValuesIn(expand(g, xpu_test::cpu_device())); }

INSTANTIATE_TEST_SUITE_P(xpu_torch, ConformanceTest, on_cpu(torch_rounding_grid()), case_name);
INSTANTIATE_TEST_SUITE_P(xpu, GluRoundingTest,
                         ::testing::ValuesIn(glu_rounding_cases(variants_of("xpu"), xpu_test::cpu_device())),
                         case_name);
INSTANTIATE_TEST_SUITE_P(xpu_edges, ConformanceTest, on_cpu(edge_grid()), case_name);
INSTANTIATE_TEST_SUITE_P(xpu, ConformanceTest, on_cpu(grid(kAllPairs, up_to_medium(), kModes, true)), case_name);
INSTANTIATE_TEST_SUITE_P(xpu_noweight, ConformanceTest, on_cpu(grid(kOnePerX, up_to_medium(), kNoOffset, false)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(xpu_long, ConformanceTest, on_cpu(grid(kAllPairs, long_and_many(), kLlama, true)), case_name);
INSTANTIATE_TEST_SUITE_P(xpu_long_noweight, ConformanceTest, on_cpu(grid(kOnePerX, long_and_many(), kLlama, false)),
                         case_name);

}  // namespace
}  // namespace opreg::conformance
