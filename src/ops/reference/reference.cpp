// The reference kernels. They define the ops' semantics (docs/ops.md), so they favour being
// obviously right over being fast: every value goes through double, a row (or normalisation
// set) is read in full before anything of it is written, and the only roundings are the ones
// the op itself defines.
#include "ops/reference/reference.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <utility>
#include <vector>

namespace opreg::reference {
namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// Element access. The conversions give exactly dtype.h's results; the typed paths keep them
// from dominating the run time of large problems (the reference runs on every conformance shape).

// The value of each of the 65536 patterns of a 16-bit format, so that reading one is a lookup.
template <class Format>
const std::vector<double>& decoded() {
  static const std::vector<double> table = [] {
    std::vector<double> values(1u << 16);
    for (std::size_t bits = 0; bits < values.size(); ++bits)
      values[bits] = to_double(Format{static_cast<std::uint16_t>(bits)});
    return values;
  }();
  return table;
}

// dtype.h's conversion of a double to a 16-bit format of E exponent and M mantissa bits: round to
// nearest, ties to even, directly from the double. It is dtype.cpp's algorithm (see SmallFloat::
// encode there) on the double's bits instead of through frexp/ldexp, which cost ~20 ns a value
// and 0.7 s of a 4096x4096 bf16 rms_norm.fwd. NaN and infinity go to dtype.h itself.
template <class Format, int E, int M, Format (*Exact)(double)>
std::uint16_t encode(double value) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr std::uint32_t kInf = ((1u << E) - 1) << M;
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const auto biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased == 0x7FF) return Exact(value).bits;
  const auto sign = static_cast<std::uint32_t>(bits >> 63) << (E + M);
  const int e = biased - 1023;
  // Zero, double subnormals and anything under half the smallest subnormal become a signed zero.
  const int eq = std::max(e, 1 - kBias);
  const int shift = 52 - M + (eq - e);  // value / 2^(eq - M) = mantissa / 2^shift, shift >= 52 - M
  if (biased == 0 || shift > 53) return static_cast<std::uint16_t>(sign);
  if (e > kBias) return static_cast<std::uint16_t>(sign | kInf);
  const std::uint64_t mantissa = (bits & ((1ull << 52) - 1)) | (1ull << 52);
  std::uint64_t r = mantissa >> shift;
  const std::uint64_t rest = mantissa - (r << shift);
  const std::uint64_t half = 1ull << (shift - 1);
  // Bitwise, not short-circuit: on real data the rounding direction is a coin flip, which a branch mispredicts.
  r += static_cast<std::uint64_t>((rest > half) | ((rest == half) & ((r & 1) != 0)));
  // As in dtype.cpp: the encoding is monotone in r, so a carry moves into the next binade (and
  // from the largest finite value to infinity) by itself.
  return static_cast<std::uint16_t>(
      sign | ((static_cast<std::uint32_t>(eq + kBias) << M) + static_cast<std::uint32_t>(r) - (1u << M)));
}
constexpr auto encode_f16 = &encode<half, 5, 10, &to_half>;
constexpr auto encode_bf16 = &encode<bfloat16, 8, 7, &to_bfloat16>;

void load_span(const Tensor& t, std::int64_t begin, std::span<double> out) {
  const auto decode16 = [&](const std::vector<double>& table) {
    const auto* bits = t.data_as<const std::uint16_t>() + begin;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = table[bits[i]];
  };
  switch (t.dtype()) {
    case DType::f32:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = t.data_as<const float>()[at(begin) + i];
      return;
    case DType::f16:
      return decode16(decoded<half>());
    case DType::bf16:
      return decode16(decoded<bfloat16>());
    default:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_as_double(t.data(), t.dtype(), at(begin) + i);
  }
}

void store_span(const Tensor& t, std::int64_t begin, std::span<const double> values) {
  const auto encode16 = [&](std::uint16_t (*encode)(double)) {
    auto* bits = t.data_as<std::uint16_t>() + begin;
    for (std::size_t i = 0; i < values.size(); ++i) bits[i] = encode(values[i]);
  };
  switch (t.dtype()) {
    case DType::f32:
      for (std::size_t i = 0; i < values.size(); ++i) t.data_as<float>()[at(begin) + i] = static_cast<float>(values[i]);
      return;
    case DType::f16:
      return encode16(encode_f16);
    case DType::bf16:
      return encode16(encode_bf16);
    default:
      for (std::size_t i = 0; i < values.size(); ++i) store_from_double(t.data(), t.dtype(), at(begin) + i, values[i]);
  }
}

