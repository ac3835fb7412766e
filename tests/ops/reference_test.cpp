// The reference kernels against independent checks: forward outputs from formulas written
// differently (mean of squares, E[x^2] - E[x]^2, the sigmoid form of gelu_tanh), and every
// backward against central finite differences of its forward, in f64 where the differences
// are accurate to ~1e-9 (the reference kernels read and write any floating dtype).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <complex>
#include <functional>
#include <vector>

#include "ops/reference/reference.h"

namespace opreg {
namespace {

Registry& reg() { return default_registry(); }

Tensor random(const Shape& shape, DType dtype, std::uint64_t seed, double lo = -2.0, double hi = 2.0) {
  Tensor t = Tensor::empty(shape, dtype, Device{}, reg());
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(s >> 11) * 0x1.0p-53;
    store_from_double(t.data(), dtype, static_cast<std::size_t>(i), lo + (hi - lo) * u);
  }
  return t;
}
Tensor empty_like(const Tensor& t, DType dtype) { return Tensor::empty(t.shape(), dtype, Device{}, reg()); }
Tensor empty_like(const Tensor& t) { return empty_like(t, t.dtype()); }
Tensor zeros(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype, Device{}, reg());
  t.fill(0.0, reg());
  return t;
}
double at(const Tensor& t, std::int64_t i) { return load_as_double(t.data(), t.dtype(), static_cast<std::size_t>(i)); }
double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) s += at(a, i) * at(b, i);
  return s;
}

// d loss / d t[i] for every i, by central differences on t's f64 storage.
std::vector<double> numeric_grad(const std::function<double()>& loss, Tensor& t, double h = 1e-5) {
  std::vector<double> g(static_cast<std::size_t>(t.numel()));
  auto* p = t.data_as<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double keep = p[i];
    p[i] = keep + h;
    const double up = loss();
    p[i] = keep - h;
    const double down = loss();
    p[i] = keep;
    g[static_cast<std::size_t>(i)] = (up - down) / (2 * h);
  }
  return g;
}

void expect_grad(const char* what, const Tensor& analytic, const std::vector<double>& numeric) {
  ASSERT_EQ(analytic.numel(), static_cast<std::int64_t>(numeric.size())) << what;
  for (std::int64_t i = 0; i < analytic.numel(); ++i) {
    const double n = numeric[static_cast<std::size_t>(i)];
    EXPECT_NEAR(at(analytic, i), n, 1e-7 + 1e-6 * std::fabs(n)) << what << "[" << i << "]";
  }
}

constexpr DType f64 = DType::f64;

// ---- Forward outputs from independent formulas (f32 inputs, long double arithmetic).

TEST(ReferenceForward, RmsNormIsTheMeanOfSquaresFormula) {
  const Shape shape{3, 7};
  Tensor x = random(shape, DType::f32, 1);
  Tensor w = random(Shape{7}, DType::f32, 2);
  Tensor y = empty_like(x);
  Tensor rstd = Tensor::empty(Shape{3}, DType::f32, Device{}, reg());
  const double eps = 1e-5;
  const double offset = 0.25;
  reference::rms_norm_fwd({x, w, y, rstd, eps, offset, Casting::gemma});
  for (int r = 0; r < 3; ++r) {
    long double squares = 0;
    for (int i = 0; i < 7; ++i) squares += static_cast<long double>(at(x, r * 7 + i)) * at(x, r * 7 + i);
    const long double inv = 1.0L / std::sqrt(squares / 7 + eps);
    EXPECT_NEAR(at(rstd, r), static_cast<double>(inv), 1e-6 * static_cast<double>(inv));
    for (int i = 0; i < 7; ++i) {
      const auto want = static_cast<double>(at(x, r * 7 + i) * inv * (offset + at(w, i)));
      EXPECT_NEAR(at(y, r * 7 + i), want, 1e-6 * std::fabs(want) + 1e-30);
    }
  }
}

