// `opreg bench`'s help text and option parsing (see bench.h).
#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "bench.h"
#include "opreg/ops.h"
#include "registry/spellings.h"
#include "run_options.h"

namespace opreg::cli {

const char* const kBenchHelp = R"(usage: opreg bench [options]

Times every op direction on every device with that backend's own clock and writes the results in
Liger-Kernel's benchmark schemas: DIR/benchmark_data.json (one record per op, mode, dtype, device
and provider, with lists over the hidden sizes) and DIR/all_benchmark_data.csv (one row per hidden
size). Clocks: the wall clock around synchronized runs (cpu, xpu), CUDA events with the L2 flushed
before each run (cuda), the emulator's est_us (npu: an estimate, marked so everywhere). Each case
reports the median and the 20th and 80th percentiles in ms, GB/s from the op's byte model (the
bytes an ideal kernel moves, as `opreg run`'s gbps), and the fraction of the device's bandwidth
ceiling, measured in the same run (cpu, cuda, xpu: a 128 MiB copy on the device; npu: the profile's
HBM bandwidth). A case whose device has no variant for it falls back to the cpu: it is reported
as a fallback and not timed. The last run of each case is checked against the reference.

options (each at most once, as `--opt V` or `--opt=V`; lists are comma-separated):
  --ops LIST      base op names (default: all: rms_norm, fused_add_rms_norm, layer_norm,
                  group_norm, geglu, swiglu, rope)
  --dirs LIST     fwd, bwd, fwdbwd (Liger's modes forward, backward, full; default: all three)
  --devices LIST  cpu, cuda, cuda:1, npu, xpu, ... (default: every available device, emulated
                  ones included and labelled); each device once (cpu and cpu:0 are one)
  --dtype LIST    bf16, f16, f32 (default bf16; the weight has x's dtype)
  --hidden LIST   hidden sizes, 1 to 1048576, each once (64 and 064 are one; default
                  1024,2048,4096,8192,16384); group_norm runs N=rows x C=32 x hidden/32 with 8
                  groups (hidden: a multiple of 32); rope runs q [1, hidden/128, rows, 128] and k
                  with as many heads, one shared [1, rows, 128] cos/sin pair
  --rows N        rows, 1 to 1048576 (default 2048, Liger's M)
  --budget S      seconds to spread over the cases, 0.001 to 86400 (default 180): each case runs
                  once to warm up and be checked, then at least 3 timed runs, more while its
                  share of the budget lasts (at most 1000); the minimum can take longer
  --out DIR       where the JSON, the CSV and the plots go (default opreg-bench; created); every
                  file it will hold is opened (the PNGs probed) before the first case, so one that
                  cannot be written is an error naming it and the reason before anything runs
  --plot          draw DIR/<op>_<mode>.png: GB/s against hidden size, a line per device and
                  provider, each device's ceiling dashed (needs /usr/bin/python3 with matplotlib,
                  Debian's python3-matplotlib: checked before the first case)
  --compare FILE  a CSV of Liger-Kernel's schema (Liger's own benchmark data, or a GPU peer
                  script's --csv), a regular file of at most 64 MiB: its speed rows of these ops
                  are converted to GB/s with opreg's byte model (shape and dtype from x_value and
                  extra_benchmark_config_str), written to DIR/compare_data.csv and overlaid on
                  the plots; rows it cannot convert (a shape whose bytes pass 2^64 among them) are
                  skipped and counted by reason, with the first one's line

Progress: a bar on stderr when it is a terminal (elapsed, remaining, the current case), and one
line per case on stdout.
exit codes: 0 done (fallbacks included), 1 a case failed its check, the plot failed or an output
could not be written at the end (disk full), 2 bad input or usage (an output that cannot be
written, a --compare that is not a regular file of at most 64 MiB), 3 a device is unavailable,
--plot without matplotlib, or no case could run (one line on stderr says how many and the first
one's reason).
)";

constexpr auto kModeNames = spellings<BenchMode>("forward", "backward", "full");
constexpr auto kModeOptions = spellings<BenchMode>("fwd", "bwd", "fwdbwd");
std::string_view to_string(BenchMode mode) { return kModeNames(mode); }
std::string_view option_name(BenchMode mode) { return kModeOptions(mode); }

namespace {

constexpr std::string_view kCommand = "bench";

// The comma-separated items of a list option: none empty, none twice.
std::vector<std::string_view> split_list(std::string_view option, std::string_view value, std::string_view accepted) {
  std::vector<std::string_view> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = value.find(',', start);
    const std::string_view item = value.substr(start, comma == std::string_view::npos ? value.npos : comma - start);
    if (item.empty()) bad_option_value(kCommand, option, value, fmt::format("a comma-separated list of {}", accepted));
    if (std::find(items.begin(), items.end(), item) != items.end()) {
      throw Usage{fmt::format("bench: {} names '{}' twice", option, item)};
    }
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

// Each item one of `names`; the error lists them.
template <class T>
std::vector<T> pick_list(std::string_view option, std::string_view value,
                         std::span<const std::pair<std::string_view, T>> names) {
  std::vector<std::string_view> spellings;
  for (const auto& n : names) spellings.push_back(n.first);
  const std::string accepted = fmt::format("{}", fmt::join(spellings, ", "));
  std::vector<T> out;
  for (const auto item : split_list(option, value, accepted)) {
    const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == item; });
    if (it == names.end()) bad_option_value(kCommand, option, item, accepted);
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

BenchOptions parse_bench_args(const std::vector<std::string_view>& args) {
  BenchOptions o;
  o.ops.assign(op_names().begin(), op_names().end());
  o.modes = {BenchMode::forward, BenchMode::backward, BenchMode::full};
  o.dtypes = {DType::bf16};
  o.hidden = {1024, 2048, 4096, 8192, 16384};

  std::vector<std::pair<std::string_view, std::string_view>> seen;  // option, its argument
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    // Each option once: a second value would silently replace the first.
    auto once = [&](std::string_view given) {
      for (const auto& [option, first] : seen) {
        if (option == name) throw Usage{fmt::format("bench: {} is given twice ('{}' and '{}')", name, first, given)};
      }
      seen.emplace_back(name, given);
    };
    if (name == "--plot") {
      if (inline_value) throw Usage{fmt::format("bench: --plot takes no value (got '{}')", arg)};
      once(arg);
      o.plot = true;
      continue;
    }
    static constexpr std::string_view kValued[] = {"--ops",  "--dirs",   "--devices", "--dtype",  "--hidden",
                                                   "--rows", "--budget", "--out",     "--compare"};
    if (std::find(std::begin(kValued), std::end(kValued), name) == std::end(kValued)) {
      throw Usage{arg.starts_with("-") ? fmt::format("bench: unknown option '{}'", name)
                                       : fmt::format("bench: unexpected argument '{}'", arg)};
    }
    const std::string_view value = option_value(kCommand, name, inline_value, args, i);
    once(value);
    if (name == "--ops") {
      std::vector<std::pair<std::string_view, std::string_view>> names;
      for (const auto n : op_names()) names.emplace_back(n, n);
      o.ops.clear();
      for (const auto op : pick_list<std::string_view>(name, value, names)) o.ops.emplace_back(op);
    } else if (name == "--dirs") {
      static constexpr std::pair<std::string_view, BenchMode> kModes[] = {
          {"fwd", BenchMode::forward}, {"bwd", BenchMode::backward}, {"fwdbwd", BenchMode::full}};
      o.modes = pick_list<BenchMode>(name, value, kModes);
    } else if (name == "--dtype") {
      static constexpr std::pair<std::string_view, DType> kDtypes[] = {
          {"bf16", DType::bf16}, {"f16", DType::f16}, {"f32", DType::f32}};
      o.dtypes = pick_list<DType>(name, value, kDtypes);
    } else if (name == "--devices") {
      o.devices.clear();
      for (const auto d : split_list(name, value, "devices such as cpu, cuda:0, npu (see `opreg devices`)")) {
        o.devices.emplace_back(d);
      }
    } else if (name == "--hidden") {
      o.hidden.clear();
      std::vector<std::string_view> spellings;
      for (const auto h : split_list(name, value, "integers from 1 to 1048576")) {
        const auto v = parse_int_value<std::int64_t>(kCommand, name, h, 1, 1 << 20, "integers from 1 to 1048576");
        // One size twice through another spelling (64, 064) would run and plot it twice.
        if (const auto same = std::find(o.hidden.begin(), o.hidden.end(), v); same != o.hidden.end()) {
          throw Usage{fmt::format("bench: --hidden names {} twice ('{}' and '{}')", v,
                                  spellings[static_cast<std::size_t>(same - o.hidden.begin())], h)};
        }
        o.hidden.push_back(v);
        spellings.push_back(h);
      }
      std::sort(o.hidden.begin(), o.hidden.end());
    } else if (name == "--rows") {
      o.rows = parse_int_value<std::int64_t>(kCommand, name, value, 1, 1 << 20, "an integer from 1 to 1048576");
    } else if (name == "--budget") {
      o.budget_s = parse_number_value(kCommand, name, value, 0.001, 86400, "seconds from 0.001 to 86400, e.g. 180");
    } else if (name == "--out") {
      if (value.empty()) bad_option_value(kCommand, name, value, "a directory path");
      o.out_dir = std::string(value);
    } else if (name == "--compare") {
      if (value.empty()) bad_option_value(kCommand, name, value, "a CSV file path");
      o.compare = std::string(value);
    }
  }
  const bool group_norm = std::find(o.ops.begin(), o.ops.end(), "group_norm") != o.ops.end();
  for (const auto h : o.hidden) {
    if (group_norm && h % 32 != 0) {
      throw Usage{
          fmt::format("bench: --hidden {} does not suit group_norm (C=32 channels x hidden/32): use "
                      "multiples of 32, or leave group_norm out of --ops",
                      h)};
    }
  }
  return o;
}

}  // namespace opreg::cli
