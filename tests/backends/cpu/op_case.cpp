// OpCase (op_case.h): a Problem (src/ops/problem.h, the one problem factory) with the test's
// inputs, run variant by variant.
#include "op_case.h"

#include "ops/problem.h"
#include "registry/fail.h"

namespace opreg::cpu_test {

struct OpCase::Impl {
  std::unique_ptr<Problem> problem;
};

const Tensor& output(const std::vector<Output>& outputs, std::string_view name) {
  for (const auto& o : outputs) {
    if (o.name == name) return o.value;
  }
  fail(ErrorKind::invalid_argument, "op_case: no output named {}", name);
}

std::string op_of(std::string_view variant) {
  const auto first = variant.find('.');
  const auto last = variant.rfind('.');
  return std::string(variant.substr(first + 1, last - first - 1));
}

bool registered(std::string_view variant) {
  for (const auto& v : default_registry().variants(op_of(variant))) {
    if (v.name == variant) return true;
  }
  return false;
}

std::vector<std::string> variants(std::string_view impl) {
  std::vector<std::string> out;
  for (std::string_view base : op_names()) {
    for (std::string_view dir : {"fwd", "bwd"}) {
      std::string name = "cpu." + std::string(base) + "." + std::string(dir) + "." + std::string(impl);
      if (registered(name)) out.push_back(std::move(name));
    }
  }
  return out;
}

OpCase::OpCase(const CaseSpec& s, const Fill& fill) : impl_(new Impl) {
  ProblemSpec spec;
  spec.op = s.op;
  spec.dtype = s.dtype;
  spec.wdtype = s.wdtype;
  spec.shape = s.shape;
  spec.groups = s.groups;
  spec.has_weight = s.weight;
  spec.has_bias = s.bias;
  spec.eps = s.eps;
  spec.offset = s.offset;
  spec.casting = s.casting;
  spec.in_place = s.in_place;
  try {
    impl_->problem = std::make_unique<Problem>(default_registry(), spec, Device{}, fill);
  } catch (...) {
    delete impl_;
    throw;
  }
}

OpCase::~OpCase() { delete impl_; }

std::vector<Output> OpCase::run(std::string_view variant, bool* ok) const {
  Problem& p = *impl_->problem;
  p.poison();  // outputs NaN (in place: back to their inputs)
  const Verdict v = p.run_variant(variant);
  if (ok != nullptr) *ok = v.ok;
  std::vector<Output> outputs;
  if (!v.ok) return outputs;
  for (auto& o : p.outputs()) outputs.push_back({o.name, o.value});
  return outputs;
}

}  // namespace opreg::cpu_test