TEST(ReferenceForward, RmsNormLlamaRoundsTheNormalisedInputBeforeTheWeight) {
  // bf16: llama multiplies bf16(x * rstd) by w; gemma rounds once at the end.
  Tensor x = random(Shape{4, 33}, DType::bf16, 3);
  Tensor w = random(Shape{33}, DType::f32, 4);
  Tensor y_llama = empty_like(x);
  Tensor y_gemma = empty_like(x);
  Tensor rstd = Tensor::empty(Shape{4}, DType::f32, Device{}, reg());
  reference::rms_norm_fwd({x, w, y_llama, rstd, 1e-6, 0.0, Casting::llama});
  reference::rms_norm_fwd({x, w, y_gemma, rstd, 1e-6, 0.0, Casting::gemma});
  int differ = 0;
  for (std::int64_t r = 0; r < 4; ++r) {
    long double squares = 0;
    for (int i = 0; i < 33; ++i) squares += static_cast<long double>(at(x, r * 33 + i)) * at(x, r * 33 + i);
    const auto inv = static_cast<double>(1.0L / std::sqrt(squares / 33 + 1e-6L));
    for (std::int64_t i = 0; i < 33; ++i) {
      const double xhat = to_double(to_bfloat16(at(x, r * 33 + i) * inv));
      EXPECT_EQ(at(y_llama, r * 33 + i), to_double(to_bfloat16(xhat * at(w, i)))) << r << "," << i;
      differ += at(y_llama, r * 33 + i) != at(y_gemma, r * 33 + i);
    }
  }
  EXPECT_GT(differ, 0) << "llama and gemma should round differently somewhere";
}

