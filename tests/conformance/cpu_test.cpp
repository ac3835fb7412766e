// The cpu backend's instantiation of the conformance harness: the twelve reference variants
// (the harness checking the oracle is fully written and matches itself on every shape) and the
// fast rms_norm variants against the reference.
#include "conformance/harness.h"

namespace opreg::conformance {
namespace {

const std::vector<std::pair<DType, DType>> kAllPairs{{DType::f32, DType::f32}, {DType::f16, DType::f16},
                                                     {DType::f16, DType::f32}, {DType::bf16, DType::bf16},
                                                     {DType::bf16, DType::f32}};

Grid reference_grid() {
  Grid g;
  g.variants = variants_of("cpu", "ref");
  g.dtypes = {{DType::f32, DType::f32}, {DType::f16, DType::f32}, {DType::bf16, DType::bf16}};
  g.shapes = standard_shapes();
  g.group_shapes = standard_group_shapes();
  g.affine = {{true, true}, {false, true}, {true, false}, {false, false}};
  g.seed = 11;
  return g;
}

Grid fast_rms_norm_grid() {
  Grid g;
  g.variants = {"cpu.rms_norm.fwd.generic", "cpu.rms_norm.bwd.generic"};
  g.dtypes = kAllPairs;
  g.shapes = standard_shapes();
  g.rms_modes = {{Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};
  g.in_place_too = true;
  g.affine = {{true, true}, {false, true}};
  g.seed = 7;
  return g;
}

// The numerical edge cases (problem.h's Values) for the references: they define what every
// kernel must give there (NaN propagates, equal rows stay finite, large values do not overflow).
Grid reference_edge_grid() {
  Grid g = reference_grid();
  g.shapes = {Shape{3, 5}, Shape{4, 1}, Shape{5, 4099}};
  g.group_shapes = {{Shape{3, 6, 5, 7}, 3}, {Shape{4, 4, 1}, 4}};
  g.affine = {{true, true}};
  g.values = {Values::large, Values::equal, Values::special};
  return g;
}

INSTANTIATE_TEST_SUITE_P(cpu_ref_edges, ConformanceTest, ::testing::ValuesIn(expand(reference_edge_grid(), "cpu")),
                         case_name);
INSTANTIATE_TEST_SUITE_P(cpu_ref, ConformanceTest, ::testing::ValuesIn(expand(reference_grid(), "cpu")), case_name);
INSTANTIATE_TEST_SUITE_P(cpu_generic, ConformanceTest, ::testing::ValuesIn(expand(fast_rms_norm_grid(), "cpu")),
                         case_name);

}  // namespace
}  // namespace opreg::conformance
