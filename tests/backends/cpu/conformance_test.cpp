// The cpu backend's instantiation of the conformance harness: the twelve reference variants (the
// harness checking the oracle is fully written and matches itself on every shape), and every fast
// variant (cpu.<op>.<dir>.generic and .avx2, each forced by name) against the reference.
//
// Several grids for the fast variants, so that the cross product stays quick on two cores:
// cpu_fast crosses every option (dtype pairs, casting modes and offsets, with and without weight
// and bias, in place) on small and medium shapes, the edge shapes among them (1 row, 1 column,
// prime sizes, empty, group_norm with one channel per group, a single group, and N x groups
// below the thread count with sets large enough to be split); cpu_edges the numerical edge cases;
// cpu_long rows longer than any cache level; cpu_stream outputs past 4 MB. rope runs its own
// cases in each (harness.h's RopeCase: the standard edge set, or a few where a grid narrows). cpu_ref and cpu_fast
// also run geglu and swiglu with rounding torch (a few shapes), and cpu_rounding tells the two
// rounding modes apart (harness.h's GluRoundingTest).
// tests/backends/cpu/CMakeLists.txt runs cpu_long under OPREG_NUM_THREADS=1 and 2 (cpu_stream
// under 2), a ctest test per variant (thousands of one-case processes would cost more than the
// cases). An avx2 variant on a CPU without AVX2 (or under OPREG_CPU_ISA=generic) is skipped with
// its reason.
#include "conformance/harness.h"