TEST(ReferenceForward, FusedAddRmsNormIsRmsNormOfTheRoundedSum) {
  Tensor x = random(Shape{5, 9}, DType::f16, 5);
  Tensor r = random(Shape{5, 9}, DType::f16, 6);
  Tensor w = random(Shape{9}, DType::f16, 7);
  Tensor y = empty_like(x), s = empty_like(x), rstd = zeros(Shape{5}, DType::f32);
  reference::fused_add_rms_norm_fwd({x, r, w, y, s, rstd, 1e-6, 0.5, Casting::llama});
  Tensor y2 = empty_like(x), rstd2 = zeros(Shape{5}, DType::f32);
  for (std::int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(at(s, i), to_double(to_half(at(x, i) + at(r, i))));
  reference::rms_norm_fwd({s, w, y2, rstd2, 1e-6, 0.5, Casting::llama});
  for (std::int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(at(y, i), at(y2, i));
  for (std::int64_t i = 0; i < 5; ++i) EXPECT_EQ(at(rstd, i), at(rstd2, i));
}

TEST(ReferenceForward, LayerNormIsTheMomentsFormula) {
  Tensor x = random(Shape{3, 11}, DType::f32, 8, -1.0, 3.0);
  Tensor w = random(Shape{11}, DType::f32, 9);
  Tensor b = random(Shape{11}, DType::f32, 10);
  Tensor y = empty_like(x), mean = zeros(Shape{3}, DType::f32), rstd = zeros(Shape{3}, DType::f32);
  reference::layer_norm_fwd({x, w, b, y, mean, rstd, 1e-5});
  for (int r = 0; r < 3; ++r) {
    long double s1 = 0, s2 = 0;
    for (int i = 0; i < 11; ++i) {
      s1 += at(x, r * 11 + i);
      s2 += static_cast<long double>(at(x, r * 11 + i)) * at(x, r * 11 + i);
    }
    const long double m = s1 / 11;
    const long double inv = 1.0L / std::sqrt(s2 / 11 - m * m + 1e-5L);
    EXPECT_NEAR(at(mean, r), static_cast<double>(m), 1e-6);
    EXPECT_NEAR(at(rstd, r), static_cast<double>(inv), 1e-6 * static_cast<double>(inv));
    for (int i = 0; i < 11; ++i) {
      const auto want = static_cast<double>((at(x, r * 11 + i) - m) * inv * at(w, i) + at(b, i));
      EXPECT_NEAR(at(y, r * 11 + i), want, 1e-5 * std::fabs(want) + 1e-6);
    }
  }
}

TEST(ReferenceForward, GroupNormIsTheMomentsFormulaPerGroup) {
  const std::int64_t n = 2, c = 6, sp = 5, g = 3, cg = c / g;
  Tensor x = random(Shape{n, c, sp}, DType::f32, 11, -1.0, 3.0);
  Tensor w = random(Shape{c}, DType::f32, 12);
  Tensor b = random(Shape{c}, DType::f32, 13);
  Tensor y = empty_like(x), mean = zeros(Shape{n, g}, DType::f32), rstd = zeros(Shape{n, g}, DType::f32);
  reference::group_norm_fwd({x, w, b, y, mean, rstd, g, 1e-5});
  for (std::int64_t in = 0; in < n; ++in) {
    for (std::int64_t ig = 0; ig < g; ++ig) {
      long double s1 = 0, s2 = 0;
      const std::int64_t base = (in * c + ig * cg) * sp;
      for (std::int64_t k = 0; k < cg * sp; ++k) {
        s1 += at(x, base + k);
        s2 += static_cast<long double>(at(x, base + k)) * at(x, base + k);
      }
      const long double m = s1 / (cg * sp);
      const long double inv = 1.0L / std::sqrt(s2 / (cg * sp) - m * m + 1e-5L);
      EXPECT_NEAR(at(mean, in * g + ig), static_cast<double>(m), 1e-6);
      EXPECT_NEAR(at(rstd, in * g + ig), static_cast<double>(inv), 1e-6 * static_cast<double>(inv));
      for (std::int64_t k = 0; k < cg * sp; ++k) {
        const std::int64_t ch = ig * cg + k / sp;
        const auto want = static_cast<double>((at(x, base + k) - m) * inv * at(w, ch) + at(b, ch));
        EXPECT_NEAR(at(y, base + k), want, 1e-5 * std::fabs(want) + 1e-6);
      }
    }
  }
}

TEST(ReferenceForward, GluActivationsMatchTheirOtherForms) {
  // 0.5 (1 + tanh(z)) = sigmoid(2 z), and silu(a) = a (1 + tanh(a / 2)) / 2.
  Tensor a = random(Shape{4, 13}, DType::f32, 14, -5.0, 5.0);
  Tensor b = random(Shape{4, 13}, DType::f32, 15);
  Tensor c = empty_like(a);
  reference::geglu_fwd({a, b, c});
  const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const long double v = at(a, i);
    const long double z = k * (v + 0.044715L * v * v * v);
    const auto want = static_cast<double>(v / (1 + std::exp(-2 * z)) * at(b, i));
    EXPECT_NEAR(at(c, i), want, 1e-6 * std::fabs(want) + 1e-30);
  }
  reference::swiglu_fwd({a, b, c});
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const long double v = at(a, i);
    const auto want = static_cast<double>(v * (1 + std::tanh(v / 2)) / 2 * at(b, i));
    EXPECT_NEAR(at(c, i), want, 1e-6 * std::fabs(want) + 1e-30);
  }
}

TEST(ReferenceForward, ZeroSizedDimsGiveDefinedResults) {
  // hidden = 0: the mean of no squares is 0, so rstd = 1 / sqrt(eps).
  Tensor x = zeros(Shape{3, 0}, DType::f32);
  Tensor w = zeros(Shape{0}, DType::f32);
  Tensor y = empty_like(x), rstd = zeros(Shape{3}, DType::f32);
  reference::rms_norm_fwd({x, w, y, rstd, 0.25, 0.0, Casting::llama});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(at(rstd, r), 2.0);
  // rows = 0: dweight sums no rows, so it is 0 (and must be written).
  Tensor none = zeros(Shape{0, 4}, DType::f32);
  Tensor w4 = random(Shape{4}, DType::f32, 16);
  Tensor dw = Tensor::empty(Shape{4}, DType::f32, Device{}, reg());
  dw.fill(std::nan(""), reg());
  Tensor dx = empty_like(none), rstd0 = zeros(Shape{0}, DType::f32);
  reference::rms_norm_bwd({none, none, w4, rstd0, dx, dw, 0.0, Casting::llama});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at(dw, i), 0.0);
}

