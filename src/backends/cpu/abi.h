// The boundary between the cpu backend's ordinary code and its instruction-set translation units.
//
// The kernels are compiled twice: once for the x86-64 baseline (namespace opreg::cpu::generic,
// *_generic.cpp) and once with AVX2, FMA and F16C (opreg::cpu::avx2, *_avx2.cpp). Everything an
// ISA unit compiles must be its own: an inline function or template it shares with another unit
// (a Tensor accessor, std::vector, fmt) is emitted in both, the linker keeps one copy, and the
// AVX2 copy may then run on a machine without AVX2. So the ISA units see only what this header
// declares: plain descriptors of raw pointers and sizes (built by variants.cpp from the op's
// argument struct), a run/scratch interface through function pointers, and out-of-line error
// reporting. tests/backends/cpu checks the AVX2 objects for shared symbols.
#pragma once

#include <cstddef>
#include <cstdint>

namespace opreg::cpu {

// The kernels' tuning constants, also listed as the variants' tunables.
// Columns converted and processed together: buffers of this many floats live on the stack, and
// each chunk's f32 sum joins its row's total in double (a lane adds at most kChunk / kLanes terms
// in f32, however long the row).
inline constexpr std::int64_t kChunk = 512;
// Independent f32 accumulators of a sum: two AVX2 or four SSE registers.
inline constexpr int kLanes = 16;
// Rows summed into a parameter gradient's f32 block before it joins the item's f64 total.
inline constexpr std::int64_t kRowBlock = 32;
// Elements an item of work aims for (items are split off rows, sets or elements).
inline constexpr std::int64_t kItemWork = 1 << 16;

enum class Elem : std::uint8_t { f32, f16, bf16 };
// Where rms_norm rounds (opreg::Casting's values, kept apart so this header needs nothing else).
enum class Mode : std::uint8_t { llama, gemma, none };

// How a kernel runs: its team and its scratch. `team` is fixed by the problem and the thread
// count alone (never by how many threads turn up), so results are reproducible for a given
// thread count.
struct Exec {
  int team = 1;
  // Runs body(job, item, slot) for every item in [0, items) on up to `team` threads and returns
  // when all are done; slot < team names the thread's per-thread scratch. Items are handed out
  // dynamically: which thread runs an item never changes a result.
  void (*run)(int team, std::int64_t items, void (*body)(void* job, std::int64_t item, int slot), void* job) = nullptr;
  // One block of scratch for the whole call (64-byte aligned, held until the kernel returns).
  void* (*scratch)(void* owner, std::size_t bytes) = nullptr;
  void* owner = nullptr;
};

// rms_norm and fused_add_rms_norm. Forward: with `residual`, s = round_x(x + residual) is stored
// to `s` and normalised; without, x is. Backward: `x` is the forward's input (s for the fused
// op); with `ds_out`, it is added to dx.
struct RmsFwd {
  const void* x = nullptr;
  const void* residual = nullptr;
  const void* weight = nullptr;  // null: no weight (scale 1)
  void* y = nullptr;
  void* s = nullptr;
  float* rstd = nullptr;
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  double eps = 0;
  double offset = 0;
  Mode mode = Mode::llama;
  Elem x_type = Elem::f32;
  Elem w_type = Elem::f32;  // f32 when there is no weight
};
struct RmsBwd {
  const void* dy = nullptr;
  const void* ds_out = nullptr;
  const void* x = nullptr;
  const void* weight = nullptr;
  const float* rstd = nullptr;
  void* dx = nullptr;  // may be dy
  void* dweight = nullptr;  // null exactly when weight is
  std::int64_t rows = 0;
  std::int64_t hidden = 0;
  double offset = 0;
  Mode mode = Mode::llama;
  Elem x_type = Elem::f32;
  Elem w_type = Elem::f32;
};

// layer_norm and group_norm as one normalisation over `sets` contiguous sets of
// channels x spread elements (the reference's formulation): layer_norm is groups 1, channels H,
// spread 1; group_norm is sets N x G, channels C / G, spread the spatial size. Set k uses
// parameters [(k % groups) * channels, ... + channels).
struct NormShape {
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
  NormShape shape;
  double eps = 0;
  Elem x_type = Elem::f32;
  Elem p_type = Elem::f32;  // weight's and bias's dtype
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
  NormShape shape;
  Elem x_type = Elem::f32;
  Elem p_type = Elem::f32;  // weight's, dweight's and dbias's dtype
};

// geglu and swiglu: n elements each.
struct GluFwd {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  std::int64_t n = 0;
  Elem type = Elem::f32;
};
struct GluBwd {
  const void* dc = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  void* da = nullptr;  // may be a
  void* db = nullptr;  // may be b
  std::int64_t n = 0;
  Elem type = Elem::f32;
};

// An (x, weight) dtype pair no kernel was built for (the op's check refuses them first); defined
// out of line so that the ISA units need no formatting code.
[[noreturn]] void no_kernel(const char* op, Elem x, Elem w);

#define OPREG_CPU_DECLARE_KERNELS(isa)                      \
  namespace isa {                                           \
  void rms_norm_fwd(const RmsFwd& d, const Exec& e);        \
  void rms_norm_bwd(const RmsBwd& d, const Exec& e);        \
  void affine_norm_fwd(const NormFwd& d, const Exec& e);    \
  void affine_norm_bwd(const NormBwd& d, const Exec& e);    \
  void geglu_fwd(const GluFwd& d, const Exec& e);           \
  void geglu_bwd(const GluBwd& d, const Exec& e);           \
  void swiglu_fwd(const GluFwd& d, const Exec& e);          \
  void swiglu_bwd(const GluBwd& d, const Exec& e);          \
  }
OPREG_CPU_DECLARE_KERNELS(generic)
OPREG_CPU_DECLARE_KERNELS(avx2)
#undef OPREG_CPU_DECLARE_KERNELS

}  // namespace opreg::cpu
