// `opreg bench`: every op direction on every device, timed with each backend's own clock, written
// as Liger-Kernel's benchmark JSON and CSV (bench_output.h) and drawn by scripts/plot_bench.py.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opreg/dtype.h"

namespace opreg::cli {

// Liger-Kernel's operation modes: forward (.fwd), backward (.bwd), full (.fwd then .bwd, timed as one).
enum class BenchMode : std::uint8_t { forward, backward, full };
std::string_view to_string(BenchMode mode);    // "forward", "backward", "full"
std::string_view option_name(BenchMode mode);  // "fwd", "bwd", "fwdbwd" (--dirs)

struct BenchOptions {
  std::vector<std::string> ops;  // base names (rms_norm, ...)
  std::vector<BenchMode> modes;
  std::vector<std::string> devices;  // as given; empty: every available device
  std::vector<DType> dtypes;
  std::vector<std::int64_t> hidden;
  std::int64_t rows = 2048;
  double budget_s = 180;
  std::string out_dir = "opreg-bench";
  bool plot = false;
  std::optional<std::string> compare;  // a CSV of Liger-Kernel's schema to overlay
};

extern const char* const kBenchHelp;

// The arguments after `bench`, each value checked. Throws Usage for anything malformed.
BenchOptions parse_bench_args(const std::vector<std::string_view>& args);

// Runs the benchmark; returns the exit code (0, or 1 when a case failed its check or the plot
// could not be drawn; 3 when every case was unsupported).
int run_bench(const BenchOptions& options);

}  // namespace opreg::cli