// ---- Backward against finite differences of the forward (f64).

TEST(ReferenceBackward, RmsNormMatchesFiniteDifferences) {
  for (Casting casting : {Casting::gemma, Casting::llama, Casting::none}) {  // f64: roundings are exact
    SCOPED_TRACE(std::string(to_string(casting)));
    Tensor x = random(Shape{3, 5}, f64, 20), w = random(Shape{5}, f64, 21), dy = random(Shape{3, 5}, f64, 22);
    Tensor y = empty_like(x), rstd = zeros(Shape{3}, DType::f32);
    const double offset = 0.3;
    auto loss = [&] {
      Tensor r = zeros(Shape{3}, f64);
      reference::rms_norm_fwd({x, w, y, r, 1e-6, offset, casting});
      return dot(dy, y);
    };
    // rstd travels in f32, so take the backward's rstd from an f64 forward for exactness.
    Tensor rstd64 = zeros(Shape{3}, f64);
    reference::rms_norm_fwd({x, w, y, rstd64, 1e-6, offset, casting});
    Tensor dx = empty_like(x), dw = empty_like(w);
    reference::rms_norm_bwd({dy, x, w, rstd64, dx, dw, offset, casting});
    expect_grad("dx", dx, numeric_grad(loss, x));
    expect_grad("dweight", dw, numeric_grad(loss, w));
  }
}

TEST(ReferenceBackward, FusedAddRmsNormMatchesFiniteDifferences) {
  Tensor x = random(Shape{2, 6}, f64, 30), res = random(Shape{2, 6}, f64, 31), w = random(Shape{6}, f64, 32);
  Tensor dy = random(Shape{2, 6}, f64, 33), ds = random(Shape{2, 6}, f64, 34);
  Tensor y = empty_like(x), s = empty_like(x);
  auto loss = [&] {
    Tensor r = zeros(Shape{2}, f64);
    reference::fused_add_rms_norm_fwd({x, res, w, y, s, r, 1e-6, 1.0, Casting::gemma});
    return dot(dy, y) + dot(ds, s);
  };
  Tensor rstd = zeros(Shape{2}, f64);
  reference::fused_add_rms_norm_fwd({x, res, w, y, s, rstd, 1e-6, 1.0, Casting::gemma});
  Tensor dx = empty_like(x), dw = empty_like(w);
  reference::fused_add_rms_norm_bwd({dy, ds, s, w, rstd, dx, dw, 1.0, Casting::gemma});
  expect_grad("dx", dx, numeric_grad(loss, x));
  expect_grad("dx (= d residual)", dx, numeric_grad(loss, res));
  expect_grad("dweight", dw, numeric_grad(loss, w));
}

TEST(ReferenceBackward, LayerNormMatchesFiniteDifferences) {
  Tensor x = random(Shape{3, 7}, f64, 40), w = random(Shape{7}, f64, 41), b = random(Shape{7}, f64, 42);
  Tensor dy = random(Shape{3, 7}, f64, 43), y = empty_like(x);
  auto loss = [&] {
    Tensor m = zeros(Shape{3}, f64), r = zeros(Shape{3}, f64);
    reference::layer_norm_fwd({x, w, b, y, m, r, 1e-6});
    return dot(dy, y);
  };
  Tensor mean = zeros(Shape{3}, f64), rstd = zeros(Shape{3}, f64);
  reference::layer_norm_fwd({x, w, b, y, mean, rstd, 1e-6});
  Tensor dx = empty_like(x), dw = empty_like(w), db = empty_like(b);
  reference::layer_norm_bwd({dy, x, w, mean, rstd, dx, dw, db});
  expect_grad("dx", dx, numeric_grad(loss, x));
  expect_grad("dweight", dw, numeric_grad(loss, w));
  expect_grad("dbias", db, numeric_grad(loss, b));
}

