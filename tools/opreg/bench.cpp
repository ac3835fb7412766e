// `opreg bench`: the cases, their timing and the progress display (see bench.h).
#include "bench.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>

#include "bench_output.h"
#include "build_commit.h"
#include "opreg/ops.h"
#include "opreg/registry.h"
#include "opreg/version.h"
#include "ops/problem.h"
#include "registry/fail.h"
#include "run_options.h"

extern char** environ;

namespace opreg::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMinRuns = 3;
constexpr int kMaxRuns = 1000;
constexpr std::int64_t kGroupNormChannels = 32;
constexpr std::int64_t kGroupNormGroups = 8;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, std::round(seconds)));
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string local_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

std::string_view torch_dtype(DType d) {
  return d == DType::bf16 ? "torch.bfloat16" : d == DType::f16 ? "torch.float16" : "torch.float32";
}

// Linear interpolation between the order statistics, as torch.quantile (Liger's quantiles).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

ProblemSpec spec_for(const std::string& op, Direction dir, DType dtype, std::int64_t rows, std::int64_t hidden) {
  ProblemSpec spec;
  spec.op = fmt::format("{}.{}", op, to_string(dir));
  const ProblemOptions uses = problem_options(spec.op);
  spec.dtype = dtype;
  spec.wdtype = dtype;
  if (uses.groups) {
    spec.shape = Shape{rows, kGroupNormChannels, hidden / kGroupNormChannels};
    spec.groups = kGroupNormGroups;
  } else if (uses.rope) {
    // rows positions of hidden / 128 heads of 128 (q [1, H, T, D], k as many), one shared table.
    spec.shape = Shape{1, std::max<std::int64_t>(hidden / 128, 1), rows, 128};
  } else {
    spec.shape = Shape{rows, hidden};
  }
  spec.eps = uses.eps_default;
  return spec;
}

std::string config_for(const std::string& op, DType dtype, std::int64_t rows) {
  if (op == "group_norm") {
    return fmt::format(R"({{"M": {}, "C": {}, "num_groups": {}, "dtype": "{}"}})", rows, kGroupNormChannels,
                       kGroupNormGroups, torch_dtype(dtype));
  }
  return fmt::format(R"({{"M": {}, "dtype": "{}"}})", rows, torch_dtype(dtype));
}

struct DeviceInfo {
  Device device;
  std::string name;  // npu:0
  DeviceProps props;
  BandwidthCeiling ceiling;
  std::string timer;
  bool estimate = false;
};

// What one case measured.
struct CaseResult {
  BenchPoint point;
  std::string provider;
};

// The machine, for the plots' titles: the CPU model and its threads (/proc/cpuinfo).
std::string machine_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string model = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return fmt::format("{} x{}", model, std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

class Progress {
 public:
  Progress(std::size_t total, double budget_s) : total_(total), budget_s_(budget_s), tty_(isatty(2) == 1) {}
  void show(std::size_t done, const std::string& current) {
    if (!tty_) return;
    const double elapsed = seconds_since(start_);
    // At least the budget's rest; more when the cases so far took longer than their shares.
    const double per_case = done > 0 ? elapsed / static_cast<double>(done) : 0.0;
    const double left = std::max(budget_s_ - elapsed, per_case * static_cast<double>(total_ - done));
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done / std::max<std::size_t>(total_, 1));
    std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu %s elapsed, ~%s left: %s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, total_, clock_text(elapsed).c_str(),
                 clock_text(left).c_str(), current.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (tty_) std::fputs("\r\033[K", stderr);
  }
  double elapsed() const { return seconds_since(start_); }

 private:
  std::size_t total_;
  double budget_s_;
  bool tty_;
  Clock::time_point start_ = Clock::now();
};