double load(const Tensor& t, std::int64_t i) { return load_as_double(t.data(), t.dtype(), at(i)); }
void store(const Tensor& t, std::int64_t i, double value) { store_from_double(t.data(), t.dtype(), at(i), value); }

std::vector<double> load_all(const Tensor& t) {
  std::vector<double> out(at(t.numel()));
  load_span(t, 0, out);
  return out;
}

// round_x: what a kernel gets when it stores a value in `dtype` and reads it back.
double round_to(DType dtype, double value) {
  switch (dtype) {
    case DType::f32:
      return static_cast<float>(value);
    case DType::f16:
      return decoded<half>()[encode_f16(value)];
    case DType::bf16:
      return decoded<bfloat16>()[encode_bf16(value)];
    default: {
      std::uint64_t cell = 0;
      store_from_double(&cell, dtype, 0, value);
      return load_as_double(&cell, dtype, 0);
    }
  }
}

// Element-wise ops go through bounded buffers rather than whole-tensor copies.
inline constexpr std::int64_t kChunk = 4096;

template <class Body>
void for_each_chunk(std::int64_t n, Body&& body) {
  for (std::int64_t begin = 0; begin < n; begin += kChunk) body(begin, std::min(kChunk, n - begin));
}

// 1 / sqrt(sum / count + eps); the mean of an empty set is 0.
double inverse_std(double sum, std::int64_t count, double eps) {
  const double mean = count == 0 ? 0.0 : sum / static_cast<double>(count);
  return 1.0 / std::sqrt(mean + eps);
}

// ---- rms_norm and fused_add_rms_norm

// (offset + w) as the casting mode sees it: `none` rounds it to the weight's dtype, as PyTorch
// adds the two. Without a weight the scale is 1 (the check keeps offset at 0 then).
std::vector<double> rms_scale(const Tensor& weight, std::int64_t hidden, double offset, Casting casting) {
  if (!weight.defined()) return std::vector<double>(at(hidden), 1.0);
  std::vector<double> scale = load_all(weight);
  for (double& v : scale) v = casting == Casting::none ? round_to(weight.dtype(), offset + v) : offset + v;
  return scale;
}

// A parameter's values, or `count` copies of `absent` when it is not given.
std::vector<double> load_param(const Tensor& t, std::int64_t count, double absent) {
  return t.defined() ? load_all(t) : std::vector<double>(at(count), absent);
}

// Stores a parameter gradient the call asked for (an undefined one is not wanted).
void store_param_grad(const Tensor& t, std::span<const double> values) {
  if (t.defined()) store_span(t, 0, values);
}

// x * rstd as the casting mode sees it: llama and none round it to x's dtype, gemma does not.
double rms_xhat(double x, double rstd, Casting casting, DType xdtype) {
  const double xhat = x * rstd;
  return casting == Casting::gemma ? xhat : round_to(xdtype, xhat);
}

// The rms_norm backward, shared with fused_add_rms_norm, whose extra gradient `ds_out`
// (undefined for rms_norm) adds to dx.
void rms_bwd(const RmsNormBwdArgs& args, const Tensor& ds_out) {
  const auto [rows, hidden] = rows_hidden(args.x.shape());
  const DType xdtype = args.x.dtype();
  const std::vector<double> scale = rms_scale(args.weight, hidden, args.offset, args.casting);
  std::vector<double> dweight(at(hidden), 0.0);
  std::vector<double> x(at(hidden));
  std::vector<double> dy(at(hidden));
  std::vector<double> extra(ds_out.defined() ? at(hidden) : 0);
  std::vector<double> dx(at(hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t begin = r * hidden;
    load_span(args.x, begin, x);
    load_span(args.dy, begin, dy);
    if (ds_out.defined()) load_span(ds_out, begin, extra);
    const double rstd = load(args.rstd, r);
    double dot = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) dot += dy[i] * scale[i] * x[i];
    const double coeff = hidden == 0 ? 0.0 : rstd * rstd * rstd * dot / static_cast<double>(hidden);
    for (std::size_t i = 0; i < x.size(); ++i) {
      dx[i] = rstd * dy[i] * scale[i] - coeff * x[i];
      if (ds_out.defined()) dx[i] += extra[i];
      dweight[i] += dy[i] * rms_xhat(x[i], rstd, args.casting, xdtype);
    }
    store_span(args.dx, begin, dx);
  }
  store_param_grad(args.dweight, dweight);
}