TEST(ReferenceBackward, GroupNormMatchesFiniteDifferences) {
  for (const auto& [shape_, groups_] :
       {std::pair{Shape{2, 6, 5}, std::int64_t{3}}, std::pair{Shape{3, 4}, std::int64_t{2}}}) {
    const Shape shape = shape_;  // lambdas below capture these (clang 14 cannot capture bindings)
    const std::int64_t groups = groups_;
    SCOPED_TRACE(shape.str());
    const Shape params{shape[1]};
    const Shape stats{shape[0], groups};
    Tensor x = random(shape, f64, 50), w = random(params, f64, 51), b = random(params, f64, 52);
    Tensor dy = random(shape, f64, 53), y = empty_like(x);
    auto loss = [&] {
      Tensor m = zeros(stats, f64), r = zeros(stats, f64);
      reference::group_norm_fwd({x, w, b, y, m, r, groups, 1e-6});
      return dot(dy, y);
    };
    Tensor mean = zeros(stats, f64), rstd = zeros(stats, f64);
    reference::group_norm_fwd({x, w, b, y, mean, rstd, groups, 1e-6});
    Tensor dx = empty_like(x), dw = empty_like(w), db = empty_like(b);
    reference::group_norm_bwd({dy, x, w, mean, rstd, dx, dw, db, groups});
    expect_grad("dx", dx, numeric_grad(loss, x));
    expect_grad("dweight", dw, numeric_grad(loss, w));
    expect_grad("dbias", db, numeric_grad(loss, b));
  }
}

TEST(ReferenceBackward, GluOpsMatchFiniteDifferences) {
  using Fwd = void (*)(const GluFwdArgs&);
  using Bwd = void (*)(const GluBwdArgs&);
  for (auto [name, fwd, bwd] : {std::tuple<const char*, Fwd, Bwd>{"geglu", &reference::geglu_fwd, &reference::geglu_bwd},
                                std::tuple<const char*, Fwd, Bwd>{"swiglu", &reference::swiglu_fwd,
                                                                  &reference::swiglu_bwd}}) {
    SCOPED_TRACE(name);
    Tensor a = random(Shape{3, 4}, f64, 60, -4.0, 4.0), b = random(Shape{3, 4}, f64, 61);
    Tensor dc = random(Shape{3, 4}, f64, 62), c = empty_like(a);
    auto loss = [&, fwd = fwd] {
      fwd({a, b, c});
      return dot(dc, c);
    };
    Tensor da = empty_like(a), db = empty_like(b);
    bwd({dc, a, b, da, db});
    expect_grad("da", da, numeric_grad(loss, a));
    expect_grad("db", db, numeric_grad(loss, b));
  }
}

// ---- Optional parameters and the casting modes' rounding points.

Tensor filled_with(const Shape& shape, DType dtype, double value) {
  Tensor t = Tensor::empty(shape, dtype, Device{}, reg());
  t.fill(value, reg());
  return t;
}

void expect_same(const char* what, const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(at(a, i), at(b, i)) << what << "[" << i << "]";
}

