// The op families as kernels see them: one plain descriptor per family and direction (raw
// pointers, sizes, the dtype, casting and rounding enums), which every backend's kernels take instead of
// a copy of their own. Dependency-free on purpose: the cpu's instruction-set units and the CUDA
// .cu files include it and nothing else of opreg (src/ops/describe.h builds descriptors from the
// ops' argument structs).
//
//   row norms      rms_norm, fused_add_rms_norm            RowNormFwd, RowNormBwd
//   affine norms   layer_norm (one set per row)             NormFwd, NormBwd
//   grouped norms  group_norm (one set per (n, group))      NormFwd, NormBwd (the same sets)
//   gated units    geglu, swiglu                            GluFwd, GluBwd
//   rotary         rope (both directions: sin negated back)  Rope
#pragma once

#include <cstdint>

namespace opreg::family {

// An activation or parameter dtype (the ops take no others).
// (No functions here: the cpu's instruction-set units must share no inline code with the rest.)
enum class Elem : std::uint8_t { f32, f16, bf16 };

// Where rms_norm rounds to the input dtype (opreg::Casting's values, docs/ops.md).
enum class Mode : std::uint8_t { llama, gemma, none };

// ---- Row norms. Forward: with `residual`, s = round_x(x + residual) is stored to `s` and
// normalised; without, x is. Backward: `x` is the forward's input (s for the fused op); with
// `ds_out`, it is added to dx.
struct RowNormFwd {
  const void* x = nullptr;
  const void* residual = nullptr;  // fused_add_rms_norm only
  const void* weight = nullptr;    // null: no weight (scale 1)
  void* y = nullptr;
  void* s = nullptr;  // fused_add_rms_norm only
  float* rstd = nullptr;
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  double eps = 0;
  double offset = 0;
  Mode mode = Mode::llama;
  Elem x_type = Elem::f32;
  Elem w_type = Elem::f32;  // f32 when there is no weight
};
struct RowNormBwd {
  const void* dy = nullptr;
  const void* ds_out = nullptr;  // fused_add_rms_norm only
  const void* x = nullptr;
  const void* weight = nullptr;
  const float* rstd = nullptr;
  void* dx = nullptr;       // may be dy
  void* dweight = nullptr;  // null exactly when weight is
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  double offset = 0;
  Mode mode = Mode::llama;
  Elem x_type = Elem::f32;
  Elem w_type = Elem::f32;  // f32 when there is no weight
};

// ---- Affine and grouped norms: one normalisation over `sets` contiguous sets of channels x
// spread elements (the reference's formulation): layer_norm is groups 1, channels H, spread 1;
// group_norm is sets N x G, channels C / G, spread the spatial size. Set k uses parameters
// [(k % groups) * channels, ... + channels).
struct NormSets {
  std::int64_t sets = 0;
  std::int64_t groups = 1;
  std::int64_t channels = 0;
  std::int64_t spread = 1;
};
struct NormFwd {
  const void* x = nullptr;
  const void* weight = nullptr;  // null: ones
  const void* bias = nullptr;    // null: zeros
  void* y = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  NormSets shape;
  double eps = 0;
  Elem x_type = Elem::f32;
  Elem p_type = Elem::f32;  // weight's and bias's dtype (f32 when there is neither)
};
struct NormBwd {
  const void* dy = nullptr;
  const void* x = nullptr;
  const void* weight = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  void* dx = nullptr;       // may be dy
  void* dweight = nullptr;  // null exactly when weight is
  void* dbias = nullptr;    // optional
  NormSets shape;
  Elem x_type = Elem::f32;
  Elem p_type = Elem::f32;  // weight's, dweight's and dbias's dtype (f32 when there is none)
};

// ---- Gated units: n elements each, rows of `hidden` (the last dimension; 1 for a scalar), which
// only a kernel that tiles by rows needs.

// Where a gated unit rounds to its dtype (opreg::Rounding, docs/ops.md):
//   once   act(a) in f32, each result rounded once;
//   torch  act(a) rounded to the dtype before it multiplies: c = round(round(act(a)) * b), and
//          geglu's db = round(dc * round(act(a))), da = round(round(dc * b) * act'(a)); swiglu's
//          backward rounds as under once (Liger-Kernel's).
// A descriptor of f32 tensors always says once: there the two are the same arithmetic, and so
// run the same instantiation and give the same bits.
enum class GluRounding : std::uint8_t { once, torch };

struct GluFwd {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  std::int64_t n = 0;
  std::int64_t hidden = 1;
  Elem type = Elem::f32;
  GluRounding rounding = GluRounding::once;
};
struct GluBwd {
  const void* dc = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  void* da = nullptr;  // may be a
  void* db = nullptr;  // may be b
  std::int64_t n = 0;
  std::int64_t hidden = 1;
  Elem type = Elem::f32;
  GluRounding rounding = GluRounding::once;
};

// ---- Rotary embeddings: q [batch, q.heads, seq, dim] and k [batch, k.heads, seq, dim], each
// head's dim elements rotated in dim/2 pairs by the angle of its (b, t) position; the backward is
// the same rotation with sin negated. Strides are in elements; the last dim's is 1 everywhere.
// A family whose kernels read strides (its variants take non-contiguous tensors).
enum class Pairing : std::uint8_t { half, interleaved };  // pairs (i, i + dim/2) | (2i, 2i + 1)

struct RopeSide {
  const void* in = nullptr;
  void* out = nullptr;  // may be in (in place, same strides)
  std::int64_t heads = 0;
  std::int64_t in_stride[3] = {};   // b, h, t
  std::int64_t out_stride[3] = {};  // b, h, t
};

struct Rope {
  static constexpr bool strided = true;
  RopeSide q;
  RopeSide k;
  // Pair i of position (b, t) takes cos and sin from entry i * table_step of its table row: row
  // positions[b * pos_stride[0] + t * pos_stride[1]] (rows table_rows; one outside [0,
  // table_rows) makes that position's outputs NaN, never a read outside the table), or without
  // positions the row at b * stride[0] + t * stride[1] (stride[0] 0: one table for every b).
  const void* cos = nullptr;
  const void* sin = nullptr;
  std::int64_t cos_stride[2] = {};
  std::int64_t sin_stride[2] = {};
  std::int64_t table_rows = 0;
  std::int64_t table_step = 1;  // 2: interleaved pairs read a full-width (dim) row's even entries
  const std::int64_t* positions = nullptr;
  std::int64_t pos_stride[2] = {};
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t dim = 0;  // even
  Pairing pairing = Pairing::half;
  bool backward = false;  // sin negated
  Elem type = Elem::f32;        // q's, k's and the outputs'
  Elem table_type = Elem::f32;  // cos's and sin's: type or f32
};

}  // namespace opreg::family