// ---- layer_norm and group_norm: one normalisation over contiguous sets of elements.
//
// Set k (k < sets) is the `size = channels * spread` elements starting at k * size; its
// element j belongs to channel (k % per_item) * channels + j / spread, which indexes weight and
// bias, and its statistics are mean[k], rstd[k]. layer_norm: a set is a row (per_item 1,
// channels H, spread 1); group_norm: a set is (n, g) (per_item G, channels C / G, spread S).
struct Sets {
  std::int64_t sets = 0;
  std::int64_t per_item = 1;
  std::int64_t channels = 0;
  std::int64_t spread = 1;
  std::int64_t size() const { return channels * spread; }
  std::int64_t params() const { return per_item * channels; }  // weight and bias length (H or C)
  std::int64_t channel(std::int64_t k, std::int64_t j) const { return (k % per_item) * channels + j / spread; }
};

Sets layer_sets(const Shape& shape) {
  const auto [rows, hidden] = rows_hidden(shape);
  return Sets{rows, 1, hidden, 1};
}

Sets group_sets(const Shape& shape, std::int64_t num_groups) {
  std::int64_t spatial = 1;
  for (int d = 2; d < shape.ndim(); ++d) spatial *= shape[d];
  return Sets{shape[0] * num_groups, num_groups, shape[1] / num_groups, spatial};
}

void affine_norm_fwd(const Sets& sets, const Tensor& x_t, const Tensor& weight_t, const Tensor& bias_t,
                     const Tensor& y_t, const Tensor& mean_t, const Tensor& rstd_t, double eps) {
  const std::vector<double> weight = load_param(weight_t, sets.params(), 1.0);
  const std::vector<double> bias = load_param(bias_t, sets.params(), 0.0);
  const std::int64_t size = sets.size();
  std::vector<double> x(at(size));
  for (std::int64_t k = 0; k < sets.sets; ++k) {
    load_span(x_t, k * size, x);
    double sum = 0.0;
    for (double v : x) sum += v;
    const double mean = size == 0 ? 0.0 : sum / static_cast<double>(size);
    double squares = 0.0;
    for (double v : x) squares += (v - mean) * (v - mean);
    const double rstd = inverse_std(squares, size, eps);
    for (std::int64_t j = 0; j < size; ++j) {
      const std::size_t c = at(sets.channel(k, j));
      x[at(j)] = (x[at(j)] - mean) * rstd * weight[c] + bias[c];
    }
    store_span(y_t, k * size, x);
    store(mean_t, k, mean);
    store(rstd_t, k, rstd);
  }
}

void affine_norm_bwd(const Sets& sets, const Tensor& dy_t, const Tensor& x_t, const Tensor& weight_t,
                     const Tensor& mean_t, const Tensor& rstd_t, const Tensor& dx_t, const Tensor& dweight_t,
                     const Tensor& dbias_t) {
  const std::vector<double> weight = load_param(weight_t, sets.params(), 1.0);
  std::vector<double> dweight(weight.size(), 0.0);
  std::vector<double> dbias(weight.size(), 0.0);
  const std::int64_t size = sets.size();
  std::vector<double> x(at(size));
  std::vector<double> dy(at(size));
  for (std::int64_t k = 0; k < sets.sets; ++k) {
    load_span(x_t, k * size, x);
    load_span(dy_t, k * size, dy);
    const double mean = load(mean_t, k);
    const double rstd = load(rstd_t, k);
    double sum_xhat_g = 0.0;
    double sum_g = 0.0;
    for (std::int64_t j = 0; j < size; ++j) {
      const std::size_t c = at(sets.channel(k, j));
      const double xhat = (x[at(j)] - mean) * rstd;
      const double g = weight[c] * dy[at(j)];
      sum_xhat_g += xhat * g;
      sum_g += g;
      dweight[c] += dy[at(j)] * xhat;
      dbias[c] += dy[at(j)];
    }
    const double c1 = size == 0 ? 0.0 : sum_xhat_g / static_cast<double>(size);
    const double c2 = size == 0 ? 0.0 : sum_g / static_cast<double>(size);
    // The x buffer is reused for dx: element j is read just before it is overwritten.
    for (std::int64_t j = 0; j < size; ++j) {
      const std::size_t c = at(sets.channel(k, j));
      const double xhat = (x[at(j)] - mean) * rstd;
      const double g = weight[c] * dy[at(j)];
      x[at(j)] = (g - (xhat * c1 + c2)) * rstd;
    }
    store_span(dx_t, k * size, x);
  }
  store_param_grad(dweight_t, dweight);
  store_param_grad(dbias_t, dbias);
}

