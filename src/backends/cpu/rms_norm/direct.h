// The rms_norm variants' kernels, callable directly (bench/bench_dispatch times a direct call
// against the public entry point, bench_cpu_busy the family kernel itself). The variants are
// registered by rms_norm/list.cpp.
#pragma once

#include "backends/cpu/abi.h"
#include "opreg/ops.h"
#include "opreg/registry.h"

namespace opreg::cpu {

// The family kernels of every level (kernels.inc; an aarch64 build defines no avx2 ones).
OPREG_CPU_KERNELS(rms_norm, RowNormFwd, RowNormBwd)

// cpu.rms_norm.{fwd,bwd}.generic and .avx2. Any (x, weight) dtype pair and casting mode the op's
// check accepts, contiguous tensors; dx may be dy. Threads: KernelContext::threads (0: the
// machine's). Scratch comes from ctx.backend's workspace (a context without a backend gets a
// buffer of its own). The avx2 kernels need a CPU with AVX2, FMA and F16C, and are defined in x86-64
// builds only.
void rms_norm_fwd_generic(const RmsNormFwdArgs& args, const KernelContext& ctx);
void rms_norm_bwd_generic(const RmsNormBwdArgs& args, const KernelContext& ctx);
void rms_norm_fwd_avx2(const RmsNormFwdArgs& args, const KernelContext& ctx);
void rms_norm_bwd_avx2(const RmsNormBwdArgs& args, const KernelContext& ctx);

}  // namespace opreg::cpu
