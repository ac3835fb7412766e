// The npu's geglu and swiglu lists (issue 19). flat first: it takes every shape, with tiles of
// whole 512-byte lines filling UB and every core busy; sub_block next, the seeds' row-chunked
// design, kept so the counters can compare the two; gpu_port last and never chosen (supports()
// refuses it with what it would do): forced, it runs the GPU kernel's launch and fails as the
// device does where that launch cannot run.
#include <string>
#include <vector>

#include "backends/npu/glu/kernels.h"
#include "backends/npu/npu_backend.h"
#include "opreg/variants.h"
#include "ops/describe.h"
#include "registry/fail.h"

namespace opreg::npu {
namespace {

using glu::Act;
using glu::Impl;

template <Act A, Impl I, class Args>
Verdict supports(const Args& a, const DeviceModel& device, glu::GluPlan& plan) {
  std::string why;
  plan = glu::plan(I, glu::problem_of(family::describe(a), glu::hidden_of(a.a)), device, &why);
  if (I == Impl::gpu_port) {
    const char* op = A == Act::gelu ? "geglu" : "swiglu";
    return Verdict::reject(why + fmt::format("; force it to see the device's failure (npu.{}.{}.flat takes any shape)",
                                             op, plan.backward ? "bwd" : "fwd"));
  }
  if (plan.fits) return {true, std::move(why)};
  return Verdict::reject(std::move(why));
}

template <Act A>
void fwd_run(const GluFwdArgs& a, const glu::GluPlan& plan, const KernelContext& ctx) {
  glu::run_fwd(a, A, plan, emulator_in(ctx));
}
template <Act A>
void bwd_run(const GluBwdArgs& a, const glu::GluPlan& plan, const KernelContext& ctx) {
  glu::run_bwd(a, A, plan, emulator_in(ctx));
}

std::vector<Tunable> tunables(Impl impl) {
  switch (impl) {
    case Impl::flat:
      return {{"partition", "grid_stride"}, {"tile", "whole 512 B lines, planner"}, {"depth", "auto"}};
    case Impl::sub_block:
      return {{"partition", "contiguous"}, {"mode", "split_row"}, {"depth", "auto"}};
    case Impl::gpu_port:
      return {{"grid", "rows"}, {"BLOCK_SIZE", "next_pow2(hidden)"}, {"multibuffer", "on"}};
  }
  return {};
}

template <Act A>
void register_gate(Registry& r, const Op<GluFwdArgs>& fwd, const Op<GluBwdArgs>& bwd) {
  register_list(r, fwd, "npu",
                {{"flat", &supports<A, Impl::flat, GluFwdArgs>, &fwd_run<A>, tunables(Impl::flat)},
                 {"sub_block", &supports<A, Impl::sub_block, GluFwdArgs>, &fwd_run<A>, tunables(Impl::sub_block)},
                 {"gpu_port", &supports<A, Impl::gpu_port, GluFwdArgs>, &fwd_run<A>, tunables(Impl::gpu_port)}});
  register_list(r, bwd, "npu",
                {{"flat", &supports<A, Impl::flat, GluBwdArgs>, &bwd_run<A>, tunables(Impl::flat)},
                 {"sub_block", &supports<A, Impl::sub_block, GluBwdArgs>, &bwd_run<A>, tunables(Impl::sub_block)},
                 {"gpu_port", &supports<A, Impl::gpu_port, GluBwdArgs>, &bwd_run<A>, tunables(Impl::gpu_port)}});
}

}  // namespace

void register_glu(Registry& r) {
  register_gate<Act::gelu>(r, geglu_fwd_op(), geglu_bwd_op());
  register_gate<Act::silu>(r, swiglu_fwd_op(), swiglu_bwd_op());
}

}  // namespace opreg::npu