// ---- geglu and swiglu: c = act(a) * b, with one activation each.

struct Activation {
  double value = 0;
  double slope = 0;  // d value / d a
};

Activation gelu_tanh(double a) {
  constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2 / pi)
  constexpr double kCubic = 0.044715;
  const double t = std::tanh(kSqrt2OverPi * (a + kCubic * a * a * a));
  const double value = 0.5 * a * (1.0 + t);
  const double slope = 0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * a * a);
  return {value, slope};
}

Activation silu(double a) {
  const double sig = 1.0 / (1.0 + std::exp(-a));
  return {a * sig, sig * (1.0 + a * (1.0 - sig))};
}

// Rounding::torch rounds act(a) to a's dtype before it multiplies b; not in f32, where the
// kernels' activation is f32 already, so that the two modes are one there (ops.h).
bool rounds_to_dtype(Rounding rounding, DType dtype) { return rounding == Rounding::torch && dtype != DType::f32; }

void glu_fwd(const GluFwdArgs& args, Activation (*act)(double)) {
  const bool torch = rounds_to_dtype(args.rounding, args.a.dtype());
  const DType dtype = args.a.dtype();
  std::vector<double> a(at(kChunk));
  std::vector<double> b(at(kChunk));
  for_each_chunk(args.a.numel(), [&](std::int64_t begin, std::int64_t count) {
    const std::span<double> av(a.data(), at(count));
    const std::span<double> bv(b.data(), at(count));
    load_span(args.a, begin, av);
    load_span(args.b, begin, bv);
    for (std::size_t i = 0; i < av.size(); ++i) {
      const double value = act(av[i]).value;
      av[i] = (torch ? round_to(dtype, value) : value) * bv[i];
    }
    store_span(args.c, begin, av);
  });
}

// `torch_points`: the backward rounds where Liger-Kernel's geglu does (rounding torch): db =
// dc * round(act(a)), da = round(dc * b) * act'(a), round() being to a's dtype. (Liger's swiglu
// keeps both products in f32, so swiglu passes false whatever the mode.)
void glu_bwd(const GluBwdArgs& args, Activation (*act)(double), bool torch_points) {
  const DType dtype = args.a.dtype();
  std::vector<double> dc(at(kChunk));
  std::vector<double> a(at(kChunk));
  std::vector<double> b(at(kChunk));
  for_each_chunk(args.a.numel(), [&](std::int64_t begin, std::int64_t count) {
    const std::span<double> dcv(dc.data(), at(count));
    const std::span<double> av(a.data(), at(count));
    const std::span<double> bv(b.data(), at(count));
    // da may be a and db may be b: the chunk is read in full before either is written.
    load_span(args.dc, begin, dcv);
    load_span(args.a, begin, av);
    load_span(args.b, begin, bv);
    for (std::size_t i = 0; i < av.size(); ++i) {
      const Activation f = act(av[i]);
      if (torch_points) {
        av[i] = round_to(dtype, dcv[i] * bv[i]) * f.slope;
        bv[i] = dcv[i] * round_to(dtype, f.value);
      } else {
        av[i] = dcv[i] * bv[i] * f.slope;
        bv[i] = dcv[i] * f.value;
      }
    }
    store_span(args.da, begin, av);
    store_span(args.db, begin, bv);
  });
}

