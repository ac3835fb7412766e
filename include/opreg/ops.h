// The six operators, forward and backward: argument structs, op handles, entry points, the
// allocating convenience wrappers and the byte model. Semantics and dtype rules: docs/ops.md.
//
// Conventions shared by every op:
// - An op sees its input as rows x hidden (hidden = last dim, rows = the product of the
//   others); group_norm sees (N, C, spatial...) and num_groups.
// - x (and a, b, dy, ...) in f32, f16 or bf16; weight and bias the same dtype as x, or f32;
//   dweight/dbias in the weight's dtype; statistics (rstd, mean) in f32, shape {rows} (group_norm:
//   {N, num_groups}). Other pairs are opreg::Error naming the pair.
// - weight and bias are optional (an undefined Tensor: torch's weight=None, Liger's
//   elementwise_affine=False): no weight scales by 1, no bias adds 0. A backward takes dweight
//   exactly when it takes a weight; dbias is optional (computed when given).
// - Build the argument structs with designated initializers ({.x = x, .weight = w, ...}): several
//   fields share a type, and a positional list that swaps two of them still compiles. Every
//   member has a default initializer, so leaving an optional one out draws no
//   -Wmissing-field-initializers warning.
// - Outputs are passed in by the caller. An output may not overlap any other tensor of the
//   call, except the in-place forms named on each struct (dx may be dy; da may be a, ...).
// - Tensors must be contiguous unless the chosen variant says it accepts strides.
// - Every entry point takes an optional execution context (the stream to run on) and dispatches
//   through default_registry(); Registry::call(op handle, args, ctx) does the same on another
//   registry.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "opreg/registry.h"

