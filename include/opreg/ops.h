// The operators, forward and backward: argument structs, op handles, entry points, the
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

#include "opreg/op_manifest.h"
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

// Where the gated activations (geglu, swiglu) round to the storage dtype (a's):
//   once:  act(a) in f32, each result rounded once;
//   torch: where Liger-Kernel (and, forward, PyTorch eager) rounds: act(a) rounded to a's dtype
//          before it multiplies (c; geglu's db), and geglu's da = (dc * b rounded) * act'(a);
//          swiglu's backward is Liger's, one rounding of each gradient (the same as once).
// In f32 the two are the same bits (the roundings to a's dtype are the kernels' own f32 ones).
// docs/ops.md has the formulas.
enum class Rounding : std::uint8_t { once, torch };
std::string_view to_string(Rounding rounding);
// "once" | "torch"; anything else is an opreg::Error naming `op` (when given), the text and what
// is accepted.
Rounding parse_rounding(std::string_view text, std::string_view op = {});

// How rope pairs a head's D elements (docs/ops.md): half, (i, i + D/2) as HF's rotate_half;
// interleaved, (2i, 2i + 1).
enum class RopeStyle : std::uint8_t { half, interleaved };
std::string_view to_string(RopeStyle style);
// "half" | "interleaved"; anything else is an opreg::Error naming `op` (when given), the text and
// what is accepted.
RopeStyle parse_rope_style(std::string_view text, std::string_view op = {});

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

// ---- The argument structs, op handles and entry points, expanded from the op manifest
// (opreg/op_manifest.h: every field with its role, in order, and its default). For example
//
//   struct RmsNormFwdArgs {
//     Tensor x{};       // (..., H)
//     Tensor weight{};  // (H); optional: without it y = x * rstd (and offset must be 0)
//     Tensor y{};       // out: like x
//     Tensor rstd{};    // out: f32 (rows)
//     double eps = 1e-6;
//     double offset = 0.0;
//     Casting casting = Casting::llama;
//   };
//
// (geglu's and swiglu's structs end with `Rounding rounding = Rounding::once;`.)
//   const Op<RmsNormFwdArgs>& rms_norm_fwd_op();  // the op handle, for Registry::call, add_variant
//   DispatchResult rms_norm_fwd(const RmsNormFwdArgs& args, const ExecContext* ctx = nullptr);
//
// The entry points check, dispatch on the tensors' device and run; outputs are the caller's.
#define OPREG_CXX_TENSOR_(name, role, kind, when, partner) Tensor name{};
#define OPREG_CXX_SCALAR_f64_(name, value) double name = value;
#define OPREG_CXX_SCALAR_i64_(name, value) std::int64_t name = value;
#define OPREG_CXX_SCALAR_casting_(name, value) Casting name = Casting::value;
#define OPREG_CXX_SCALAR_rounding_(name, value) Rounding name = Rounding::value;
#define OPREG_CXX_SCALAR_rope_style_(name, value) RopeStyle name = RopeStyle::value;
#define OPREG_CXX_SCALAR_pad32_(name, value)
#define OPREG_CXX_SCALAR_(type, name, value, key) OPREG_CXX_SCALAR_##type##_(name, value)
#define OPREG_CXX_STRUCT_(Name, c_name, family, FIELDS) \
  struct Name {                                          \
    FIELDS(OPREG_CXX_TENSOR_, OPREG_CXX_SCALAR_)         \
  };
#define OPREG_CXX_ALIAS_(Alias, Name, c_alias, c_name) using Alias = Name;
#define OPREG_CXX_OP_(ident, base, direction, Args, c_args) \
  const Op<Args>& ident##_op();                             \
  DispatchResult ident(const Args& args, const ExecContext* ctx = nullptr);
OPREG_ARG_STRUCTS(OPREG_CXX_STRUCT_)
OPREG_ARG_ALIASES(OPREG_CXX_ALIAS_)
OPREG_OPS(OPREG_CXX_OP_)
#undef OPREG_CXX_TENSOR_
#undef OPREG_CXX_SCALAR_f64_
#undef OPREG_CXX_SCALAR_i64_
#undef OPREG_CXX_SCALAR_casting_
#undef OPREG_CXX_SCALAR_rounding_
#undef OPREG_CXX_SCALAR_rope_style_
#undef OPREG_CXX_SCALAR_pad32_
#undef OPREG_CXX_SCALAR_
#undef OPREG_CXX_STRUCT_
#undef OPREG_CXX_ALIAS_
#undef OPREG_CXX_OP_

// Defines every op of the manifest (idempotent); default_registry() does it before registering
// backends.
void define_builtin_ops();

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
struct RopeOut {
  Tensor q;  // rope: q_out and k_out; rope_backward: dq and dk
  Tensor k;
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
Tensor geglu(const Tensor& a, const Tensor& b, Rounding rounding = Rounding::once, const ExecContext* ctx = nullptr);
GluGrads geglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, Rounding rounding = Rounding::once,
                        const ExecContext* ctx = nullptr);
Tensor swiglu(const Tensor& a, const Tensor& b, Rounding rounding = Rounding::once, const ExecContext* ctx = nullptr);
GluGrads swiglu_backward(const Tensor& dc, const Tensor& a, const Tensor& b, Rounding rounding = Rounding::once,
                         const ExecContext* ctx = nullptr);
// q and k rotated by cos and sin (position_ids: Tensor{} for none); the outputs are contiguous.
RopeOut rope(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
             const Tensor& position_ids = Tensor{}, RopeStyle style = RopeStyle::half, const ExecContext* ctx = nullptr);
RopeOut rope_backward(const Tensor& dq_out, const Tensor& dk_out, const Tensor& cos, const Tensor& sin,
                      const Tensor& position_ids = Tensor{}, RopeStyle style = RopeStyle::half,
                      const ExecContext* ctx = nullptr);

// ---- Byte model: the bytes an ideal kernel reads and writes (each input once, each output
// once). `op` is the base name ("rms_norm"); `shape` is x's (a's for the glu ops, q's for rope);
// `wdtype` the weight's and bias's dtype (rope: the tables'; ignored by geglu and swiglu);
// `num_groups` for group_norm; `has_weight` / `has_bias` whether the call passes them (a
// backward: dweight / dbias). rope by shape is HF's call: k with q's head count, one [1, T, D]
// table pair read in its first half, no position_ids; bytes_moved(args) counts any call. Every
// GB/s figure divides this by time. A count of 2^64 bytes or more (2^31 x 2^31 in bf16) throws
// opreg::Error (invalid argument) naming the op and the shape rather than wrapping.
std::uint64_t bytes_moved(std::string_view op, Direction direction, const Shape& shape, DType dtype, DType wdtype,
                          std::int64_t num_groups = 1, bool has_weight = true, bool has_bias = true);

// The byte model of one call, from its tensors: each input read once and each output written
// once, in full, but rope's tables: the rows the call uses ((1 or B) x T, or position_ids' count)
// at the width it reads (D/2 of a half-style row, all D of an interleaved full-width one).
#define OPREG_CXX_BYTES_(Name, c_name, family, FIELDS) std::uint64_t bytes_moved(const Name& args);
OPREG_ARG_STRUCTS(OPREG_CXX_BYTES_)
#undef OPREG_CXX_BYTES_

// The ops' base names ("rms_norm", ...), in the order docs and tools list them.
std::span<const std::string_view> op_names();

}  // namespace opreg
