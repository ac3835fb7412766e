// The xpu backend's instantiation of the conformance harness: every xpu variant against the
// reference on the OpenCL CPU device (PoCL), every dtype pair and casting mode, in place too,
// on the shared shapes plus a row of 200,000 columns and 70,000 short rows (more rows than
// work-groups, so the groups loop).
#include "conformance/harness.h"
#include "xpu_test_support.h"

namespace opreg::conformance {
namespace {

Grid xpu_grid() {
  Grid g;
  g.variants = variants_of("xpu");
  g.dtypes = {{DType::f32, DType::f32},
              {DType::f16, DType::f16},
              {DType::f16, DType::f32},
              {DType::bf16, DType::bf16},
              {DType::bf16, DType::f32}};
  g.shapes = standard_shapes();
  g.shapes.push_back(Shape{1, 200000});
  g.shapes.push_back(Shape{70000, 9});
  g.rms_modes = {{Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};
  g.in_place_too = true;
  g.affine = {{true, true}, {false, true}};
  g.seed = 12;
  return g;
}

INSTANTIATE_TEST_SUITE_P(xpu, ConformanceTest, ::testing::ValuesIn(expand(xpu_grid(), xpu_test::cpu_device())),
                         case_name);

}  // namespace
}  // namespace opreg::conformance
