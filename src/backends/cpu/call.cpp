// The cpu lists' shared parts (list.h): a call's team and scratch, the capped levels' refusal,
// the tunables, and the kernels' out-of-line error.
#include <string>
#include <vector>

#include "backends/cpu/list.h"
#include "backends/cpu/parallel.h"
#include "registry/fail.h"

namespace opreg::cpu {

void no_kernel(const char* op, Elem x, Elem w) {
  fail(ErrorKind::internal, "cpu {}: no kernel for x {} with parameters {}", op, family::elem_name(x),
       family::elem_name(w));
}

Call::Call(const KernelContext& ctx, std::int64_t elements) : ctx_(ctx) {
  exec_.team = team_size(ctx.threads, elements);
  exec_.run = &run_items;
  exec_.scratch = &Call::scratch;
  exec_.owner = this;
}

void* Call::scratch(void* owner, std::size_t bytes) {
  auto& self = *static_cast<Call*>(owner);
  if (self.taken_) fail(ErrorKind::internal, "cpu kernels: scratch asked for twice in one call");
  self.taken_ = true;
  if (self.ctx_.backend != nullptr) {
    self.lease_ = acquire_scratch(self.ctx_, bytes);
    return self.lease_.data();
  }
  self.own_.resize((bytes + sizeof(double) - 1) / sizeof(double) + 8);
  const auto address = reinterpret_cast<std::uintptr_t>(self.own_.data());
  return reinterpret_cast<void*>((address + 63) / 64 * 64);
}

std::string capped_reason(bool cpu_lacks) {
  return cpu_lacks ? "this CPU lacks AVX2, FMA or F16C"
                   : "OPREG_CPU_ISA=generic caps the cpu kernels at the x86-64 baseline";
}

void capped_refuses(const KernelContext& ctx, const Capped& plan) {
  fail(ErrorKind::unsupported, "{} cannot run: {}", ctx.variant->name, capped_reason(plan.cpu_lacks));
}

std::vector<Tunable> tunables(Isa isa) {
  return {{"threads", "OPREG_NUM_THREADS"},
          {"serial_below", std::to_string(kSerialBelow)},
          {"min_per_thread", std::to_string(kMinPerThread)},
          {"item_work", std::to_string(kItemWork)},
          {"chunk", std::to_string(kChunk)},
          {"lanes", std::to_string(kLanes)},
          {"row_block", std::to_string(kRowBlock)},
          {"isa", std::string(isa_name(isa))}};
}

}  // namespace opreg::cpu
