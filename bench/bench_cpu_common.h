// What the cpu benchmarks share: problems of every op built through the public API with
// deterministic inputs, run through the registry (the default choice, or one variant by name).
#pragma once

#include <cmath>
#include <cstdio>
#include <exception>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "opreg/ops.h"

namespace opreg::bench {

// Deterministic, non-zero, varied values in [-2, 2], cheap enough to fill gigabytes.
inline void fill_pattern(Tensor& t, std::uint64_t seed) {
  std::uint32_t s = static_cast<std::uint32_t>(seed * 2654435761U + 1);
  const auto n = static_cast<std::size_t>(t.numel());
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 1664525U + 1013904223U;
    const double v = 0.125 + static_cast<double>(s >> 9) * 0x1.0p-22;  // [0.125, 2.125)
    store_from_double(t.data(), t.dtype(), i, (s & 1U) != 0 ? -v : v);
  }
}

// Whether the op (its base name, "group_norm") takes a grouped problem (N, C, spatial...) rather
// than rows x hidden: the manifest's word for it, through the problem factory.
bool grouped(std::string_view base);

// The shape of an op's input for a benchmark "hidden": rows x hidden, for a grouped op
// (group_norm) N = 32, C = hidden / 16, HW = 4096 (32 groups), and for rope q [1, hidden / 128,
// rows, 128] (heads of 128, k with as many).
Shape bench_shape(const std::string& base, std::int64_t rows, std::int64_t hidden);
inline constexpr std::int64_t kGroups = 32;

// One op direction's arguments, allocated and filled once; run() dispatches it.
class OpProblem {
 public:
  // op: "rms_norm.fwd" ...; dtype for x and the parameters alike (as PyTorch runs them).
  OpProblem(const std::string& op, const Shape& shape, DType dtype);
  ~OpProblem();
  OpProblem(const OpProblem&) = delete;
  OpProblem& operator=(const OpProblem&) = delete;
  // Through the default registry's choice; returns the variant that ran.
  std::string run();
  // One variant by name (Registry::call_variant); false if its supports() refuses.
  bool run_variant(const std::string& variant);
  std::uint64_t bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A program's main around `body`: an exception ends it with "<program>: <what>" and exit 1.
inline int guarded_main(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

// Google Benchmark's main after the program registered its cases: initialise, refuse unknown
// arguments (exit 1), run, shut down.
int run_benchmarks(int argc, char** argv);

}  // namespace opreg::bench
