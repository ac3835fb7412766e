// The cuda layer_norm and group_norm lists (the variants: plan.h, plan.cpp). layer_norm: rows
// where one block holds the row, then split (a row over several blocks), then sets for what split
// refuses (empty rows). group_norm: split, each (n, group) set over several blocks, then sets
// (channels under 32 elements, empty sets).
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cuda_like/norm/plan.h"
#include "backends/family_entry.h"

namespace opreg::cuda_like {
namespace {

template <class Args>
constexpr bool kBwd = std::is_same_v<family::Descriptor<Args>, family::NormBwd>;

// A variant's tunables, and a backward's way with the parameter gradients (dw_db).
template <class Args>
std::vector<Tunable> tunables(std::vector<Tunable> own, const char* dw_db) {
  if (kBwd<Args>) own.push_back({"dw_db", dw_db});
  return own;
}

template <class Args, class D = family::Descriptor<Args>>
ListedVariant<Args> rows_entry() {
  return family_entry<Args, &ln_rows_supports<D>, &ln_rows_run<D>>(
      "rows", tunables<Args>({{"threads", "a row over up to 1024 (backward: 512 past 8 columns a thread)"},
                              {"accesses", kBwd<Args> ? "1, 2 or 4 of 16 bytes; 8 of 1 element"
                                                      : "4 or 8 of 16 bytes; 8 of 1 element"}},
                             "per-block partial rows (f64 for f32 inputs), added in order"));
}

template <class Args, class D = family::Descriptor<Args>>
ListedVariant<Args> split_entry() {
  return family_entry<Args, &split_supports<D>, &split_run<D>>(
      "split", tunables<Args>({{"threads", std::to_string(kNormSplitThreads)},
                               {"chunk", kBwd<Args> ? "2 accesses a thread (columns, or whole channels)"
                                                    : "4 accesses a thread (columns, or whole channels)"},
                               {"grid", "chunks x set groups, twice the resident blocks"}},
                              "f64 partial rows per set group (columns) or per n (channels), added in order"));
}

template <class Args, class D = family::Descriptor<Args>>
ListedVariant<Args> sets_entry() {
  return family_entry<Args, &sets_supports<D>, &sets_run<D>>(
      "sets", tunables<Args>({{"threads", std::to_string(kNormThreads)}, {"grid", "a block per set, up to 8 a multiprocessor"}},
                             "per-block or per-(n, channel) double sums, added in order"));
}

}  // namespace

void register_norm(Registry& r) {
  register_list(r, layer_norm_fwd_op(), "cuda",
                {rows_entry<LayerNormFwdArgs>(), split_entry<LayerNormFwdArgs>(), sets_entry<LayerNormFwdArgs>()});
  register_list(r, layer_norm_bwd_op(), "cuda",
                {rows_entry<LayerNormBwdArgs>(), split_entry<LayerNormBwdArgs>(), sets_entry<LayerNormBwdArgs>()});
  register_list(r, group_norm_fwd_op(), "cuda", {split_entry<GroupNormFwdArgs>(), sets_entry<GroupNormFwdArgs>()});
  register_list(r, group_norm_bwd_op(), "cuda", {split_entry<GroupNormBwdArgs>(), sets_entry<GroupNormBwdArgs>()});
}

}  // namespace opreg::cuda_like