// No weight is a weight of ones and no bias a bias of zeros, bit for bit, forward and backward
// (dx; dbias too), in bf16 where the rounding points would show a difference.
TEST(ReferenceOptional, AbsentWeightIsOnesAndAbsentBiasIsZeros) {
  const Shape shape{5, 9};
  const Shape params{9};
  const DType d = DType::bf16;
  Tensor x = random(shape, d, 70), dy = random(shape, d, 71);
  Tensor ones = filled_with(params, d, 1.0), zeros_b = filled_with(params, d, 0.0);
  Tensor rstd = Tensor::empty(Shape{5}, DType::f32, Device{}, reg()), rstd2 = empty_like(rstd);
  Tensor mean = empty_like(rstd), mean2 = empty_like(rstd);
  for (Casting casting : {Casting::llama, Casting::gemma, Casting::none}) {
    SCOPED_TRACE(to_string(casting));
    Tensor y = empty_like(x), y2 = empty_like(x);
    reference::rms_norm_fwd({.x = x, .y = y, .rstd = rstd, .casting = casting});
    reference::rms_norm_fwd({.x = x, .weight = ones, .y = y2, .rstd = rstd2, .casting = casting});
    expect_same("rms y", y, y2);
    expect_same("rms rstd", rstd, rstd2);
    Tensor dx = empty_like(x), dx2 = empty_like(x), dw = empty_like(ones);
    reference::rms_norm_bwd({.dy = dy, .x = x, .rstd = rstd, .dx = dx, .casting = casting});
    reference::rms_norm_bwd(
        {.dy = dy, .x = x, .weight = ones, .rstd = rstd, .dx = dx2, .dweight = dw, .casting = casting});
    expect_same("rms dx", dx, dx2);
  }
  Tensor y = empty_like(x), y2 = empty_like(x);
  reference::layer_norm_fwd({.x = x, .y = y, .mean = mean, .rstd = rstd});
  reference::layer_norm_fwd({.x = x, .weight = ones, .bias = zeros_b, .y = y2, .mean = mean2, .rstd = rstd2});
  expect_same("layer y", y, y2);
  Tensor dx = empty_like(x), dx2 = empty_like(x), dw = empty_like(ones), db = empty_like(ones), db2 = empty_like(ones);
  reference::layer_norm_bwd({.dy = dy, .x = x, .mean = mean, .rstd = rstd, .dx = dx, .dbias = db});
  reference::layer_norm_bwd(
      {.dy = dy, .x = x, .weight = ones, .mean = mean, .rstd = rstd, .dx = dx2, .dweight = dw, .dbias = db2});
  expect_same("layer dx", dx, dx2);
  expect_same("layer dbias", db, db2);
}

// `none` rounds (offset + w) to the weight's dtype: with an f32 weight it is llama, bit for bit,
// and with a bf16 weight it differs from llama where offset + w is not a bf16 value.
TEST(ReferenceCasting, NoneRoundsTheScaleToTheWeightsDtype) {
  const Shape shape{4, 33};
  Tensor x = random(shape, DType::bf16, 80);
  Tensor w32 = random(Shape{33}, DType::f32, 81);
  Tensor rstd = Tensor::empty(Shape{4}, DType::f32, Device{}, reg());
  Tensor none = empty_like(x), llama = empty_like(x);
  const double offset = 1.0 / 3.0;
  reference::rms_norm_fwd({.x = x, .weight = w32, .y = none, .rstd = rstd, .offset = offset, .casting = Casting::none});
  reference::rms_norm_fwd(
      {.x = x, .weight = w32, .y = llama, .rstd = rstd, .offset = offset, .casting = Casting::llama});
  expect_same("f32 weight: none == llama", none, llama);
  Tensor w16 = random(Shape{33}, DType::bf16, 81);
  reference::rms_norm_fwd({.x = x, .weight = w16, .y = none, .rstd = rstd, .offset = offset, .casting = Casting::none});
  reference::rms_norm_fwd(
      {.x = x, .weight = w16, .y = llama, .rstd = rstd, .offset = offset, .casting = Casting::llama});
  int differ = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) differ += at(none, i) != at(llama, i) ? 1 : 0;
  EXPECT_GT(differ, 0) << "bf16 weight: none should round (offset + w) to bf16";
}


// ---- rope: HF's rotate_half formula, the complex product of the interleaved pairs, the
// backward against finite differences, and the table forms and strides as the same rotation.

// cos or sin tables [rows, width] of angle (row + 1) * 10000^(-j / width'), as HF makes them:
// `dup` repeats each pair's angle, as cat(freqs, freqs) (half) or repeat_interleave (interleaved).
Tensor angle_table(std::int64_t rows, std::int64_t dim, bool is_sin, int dup, bool interleaved) {
  const std::int64_t width = dup == 2 ? dim : dim / 2;
  Tensor t = Tensor::empty(Shape{rows, width}, f64, Device{}, reg());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < width; ++j) {
      const std::int64_t pair = dup == 1 ? j : interleaved ? j / 2 : j % (dim / 2);
      const double angle = static_cast<double>(r + 1) * std::pow(10000.0, -2.0 * static_cast<double>(pair) / dim);
      t.data_as<double>()[r * width + j] = is_sin ? std::sin(angle) : std::cos(angle);
    }
  }
  return t;
}

