// The cuda variants on a real GPU (rms_norm's and fused_add_rms_norm's in particular): every
// variant against the reference through the conformance harness (each variant run by name, and
// the registry's own choice), results that are bit-identical run to run (dW included), the op's
// stream, a second GPU, and the errors.
// Without a usable GPU every test skips with the reason the backend gave (main prints it once for
// ctest's SKIP_REGULAR_EXPRESSION).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/cuda_like/gpu_vendor.h"
#include "conformance/harness.h"
#include "ops/problem.h"
#include "support/throws_error.h"

namespace opreg {
namespace {

const Availability& cuda_availability() {
  static const Availability a = [] {
    for (const auto& b : default_registry().backends()) {
      if (b.name == "cuda") return b.availability;
    }
    return Availability{false, 0, "the cuda backend is not registered"};
  }();
  return a;
}
bool have_gpu() { return cuda_availability().available; }
int gpu_count() { return have_gpu() ? cuda_availability().device_count : 0; }

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no usable GPU: " << cuda_availability().reason

// The shared shapes, plus what picks each variant's paths: many rows of 16-byte aligned short
// rows (several rows a warp, persistent grid), aligned rows over several warps (5120) and over a
// whole block (16384: the cluster variant for few rows), rows longer than one block holds
// (65536, 200000, 262144: clusters up to 8 blocks), and a row no cluster holds (1,048,576). 1000:
// 16-byte aligned rows whose last accesses leave some threads short, two rows a block over
// several warps in the layer_norm rows backward.
std::vector<Shape> cuda_shapes() {
  std::vector<Shape> shapes = conformance::standard_shapes();
  for (const Shape& s : {Shape{70000, 64}, Shape{300, 1000}, Shape{37, 5120}, Shape{3, 16384}, Shape{2, 65536},
                         Shape{2, 200000}, Shape{3, 262144}, Shape{1, 1048576}}) {
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<conformance::Case> forced_cases() {
  if (!have_gpu()) return {};
  conformance::Grid g;
  g.variants = conformance::variants_of("cuda");
  g.dtypes = conformance::kAllPairs;
  g.shapes = cuda_shapes();
  g.rms_modes = {{Casting::llama, 0.0}, {Casting::gemma, 1.0}, {Casting::none, 0.5}};
  g.in_place_too = true;
  g.affine = {{true, true}, {false, true}, {true, false}};  // with and without a weight, a bias
  // group_norm: the shared shapes, N x groups past 65535, one group larger than a block's work,
  // one channel a group, spatial sizes 1, 3 and 7.
  g.group_shapes = conformance::standard_group_shapes();
  for (const conformance::GroupShape& s :
       {conformance::GroupShape{Shape{33000, 4, 3}, 2}, conformance::GroupShape{Shape{2, 16, 20011}, 1},
        conformance::GroupShape{Shape{3, 12, 7}, 12}, conformance::GroupShape{Shape{5, 8, 1}, 4},
        conformance::GroupShape{Shape{4, 64, 33}, 32}}) {
    g.group_shapes.push_back(s);
  }
  // rope: 16-byte groups (D/2 or D a multiple of 8 elements, every head on 16 bytes) beside the
  // standard set's single elements, more heads than a block has slots, and more positions than
  // the grid has blocks (the grid-stride loop).
  for (const conformance::RopeCase& r :
       {conformance::RopeCase{Shape{2, 8, 33, 128}, 2, RopeTable::shared, RopeStyle::half, true},
        conformance::RopeCase{Shape{2, 4, 17, 256}, 5, RopeTable::batched, RopeStyle::interleaved, false},
        conformance::RopeCase{Shape{1, 300, 3, 16}, 700, RopeTable::positions, RopeStyle::half, true},
        conformance::RopeCase{Shape{1, 1, 140000, 2}, 1, RopeTable::flat, RopeStyle::interleaved, false}}) {
    g.rope_cases.push_back(r);
  }
  g.seed = 17;
  std::vector<conformance::Case> cases = conformance::expand(g, "cuda:0");
  // The numerical edge cases (problem.h's Values) on the rows path, the cluster path and split
  // rows, hidden size 1 included: squares whose f32 sum overflows (a kernel must rescale or
  // accumulate wider, never return 0), rows of one value, NaN and infinities that propagate.
  conformance::Grid edges;
  edges.variants = g.variants;
  edges.dtypes = {{DType::f32, DType::f32}, {DType::f16, DType::f16}, {DType::bf16, DType::f32}};
  edges.shapes = {Shape{3, 5}, Shape{4, 1}, Shape{5, 4099}, Shape{37, 5120}, Shape{3, 16384}, Shape{2, 200000}};
  edges.group_shapes = {{Shape{3, 6, 5}, 3}, {Shape{2, 4, 1}, 4}, {Shape{2, 4, 4099}, 2}};
  edges.values = {Values::large, Values::equal, Values::special};
  edges.rope_cases = {{Shape{2, 3, 4, 6}, 2, RopeTable::shared, RopeStyle::half, false},
                      {Shape{2, 4, 5, 128}, 2, RopeTable::positions, RopeStyle::interleaved, true}};
  edges.in_place_too = true;
  edges.seed = 13;
  for (auto& c : conformance::expand(edges, "cuda:0")) cases.push_back(std::move(c));
  // geglu and swiglu with rounding torch, 16-bit: element and 16-byte accesses, a grid-stride
  // loop, in place.
  conformance::Grid torch;
  torch.variants = g.variants;
  std::erase_if(torch.variants, [](const std::string& v) { return v.find("glu.") == std::string::npos; });
  torch.dtypes = {{DType::f16, DType::f16}, {DType::bf16, DType::bf16}};
  torch.shapes = {Shape{3, 5}, Shape{37, 5120}, Shape{2, 200000}};
  torch.roundings = {Rounding::torch};
  torch.in_place_too = true;
  torch.seed = 18;
  for (auto& c : conformance::expand(torch, "cuda:0")) cases.push_back(std::move(c));
  return cases;
}

// The rounding modes told apart (harness.h's GluRoundingTest).
std::vector<conformance::Case> rounding_cases() {
  if (!have_gpu()) return {};
  return conformance::glu_rounding_cases(conformance::variants_of("cuda"), "cuda:0");
}

}  // namespace

namespace conformance {
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ConformanceTest);
INSTANTIATE_TEST_SUITE_P(cuda, ConformanceTest, ::testing::ValuesIn(forced_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(cuda, GluRoundingTest, ::testing::ValuesIn(rounding_cases()), case_name);
}  // namespace conformance

namespace {

// ---- The registry's choice: the same problems through Registry::call, which must pick a cuda
// variant (no fallback) and match the reference.

struct ChosenCase {
  ProblemSpec spec;
};
std::string chosen_name(const ::testing::TestParamInfo<ChosenCase>& info) {
  const ProblemSpec& s = info.param.spec;
  std::string name = s.op + "__" + std::string(to_string(s.dtype)) + "_" + std::string(to_string(s.wdtype)) + "__" +
                     s.shape.str() + "__" + std::string(to_string(s.casting));
  for (char& c : name) {
    if (c == '.') c = '_';
  }
  return name;
}

// fused_add_rms_norm also at 4096 x 32768 (16-bit and f32), where its backward once had no cuda
// variant (past what rows holds; now cluster or split).
std::vector<ChosenCase> chosen_cases() {
  std::vector<ChosenCase> out;
  if (!have_gpu()) return out;
  for (const char* op : {"rms_norm.fwd", "rms_norm.bwd", "fused_add_rms_norm.fwd", "fused_add_rms_norm.bwd",
                         "layer_norm.fwd", "layer_norm.bwd"}) {
    const bool fused = std::string(op).starts_with("fused");
    const bool rms = !std::string(op).starts_with("layer_norm");
    for (const auto& [x, w] : conformance::kAllPairs) {
      std::vector<Shape> shapes = cuda_shapes();
      if (fused && w == x && x != DType::f16) shapes.push_back(Shape{4096, 32768});
      for (const Shape& shape : shapes) {
        ChosenCase c;
        c.spec.op = op;
        c.spec.dtype = x;
        c.spec.wdtype = w;
        c.spec.shape = shape;
        c.spec.casting = rms && x == DType::bf16 ? Casting::gemma : Casting::llama;
        c.spec.offset = rms && x == DType::bf16 ? 1.0 : 0.0;
        c.spec.seed = 23;
        out.push_back(c);
      }
    }
  }
  return out;
}

class CudaChosen : public ::testing::TestWithParam<ChosenCase> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaChosen);

TEST_P(CudaChosen, PicksACudaVariantThatMatchesTheReference) {
  REQUIRE_GPU();
  Registry& reg = default_registry();
  Problem problem(reg, GetParam().spec, reg.parse_device("cuda:0"));
  problem.poison();
  const DispatchResult r = problem.run();
  ASSERT_NE(r.variant, nullptr);
  EXPECT_FALSE(r.fell_back);
  EXPECT_EQ(r.variant->backend, "cuda") << r.variant->name;
  const CheckReport report = problem.check();
  EXPECT_TRUE(report.pass()) << r.variant->name << ": " << report.summary() << "\n  reproduce: opreg run "
                             << GetParam().spec.cli_args("cuda:0");
}
INSTANTIATE_TEST_SUITE_P(cuda, CudaChosen, ::testing::ValuesIn(chosen_cases()), chosen_name);

// ---- Bit-identical results over repeated runs.

// Tensors of one problem made directly (not through Problem, which keeps its outputs to itself).
struct Bits {
  std::vector<std::vector<unsigned char>> outputs;
  friend bool operator==(const Bits&, const Bits&) = default;
};

Tensor random_tensor(const Shape& shape, DType dtype, Device device, std::mt19937& rng) {
  Tensor host = Tensor::empty(shape, dtype);
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  for (std::int64_t i = 0; i < host.numel(); ++i)
    store_from_double(host.data(), dtype, static_cast<std::size_t>(i), dist(rng));
  return host.to(device);
}

std::vector<unsigned char> host_bytes(const Tensor& t) {
  Tensor h = t.to(Device{});
  const auto* p = static_cast<const unsigned char*>(h.data());
  return {p, p + h.nbytes()};
}

// A variant's forward and backward ten times on the same inputs: the same bits every time (dW
// and dB included, which are summed from partial rows in a fixed order).
struct DeterminismCase;
struct DeterminismOp {
  const char* name;
  void (*check)(const DeterminismCase&);  // determinism() over the op's handles
};
struct DeterminismCase {
  const DeterminismOp* op;
  const char* variant;  // forward and backward impl
  Shape shape;
  DType dtype;
  const char* bwd = nullptr;  // the backward's impl where it differs from the forward's
  std::int64_t groups = 0;    // group_norm's
};

class CudaDeterminism : public ::testing::TestWithParam<DeterminismCase> {};

// Tensors of one determinism case on cuda:0: random ones of the case's dtype, drawn from `rng` in
// the order asked for, and empty ones.
struct CaseTensors {
  Registry& reg;
  Device dev;
  DType dtype;
  std::mt19937 rng;
  CaseTensors(DType dtype_, unsigned seed)
      : reg(default_registry()), dev(reg.parse_device("cuda:0")), dtype(dtype_), rng(seed) {}
  Tensor random(const Shape& shape) { return random_tensor(shape, dtype, dev, rng); }
  Tensor empty(const Shape& shape, DType type) const { return Tensor::empty(shape, type, dev, reg); }
};

// A variant's forward and then its backward, ten times on the same inputs (`outputs` filled with
// NaN before each run): the outputs' bits must be the same every time.
template <class Fwd, class Bwd>
void expect_ten_equal_runs(const CaseTensors& t, const Op<Fwd>& fwd_op, const std::string& fwd, const Fwd& f,
                           const Op<Bwd>& bwd_op, const std::string& bwd, const Bwd& b,
                           std::initializer_list<Tensor*> outputs, const Shape& shape) {
  Bits first;
  for (int run = 0; run < 10; ++run) {
    for (Tensor* out : outputs) out->fill(std::nan(""), t.reg);
    const Verdict vf = t.reg.call_variant(fwd_op, fwd, f);
    ASSERT_TRUE(vf.ok) << fwd << ": " << vf.reason;
    const Verdict vb = t.reg.call_variant(bwd_op, bwd, b);
    ASSERT_TRUE(vb.ok) << bwd << ": " << vb.reason;
    Bits now;
    for (const Tensor* out : outputs) now.outputs.push_back(host_bytes(*out));
    if (run == 0) {
      first = std::move(now);
    } else {
      ASSERT_TRUE(now == first) << fwd << ", " << bwd << " " << shape.str() << ": run " << run
                                << " differs from run 0";
    }
  }
}

// The variant of a case, by name.
std::string variant_name(std::string_view op, const char* impl) { return "cuda." + std::string(op) + "." + impl; }

// rms_norm, or fused_add_rms_norm (Fwd with a residual): forward (y, rstd; the fused op's s) then
// backward (dx, with the fused op's ds_out; dweight).
template <class Fwd, class Bwd>
  requires(!requires(Fwd f) { f.mean; })
void determinism(const DeterminismCase& c, const Op<Fwd>& fwd_op, const Op<Bwd>& bwd_op) {
  constexpr bool kFused = requires(Fwd f) { f.residual; };
  CaseTensors t(c.dtype, 99);
  const std::int64_t hidden = c.shape[c.shape.ndim() - 1];
  Fwd f;
  f.x = t.random(c.shape);
  if constexpr (kFused) f.residual = t.random(c.shape);
  f.weight = t.random({hidden});
  f.y = t.empty(c.shape, c.dtype);
  f.rstd = t.empty(Shape{rows_hidden(c.shape).rows}, DType::f32);
  Bwd b;
  b.dy = t.random(c.shape);
  if constexpr (kFused) {
    f.s = t.empty(c.shape, c.dtype);
    b.ds_out = t.random(c.shape);
    b.s = f.s;
  } else {
    b.x = f.x;
  }
  b.weight = f.weight;
  b.rstd = f.rstd;
  b.dx = t.empty(c.shape, c.dtype);
  b.dweight = t.empty({hidden}, c.dtype);
  const std::string fwd = variant_name(fwd_op.name(), c.variant);
  const std::string bwd = variant_name(bwd_op.name(), c.bwd != nullptr ? c.bwd : c.variant);
  if constexpr (kFused) {
    expect_ten_equal_runs(t, fwd_op, fwd, f, bwd_op, bwd, b, {&f.y, &f.s, &f.rstd, &b.dx, &b.dweight}, c.shape);
  } else {
    expect_ten_equal_runs(t, fwd_op, fwd, f, bwd_op, bwd, b, {&f.y, &f.rstd, &b.dx, &b.dweight}, c.shape);
  }
}

// layer_norm and group_norm (group_norm's Fwd with num_groups, on (N, C, HW)): forward (y, mean,
// rstd) then backward (dx, dweight, dbias).
template <class Fwd, class Bwd>
  requires requires(Fwd f) { f.mean; }
void determinism(const DeterminismCase& c, const Op<Fwd>& fwd_op, const Op<Bwd>& bwd_op) {
  CaseTensors t(c.dtype, 98);
  const bool group = c.groups > 0;
  const std::int64_t params = group ? c.shape[1] : c.shape[c.shape.ndim() - 1];
  const Shape stats = group ? Shape{c.shape[0], c.groups} : Shape{rows_hidden(c.shape).rows};
  Fwd f;
  f.x = t.random(c.shape);
  f.weight = t.random({params});
  f.bias = t.random({params});
  f.y = t.empty(c.shape, c.dtype);
  f.mean = t.empty(stats, DType::f32);
  f.rstd = t.empty(stats, DType::f32);
  Bwd b;
  b.dy = t.random(c.shape);
  b.x = f.x;
  b.weight = f.weight;
  b.mean = f.mean;
  b.rstd = f.rstd;
  b.dx = t.empty(c.shape, c.dtype);
  b.dweight = t.empty({params}, c.dtype);
  b.dbias = t.empty({params}, c.dtype);
  if constexpr (requires { f.num_groups; }) {
    f.num_groups = c.groups;
    b.num_groups = c.groups;
  }
  expect_ten_equal_runs(t, fwd_op, variant_name(fwd_op.name(), c.variant), f, bwd_op,
                        variant_name(bwd_op.name(), c.variant), b,
                        {&f.y, &f.mean, &f.rstd, &b.dx, &b.dweight, &b.dbias}, c.shape);
}

template <auto FwdOp, auto BwdOp>
void determinism_of(const DeterminismCase& c) {
  determinism(c, FwdOp(), BwdOp());
}
const DeterminismOp kRmsNorm{"rms_norm", determinism_of<rms_norm_fwd_op, rms_norm_bwd_op>};
const DeterminismOp kFusedAddRmsNorm{"fused_add_rms_norm",
                                     determinism_of<fused_add_rms_norm_fwd_op, fused_add_rms_norm_bwd_op>};
const DeterminismOp kLayerNorm{"layer_norm", determinism_of<layer_norm_fwd_op, layer_norm_bwd_op>};
const DeterminismOp kGroupNorm{"group_norm", determinism_of<group_norm_fwd_op, group_norm_bwd_op>};

TEST_P(CudaDeterminism, TenRunsGiveTheSameBits) {
  REQUIRE_GPU();
  GetParam().op->check(GetParam());
}

// rms_norm: shapes where each variant has many blocks contributing dW partials; fused_add_rms_norm's
// split (and its backward cluster) on rows the rows variants do not hold, 4096 x 32768 among them.
// layer_norm rows: two rows a block over several warps (4096 x 1000 bf16), many rows a warp
// (70000 x 64), the 1-element path (4099), a 512-thread row of f32 (8192). split: rows of several
// chunks with 128 set groups' partial rows (1000 x 20000), one long unaligned row (3 x 200003);
// group_norm's channel chunks, a channel a chunk and several (32 x 256 x 4096, 8 x 64 x 999 f16).
// sets for comparison.
const DeterminismCase kDeterminismCases[] = {
    {&kRmsNorm, "rows", {4096, 1024}, DType::bf16},
    {&kRmsNorm, "rows", {70000, 64}, DType::f32},
    {&kRmsNorm, "rows", {513, 4099}, DType::f16},
    {&kRmsNorm, "cluster", {64, 131072}, DType::bf16},
    {&kRmsNorm, "cluster", {3, 16384}, DType::f32},
    {&kRmsNorm, "split", {1000, 12345}, DType::bf16},
    {&kRmsNorm, "split", {2, 200003}, DType::f32},
    {&kFusedAddRmsNorm, "split", {1000, 12345}, DType::bf16},
    {&kFusedAddRmsNorm, "split", {2, 200003}, DType::f32},
    {&kFusedAddRmsNorm, "split", {4096, 32768}, DType::bf16},
    {&kFusedAddRmsNorm, "rows", {4096, 32768}, DType::f32, "split"},
    {&kFusedAddRmsNorm, "split", {64, 131072}, DType::bf16, "cluster"},
    {&kLayerNorm, "rows", {4096, 1000}, DType::bf16},
    {&kLayerNorm, "rows", {70000, 64}, DType::f32},
    {&kLayerNorm, "rows", {513, 4099}, DType::f16},
    {&kLayerNorm, "rows", {64, 8192}, DType::f32},
    {&kLayerNorm, "split", {1000, 20000}, DType::bf16},
    {&kLayerNorm, "split", {3, 200003}, DType::f32},
    {&kGroupNorm, "split", {32, 256, 4096}, DType::bf16, nullptr, 32},
    {&kGroupNorm, "split", {8, 64, 999}, DType::f16, nullptr, 4},
    {&kGroupNorm, "split", {16, 32, 4096}, DType::f32, nullptr, 1},
    {&kLayerNorm, "sets", {1000, 1024}, DType::bf16},
    {&kGroupNorm, "sets", {8, 64, 999}, DType::f16, nullptr, 4},
};
INSTANTIATE_TEST_SUITE_P(cuda, CudaDeterminism, ::testing::ValuesIn(kDeterminismCases),
                         [](const ::testing::TestParamInfo<DeterminismCase>& info) {
                           const DeterminismCase& c = info.param;
                           std::string name = std::string(c.op->name) + "_" + c.variant;
                           if (c.bwd != nullptr) name += std::string("_") + c.bwd;
                           return name + "_" + c.shape.str() + "_" + std::string(to_string(c.dtype));
                         });

// ---- Streams and devices.

TEST(CudaRmsNorm, RunsOnTheStreamItIsGiven) {
  REQUIRE_GPU();
  Registry& reg = default_registry();
  ASSERT_EQ(gpuSetDevice(0), gpuSuccess);
  gpuStream_t stream = nullptr;
  ASSERT_EQ(gpuStreamCreate(&stream), gpuSuccess);
  const ExecContext ctx{stream};
  for (const char* op : {"rms_norm.fwd", "rms_norm.bwd"}) {
    ProblemSpec spec;
    spec.op = op;
    spec.dtype = DType::bf16;
    spec.wdtype = DType::f32;
    spec.shape = Shape{4096, 2048};
    Problem problem(reg, spec, reg.parse_device("cuda:0"));
    problem.poison();
    const DispatchResult r = problem.run(&ctx);
    problem.synchronize(&ctx);
    EXPECT_TRUE(problem.check().pass()) << op << " on a stream of its own via " << r.variant->name;
  }
  EXPECT_EQ(gpuStreamDestroy(stream), gpuSuccess);
}

// Each problem runs on cuda:1 first, then on cuda:0: what a variant sets up per device (shared
// memory opt-ins, occupancy, the plan's device facts) must be set up on each (a 3x262144 bf16
// forward once failed on cuda:0 with "invalid argument" after running on cuda:1 first). Every op
// direction, at shapes that reach each list's variants (rows, split, cluster; group_norm's split
// and sets).
TEST(CudaBackend, EveryOpRunsOnTheSecondGpu) {
  REQUIRE_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "one GPU on this machine; cuda:1 needs a second";
  Registry& reg = default_registry();
  // The caller's current device stays 0: the variant must switch to the tensors' device itself.
  ASSERT_EQ(gpuSetDevice(0), gpuSuccess);
  struct Case {
    Shape shape;
    std::int64_t groups;
  };
  const std::vector<Case> rows = {{Shape{4096, 4096}, 1}, {Shape{3, 262144}, 1}, {Shape{2, 200000}, 1},
                                  {Shape{127, 4099}, 1}};
  const std::vector<Case> images = {{Shape{8, 64, 999}, 8}, {Shape{4, 32, 5, 7}, 4}, {Shape{2, 256, 4096}, 32}};
  for (const char* op : {"rms_norm", "fused_add_rms_norm", "layer_norm", "group_norm", "geglu", "swiglu"}) {
    for (const char* dir : {".fwd", ".bwd"}) {
      for (const Case& c : std::string_view(op) == "group_norm" ? images : rows) {
        for (const char* device : {"cuda:1", "cuda:0"}) {
          ProblemSpec spec;
          spec.op = std::string(op) + dir;
          spec.dtype = DType::bf16;
          spec.wdtype = DType::bf16;
          spec.shape = c.shape;
          spec.groups = c.groups;
          Problem problem(reg, spec, reg.parse_device(device));
          problem.poison();
          const DispatchResult r = problem.run();
          const CheckReport report = problem.check();
          EXPECT_TRUE(report.pass()) << spec.op << " " << c.shape.str() << " on " << device << " via "
                                     << r.variant->name << ": " << report.summary();
        }
      }
    }
  }
  int current = -1;
  ASSERT_EQ(gpuGetDevice(&current), gpuSuccess);
  EXPECT_EQ(current, 0) << "the call left another device current";
}

// ---- Memory admission: the backend reports the device's free memory (cudaMemGetInfo), so a
// tensor larger than that is refused before cudaMalloc, naming both numbers.

TEST(CudaRmsNorm, ReportsFreeDeviceMemoryAndRefusesMoreThanThat) {
  REQUIRE_GPU();
  Registry& reg = default_registry();
  const Device dev = reg.parse_device("cuda:0");
  Backend& backend = reg.backend(dev.backend);
  const std::uint64_t total = reg.device_props(dev).memory_bytes;
  const std::uint64_t before = backend.memory_available(0);
  EXPECT_GT(before, 0u);
  EXPECT_LE(before, total);
  {
    Tensor big = Tensor::empty({std::int64_t{256} << 20}, DType::f32, dev, reg);  // 1 GiB
    const std::uint64_t during = backend.memory_available(0);
    EXPECT_LE(during + (std::uint64_t{1} << 30), before + (std::uint64_t{64} << 20)) << "1 GiB held";
  }
  const std::int64_t too_many = static_cast<std::int64_t>(total / 2 + (std::uint64_t{1} << 30));
  EXPECT_TRUE(testing::ThrowsError([&] { Tensor::empty({too_many}, DType::f32, dev, reg); }, ErrorKind::device,
                                   {"needs", "cuda:0", "available"}));
}

// ---- Errors: a forced variant that cannot hold the problem says which and why.

TEST(CudaRmsNorm, AForcedVariantThatCannotHoldTheRowSaysWhy) {
  REQUIRE_GPU();
  Registry& reg = default_registry();
  ProblemSpec spec;
  spec.op = "rms_norm.fwd";
  spec.shape = Shape{2, 200003};
  Problem problem(reg, spec, reg.parse_device("cuda:0"));
  const Verdict v = problem.run_variant("cuda.rms_norm.fwd.rows");
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.reason.find("one block holds"), std::string::npos) << v.reason;
  Config forced = reg.config();
  const Config saved = forced;
  forced.force_variants = {"cuda.rms_norm.fwd.rows"};
  reg.set_config(forced);
  EXPECT_TRUE(testing::ThrowsError([&] { problem.run(); }, ErrorKind::unsupported,
                                   {"cuda.rms_norm.fwd.rows", "cuda:0", "2x200003", "one block holds"}));
  reg.set_config(saved);
}

}  // namespace
}  // namespace opreg

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!opreg::have_gpu()) {
    std::cout << "opreg cuda tests skipped: no usable GPU (" << opreg::cuda_availability().reason << ")\n";
  }
  return RUN_ALL_TESTS();
}