namespace opreg {

// Where rms_norm rounds to the input dtype (as Liger-Kernel defines the modes):
//   llama: statistics in f32; x * rstd rounded to x's dtype, then multiplied by (offset + w);
//   gemma: everything in f32, one rounding of the result;
//   none:  like llama, and (offset + w) is also rounded to the weight's dtype (as PyTorch adds
//          them), which changes nothing for an f32 weight.
enum class Casting : std::uint8_t { llama, gemma, none };
std::string_view to_string(Casting casting);
Casting parse_casting(std::string_view text);  // "llama" | "gemma" | "none"

enum class Direction : std::uint8_t { fwd, bwd };
std::string_view to_string(Direction direction);

// How a row op sees its input: hidden = the last extent, rows = the product of the others
// (from the extents, not numel, so hidden = 0 keeps the row count; a 0-d shape is 1 x 1).
struct RowsHidden {
  std::int64_t rows = 1;
  std::int64_t hidden = 1;
};
[[noreturn]] void rows_overflow(const Shape& shape);  // an opreg::Error naming the shape
inline RowsHidden rows_hidden(const Shape& shape) {
  RowsHidden out;
  if (shape.ndim() == 0) return out;
  out.hidden = shape[shape.ndim() - 1];
  // A Shape checks its extents' product when made, but operator[] may have changed them since.
  for (int d = 0; d + 1 < shape.ndim(); ++d) {
    if (__builtin_mul_overflow(out.rows, shape[d], &out.rows)) rows_overflow(shape);
  }
  return out;
}

// ---- rms_norm: y = x * rstd * (offset + w), rstd = 1 / sqrt(mean(x^2) + eps) per row
struct RmsNormFwdArgs {
  Tensor x{};       // (..., H)
  Tensor weight{};  // (H); optional: without it y = x * rstd (and offset must be 0)
  Tensor y{};       // out: like x
  Tensor rstd{};    // out: f32 (rows)
  double eps = 1e-6;
  double offset = 0.0;
  Casting casting = Casting::llama;
};
struct RmsNormBwdArgs {
  Tensor dy{};       // like x
  Tensor x{};        // (..., H)
  Tensor weight{};   // (H); optional
  Tensor rstd{};     // f32 (rows), from the forward
  Tensor dx{};       // out: like x; may be dy itself (in place)
  Tensor dweight{};  // out: like weight; undefined exactly when weight is
  double offset = 0.0;
  Casting casting = Casting::llama;
};

// ---- fused_add_rms_norm: s = x + residual (rounded to x's dtype), y = rms_norm(s)
struct FusedAddRmsNormFwdArgs {
  Tensor x{};         // (..., H)
  Tensor residual{};  // like x
  Tensor weight{};    // (H); optional: without it y = s * rstd (and offset must be 0)
  Tensor y{};         // out: like x
  Tensor s{};         // out: like x, the new residual
  Tensor rstd{};      // out: f32 (rows)
  double eps = 1e-6;
  double offset = 0.0;
  Casting casting = Casting::llama;
};
struct FusedAddRmsNormBwdArgs {
  Tensor dy{};       // like s
  Tensor ds_out{};   // like s: the gradient flowing into the new residual
  Tensor s{};        // (..., H), from the forward
  Tensor weight{};   // (H); optional
  Tensor rstd{};     // f32 (rows)
  Tensor dx{};       // out: like s; the gradient of x and of residual (equal); may be dy itself
  Tensor dweight{};  // out: like weight; undefined exactly when weight is
  double offset = 0.0;
  Casting casting = Casting::llama;
};

// ---- layer_norm: y = (x - mean) * rstd * w + b
struct LayerNormFwdArgs {
  Tensor x{};         // (..., H)
  Tensor weight{};    // (H); optional (ones)
  Tensor bias{};      // (H), the weight's dtype (without a weight: x's or f32); optional (zeros)
  Tensor y{};         // out: like x
  Tensor mean{};      // out: f32 (rows)
  Tensor rstd{};      // out: f32 (rows)
  double eps = 1e-5;  // torch.nn.LayerNorm's default
};
struct LayerNormBwdArgs {
  Tensor dy{};       // like x
  Tensor x{};        // (..., H)
  Tensor weight{};   // (H); optional
  Tensor mean{};     // f32 (rows)
  Tensor rstd{};     // f32 (rows)
  Tensor dx{};       // out: like x; may be dy itself
  Tensor dweight{};  // out: like weight; undefined exactly when weight is
  Tensor dbias{};    // out: like weight (without a weight: x's dtype or f32); optional
};

// ---- group_norm: statistics per (n, group) over C / num_groups channels x spatial
struct GroupNormFwdArgs {
  Tensor x{};       // (N, C, spatial...)
  Tensor weight{};  // (C); optional (ones)
  Tensor bias{};    // (C), the weight's dtype (without a weight: x's or f32); optional (zeros)
  Tensor y{};       // out: like x
  Tensor mean{};    // out: f32 (N, num_groups)
  Tensor rstd{};    // out: f32 (N, num_groups)
  std::int64_t num_groups = 1;
  double eps = 1e-5;  // torch.nn.GroupNorm's default
};
struct GroupNormBwdArgs {
  Tensor dy{};       // like x
  Tensor x{};        // (N, C, spatial...)
  Tensor weight{};   // (C); optional
  Tensor mean{};     // f32 (N, num_groups)
  Tensor rstd{};     // f32 (N, num_groups)
  Tensor dx{};       // out: like x; may be dy itself
  Tensor dweight{};  // out: like weight; undefined exactly when weight is
  Tensor dbias{};    // out: like weight (without a weight: x's dtype or f32); optional
  std::int64_t num_groups = 1;
};

// ---- geglu: c = gelu_tanh(a) * b;  swiglu: c = silu(a) * b  (a, b, c one shape, one dtype)
struct GluFwdArgs {
  Tensor a{};
  Tensor b{};
  Tensor c{};  // out
};
struct GluBwdArgs {
  Tensor dc{};
  Tensor a{};
  Tensor b{};
  Tensor da{};  // out: may be a itself (in place, as Liger does)
  Tensor db{};  // out: may be b itself
};
using GegluFwdArgs = GluFwdArgs;
using GegluBwdArgs = GluBwdArgs;
using SwigluFwdArgs = GluFwdArgs;
using SwigluBwdArgs = GluBwdArgs;

// ---- Op handles, for Registry::call, add_variant and tests.
const Op<RmsNormFwdArgs>& rms_norm_fwd_op();
const Op<RmsNormBwdArgs>& rms_norm_bwd_op();
const Op<FusedAddRmsNormFwdArgs>& fused_add_rms_norm_fwd_op();
const Op<FusedAddRmsNormBwdArgs>& fused_add_rms_norm_bwd_op();
const Op<LayerNormFwdArgs>& layer_norm_fwd_op();
const Op<LayerNormBwdArgs>& layer_norm_bwd_op();
const Op<GroupNormFwdArgs>& group_norm_fwd_op();
const Op<GroupNormBwdArgs>& group_norm_bwd_op();
const Op<GegluFwdArgs>& geglu_fwd_op();
const Op<GegluBwdArgs>& geglu_bwd_op();
const Op<SwigluFwdArgs>& swiglu_fwd_op();
const Op<SwigluBwdArgs>& swiglu_bwd_op();

// Defines all twelve ops (idempotent); default_registry() does it before registering backends.
void define_builtin_ops();

// ---- Entry points: check, dispatch on the tensors' device, run. Outputs are the caller's.
DispatchResult rms_norm_fwd(const RmsNormFwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult rms_norm_bwd(const RmsNormBwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult fused_add_rms_norm_fwd(const FusedAddRmsNormFwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult fused_add_rms_norm_bwd(const FusedAddRmsNormBwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult layer_norm_fwd(const LayerNormFwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult layer_norm_bwd(const LayerNormBwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult group_norm_fwd(const GroupNormFwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult group_norm_bwd(const GroupNormBwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult geglu_fwd(const GegluFwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult geglu_bwd(const GegluBwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult swiglu_fwd(const SwigluFwdArgs& args, const ExecContext* ctx = nullptr);
DispatchResult swiglu_bwd(const SwigluBwdArgs& args, const ExecContext* ctx = nullptr);

// ---- Allocating wrappers: outputs are allocated on the inputs' device (default registry). Pass
// Tensor{} for an absent weight or bias; a backward then returns no dweight (and a dbias in x's
// dtype).
struct NormOut {
  Tensor y;
  Tensor mean;  // undefined for rms_norm and fused_add_rms_norm
  Tensor rstd;
  Tensor s;  // fused_add_rms_norm only: the new residual
};
struct NormGrads {
  Tensor dx;
  Tensor dweight;
  Tensor dbias;  // undefined for rms_norm and fused_add_rms_norm
};
struct GluGrads {
  Tensor da;
  Tensor db;
};

NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6, double offset = 0.0,
                 Casting casting = Casting::llama, const ExecContext* ctx = nullptr);
NormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                            double offset = 0.0, Casting casting = Casting::llama, const ExecContext* ctx = nullptr);
NormOut fused_add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps = 1e-6,
                           double offset = 0.0, Casting casting = Casting::llama, const ExecContext* ctx = nullptr);
NormGrads fused_add_rms_norm_backward(const Tensor& dy, const Tensor& ds_out, const Tensor& s, const Tensor& weight,
                                      const Tensor& rstd, double offset = 0.0, Casting casting = Casting::llama,
                                      const ExecContext* ctx = nullptr);
NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                   const ExecContext* ctx = nullptr);
NormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const ExecContext* ctx = nullptr);
NormOut group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t num_groups,
                   double eps = 1e-5, const ExecContext* ctx = nullptr);
NormGrads group_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, std::int64_t num_groups, const ExecContext* ctx = nullptr);
Tensor geglu(const Tensor& a, const Tensor& b, const ExecContext* ctx = nullptr);
GluGrads geglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, const ExecContext* ctx = nullptr);
Tensor swiglu(const Tensor& a, const Tensor& b, const ExecContext* ctx = nullptr);
GluGrads swiglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, const ExecContext* ctx = nullptr);

// ---- Byte model: the bytes an ideal kernel reads and writes (each input once, each output
// once). `op` is the base name ("rms_norm"); `shape` is x's (a's for the glu ops); `wdtype` the
// weight's and bias's dtype (ignored by geglu and swiglu); `num_groups` for group_norm;
// `has_weight` / `has_bias` whether the call passes them (a backward: dweight / dbias). Every
// GB/s figure divides this by time.
std::uint64_t bytes_moved(std::string_view op, Direction direction, const Shape& shape, DType dtype, DType wdtype,
                          std::int64_t num_groups = 1, bool has_weight = true, bool has_bias = true);

// The six base names, in the order docs and tools list them.
std::span<const std::string_view> op_names();

}  // namespace opreg
