// The cuda rms_norm and fused_add_rms_norm lists (the variants: plan.h, plan.cpp). Priority
// order, as `opreg ops` and OPREG_VERBOSE=2 show per shape:
//   cluster  rows longer than one block holds, or so few rows that one block per row would leave
//            most multiprocessors idle; sm_90 and later, 16-byte aligned rows (an older GPU lists
//            it refusing every problem with the reason; a HIP build, without clusters, does not)
//   rows     the row in one block (forward: registers, a block per row group; backward: staged
//            in shared memory or in registers, persistent grid), several rows a block when short
//   split    anything: very long rows, long rows that are not 16-byte aligned
// fused_add_rms_norm: the same kernels with the residual's accesses, told apart at run time (the
// descriptor's residual, ds_out), and the same lists but for the forward's cluster: the cluster
// forward stages x in shared memory and the residual is added only on the register path, so past
// what rows holds (65,536 16-bit / 32,768 f32 columns) the fused forward takes split.
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cuda_like/rms_norm/plan.h"
#include "backends/family_entry.h"

namespace opreg::cuda_like {
namespace {

template <class Args>
constexpr bool kBwd = std::is_same_v<family::Descriptor<Args>, RowNormBwd>;

template <class Args, bool Fused>
ListedVariant<Args> cluster_entry() {
  using D = family::Descriptor<Args>;
  return family_entry<Args, &RowNormPlans<D, Fused>::cluster_supports, &RowNormRuns<D>::cluster_run>(
      "cluster", {{"max_cluster", "8"}, {"accesses_per_thread", kBwd<Args> ? "2" : "4"}, {"access_bytes", "16"}});
}

template <class Args, bool Fused>
ListedVariant<Args> rows_entry() {
  using D = family::Descriptor<Args>;
  std::vector<Tunable> t{{"accesses_per_thread", kBwd<Args> ? "1,2,4" : "4,8,2"},
                         {"access_bytes", "16 or 1 element"},
                         {"block", "256 or one row"}};
  if (kBwd<Args>) t.push_back({"stages", "2 in shared memory, or registers"});
  t.push_back({"grid", kBwd<Args> ? "persistent" : "a block per row group"});
  return family_entry<Args, &RowNormPlans<D, Fused>::rows_supports, &RowNormRuns<D>::rows_run>("rows", std::move(t));
}

template <class Args, bool Fused>
ListedVariant<Args> split_entry() {
  using D = family::Descriptor<Args>;
  return family_entry<Args, &RowNormPlans<D, Fused>::split_plan, &RowNormRuns<D>::split_run>(
      "split", {{"threads", "256"}, {"accesses_per_thread", kBwd<Args> ? "2" : "4"}});
}

}  // namespace

// The cluster entries, where their kernels are built (CUDA; HIP has no thread-block clusters).
#if OPREG_GPU_CLUSTERS
#define OPREG_IF_CLUSTERS(...) __VA_ARGS__,
#else
#define OPREG_IF_CLUSTERS(...)
#endif

void register_rms_norm(Registry& r) {
  register_list(r, rms_norm_fwd_op(), "cuda",
                {OPREG_IF_CLUSTERS(cluster_entry<RmsNormFwdArgs, false>()) rows_entry<RmsNormFwdArgs, false>(),
                 split_entry<RmsNormFwdArgs, false>()});
  register_list(r, rms_norm_bwd_op(), "cuda",
                {OPREG_IF_CLUSTERS(cluster_entry<RmsNormBwdArgs, false>()) rows_entry<RmsNormBwdArgs, false>(),
                 split_entry<RmsNormBwdArgs, false>()});
  register_list(r, fused_add_rms_norm_fwd_op(), "cuda",
                {rows_entry<FusedAddRmsNormFwdArgs, true>(), split_entry<FusedAddRmsNormFwdArgs, true>()});
  register_list(r, fused_add_rms_norm_bwd_op(), "cuda",
                {OPREG_IF_CLUSTERS(cluster_entry<FusedAddRmsNormBwdArgs, true>())
                     rows_entry<FusedAddRmsNormBwdArgs, true>(),
                 split_entry<FusedAddRmsNormBwdArgs, true>()});
}

}  // namespace opreg::cuda_like