// rope, both directions: every (b, t) position's pairs rotated by its table row's angles (sin
// negated backward), through the tensors' strides; a position outside the table gives NaN.
void rope(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin, const Tensor& positions,
          const Tensor& q_out, const Tensor& k_out, RopeStyle style, bool backward) {
  const std::int64_t batch = q.size(0);
  const std::int64_t seq = q.size(2);
  const std::int64_t dim = q.size(3);
  const std::int64_t half = dim / 2;
  const int nd = cos.ndim();
  const std::int64_t rows = cos.size(nd - 2);
  const bool interleaved = style == RopeStyle::interleaved;
  const std::int64_t step = interleaved && cos.size(nd - 1) == dim ? 2 : 1;
  std::vector<double> c(at(half));
  std::vector<double> s(at(half));
  std::vector<double> x(at(dim));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < seq; ++t) {
      bool outside = false;
      std::int64_t cos_at = 0;
      std::int64_t sin_at = 0;
      if (positions.defined()) {
        const int pd = positions.ndim();
        const std::int64_t pb = pd == 2 && positions.size(0) > 1 ? b * positions.stride(0) : 0;
        const std::int64_t row = positions.data_as<const std::int64_t>()[pb + t * positions.stride(pd - 1)];
        outside = row < 0 || row >= rows;
        cos_at = outside ? 0 : row * cos.stride(nd - 2);
        sin_at = outside ? 0 : row * sin.stride(nd - 2);
      } else {
        const bool batched = nd == 3 && cos.size(0) > 1;
        cos_at = (batched ? b * cos.stride(0) : 0) + t * cos.stride(nd - 2);
        sin_at = (batched ? b * sin.stride(0) : 0) + t * sin.stride(nd - 2);
      }
      for (std::int64_t i = 0; i < half && !outside; ++i) {
        c[at(i)] = load(cos, cos_at + i * step);
        s[at(i)] = (backward ? -1.0 : 1.0) * load(sin, sin_at + i * step);
      }
      for (const auto& [in, out] : {std::pair{&q, &q_out}, std::pair{&k, &k_out}}) {
        for (std::int64_t h = 0; h < in->size(1); ++h) {
          load_span(*in, b * in->stride(0) + h * in->stride(1) + t * in->stride(2), x);  // read in full: out may be in
          for (std::int64_t i = 0; i < half; ++i) {
            const std::size_t i1 = at(interleaved ? 2 * i : i);
            const std::size_t i2 = at(interleaved ? 2 * i + 1 : i + half);
            const double x1 = x[i1];
            const double x2 = x[i2];
            const double ci = outside ? std::numeric_limits<double>::quiet_NaN() : c[at(i)];
            const double si = outside ? std::numeric_limits<double>::quiet_NaN() : s[at(i)];
            x[i1] = x1 * ci - x2 * si;
            x[i2] = x2 * ci + x1 * si;
          }
          store_span(*out, b * out->stride(0) + h * out->stride(1) + t * out->stride(2), x);
        }
      }
    }
  }
}

// file and line pass through so that each variant's registration site names its own line.
template <class Args>
void add_ref(Registry& registry, const Op<Args>& op, void (*kernel)(const Args&), const char* file = __builtin_FILE(),
             int line = __builtin_LINE()) {
  VariantSpec<Args> spec;
  spec.backend = "cpu";
  spec.impl = "ref";
  spec.priority = kPriority;
  spec.run = [kernel](const Args& args, const KernelContext&) { kernel(args); };
  spec.strided = manifest::Spec<Args>::strided;
  registry.add_variant(op, std::move(spec), {}, file, line).release();
}

}  // namespace

void rms_norm_fwd(const RmsNormFwdArgs& args) {
  const auto [rows, hidden] = rows_hidden(args.x.shape());
  const DType xdtype = args.x.dtype();
  const std::vector<double> scale = rms_scale(args.weight, hidden, args.offset, args.casting);
  std::vector<double> x(at(hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    load_span(args.x, r * hidden, x);
    double squares = 0.0;
    for (double v : x) squares += v * v;
    const double rstd = inverse_std(squares, hidden, args.eps);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = rms_xhat(x[i], rstd, args.casting, xdtype) * scale[i];
    store_span(args.y, r * hidden, x);
    store(args.rstd, r, rstd);
  }
}

void rms_norm_bwd(const RmsNormBwdArgs& args) { rms_bwd(args, Tensor{}); }

void fused_add_rms_norm_fwd(const FusedAddRmsNormFwdArgs& args) {
  std::vector<double> x(at(kChunk));
  std::vector<double> residual(at(kChunk));
  for_each_chunk(args.x.numel(), [&](std::int64_t begin, std::int64_t count) {
    const std::span<double> xv(x.data(), at(count));
    const std::span<double> rv(residual.data(), at(count));
    load_span(args.x, begin, xv);
    load_span(args.residual, begin, rv);
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] += rv[i];
    store_span(args.s, begin, xv);
  });
  // s now holds round_x(x + residual): the rest is rms_norm on it. Qualified, because argument-dependent
  // lookup would also find the dispatching opreg::rms_norm_fwd.
  reference::rms_norm_fwd(RmsNormFwdArgs{args.s, args.weight, args.y, args.rstd, args.eps, args.offset, args.casting});
}

