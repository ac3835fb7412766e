// `opreg run`'s options: parsing the command line into RunOptions and RunOptions into the
// problem it describes. A translation unit of its own so that the fuzzers (tests/fuzz) can drive
// it without running anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/problem.h"

namespace opreg::cli {

// A usage error (exit 2): the message names the command, the option and the accepted values.
struct Usage {
  std::string message;
};

struct RunOptions {
  std::string op;
  std::optional<std::string> device;
  std::optional<opreg::DType> dtype;
  std::optional<bool> wdtype_f32;  // --wdtype: false = same, true = f32
  std::optional<opreg::Shape> shape;
  std::optional<std::int64_t> groups;
  std::optional<double> eps;
  std::optional<double> offset;
  std::optional<opreg::Casting> casting;
  bool inplace = false;
  bool no_weight = false;
  bool no_bias = false;
  std::optional<std::uint64_t> seed;
  std::optional<opreg::Values> values;
  std::optional<std::int64_t> repeat;
  std::optional<double> tol_scale;
};

// The arguments after `run`: the op and each option at most once, each value checked. Throws
// Usage for anything malformed.
RunOptions parse_run_args(const std::vector<std::string_view>& args);

// The problem the options describe, with every default filled in. Throws Usage for an option the
// op does not use, opreg::Error (unsupported) for an unknown op.
ProblemSpec to_spec(const RunOptions& options);

}  // namespace opreg::cli