namespace opreg::conformance {
namespace {

std::vector<std::string> fast_variants() {
  std::vector<std::string> v = variants_of("cpu", "generic");
  for (auto& name : variants_of("cpu", "avx2")) v.push_back(name);
  return v;
}

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

Grid fast_grid() {
  Grid g;
  g.variants = fast_variants();
  g.dtypes = kAllPairs;
  // 1 x 1, one row, one column, primes, 4-D, empty, and 37 x 1031 (prime, several chunks, a team
  // of two at two threads).
  g.shapes = {Shape{1, 1}, Shape{1, 13}, Shape{7, 1}, Shape{3, 5}, Shape{2, 3, 5, 7}, Shape{0, 7}, Shape{4, 0},
              Shape{37, 1031}};
  g.group_shapes = {
      {Shape{1, 1}, 1},
      {Shape{3, 5}, 5},             // one channel per group, spread 1
      {Shape{2, 64, 17}, 64},       // one channel per group, spread 17
      {Shape{5, 7}, 1},             // a single group, spread 1
      {Shape{2, 6, 5, 7}, 3},
      {Shape{4, 32, 9, 7}, 8},
      {Shape{1, 4, 100, 100}, 1},   // N x groups = 1: the set is split across the team
      {Shape{1, 3, 17, 1031}, 1},   // the same with parts that end inside a channel
      {Shape{0, 6, 5}, 3},
      {Shape{2, 6, 0}, 2},
  };
  g.rms_modes = {{Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};
  g.in_place_too = true;
  g.affine = {{true, true}, {false, true}, {true, false}, {false, false}};
  g.seed = 7;
  return g;
}

Grid long_grid() {
  Grid g;
  g.variants = fast_variants();
  g.dtypes = {{DType::f32, DType::f32}, {DType::bf16, DType::f32}, {DType::f16, DType::f16}};
  g.shapes = {Shape{127, 4099}, Shape{2, 200003}, Shape{1, 250000}};
  g.group_shapes = {{Shape{127, 4099}, 1}, {Shape{1, 2, 125003}, 1}, {Shape{3, 64, 1031}, 4}};
  g.rope_cases = {{Shape{1, 2, 3, 250000}, 1, RopeTable::half, RopeStyle::half, false},
                  {Shape{2, 8, 129, 1030}, 3, RopeTable::positions, RopeStyle::interleaved, true}};
  g.seed = 5;
  return g;
}

// Outputs past 4 MB, which the kernels write around the caches, from rows that are not 16-byte
// aligned.
Grid stream_grid() {
  Grid g = long_grid();
  g.dtypes = {{DType::f32, DType::f32}, {DType::bf16, DType::bf16}};
  g.shapes = {Shape{2053, 1031}};
  g.group_shapes = {{Shape{4, 64, 8209}, 8}};
  g.rope_cases = {{Shape{3, 16, 257, 130}, 5, RopeTable::batched, RopeStyle::half, true}};
  g.seed = 3;
  return g;
}

// geglu and swiglu with rounding torch (each case against the reference with the same rounding
// points): the 16-bit dtypes (in f32 the modes are one), a few shapes, in place.
Grid torch_rounding_grid(std::vector<std::string> variants) {
  Grid g;
  std::erase_if(variants, [](const std::string& v) { return v.find("glu.") == std::string::npos; });
  g.variants = std::move(variants);
  g.dtypes = {{DType::f16, DType::f16}, {DType::bf16, DType::bf16}};
  g.shapes = {Shape{3, 5}, Shape{2, 3, 5, 7}, Shape{37, 1031}};
  g.roundings = {Rounding::torch};
  g.in_place_too = true;
  g.seed = 8;
  return g;
}

std::vector<Case> with_torch_rounding(const Grid& grid) {
  std::vector<Case> cases = expand(grid, "cpu");
  for (auto& c : expand(torch_rounding_grid(grid.variants), "cpu")) cases.push_back(std::move(c));
  return cases;
}

// The numerical edge cases (problem.h's Values) for the references: they define what every
// kernel must give there (NaN propagates, equal rows stay finite, large values do not overflow).
Grid reference_edge_grid() {
  Grid g = reference_grid();
  g.shapes = {Shape{3, 5}, Shape{4, 1}, Shape{5, 4099}};
  g.group_shapes = {{Shape{3, 6, 5, 7}, 3}, {Shape{4, 4, 1}, 4}};
  g.rope_cases = {{Shape{2, 3, 4, 6}, 2, RopeTable::shared, RopeStyle::half, false},
                  {Shape{3, 2, 5, 10}, 1, RopeTable::positions, RopeStyle::interleaved, true}};
  g.affine = {{true, true}};
  g.values = {Values::large, Values::equal, Values::special};
  return g;
}

// The same edge cases for every fast variant: NaN and infinities where the reference has them,
// finite outputs for rows of equal values, no overflow from large magnitudes (issue 14's f32 rows
// of |x| ~ 2^59 gave y = 0 and rstd = 0), hidden size 1.
Grid edge_grid() {
  Grid g = reference_edge_grid();
  g.variants = fast_variants();
  g.dtypes = {{DType::f32, DType::f32}, {DType::f16, DType::f16}, {DType::bf16, DType::f32}};
  g.shapes = {Shape{3, 5}, Shape{4, 1}, Shape{5, 4099}};
  g.group_shapes = {{Shape{3, 6, 5, 7}, 3}, {Shape{4, 4, 1}, 4}, {Shape{2, 4, 1031}, 2}};
  g.in_place_too = true;
  g.seed = 13;
  return g;
}

INSTANTIATE_TEST_SUITE_P(cpu_ref_edges, ConformanceTest, ::testing::ValuesIn(expand(reference_edge_grid(), "cpu")),
                         case_name);
INSTANTIATE_TEST_SUITE_P(cpu_edges, ConformanceTest, ::testing::ValuesIn(expand(edge_grid(), "cpu")), case_name);
INSTANTIATE_TEST_SUITE_P(cpu_ref, ConformanceTest, ::testing::ValuesIn(with_torch_rounding(reference_grid())),
                         case_name);
INSTANTIATE_TEST_SUITE_P(cpu_fast, ConformanceTest, ::testing::ValuesIn(with_torch_rounding(fast_grid())), case_name);
INSTANTIATE_TEST_SUITE_P(cpu_rounding, GluRoundingTest, ::testing::ValuesIn(glu_rounding_cases(fast_variants(), "cpu")),
                         case_name);
INSTANTIATE_TEST_SUITE_P(cpu_long, ConformanceTest, ::testing::ValuesIn(expand(long_grid(), "cpu")), case_name);
INSTANTIATE_TEST_SUITE_P(cpu_stream, ConformanceTest, ::testing::ValuesIn(expand(stream_grid(), "cpu")), case_name);

}  // namespace
}  // namespace opreg::conformance