// Runs one case: a warm-up run that also decides fallback and variant and is checked against the
// reference, then the timed runs while `share_s` lasts (at least kMinRuns).
CaseResult run_case(Registry& reg, const DeviceInfo& dev, const std::string& op, BenchMode mode, DType dtype,
                    std::int64_t rows, std::int64_t hidden, double share_s) {
  CaseResult out;
  BenchPoint& p = out.point;
  p.hidden = hidden;
  std::vector<Direction> dirs;
  if (mode != BenchMode::backward) dirs.push_back(Direction::fwd);
  if (mode != BenchMode::forward) dirs.push_back(Direction::bwd);
  std::vector<std::unique_ptr<Problem>> problems;
  for (const auto dir : dirs) {
    problems.push_back(std::make_unique<Problem>(reg, spec_for(op, dir, dtype, rows, hidden), dev.device));
    p.bytes += problems.back()->bytes();
  }
  std::vector<std::string> variants;
  for (auto& problem : problems) {
    problem->poison();
    const DispatchResult r = problem->run();
    problem->synchronize();
    const std::string variant = r.variant != nullptr ? r.variant->name : std::string("-");
    if (r.fell_back) {
      p.status = "fallback";
      p.note = fmt::format("{} fell back to the cpu ({}); not timed", problem->spec().op, variant);
      out.provider = "opreg:fallback";
      return out;
    }
    variants.push_back(variant);
  }
  out.provider = fmt::format("opreg:{}", fmt::join(variants, "+"));
  for (auto& problem : problems) {
    const CheckReport report = problem->check();
    if (!report.pass()) {
      p.status = "failed";
      p.note = fmt::format("{}: {}", problem->spec().op, report.summary());
      return out;
    }
  }
  Backend& backend = reg.backend(dev.device.backend);
  const auto timer = backend.make_timer(dev.device.index, backend.default_stream(dev.device.index));
  std::vector<double> ms;
  const auto start = Clock::now();
  while (static_cast<int>(ms.size()) < kMinRuns ||
         (static_cast<int>(ms.size()) < kMaxRuns && seconds_since(start) < share_s)) {
    timer->prepare();
    timer->start();
    for (auto& problem : problems) (void)problem->run();
    ms.push_back(timer->stop_us() / 1e3);
  }
  std::sort(ms.begin(), ms.end());
  p.runs = static_cast<int>(ms.size());
  p.ms_20 = quantile(ms, 0.2);
  p.ms_50 = quantile(ms, 0.5);
  p.ms_80 = quantile(ms, 0.8);
  return out;
}

// The devices to run on, each checked (nothing printed): --devices, or device 0 of every
// available backend. Two spellings of one device (cpu, cpu:0) are a usage error naming both.
std::vector<Device> devices_to_run(Registry& reg, const BenchOptions& o) {
  std::vector<Device> devices;
  if (o.devices.empty()) {
    for (const auto& b : reg.backends()) {
      if (b.availability.available && !b.disabled && b.availability.device_count > 0) devices.push_back({b.id, 0});
    }
    return devices;
  }
  for (const auto& text : o.devices) {
    Device d;
    try {
      d = reg.parse_device(text);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("bench: --devices '{}': {}", text, e.what()));
    }
    const auto same = std::find(devices.begin(), devices.end(), d);
    if (same != devices.end()) {
      fail(ErrorKind::invalid_argument, "bench: --devices names {} twice ('{}' and '{}')", reg.device_name(d),
           o.devices[static_cast<std::size_t>(same - devices.begin())], text);
    }
    devices.push_back(d);
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    try {
      reg.check_device(devices[i]);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("bench: --devices '{}': {}", o.devices[i], e.what()));
    }
  }
  return devices;
}

// Each device's name, properties, clock and bandwidth ceiling (measured: printed as it goes).
std::vector<DeviceInfo> measure_devices(Registry& reg, const std::vector<Device>& devices) {
  std::vector<DeviceInfo> out;
  for (const auto d : devices) {
    DeviceInfo info;
    info.device = d;
    info.name = reg.device_name(d);
    info.props = reg.device_props(d);
    Backend& backend = reg.backend(d.backend);
    const auto timer = backend.make_timer(d.index, backend.default_stream(d.index));
    info.timer = timer->method();
    info.estimate = timer->estimate();
    fmt::print("bench: {} ({}): measuring its bandwidth ceiling\n", info.name, info.props.name);
    std::fflush(stdout);
    info.ceiling = backend.bandwidth_ceiling(d.index);
    fmt::print("bench: {}: timer {}{}; ceiling {:.1f} GB/s ({}{})\n", info.name, info.timer,
               info.estimate ? " (an estimate)" : "", info.ceiling.gbps, info.ceiling.method,
               info.ceiling.estimate ? ", an estimate" : "");
    out.push_back(std::move(info));
  }
  return out;
}

