// `opreg run`'s options: parsing the command line into RunOptions and RunOptions into the
// problem it describes. A translation unit of its own so that the fuzzers (tests/fuzz) can drive
// it without running anything.
#pragma once

#include <charconv>
#include <cstdint>
#include <system_error>
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

// Option values, for every command's parser: anything but an accepted value is a Usage error
// "<command>: invalid <option> '<value>'; accepted: <accepted>".
[[noreturn]] void bad_option_value(std::string_view command, std::string_view option, std::string_view value,
                                   std::string_view accepted);
// A valued option's value: the inline one (--name=value), else the next argument (args[++i]); a
// Usage error "<command>: <name> needs a value" when there is none.
std::string_view option_value(std::string_view command, std::string_view name,
                              std::optional<std::string_view> inline_value, const std::vector<std::string_view>& args,
                              std::size_t& i);
// A whole decimal integer from lo to hi.
template <class Int>
Int parse_int_value(std::string_view command, std::string_view option, std::string_view text, Int lo, Int hi,
                    std::string_view accepted) {
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < lo || value > hi) {
    bad_option_value(command, option, text, accepted);
  }
  return value;
}
// A finite decimal number from lo to hi (one too small for a double is the nearest one).
double parse_number_value(std::string_view command, std::string_view option, std::string_view text, double lo,
                          double hi, std::string_view accepted);

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
  std::optional<opreg::Rounding> rounding;
  std::optional<std::int64_t> kv_heads;
  std::optional<opreg::RopeStyle> style;
  std::optional<opreg::RopeTable> table;
  bool transposed = false;
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