TEST(ReferenceForward, RopeHalfIsHFsRotateHalfFormula) {
  const std::int64_t B = 2, H = 3, T = 5, D = 6;
  Tensor q = random(Shape{B, H, T, D}, f64, 90), k = random(Shape{B, 1, T, D}, f64, 91);
  Tensor cos = angle_table(T, D, false, 2, false), sin = angle_table(T, D, true, 2, false);
  Tensor qo = empty_like(q), ko = empty_like(k);
  reference::rope_fwd({.q = q, .k = k, .cos = cos, .sin = sin, .q_out = qo, .k_out = ko});
  for (const auto& [in, out] : {std::pair{&q, &qo}, std::pair{&k, &ko}}) {
    for (std::int64_t row = 0; row < in->numel() / D; ++row) {
      const std::int64_t t = row % T;
      for (std::int64_t j = 0; j < D; ++j) {
        // q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q[D/2:], q[:D/2])
        const double rotated = j < D / 2 ? -at(*in, row * D + j + D / 2) : at(*in, row * D + j - D / 2);
        const double want = at(*in, row * D + j) * at(cos, t * D + j) + rotated * at(sin, t * D + j);
        EXPECT_NEAR(at(*out, row * D + j), want, 1e-12) << row << "," << j;
      }
    }
  }
}

TEST(ReferenceForward, RopeInterleavedIsTheComplexProductOfPairs) {
  const std::int64_t T = 4, D = 8;
  Tensor q = random(Shape{1, 2, T, D}, f64, 92), k = random(Shape{1, 3, T, D}, f64, 93);
  Tensor qo = empty_like(q), ko = empty_like(k), qo2 = empty_like(q), ko2 = empty_like(k);
  // A half-length table, and the full-width repeat_interleave one: the same rotation.
  reference::rope_fwd({.q = q, .k = k, .cos = angle_table(T, D, false, 1, true), .sin = angle_table(T, D, true, 1, true),
                       .q_out = qo, .k_out = ko, .style = RopeStyle::interleaved});
  Tensor cos = angle_table(T, D, false, 2, true), sin = angle_table(T, D, true, 2, true);
  reference::rope_fwd({.q = q, .k = k, .cos = cos, .sin = sin, .q_out = qo2, .k_out = ko2,
                       .style = RopeStyle::interleaved});
  expect_same("q: half-length == full-width", qo, qo2);
  expect_same("k: half-length == full-width", ko, ko2);
  for (std::int64_t row = 0; row < q.numel() / D; ++row) {
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const std::int64_t e = row * D + 2 * i;
      const std::complex<double> x{at(q, e), at(q, e + 1)};
      const std::complex<double> z{at(cos, (row % T) * D + 2 * i), at(sin, (row % T) * D + 2 * i)};
      const std::complex<double> y = x * z;
      EXPECT_NEAR(at(qo, e), y.real(), 1e-12);
      EXPECT_NEAR(at(qo, e + 1), y.imag(), 1e-12);
    }
  }
}