// scripts/plot_bench.py: installed beside the program (share/opreg), else the source tree's.
std::string plot_script() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "opreg" / "plot_bench.py";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return OPREG_PLOT_SCRIPT;
}

constexpr const char* kPython = "/usr/bin/python3";

// /usr/bin/python3 ARGS...: its exit status (127 when it could not start). `quiet`: its stdout and
// stderr go to /dev/null.
int run_python(const std::vector<std::string>& args, bool quiet = false) {
  std::vector<char*> argv;
  std::string python = kPython;
  argv.push_back(python.data());
  std::vector<std::string> copies = args;
  for (auto& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// --plot needs matplotlib: checked before the first case, so that a run is not lost to it.
void check_matplotlib() {
  const int status = run_python({"-c", "import matplotlib"}, true);
  if (status != 0) {
    fail(ErrorKind::unsupported,
         "bench: --plot needs matplotlib, which {} {}: install it (Debian: apt-get install python3-matplotlib) or "
         "leave --plot out",
         kPython, status == 127 ? "could not run to import" : "cannot import");
  }
}

// The outputs, each opened (or, for the plot script's PNGs, probed) before the first case.
struct Outputs {
  std::unique_ptr<OutputFile> json, csv, compare;
};

Outputs open_outputs(const BenchOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) {
    fail(ErrorKind::invalid_argument, "bench: --out {}: cannot create the directory: {}", o.out_dir, ec.message());
  }
  const std::filesystem::path dir(o.out_dir);
  Outputs out;
  out.json = std::make_unique<OutputFile>(o.out_dir, (dir / "benchmark_data.json").string());
  out.csv = std::make_unique<OutputFile>(o.out_dir, (dir / "all_benchmark_data.csv").string());
  if (o.compare) out.compare = std::make_unique<OutputFile>(o.out_dir, (dir / "compare_data.csv").string());
  if (o.plot) {
    for (const auto& op : o.ops) {
      for (const auto mode : o.modes) {
        probe_output(o.out_dir, (dir / fmt::format("{}_{}.png", op, to_string(mode))).string());
      }
    }
  }
  return out;
}

}  // namespace

