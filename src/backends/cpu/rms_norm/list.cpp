// The cpu's row-norm lists: rms_norm and fused_add_rms_norm, forward and backward (one kernel per
// direction serves both ops: the fused op's residual and ds_out are optional in the descriptor).
#include "backends/cpu/list.h"

#include "backends/cpu/rms_norm/direct.h"

namespace opreg::cpu {

void register_rms_norm(Registry& r, Isa level) {
  OPREG_CPU_LISTS(r, level, rms_norm, RmsNorm, rms_norm);
  OPREG_CPU_LISTS(r, level, fused_add_rms_norm, FusedAddRmsNorm, rms_norm);
}

void rms_norm_fwd_generic(const RmsNormFwdArgs& a, const KernelContext& c) {
  run<RowNormFwd, &generic::rms_norm_fwd>(family::describe(a), c);
}
void rms_norm_bwd_generic(const RmsNormBwdArgs& a, const KernelContext& c) {
  run<RowNormBwd, &generic::rms_norm_bwd>(family::describe(a), c);
}
#if defined(OPREG_HAVE_CPU_AVX2)
void rms_norm_fwd_avx2(const RmsNormFwdArgs& a, const KernelContext& c) {
  run<RowNormFwd, &avx2::rms_norm_fwd>(family::describe(a), c);
}
void rms_norm_bwd_avx2(const RmsNormBwdArgs& a, const KernelContext& c) {
  run<RowNormBwd, &avx2::rms_norm_bwd>(family::describe(a), c);
}
#endif

}  // namespace opreg::cpu
