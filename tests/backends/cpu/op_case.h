// One op problem with inputs the test chooses (the conformance harness draws its own random
// ones): for the cpu backend's edge-case and reproducibility tests. A case builds its inputs on
// the host with fill(tensor name, flat index), makes a backward's statistics with the reference
// forward on the same inputs (as a framework would pass them), and runs any variant by name on
// fresh copies, returning every output.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opreg/ops.h"

namespace opreg::cpu_test {

struct CaseSpec {
  std::string op = "rms_norm.fwd";  // full op name
  DType dtype = DType::f32;
  DType wdtype = DType::f32;  // weight and bias (norms only)
  Shape shape{4, 8};
  std::int64_t groups = 1;
  bool weight = true;
  bool bias = true;
  double eps = 1e-5;
  double offset = 0.0;
  Casting casting = Casting::llama;
  bool in_place = false;  // backward: dx is dy (glu: da is a, db is b)
};

using Fill = std::function<double(std::string_view tensor, std::int64_t index)>;

struct Output {
  std::string name;  // y, rstd, dx, dweight, ...
  Tensor value;      // on the host
};

// The output of that name (an opreg::Error if there is none).
const Tensor& output(const std::vector<Output>& outputs, std::string_view name);

// Whether the default registry has the variant (the avx2 ones are built on x86-64 only).
bool registered(std::string_view variant);
// Variant names of every op direction for an implementation ("generic", "avx2", "ref"), those
// registered.
std::vector<std::string> variants(std::string_view impl);
// "rms_norm.fwd" of "cpu.rms_norm.fwd.avx2".
std::string op_of(std::string_view variant);

class OpCase {
 public:
  OpCase(const CaseSpec& spec, const Fill& fill);
  ~OpCase();
  OpCase(const OpCase&) = delete;
  OpCase& operator=(const OpCase&) = delete;
  // Runs the variant (Registry::call_variant on the default registry) on copies of the inputs
  // with outputs poisoned; `ok` is false (and the outputs empty) when its supports() refuses.
  std::vector<Output> run(std::string_view variant, bool* ok = nullptr) const;

  struct Impl;  // the typed case (op_case.cpp)

 private:
  Impl* impl_;
};

}  // namespace opreg::cpu_test
