// The op with the most tensors through the C plugin interface: wide_plugin.c's group_norm.bwd
// kernel (eight tensors as DLTensor views) against the reference, through the conformance
// harness, with and without weight and bias, and in place.
#include <gtest/gtest.h>

#include "conformance/harness.h"
#include "ops/manifest.h"

#ifndef OPREG_WIDE_PLUGIN
#error "OPREG_WIDE_PLUGIN must name the wide plugin's path"
#endif

namespace opreg::conformance {
namespace {

// group_norm.bwd has the most tensors of any op: what this test is about.
static_assert(manifest::Spec<GroupNormBwdArgs>::fields.size() == manifest::kMaxTensors);

Grid wide_grid() {
  Grid g;
  g.variants = {"cpu.group_norm.bwd.cwide"};
  g.dtypes = {{DType::f32, DType::f32}};  // what the C kernel takes
  g.group_shapes = standard_group_shapes();
  g.affine = {{true, true}, {true, false}, {false, true}, {false, false}};
  g.in_place_too = true;
  g.seed = 17;
  return g;
}

INSTANTIATE_TEST_SUITE_P(cwide, ConformanceTest, ::testing::ValuesIn(expand(wide_grid(), "cpu")), case_name);

}  // namespace
}  // namespace opreg::conformance

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  opreg::load_plugin(OPREG_WIDE_PLUGIN);
  return RUN_ALL_TESTS();
}
