// The conformance harness: every kernel variant of every backend against the double-precision
// reference, on seeded random inputs (never zeros), outputs poisoned before the run, with the
// one tolerance table of src/ops/problem.h. A backend instantiates it with its own grid:
//
//   INSTANTIATE_TEST_SUITE_P(npu, ConformanceTest, ::testing::ValuesIn(expand(grid, "npu:0")), case_name);
//
// and labels the test program with its backend's ctest label. A failure prints the worst
// element of each failing output and a one-line reproducer (`opreg run ...`).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ops/problem.h"

namespace opreg::conformance {

struct Case {
  std::string variant;  // full name: cpu.rms_norm.fwd.generic
  std::string device;   // cpu, npu:0, cuda:0
  ProblemSpec spec;
};

// Shapes for group_norm come with their group count.
struct GroupShape {
  Shape shape;
  std::int64_t groups = 1;
};

// Every (x, weight) dtype pair the ops accept.
inline const std::vector<std::pair<DType, DType>> kAllPairs{{DType::f32, DType::f32},
                                                            {DType::f16, DType::f16},
                                                            {DType::f16, DType::f32},
                                                            {DType::bf16, DType::bf16},
                                                            {DType::bf16, DType::f32}};

// rope's problems: q's shape [B, H, T, D] with k's head count (0: q's), the tables' form, the
// pairing and whether q and k are HF's transposed views.
struct RopeCase {
  Shape shape;
  std::int64_t kv_heads = 0;
  RopeTable table = RopeTable::shared;
  RopeStyle style = RopeStyle::half;
  bool transposed = false;
};
// The edge grid every backend covers: D = 2 and D not a multiple of 8, T = 1 (decode), Hk = 1
// and Hk > Hq, every table form (position_ids out of order), transposed views, a head longer
// than the NPU's Unified Buffer (D = 100002: 400 KB in f32), empty batch and sequence.
std::vector<RopeCase> standard_rope_cases();

struct Grid {
  std::vector<std::string> variants;                  // the op comes from each name
  std::vector<std::pair<DType, DType>> dtypes{{DType::f32, DType::f32}};  // (x, weight); glu ops use x only
  std::vector<Shape> shapes;                          // every op but group_norm
  std::vector<GroupShape> group_shapes;               // group_norm
  std::vector<RopeCase> rope_cases = standard_rope_cases();  // rope (its large values: large angles too)
  // rms_norm and fused_add_rms_norm: (casting, offset) pairs.
  std::vector<std::pair<Casting, double>> rms_modes{{Casting::llama, 0.0}};
  // geglu and swiglu: their rounding modes (a case name says a mode other than once).
  std::vector<Rounding> roundings{Rounding::once};
  bool in_place_too = false;  // bwd ops: also run with dx = dy (glu: da = a, db = b)
  // (has_weight, has_bias) pairs: the norms' optional parameters. rms_norm and
  // fused_add_rms_norm have no bias and take the pairs' first half; glu ops ignore it.
  std::vector<std::pair<bool, bool>> affine{{true, true}};
  // The activation inputs' edge cases (problem.h's Values): a grid of its own is the usual way,
  // with a few shapes.
  std::vector<Values> values{Values::random};
  std::uint64_t seed = 1;
};

// Every combination the grid names; dtype pairs with a weight dtype other than x's are skipped
// for the glu ops (they have no weight).
std::vector<Case> expand(const Grid& grid, const std::string& device);

// A test name: variant, dtypes, shape and options, e.g.
// cpu_rms_norm_fwd_generic__bf16_f32__127x4099__gemma_off1.
std::string case_name(const ::testing::TestParamInfo<Case>& info);

// The shapes every backend should cover: degenerate, not powers of two, rows longer than the
// NPU's Unified Buffer (2x200003 f32 is 800 KB a row), a 4-D input, and zero-sized dims.
std::vector<Shape> standard_shapes();
std::vector<GroupShape> standard_group_shapes();

// The variant names of `backend` for every op (active ones, as Registry::variants lists them).
std::vector<std::string> variants_of(const std::string& backend, const std::string& impl = "");

// With CONFORMANCE_DIGESTS=DIR each case also records a digest of its outputs
// (tests/conformance/digests.sh compares two builds bit for bit).
class ConformanceTest : public ::testing::TestWithParam<Case> {};

// The rounding modes of geglu and swiglu (Rounding), per variant: the grids' `torch` cases check
// each mode against its own reference, but the modes are at most an ulp apart on ordinary inputs,
// inside the tolerance. These cases tell them apart bit for bit. f32: once and torch give the same
// bits. f16: the variant's outputs in each mode equal that mode's reference's but for a few
// elements, on inputs where the references of the two modes differ on many (swiglu's backward has
// the same points in both modes: the same bits). A backend instantiates it with its variants:
//
//   INSTANTIATE_TEST_SUITE_P(npu, GluRoundingTest, ::testing::ValuesIn(glu_rounding_cases(variants, "npu:0")),
//                            case_name);
std::vector<Case> glu_rounding_cases(const std::vector<std::string>& variants, const std::string& device);
class GluRoundingTest : public ::testing::TestWithParam<Case> {};

// gtest prints a failing parameter with this: the variant and the reproducer arguments.
void PrintTo(const Case& c, std::ostream* os);

}  // namespace opreg::conformance
