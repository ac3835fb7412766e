// The xpu backend's instantiation of the conformance harness on the OpenCL CPU device (PoCL):
// every xpu variant, every (x, weight) dtype pair, llama/gemma/none with offsets, in place,
// with and without a weight, on the shared shapes plus a row of 200,000 columns and 70,000
// short rows (more rows than work-groups, so the groups loop), and the edge-case values. The casting modes and offsets
// meet every shape up to 127 x 4099; the long rows and the many rows run with llama, since a
// mode changes the arithmetic of an element, not how rows and columns are walked, and these
// shapes are most of the label's time (under ASan above all).
#include "conformance/harness.h"
#include "xpu_test_support.h"

namespace opreg::conformance {
namespace {

const std::vector<std::pair<DType, DType>> kAllPairs{{DType::f32, DType::f32},
                                                     {DType::f16, DType::f16},
                                                     {DType::f16, DType::f32},
                                                     {DType::bf16, DType::bf16},
                                                     {DType::bf16, DType::f32}};
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

Grid grid(std::vector<std::pair<DType, DType>> dtypes, std::vector<Shape> shapes,
          std::vector<std::pair<Casting, double>> modes, bool weight) {
  Grid g;
  g.variants = variants_of("xpu");
  g.dtypes = std::move(dtypes);
  g.shapes = std::move(shapes);
  g.rms_modes = std::move(modes);
  g.in_place_too = true;
  g.affine = {{weight, true}};
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
  g.values = {Values::large, Values::equal, Values::special};
  return g;
}

INSTANTIATE_TEST_SUITE_P(xpu_edges, ConformanceTest,
                         ::testing::ValuesIn(expand(edge_grid(), xpu_test::cpu_device())), case_name);
INSTANTIATE_TEST_SUITE_P(xpu, ConformanceTest,
                         ::testing::ValuesIn(expand(grid(kAllPairs, up_to_medium(), kModes, true),
                                                    xpu_test::cpu_device())),
                         case_name);
INSTANTIATE_TEST_SUITE_P(xpu_noweight, ConformanceTest,
                         ::testing::ValuesIn(expand(grid(kOnePerX, up_to_medium(), kNoOffset, false),
                                                    xpu_test::cpu_device())),
                         case_name);
INSTANTIATE_TEST_SUITE_P(xpu_long, ConformanceTest,
                         ::testing::ValuesIn(expand(grid(kAllPairs, long_and_many(), kLlama, true),
                                                    xpu_test::cpu_device())),
                         case_name);
INSTANTIATE_TEST_SUITE_P(xpu_long_noweight, ConformanceTest,
                         ::testing::ValuesIn(expand(grid(kOnePerX, long_and_many(), kLlama, false),
                                                    xpu_test::cpu_device())),
                         case_name);

}  // namespace
}  // namespace opreg::conformance
