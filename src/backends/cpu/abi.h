// The boundary between the cpu backend's ordinary code and its instruction-set translation units.
//
// The kernels are compiled twice: once for the target's baseline (namespace opreg::cpu::generic,
// <family>/kernels_generic.cpp) and, on x86-64, once with AVX2, FMA and F16C (opreg::cpu::avx2,
// <family>/kernels_avx2.cpp; an aarch64 build has no avx2 objects and its lists no avx2 entries:
// list.h's OPREG_CPU_AVX2_ENTRY). Everything an ISA unit compiles must be its own: an inline function or template it shares with another unit
// (a Tensor accessor, std::vector, fmt) is emitted in both, the linker keeps one copy, and the
// AVX2 copy may then run on a machine without AVX2. So the ISA units see only what this header
// declares: the op families' plain descriptors of raw pointers and sizes (src/ops/families.h,
// built by src/ops/describe.h from the op's argument struct), a run/scratch interface through
// function pointers, and out-of-line error reporting. tests/backends/cpu checks the AVX2 objects
// for shared symbols.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/families.h"

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

// The kernels' arguments: the op families' descriptors, shared by every backend.
using family::Elem;
using family::GluBwd;
using family::GluFwd;
using family::GluRounding;
using family::Mode;
using family::NormBwd;
using family::NormFwd;
using family::NormSets;
using family::RowNormBwd;
using family::RowNormFwd;

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

// An (x, weight) dtype pair no kernel was built for (the op's check refuses them first); defined
// out of line so that the ISA units need no formatting code.
[[noreturn]] void no_kernel(const char* op, Elem x, Elem w);

#define OPREG_CPU_DECLARE_KERNELS(isa)                      \
  namespace isa {                                           \
  void rms_norm_fwd(const RowNormFwd& d, const Exec& e);    \
  void rms_norm_bwd(const RowNormBwd& d, const Exec& e);    \
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
