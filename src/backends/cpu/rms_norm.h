// The fast host rms_norm: cpu.rms_norm.fwd.generic and cpu.rms_norm.bwd.generic. Internal to the
// cpu backend; declared here so benchmarks and tests can call the kernels directly.
#pragma once

#include "opreg/ops.h"
#include "opreg/registry.h"

namespace opreg::cpu {

// Every (x, weight) dtype pair and casting mode the op's check accepts, contiguous tensors
// only. Rows run across OpenMP threads (KernelContext::threads, 0: omp_get_max_threads());
// problems below 32768 elements run on the calling thread and, forward, touch no workspace. The
// row loops exist for the baseline ISA, AVX2 and AVX-512 (x86-64), the best the cpu has picked
// once; all give the same bits.
void rms_norm_fwd_generic(const RmsNormFwdArgs& args, const KernelContext& ctx);
// dx may be dy itself. dweight is reduced per thread and summed in thread order, so it is
// bitwise reproducible for a given thread count. Scratch comes from ctx.backend's workspace
// (a context without a backend, as in a direct call, gets a buffer of its own).
void rms_norm_bwd_generic(const RmsNormBwdArgs& args, const KernelContext& ctx);

// Registers both variants (priority 100, no supports predicate) for the registry's lifetime.
void register_rms_norm(Registry& registry);

}  // namespace opreg::cpu
