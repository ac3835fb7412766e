// What the cpu backend's op-family lists (<family>/list.cpp) share:
// the device facts, one call's team and scratch, and the list entry of a kernel compiled for an
// instruction-set level. Each list is written out in its family's list.cpp: avx2 first (x86-64
// only), then generic; the reference (cpu.<op>.<dir>.ref) comes last for every op of the manifest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/abi.h"
#include "backends/cpu/isa.h"
#include "backends/family_entry.h"

namespace opreg::cpu {

// The cpu's device facts (DeviceProps::facts): the level its kernels run at, and the CPU's own.
struct Facts {
  Isa level = Isa::generic;
  Isa host = Isa::generic;
};

inline std::int64_t work(const RowNormFwd& d) { return d.rows * d.hidden; }
inline std::int64_t work(const RowNormBwd& d) { return d.rows * d.hidden; }
inline std::int64_t work(const NormFwd& d) { return d.shape.sets * d.shape.channels * d.shape.spread; }
inline std::int64_t work(const NormBwd& d) { return d.shape.sets * d.shape.channels * d.shape.spread; }
inline std::int64_t work(const Rope& d) { return d.batch * d.seq * (d.q.heads + d.k.heads) * d.dim; }
// An elementwise family's (every descriptor with an element count n).
template <class Desc>
requires requires(const Desc& d) { d.n; }
std::int64_t work(const Desc& d) { return d.n; }

// One call: its team (by the problem's size and OPREG_NUM_THREADS) and its scratch, a lease on
// the backend's cached workspace (nothing is allocated once the workspace is warm). A context
// without a backend (a kernel called directly) gets a buffer of its own.
class Call {
 public:
  Call(const KernelContext& ctx, std::int64_t elements);
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  const Exec& exec() const { return exec_; }

 private:
  static void* scratch(void* owner, std::size_t bytes);
  const KernelContext& ctx_;
  Exec exec_;
  Workspace::Lease lease_;
  std::vector<double> own_;
  bool taken_ = false;
};

// A variant's run: the family's descriptor, its call, the kernel of one instruction set.
template <class Desc, auto Kernel>
void run(const Desc& d, const KernelContext& ctx) {
  Call call(ctx, work(d));
  Kernel(d, call.exec());
}

// A level above the one the cpu runs at stays listed, refusing every problem with the reason;
// forced, its kernel refuses too, rather than run instructions the CPU may lack (SIGILL) or that
// OPREG_CPU_ISA ruled out.
struct Capped {
  bool cpu_lacks = false;  // else OPREG_CPU_ISA capped it
};
std::string capped_reason(bool cpu_lacks);
template <class Desc>
Verdict capped_supports(const Desc&, const Facts& facts, Capped& plan) {
  plan.cpu_lacks = facts.host < Isa::avx2;
  return Verdict::reject(capped_reason(plan.cpu_lacks));
}
[[noreturn]] void capped_refuses(const KernelContext& ctx, const Capped& plan);
template <class Desc>
void capped_run(const Desc&, const Capped& plan, const KernelContext& ctx) {
  capped_refuses(ctx, plan);
}

std::vector<Tunable> tunables(Isa isa);

// The list entry of `Kernel`, compiled for `isa`, on a cpu that runs at `level`. One that the cpu
// can run has no supports(): the registry then resolves the choice once, not per problem.
template <class Args, auto Kernel>
ListedVariant<Args> isa_entry(Isa isa, Isa level, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using Desc = family::Descriptor<Args>;
  if (static_cast<int>(isa) <= static_cast<int>(level)) {
    return family_entry<Args, &run<Desc, Kernel>>(std::string(isa_name(isa)), tunables(isa), file, line);
  }
  return family_entry<Args, &capped_supports<Desc>, &capped_run<Desc>>(std::string(isa_name(isa)), tunables(isa), file,
                                                                       line);
}

// A list's avx2 entry, where the avx2 kernels are compiled (x86-64: OPREG_HAVE_CPU_AVX2, set by
// CMakeLists.txt); elsewhere (aarch64) the list has none.
#if defined(OPREG_HAVE_CPU_AVX2)
#define OPREG_CPU_AVX2_ENTRY(...) __VA_ARGS__,
#else
#define OPREG_CPU_AVX2_ENTRY(...)
#endif

// Every cpu list has one shape: the op direction's family kernel compiled for avx2, then generic.
// OPREG_CPU_LISTS registers both directions of an op, Op##FwdArgs with kernel##_fwd and
// Op##BwdArgs with kernel##_bwd, e.g. OPREG_CPU_LISTS(r, level, layer_norm, LayerNorm, affine_norm).
#define OPREG_CPU_LIST(registry, level, op, Args, kernel)                               \
  register_list(registry, op, "cpu",                                                    \
                {OPREG_CPU_AVX2_ENTRY(isa_entry<Args, &avx2::kernel>(Isa::avx2, level)) \
                     isa_entry<Args, &generic::kernel>(Isa::generic, level)})
#define OPREG_CPU_LISTS(registry, level, op, Op, kernel)                     \
  OPREG_CPU_LIST(registry, level, op##_fwd_op(), Op##FwdArgs, kernel##_fwd); \
  OPREG_CPU_LIST(registry, level, op##_bwd_op(), Op##BwdArgs, kernel##_bwd)

}  // namespace opreg::cpu
