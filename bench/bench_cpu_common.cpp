// OpProblem (bench_cpu_common.h): a Problem of the one problem factory (src/ops/problem.h) on the
// cpu, with x and the parameters in one dtype and group_norm's kGroups groups.
#include "bench_cpu_common.h"

#include <benchmark/benchmark.h>

#include <algorithm>

#include "ops/problem.h"

namespace opreg::bench {

bool grouped(std::string_view base) { return problem_options(std::string(base) + ".fwd").groups; }

Shape bench_shape(const std::string& base, std::int64_t rows, std::int64_t hidden) {
  if (grouped(base)) return Shape{32, hidden / 16, 4096};
  // rope: rows positions of heads of 128, hidden / 128 of them (q's [1, H, T, D]; k has as many).
  if (problem_options(base + ".fwd").rope) return Shape{1, std::max<std::int64_t>(hidden / 128, 1), rows, 128};
  return Shape{rows, hidden};
}

struct OpProblem::Impl {
  std::unique_ptr<Problem> problem;
};

OpProblem::OpProblem(const std::string& op, const Shape& shape, DType dtype) : impl_(std::make_unique<Impl>()) {
  ProblemSpec spec;
  spec.op = op;
  spec.dtype = dtype;
  spec.wdtype = dtype;
  spec.shape = shape;
  spec.groups = kGroups;
  impl_->problem = std::make_unique<Problem>(default_registry(), spec, Device{});
}
OpProblem::~OpProblem() = default;

std::string OpProblem::run() {
  const DispatchResult r = impl_->problem->run();
  return r.variant != nullptr ? r.variant->name : "?";
}
bool OpProblem::run_variant(const std::string& variant) { return impl_->problem->run_variant(variant).ok; }
std::uint64_t OpProblem::bytes() const { return impl_->problem->bytes(); }

int run_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace opreg::bench
