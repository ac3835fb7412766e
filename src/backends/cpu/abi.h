// The boundary between the cpu backend's ordinary code and its instruction-set translation units.
//
// The kernels are compiled twice: once for the target's baseline (namespace opreg::cpu::generic,
// the unit <family>_generic.cpp that CMakeLists.txt writes) and, on x86-64, once with AVX2, FMA
// and F16C (opreg::cpu::avx2, <family>_avx2.cpp; an aarch64 build has no avx2 objects and its lists no avx2 entries:
// list.h's OPREG_CPU_AVX2_ENTRY). Everything an ISA unit compiles must be its own: an inline function or template it
// shares with another unit (a Tensor accessor, std::vector, fmt) is emitted in both, the linker keeps one copy, and the
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
using namespace family;

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
// A rope position_ids value outside the tables (rope/list.cpp): an error on the cpu, before any
// output is written.
[[noreturn]] void position_outside(const char* op, std::int64_t b, std::int64_t t, std::int64_t row,
                                   std::int64_t rows);

// A family's kernel pair, kernel##_fwd over the descriptor Fwd and kernel##_bwd over Bwd, at every
// level: its <family>/kernels.inc defines them once per level, and its list.cpp declares them with
// this line, e.g. OPREG_CPU_KERNELS(affine_norm, NormFwd, NormBwd).
#define OPREG_CPU_KERNELS_AT(isa, kernel, Fwd, Bwd) \
  namespace isa {                                   \
  void kernel##_fwd(const Fwd& d, const Exec& e);   \
  void kernel##_bwd(const Bwd& d, const Exec& e);   \
  }
#define OPREG_CPU_KERNELS(kernel, Fwd, Bwd)       \
  OPREG_CPU_KERNELS_AT(generic, kernel, Fwd, Bwd) \
  OPREG_CPU_KERNELS_AT(avx2, kernel, Fwd, Bwd)

}  // namespace opreg::cpu