TEST(ReferenceForward, RopeTableFormsAndStridesAreTheSameRotation) {
  const std::int64_t B = 2, H = 3, T = 4, D = 6;
  Tensor q = random(Shape{B, H, T, D}, f64, 94), k = random(Shape{B, 2, T, D}, f64, 95);
  Tensor cos = angle_table(T + 5, D, false, 2, false), sin = angle_table(T + 5, D, true, 2, false);
  Tensor qo = empty_like(q), ko = empty_like(k);
  reference::rope_fwd({.q = q, .k = k, .cos = cos, .sin = sin, .q_out = qo, .k_out = ko});  // rows 0..T-1 of T + 5
  // position_ids naming rows 0..T-1 in order, for both batches ([1, T]).
  Tensor pos = Tensor::empty(Shape{1, T}, DType::i64, Device{}, reg());
  for (std::int64_t t = 0; t < T; ++t) pos.data_as<std::int64_t>()[t] = t;
  Tensor qp = empty_like(q), kp = empty_like(k);
  reference::rope_fwd({.q = q, .k = k, .cos = cos, .sin = sin, .position_ids = pos, .q_out = qp, .k_out = kp});
  expect_same("position_ids 0..T-1 == the first T rows", qo, qp);
  // q as HF's transposed view of [B, T, H, D] memory, written to a transposed output.
  Tensor mem = Tensor::empty(Shape{B, T, H, D}, f64, Device{}, reg());
  Tensor out_mem = Tensor::empty(Shape{B, T, H, D}, f64, Device{}, reg());
  const std::array<std::int64_t, 4> strides{T * H * D, D, H * D, 1};
  Tensor qv = Tensor::wrap(mem.data(), q.shape(), f64, Device{}, strides);
  Tensor qov = Tensor::wrap(out_mem.data(), q.shape(), f64, Device{}, strides);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t d = 0; d < D; ++d)
          mem.data_as<double>()[((b * T + t) * H + h) * D + d] = at(q, ((b * H + h) * T + t) * D + d);
  Tensor ks = empty_like(k);
  reference::rope_fwd({.q = qv, .k = k, .cos = cos, .sin = sin, .q_out = qov, .k_out = ks});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t d = 0; d < D; ++d)
          EXPECT_EQ(out_mem.data_as<double>()[((b * T + t) * H + h) * D + d], at(qo, ((b * H + h) * T + t) * D + d));
}

TEST(ReferenceBackward, RopeMatchesFiniteDifferencesAndUndoesTheForward) {
  const std::int64_t T = 3, D = 4;
  for (RopeStyle style : {RopeStyle::half, RopeStyle::interleaved}) {
    SCOPED_TRACE(to_string(style));
    Tensor q = random(Shape{2, 2, T, D}, f64, 96), k = random(Shape{2, 1, T, D}, f64, 97);
    Tensor cos = random(Shape{2, T, D}, f64, 98), sin = random(Shape{2, T, D}, f64, 99);  // any table: linear
    Tensor qo = empty_like(q), ko = empty_like(k);
    Tensor dqo = random(q.shape(), f64, 100), dko = random(k.shape(), f64, 101);
    auto loss = [&] {
      reference::rope_fwd({.q = q, .k = k, .cos = cos, .sin = sin, .q_out = qo, .k_out = ko, .style = style});
      return dot(dqo, qo) + dot(dko, ko);
    };
    Tensor dq = empty_like(q), dk = empty_like(k);
    reference::rope_bwd({.dq_out = dqo, .dk_out = dko, .cos = cos, .sin = sin, .dq = dq, .dk = dk, .style = style});
    expect_grad("dq", dq, numeric_grad(loss, q));
    expect_grad("dk", dk, numeric_grad(loss, k));
  }
  // With a true rotation table the backward is the inverse.
  Tensor q = random(Shape{1, 2, 5, 6}, f64, 102), k = random(Shape{1, 2, 5, 6}, f64, 103);
  Tensor cos = angle_table(5, 6, false, 2, false), sin = angle_table(5, 6, true, 2, false);
  Tensor qo = empty_like(q), ko = empty_like(k), back_q = empty_like(q), back_k = empty_like(k);
  reference::rope_fwd({.q = q, .k = k, .cos = cos, .sin = sin, .q_out = qo, .k_out = ko});
  reference::rope_bwd({.dq_out = qo, .dk_out = ko, .cos = cos, .sin = sin, .dq = back_q, .dk = back_k});
  for (std::int64_t i = 0; i < q.numel(); ++i) EXPECT_NEAR(at(back_q, i), at(q, i), 1e-12);
}

}  // namespace
}  // namespace opreg
