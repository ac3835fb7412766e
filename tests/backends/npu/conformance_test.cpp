// The npu backend's instantiations of the conformance harness: every npu variant run by name
// (its supports() asked: a refusal skips the case with its reason) and the registry's own choice,
// on shapes that reach every tiling mode and boundary. One source, three programs: ctest runs
// each with its profile (OPREG_NPU_PROFILE / OPREG_NPU_UB_BYTES, see CMakeLists.txt), and
// OPREG_NPU_GRID picks the grid that fits it.
#include "backends/npu/npu_backend.h"
#include "backends/npu/rope/plan.h"
#include "ops/describe.h"
#include "conformance/harness.h"
#include "registry/fail.h"

namespace opreg::conformance {
namespace {

constexpr int kGrid = OPREG_NPU_GRID;

const std::vector<std::pair<Casting, double>> kModes{
    {Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};

// Every npu variant of every op, as registered (a new op's variants join the grids by being
// registered; a variant that refuses a case, e.g. a forced-only gpu_port, skips it with its reason).
std::vector<std::string> npu_variants() { return variants_of("npu"); }
// For the registry's choice: one name per op the npu has variants for; the op comes from the
// name, the impl part is a label.
std::vector<std::string> npu_chosen() {
  std::vector<std::string> out;
  for (const auto& op : problem_ops()) {
    for (const auto& v : default_registry().variants(op)) {
      if (v.backend == "npu") {
        out.push_back("npu." + op + ".chosen");
        break;
      }
    }
  }
  return out;
}

// Short rows of 1..7 columns and unaligned pitches (123 f32 is 492 B a row), every dtype pair,
// casting mode, weight or none, in place.
Grid api_grid(const std::vector<std::string>& variants) {
  Grid g;
  g.variants = variants;
  g.dtypes = kAllPairs;
  g.shapes = {Shape{9, 1}, Shape{5, 2},  Shape{3, 3},    Shape{47, 4},  Shape{2, 5}, Shape{45, 6},
              Shape{3, 7}, Shape{3, 41}, Shape{64, 123}, Shape{5, 341}, Shape{0, 7}, Shape{4, 0}};
  // group_norm: spatial sizes of 1, 3 and 7, one channel a group, one group, empty.
  g.group_shapes = {{Shape{5, 8, 1}, 4},  {Shape{3, 6, 3}, 3}, {Shape{4, 12, 7}, 4}, {Shape{2, 6, 5}, 6},
                    {Shape{2, 6, 5}, 1},  {Shape{9, 4, 123}, 2}, {Shape{0, 6, 5}, 3}, {Shape{2, 6, 0}, 2}};
  g.rms_modes = kModes;
  g.affine = {{true, false}, {false, false}};
  g.in_place_too = true;
  g.seed = 3;
  return g;
}

// rope's heads at the whole-head limit of npu.rope.*.rows on the 910B4 and one pair past it
// (rows refuses, chunked cuts the head in two), for each pairing and dtype pair: the limit is the
// planner's, so the cases follow the kernel's UB layout.
std::vector<RopeCase> rope_limit_cases(const std::vector<std::pair<DType, DType>>& dtypes) {
  std::vector<RopeCase> out;
  const npu::DeviceModel m = npu::select_device_model(std::string("Ascend910B4"), std::nullopt);
  for (const auto& [x, w] : dtypes) {
    for (const RopeStyle style : {RopeStyle::half, RopeStyle::interleaved}) {
      npu::rope::RopeSizes s{.x = family::elem_of(x), .w = family::elem_of(w),
                             .pairing = style == RopeStyle::half ? family::Pairing::half : family::Pairing::interleaved,
                             .batch = 1, .seq = 3, .dim = 2, .heads = 2};
      const std::int64_t pairs = npu::largest(1 << 16, [&](std::int64_t n) {
        s.dim = 2 * n;
        return npu::rope::plan(npu::rope::Impl::rows, s, m).fits;
      });
      for (const std::int64_t dim : {2 * pairs, 2 * pairs + 2}) {
        out.push_back({Shape{1, 2, 3, dim}, 1, RopeTable::shared, style, false});
      }
    }
  }
  return out;
}

// Where the tiling changes on the 910B4: CANN's MERGE_N bound (2000), rows at the single-pass
// limit and past it (10240/10241 f32, 12288/12289 16-bit), rows longer than UB, many rows, rows
// fewer than the cores and 40k + 1. The casting modes' arithmetic is the api grid's business.
Grid boundary_grid(const std::vector<std::string>& variants, bool f32) {
  Grid g;
  g.variants = variants;
  if (f32) {
    g.dtypes = {{DType::f32, DType::f32}};
    g.shapes = {Shape{3, 2000},   Shape{43, 2001}, Shape{41, 2048}, Shape{5, 10240}, Shape{3, 10241},
                Shape{2, 200000}, Shape{70000, 7}, Shape{7, 4099},  Shape{81, 341},  Shape{2, 3, 5, 7}};
    // group_norm: N x groups above 65535, a group larger than UB, channels a tile crosses.
    g.group_shapes = {{Shape{33000, 4, 3}, 2}, {Shape{2, 16, 12289}, 1}, {Shape{3, 64, 4099}, 32},
                      {Shape{41, 32, 2001}, 8}};
    g.rms_modes = {{Casting::llama, 0.0}};
  } else {
    g.dtypes = {{DType::bf16, DType::bf16}, {DType::f16, DType::f32}};
    g.shapes = {Shape{5, 12288}, Shape{3, 12289}, Shape{2, 200003}, Shape{41, 4096}, Shape{3000, 33}};
    g.group_shapes = {{Shape{3, 8, 24577}, 2}, {Shape{67000, 2, 3}, 1}, {Shape{5, 32, 4096}, 32}};
    g.rms_modes = {{Casting::gemma, 1.0}};
  }
  g.rope_cases = rope_limit_cases(g.dtypes);  // the standard set runs in the api grid
  g.in_place_too = true;
  g.seed = 5;
  return g;
}

// The 950PR's larger UB (253952 B usable) moves the single-pass limits; a row of 16384 f32 is
// 65536 B, one byte more than a DataCopyPad block, so it splits although UB could hold it.
Grid ub_950_grid(const std::vector<std::string>& variants) {
  Grid g;
  g.variants = variants;
  g.dtypes = {{DType::f32, DType::f32}, {DType::bf16, DType::f32}};
  g.shapes = {Shape{43, 2001}, Shape{5, 10241}, Shape{3, 12289}, Shape{2, 16383},
              Shape{2, 16384}, Shape{81, 341},  Shape{65, 4099}};
  g.group_shapes = {{Shape{3, 4, 16383}, 1}, {Shape{2, 8, 16384}, 4}, {Shape{5, 6, 341}, 3}};
  g.in_place_too = true;
  g.seed = 6;
  return g;
}

// The numerical edge cases (problem.h's Values) on whole and split rows: squares that overflow
// float (large: the forward rescales such rows by a power of two), rows of one value, NaN and
// infinities. Under `large`, f32 parameter gradients sum products of ~2^60 that cancel to ~2^49
// and f32 means sum values that cancel: the kernels sum those exactly (compensated.h). The atomic
// variant is left out of f32 `large`: its cores' partials meet in float atomic adds in arrival
// order, which cannot carry the cancellation (CANN's default mode has the same limit; the
// workspace variants are chosen before it).
std::vector<Grid> edge_grids(const std::vector<std::string>& variants) {
  Grid g;
  g.dtypes = {{DType::f32, DType::f32}, {DType::f16, DType::f16}, {DType::bf16, DType::f32}};
  g.shapes = {Shape{3, 5}, Shape{4, 1}, Shape{5, 4099}, Shape{2, 20011}};
  g.group_shapes = {{Shape{3, 6, 5}, 3}, {Shape{2, 4, 1}, 4}, {Shape{2, 4, 20011}, 2}};
  g.values = {Values::large, Values::equal, Values::special};
  g.seed = 13;
  Grid fwd = g;
  Grid bwd = g;
  Grid bwd_large = g;
  for (const auto& v : variants) (v.find(".fwd.") != std::string::npos ? fwd : bwd).variants.push_back(v);
  bwd.values = {Values::equal, Values::special};
  bwd_large.variants = bwd.variants;
  bwd_large.dtypes = {{DType::f16, DType::f16}, {DType::bf16, DType::f32}};
  bwd_large.values = {Values::large};
  Grid bwd_large_f32 = bwd_large;
  bwd_large_f32.dtypes = {{DType::f32, DType::f32}};
  std::erase_if(bwd_large_f32.variants, [](const std::string& v) { return v.ends_with(".atomic"); });
  return {fwd, bwd, bwd_large, bwd_large_f32};
}

// geglu and swiglu with rounding torch, 16-bit: short rows, a row past the UB (flat and sub_block
// tiles), in place.
Grid torch_rounding_grid(std::vector<std::string> variants) {
  Grid g;
  std::erase_if(variants, [](const std::string& v) { return v.find("glu.") == std::string::npos; });
  g.variants = std::move(variants);
  g.dtypes = {{DType::f16, DType::f16}, {DType::bf16, DType::bf16}};
  g.shapes = {Shape{3, 7}, Shape{64, 123}, Shape{2, 200003}};
  g.roundings = {Rounding::torch};
  g.in_place_too = true;
  g.seed = 4;
  return g;
}

// A small UB (OPREG_NPU_UB_BYTES=16384) splits rows of a few thousand columns and shrinks tiles.
Grid small_ub_grid(const std::vector<std::string>& variants) {
  Grid g;
  g.variants = variants;
  g.dtypes = {{DType::f32, DType::f32}, {DType::bf16, DType::f32}, {DType::f16, DType::f16}};
  g.shapes = {Shape{3, 7}, Shape{64, 123}, Shape{41, 600}, Shape{5, 1000}, Shape{3, 2001}, Shape{2, 20011}};
  g.group_shapes = {{Shape{3, 6, 7}, 3}, {Shape{2, 8, 1000}, 2}, {Shape{2, 4, 5000}, 1}};
  g.rms_modes = kModes;
  g.in_place_too = true;
  g.seed = 9;
  return g;
}

std::vector<Case> cases(bool chosen) {
  const std::vector<std::string> v = chosen ? npu_chosen() : npu_variants();
  std::vector<Case> out;
  auto add = [&](const Grid& g) {
    auto more = expand(g, "npu:0");
    out.insert(out.end(), more.begin(), more.end());
  };
  if (kGrid == 1) {  // the default profile, Ascend910B4
    add(api_grid(v));
    for (const Grid& g : edge_grids(v)) add(g);
    add(torch_rounding_grid(v));
  } else if (kGrid == 4) {  // Ascend910B4's long shapes (ctest label slow)
    add(boundary_grid(v, true));
    add(boundary_grid(v, false));
  } else if (kGrid == 2) {  // Ascend950PR
    add(ub_950_grid(v));
  } else {  // a 16 KiB Unified Buffer
    add(small_ub_grid(v));
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(npu, ConformanceTest, ::testing::ValuesIn(cases(false)), case_name);
// The rounding modes told apart (harness.h), on the default profile's program.
INSTANTIATE_TEST_SUITE_P(npu, GluRoundingTest,
                         ::testing::ValuesIn(kGrid == 1 ? glu_rounding_cases(npu_variants(), "npu:0")
                                                        : std::vector<Case>{}),
                         case_name);

// The registry's choice of npu variant for the problem (no fallback).
class NpuChosen : public ::testing::TestWithParam<Case> {};

TEST_P(NpuChosen, MatchesReference) {
  const Case& c = GetParam();
  Registry& registry = default_registry();
  Problem problem(registry, c.spec, registry.parse_device(c.device));
  problem.poison();
  const DispatchResult result = problem.run();
  ASSERT_NE(result.variant, nullptr);
  EXPECT_FALSE(result.fell_back);
  EXPECT_EQ(result.variant->backend, "npu");
  const CheckReport report = problem.check();
  EXPECT_TRUE(report.pass()) << result.variant->name << ": " << report.summary() << "\n  reproduce: opreg run "
                             << c.spec.cli_args(c.device);
}

INSTANTIATE_TEST_SUITE_P(npu, NpuChosen, ::testing::ValuesIn(cases(true)), case_name);

// This program runs against the profile its ctest entry sets.
TEST(NpuProfile, IsTheOneThisProgramTests) {
  const npu::Emulator* em = npu::emulator_of(default_registry());
  ASSERT_NE(em, nullptr);
  if (kGrid == 1 || kGrid == 4) {
    EXPECT_STREQ(em->profile().name, "Ascend910B4");
    EXPECT_EQ(em->ub_bytes(), 196608U);
  } else if (kGrid == 2) {
    EXPECT_STREQ(em->profile().name, "Ascend950PR");
  } else {
    EXPECT_EQ(em->ub_bytes(), 16384U);
  }
}

}  // namespace
}  // namespace opreg::conformance