int run_bench(const BenchOptions& o) {
  auto& reg = default_registry();
  // Everything that can be refused is, before anything is printed or run: the devices, the
  // outputs, --compare's file, matplotlib for --plot.
  const std::vector<Device> device_ids = devices_to_run(reg, o);
  Outputs outputs = open_outputs(o);
  std::vector<BenchRecord> compare;
  std::vector<std::string> skipped;
  if (o.compare) compare = read_compare_csv(*o.compare, o.ops, skipped);
  if (o.plot) check_matplotlib();

  if (o.compare) {
    std::size_t points = 0;
    for (const auto& r : compare) points += r.points.size();
    fmt::print("bench: --compare {}: {} rows converted to GB/s with opreg's byte model\n", *o.compare, points);
    for (const auto& s : skipped) fmt::print("bench: --compare {}: skipped {}\n", *o.compare, s);
  }
  const std::vector<DeviceInfo> devices = measure_devices(reg, device_ids);

  const std::size_t total = o.ops.size() * o.modes.size() * o.dtypes.size() * o.hidden.size() * devices.size();
  const std::string version = fmt::format("opreg {} ({})", library_version(), OPREG_BUILD_COMMIT);
  std::vector<BenchRecord> records;
  std::map<std::string, std::size_t> record_of;
  Progress progress(total, o.budget_s);
  std::size_t done = 0;
  int failed = 0;
  int errors = 0;
  int timed = 0;
  std::string first_error;  // the first case that could not run: its label and why
  for (const auto& op : o.ops) {
    for (const auto mode : o.modes) {
      for (const auto dtype : o.dtypes) {
        for (const auto& dev : devices) {
          for (const auto hidden : o.hidden) {
            const std::string label =
                fmt::format("{} {} {} {}x{} on {}", op, to_string(mode), to_string(dtype), o.rows, hidden, dev.name);
            progress.show(done, label);
            const double share = std::max(0.0, o.budget_s - progress.elapsed()) / static_cast<double>(total - done);
            CaseResult result;
            try {
              result = run_case(reg, dev, op, mode, dtype, o.rows, hidden, share);
            } catch (const Error& e) {
              result.point = BenchPoint{};
              result.point.hidden = hidden;
              result.point.status = "error";
              result.point.note = e.what();
              result.provider = "opreg:error";
            }
            BenchPoint& p = result.point;
            ++done;
            progress.clear();
            std::string line = fmt::format("bench: [{}/{}] {}: ", done, total, label);
            if (p.status == "ok") {
              ++timed;
              const double g = gbps(p, p.ms_50);
              line += fmt::format("{:.4g} ms (p20 {:.4g}, p80 {:.4g}, {} runs{}) {:.1f} GB/s", p.ms_50, p.ms_20,
                                  p.ms_80, p.runs, dev.estimate ? ", estimated" : "", g);
              if (dev.ceiling.gbps > 0)
                line += fmt::format(" = {:.2f} of {:.3g}", g / dev.ceiling.gbps, dev.ceiling.gbps);
              line += fmt::format(" {}", result.provider);
            } else {
              failed += p.status == "failed";
              errors += p.status == "error";
              if (p.status == "error" && first_error.empty()) first_error = fmt::format("{}: {}", label, p.note);
              line += fmt::format("{}: {}", p.status, p.note);
            }
            fmt::print("{}\n", line);
            std::fflush(stdout);
            const std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", op, to_string(mode), to_string(dtype),
                                                dev.name, result.provider);
            auto [it, fresh] = record_of.try_emplace(key, records.size());
            if (fresh) {
              BenchRecord rec;
              rec.kernel_name = op;
              rec.provider = result.provider;
              rec.mode = mode;
              rec.dtype = std::string(to_string(dtype));
              rec.device = dev.name;
              rec.gpu_name = dev.props.name;
              rec.emulated = dev.props.emulated;
              rec.timer = dev.timer;
              rec.estimate = dev.estimate;
              rec.ceiling_gbps = dev.ceiling.gbps;
              rec.config = config_for(op, dtype, o.rows);
              rec.timestamp = local_timestamp();
              rec.version = version;
              records.push_back(std::move(rec));
            }
            records[it->second].points.push_back(std::move(p));
          }
        }
      }
    }
  }
  const std::string json = outputs.json->path();
  const std::string csv = outputs.csv->path();
  outputs.json->write(bench_json(records));
  outputs.csv->write(bench_csv(records));
  std::string compare_csv;
  if (outputs.compare) {
    compare_csv = outputs.compare->path();
    outputs.compare->write(bench_csv(compare));
  }
  fmt::print(
      "bench: {} cases ({} timed, {} failed their check, {} errors) in {:.1f} s (budget {} s); wrote {} and {}\n",
      total, timed, failed, errors, progress.elapsed(), o.budget_s, json, csv);
  int code = failed > 0 ? 1 : (timed == 0 && errors > 0 ? 3 : 0);
  if (code == 3) {
    for (char& c : first_error) c = c == '\n' || c == '\r' ? ' ' : c;  // one line
    std::fflush(stdout);
    std::fprintf(stderr, "opreg: bench: no case could run: %d of %zu cases could not run%s; first: %s\n", errors, total,
                 static_cast<std::size_t>(errors) < total ? " (the rest fell back to the cpu, not timed)" : "",
                 first_error.c_str());
  }
  if (o.plot && code != 3) {  // with no case run there is nothing to draw (the line above says why)
    std::vector<std::string> args = {plot_script(), "--csv", csv, "--out", o.out_dir, "--title", machine_name()};
    if (!compare_csv.empty()) {
      args.emplace_back("--compare");
      args.push_back(compare_csv);
    }
    const int status = run_python(args);
    if (status != 0) {
      std::fprintf(stderr, "opreg: bench: the plot script failed (%s, exit %d)%s\n", args[0].c_str(), status,
                   status == 127 ? ": /usr/bin/python3 could not run" : "");
      code = code == 0 ? 1 : code;
    }
  }
  return code;
}

}  // namespace opreg::cli