void fused_add_rms_norm_bwd(const FusedAddRmsNormBwdArgs& args) {
  rms_bwd(RmsNormBwdArgs{args.dy, args.s, args.weight, args.rstd, args.dx, args.dweight, args.offset, args.casting},
          args.ds_out);
}

void layer_norm_fwd(const LayerNormFwdArgs& args) {
  affine_norm_fwd(layer_sets(args.x.shape()), args.x, args.weight, args.bias, args.y, args.mean, args.rstd, args.eps);
}

void layer_norm_bwd(const LayerNormBwdArgs& args) {
  affine_norm_bwd(layer_sets(args.x.shape()), args.dy, args.x, args.weight, args.mean, args.rstd, args.dx, args.dweight,
                  args.dbias);
}

void group_norm_fwd(const GroupNormFwdArgs& args) {
  affine_norm_fwd(group_sets(args.x.shape(), args.num_groups), args.x, args.weight, args.bias, args.y, args.mean,
                  args.rstd, args.eps);
}

void group_norm_bwd(const GroupNormBwdArgs& args) {
  affine_norm_bwd(group_sets(args.x.shape(), args.num_groups), args.dy, args.x, args.weight, args.mean, args.rstd,
                  args.dx, args.dweight, args.dbias);
}

void geglu_fwd(const GegluFwdArgs& args) { glu_fwd(args, gelu_tanh); }
void geglu_bwd(const GegluBwdArgs& args) { glu_bwd(args, gelu_tanh, rounds_to_dtype(args.rounding, args.a.dtype())); }
void swiglu_fwd(const SwigluFwdArgs& args) { glu_fwd(args, silu); }
void swiglu_bwd(const SwigluBwdArgs& args) { glu_bwd(args, silu, false); }

void rope_fwd(const RopeFwdArgs& a) {
  rope(a.q, a.k, a.cos, a.sin, a.position_ids, a.q_out, a.k_out, a.style, false);
}
void rope_bwd(const RopeBwdArgs& a) {
  rope(a.dq_out, a.dk_out, a.cos, a.sin, a.position_ids, a.dq, a.dk, a.style, true);
}

namespace {

// The forward output a statistics run writes and nobody reads: host memory of its own, so that
// no registry is involved.
class Discard {
 public:
  explicit Discard(const Tensor& like)
      : bytes_((static_cast<std::size_t>(like.numel()) * element_size(like.dtype()) + 7) / 8 + 1),
        tensor_(Tensor::wrap(static_cast<void*>(bytes_.data()), like.shape(), like.dtype())) {}
  const Tensor& operator*() const { return tensor_; }

 private:
  std::vector<std::uint64_t> bytes_;
  Tensor tensor_;
};

}  // namespace

void statistics(const RmsNormBwdArgs& a, double eps) {
  const Discard y(a.x);
  rms_norm_fwd({a.x, a.weight, *y, a.rstd, eps, a.offset, a.casting});
}
void statistics(const FusedAddRmsNormBwdArgs& a, double eps) {
  const Discard y(a.s);
  rms_norm_fwd({a.s, a.weight, *y, a.rstd, eps, a.offset, a.casting});
}
// The statistics do not depend on the bias, so the forward that makes them takes none.
void statistics(const LayerNormBwdArgs& a, double eps) {
  const Discard y(a.x);
  layer_norm_fwd({a.x, a.weight, Tensor{}, *y, a.mean, a.rstd, eps});
}
void statistics(const GroupNormBwdArgs& a, double eps) {
  const Discard y(a.x);
  group_norm_fwd({a.x, a.weight, Tensor{}, *y, a.mean, a.rstd, a.num_groups, eps});
}

void register_variants(Registry& registry) {
  manifest::for_each_op([&](auto entry) {
    using E = decltype(entry);
    add_ref(registry, E::op(), kernel<E::id>::run);
  });
}

}  // namespace opreg::reference
