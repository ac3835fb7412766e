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

}  // namespace opreg::family
