// opreg: the command-line face of the registry.
// Exit codes: 0 success, 1 a result failed its check, 2 bad input or usage, 3 the device or op
// is unsupported or unavailable. Errors are one line on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opreg/ops.h"
#include "opreg/registry.h"
#include "ops/problem.h"
#include "registry/fail.h"

namespace {

using opreg::ErrorKind;

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnsupported = 3;

struct Usage {
  std::string message;
};

constexpr const char* kMainHelp = R"(usage: opreg <command> [options]

commands:
  devices   every backend, its devices and properties, and the device inference picks
  ops       every op and, per backend, its variants in choice order
  run       run one op on a device, check it against the reference, time it
  help      this text; `opreg <command> --help` for one command

environment: OPREG_DEVICE, OPREG_BACKEND_ORDER, OPREG_DISABLE, OPREG_FORCE_VARIANT,
OPREG_FALLBACK, OPREG_VERBOSE, OPREG_NUM_THREADS (see docs/env.md)
exit codes: 0 success, 1 a check failed, 2 bad input or usage, 3 unsupported or unavailable
)";

constexpr const char* kDevicesHelp = R"(usage: opreg devices

Lists every registered backend (id, inference priority, fallback policy, availability and
why), each of its devices with properties (emulated devices are marked emulated), and the
device that inference picks with the reason. Exits 3 when inference finds no device.
)";

constexpr const char* kOpsHelp = R"(usage: opreg ops [--op NAME]

Lists every op and, for each backend, its variants in the order they are tried: priority,
tunables, registration site, and whether OPREG_DISABLE or OPREG_FORCE_VARIANT applies.
  --op NAME   only this op: a full name (rms_norm.fwd) or a base name (rms_norm: both directions)
)";

constexpr const char* kRunHelp = R"(usage: opreg run OP [options]

Builds one problem of OP (e.g. rms_norm.fwd; `opreg ops` lists them) from seeded random inputs,
runs it through the registry's choice of variant K times, checks the last outputs against the
double-precision reference and prints one line:
  result op=OP device=D emulated=0|1 variant=V [fallback=1] dtype=T wdtype=W shape=S err=E
         time_us=U gbps=G status=pass|fail
err is max |out - ref| / (atol + rtol |ref|) over every output (pass: err <= 1); time_us is the
median of the K runs (each: run + synchronize); gbps is the op's ideal bytes moved / time_us.

options (each takes one value, as `--opt V` or `--opt=V`; a repeated option: the last wins):
  --device D        cpu, cuda:1, npu, ... (default: the device inference picks, see `opreg devices`)
  --dtype T         x's dtype: f32, f16, bf16 (default f32)
  --wdtype W        weight and bias dtype: same (as --dtype) or f32 (default same; norms only)
  --no-weight       the norms: call without a weight (torch's weight=None); a backward then
                    computes no dweight
  --no-bias         layer_norm, group_norm: call without a bias (a backward: no dbias)
  --shape S         x's shape (a's for geglu, swiglu), e.g. 4096x4096 (default 4096x4096;
                    group_norm: N x C x spatial..., default 16x128x1024)
  --groups G        group_norm's group count, dividing C (default 32 if it divides C, else 1)
  --eps E           the norms' epsilon, a finite number >= 0 (default: the op's, 1e-6 for
                    rms_norm and fused_add_rms_norm, 1e-5 for layer_norm and group_norm; a
                    backward problem uses it for the forward statistics it is given)
  --offset O        rms_norm, fused_add_rms_norm: y = x * rstd * (O + w) (default 0)
  --casting C       rms_norm, fused_add_rms_norm: llama, gemma, none (default llama)
  --inplace         backward ops: the input gradient overwrites dy (glu: da is a, db is b)
  --seed N          input seed, 0 to 2^64-1 (default 1)
  --repeat K        runs to time, 1 to 100000 (default 3)
  --tol-scale S     multiply the tolerance table by S (default 1; 0 demands equality with the
                    reference, e.g. to see how far a variant is from it)
An option the op does not use (--groups for rms_norm.fwd, ...) is an error.

exit codes: 0 pass, 1 the check failed (the result line says status=fail and stderr has the
worst elements), 2 bad input or usage, 3 the device or op is unsupported or unavailable.
)";

bool wants_help(const std::vector<std::string_view>& args) {
  for (auto a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

std::string human_bytes(std::uint64_t b) {
  if (b == 0) return "-";
  if (b >= (1ULL << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ULL << 30));
  return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1ULL << 20));
}

int cmd_devices(const std::vector<std::string_view>& args) {
  if (wants_help(args)) {
    std::fputs(kDevicesHelp, stdout);
    return kExitOk;
  }
  if (!args.empty()) throw Usage{fmt::format("devices: unexpected argument '{}'", args[0])};
  auto& reg = opreg::default_registry();
  fmt::print("{:<8} {:>2} {:>5}  {:<8} {}\n", "backend", "id", "prio", "fallback", "status");
  for (const auto& b : reg.backends()) {
    std::string status = b.availability.available ? "available: " : "unavailable: ";
    status += b.availability.reason;
    if (b.disabled) status += " [disabled by OPREG_DISABLE]";
    fmt::print("{:<8} {:>2} {:>5}  {:<8} {}\n", b.name, static_cast<int>(b.id), b.priority,
               opreg::to_string(b.fallback), status);
    for (std::size_t i = 0; i < b.devices.size(); ++i) {
      const auto& p = b.devices[i];
      std::string extra;
      for (const auto& [k, v] : p.extra) extra += fmt::format(" {}={}", k, v);
      fmt::print("  {:<8} {}{}; {} compute units, memory {};{}\n",
                 reg.device_name({b.id, static_cast<std::int16_t>(i)}), p.name, p.emulated ? " [emulated]" : "",
                 p.compute_units, human_bytes(p.memory_bytes), extra);
    }
  }
  for (const auto& [name, why] : reg.absent_backends())
    fmt::print("{:<8} {:>2} {:>5}  {:<8} not built: {}\n", name, "-", "-", "-", why);
  std::fflush(stdout);
  auto inferred = reg.infer_device();
  bool emulated = reg.device_props(inferred.device).emulated;
  fmt::print("inference: {}{} ({})\n", reg.device_name(inferred.device), emulated ? " [emulated]" : "", inferred.why);
  return kExitOk;
}

int cmd_ops(const std::vector<std::string_view>& args) {
  if (wants_help(args)) {
    std::fputs(kOpsHelp, stdout);
    return kExitOk;
  }
  std::string_view only;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--op") {
      if (i + 1 == args.size()) throw Usage{"ops: --op needs an op name (e.g. rms_norm.fwd)"};
      only = args[++i];
    } else {
      throw Usage{fmt::format("ops: unexpected argument '{}'", args[i])};
    }
  }
  auto& reg = opreg::default_registry();
  auto ops = opreg::all_ops();
  bool found = false;
  // A base name (rms_norm) stands for its directions (rms_norm.fwd, rms_norm.bwd).
  auto selected = [&](std::string_view name) {
    return only.empty() || name == only || (name.starts_with(only) && name.substr(only.size()).starts_with("."));
  };
  for (const auto* op : ops) {
    if (!selected(op->name)) continue;
    found = true;
    fmt::print("{}\n", op->name);
    auto variants = reg.variants(op->name);
    if (variants.empty()) fmt::print("  (no variants)\n");
    std::string backend;
    for (const auto& v : variants) {
      if (v.backend != backend) {
        backend = v.backend;
        fmt::print("  {}:\n", backend);
      }
      std::string flags;
      if (reg.is_forced(v)) flags += " [forced]";
      if (reg.is_disabled(v)) flags += " [disabled]";
      if (v.is_override) flags += " [override]";
      if (!v.has_supports) flags += " [accepts all]";
      fmt::print("    {:<40} prio={:<4} {:<30} {}{}\n", v.name, v.priority,
                 v.tunables.empty() ? std::string("-") : v.tunables_str(), v.site, flags);
    }
  }
  if (!only.empty() && !found) {
    std::vector<std::string> names;
    for (const auto* op : ops) names.emplace_back(op->name);
    throw opreg::Error(ErrorKind::invalid_argument,
                       fmt::format("unknown op '{}'; defined ops: {} (or a base name such as rms_norm)", only,
                                   fmt::join(names, ", ")));
  }
  if (ops.empty()) fmt::print("(no ops are defined in this build)\n");
  return kExitOk;
}

// ---- opreg run

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
  std::optional<std::int64_t> repeat;
  std::optional<double> tol_scale;
};

[[noreturn]] void bad_value(std::string_view option, std::string_view value, std::string_view accepted) {
  throw Usage{fmt::format("run: invalid {} '{}'; accepted: {}", option, value, accepted)};
}

// One of a fixed set of spellings; the error lists them all.
template <class T>
T pick(std::string_view option, std::string_view text, std::initializer_list<std::pair<std::string_view, T>> choices) {
  std::vector<std::string_view> names;
  for (const auto& [name, value] : choices) {
    if (name == text) return value;
    names.push_back(name);
  }
  bad_value(option, text, fmt::format("{}", fmt::join(names, ", ")));
}

template <class Int>
Int parse_int(std::string_view option, std::string_view text, Int lo, Int hi, std::string_view accepted) {
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < lo || value > hi) {
    bad_value(option, text, accepted);
  }
  return value;
}

double parse_number(std::string_view option, std::string_view text, double lo, std::string_view accepted) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value) || value < lo) {
    bad_value(option, text, accepted);
  }
  return value;
}

RunOptions parse_run_args(const std::vector<std::string_view>& args) {
  RunOptions o;
  bool have_op = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (!arg.starts_with("-")) {
      if (have_op) throw Usage{fmt::format("run: unexpected argument '{}' (the op is '{}')", arg, o.op)};
      o.op = std::string(arg);
      have_op = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    if (name == "--inplace" || name == "--no-weight" || name == "--no-bias") {
      if (inline_value) throw Usage{fmt::format("run: {} takes no value (got '{}')", name, arg)};
      (name == "--inplace" ? o.inplace : name == "--no-weight" ? o.no_weight : o.no_bias) = true;
      continue;
    }
    static constexpr std::string_view kValued[] = {"--device", "--dtype",  "--wdtype",  "--shape", "--groups",
                                                   "--eps",    "--offset", "--casting", "--seed",  "--repeat",
                                                   "--tol-scale"};
    if (std::find(std::begin(kValued), std::end(kValued), name) == std::end(kValued)) {
      throw Usage{fmt::format("run: unknown option '{}'", name)};
    }
    std::string_view value;
    if (inline_value) {
      value = *inline_value;
    } else {
      if (i + 1 == args.size()) throw Usage{fmt::format("run: {} needs a value", name)};
      value = args[++i];
    }
    if (name == "--device") {
      if (value.empty()) bad_value(name, value, "a device such as cpu, cuda:0, npu (see `opreg devices`)");
      o.device = std::string(value);
    } else if (name == "--dtype") {
      o.dtype = pick<opreg::DType>(
          name, value, {{"f32", opreg::DType::f32}, {"f16", opreg::DType::f16}, {"bf16", opreg::DType::bf16}});
    } else if (name == "--wdtype") {
      o.wdtype_f32 = pick<bool>(name, value, {{"same", false}, {"f32", true}});
    } else if (name == "--shape") {
      try {
        o.shape = opreg::Shape::parse(value);
      } catch (const opreg::Error& e) {
        throw Usage{fmt::format("run: --shape: {}", e.what())};
      }
    } else if (name == "--groups") {
      o.groups = parse_int<std::int64_t>(name, value, 1, INT64_MAX, "an integer >= 1 that divides C (shape[1])");
    } else if (name == "--eps") {
      o.eps = parse_number(name, value, 0.0, "a finite number >= 0, e.g. 1e-6");
    } else if (name == "--offset") {
      o.offset = parse_number(name, value, -HUGE_VAL, "a finite number, e.g. 0 or 1");
    } else if (name == "--casting") {
      o.casting = pick<opreg::Casting>(
          name, value,
          {{"llama", opreg::Casting::llama}, {"gemma", opreg::Casting::gemma}, {"none", opreg::Casting::none}});
    } else if (name == "--seed") {
      o.seed = parse_int<std::uint64_t>(name, value, 0, UINT64_MAX, "an integer from 0 to 2^64-1");
    } else if (name == "--repeat") {
      o.repeat = parse_int<std::int64_t>(name, value, 1, 100000, "an integer from 1 to 100000");
    } else if (name == "--tol-scale") {
      o.tol_scale = parse_number(name, value, 0.0, "a finite number >= 0 (1: the tolerance table; 0: exact)");
    }
  }
  if (!have_op) throw Usage{"run: no op given; usage: opreg run OP [options], e.g. opreg run rms_norm.fwd"};
  return o;
}

// 3 significant digits without an exponent: time_us and gbps stay greppable and sortable
// by eye (1234 rather than 1.23e+03).
std::string plain3(double v) {
  if (!std::isfinite(v)) return fmt::format("{}", v);
  const double a = std::fabs(v);
  if (a >= 100 || a == 0) return fmt::format("{:.0f}", v);
  const int decimals = std::clamp(2 - static_cast<int>(std::floor(std::log10(a))), 0, 9);
  return fmt::format("{:.{}f}", v, decimals);
}

int cmd_run(const std::vector<std::string_view>& args) {
  if (wants_help(args)) {
    std::fputs(kRunHelp, stdout);
    return kExitOk;
  }
  const RunOptions o = parse_run_args(args);

  // An option the op does not read is an error rather than silently ignored, so a mistyped
  // experiment (--groups on layer_norm) cannot pass for a measured one. problem_options() also
  // refuses an unknown op (unsupported, listing the defined ones).
  const opreg::ProblemOptions uses = opreg::problem_options(o.op);
  using Uses = bool opreg::ProblemOptions::*;
  auto refuse_unless = [&](bool given, Uses field, std::string_view option) {
    if (!given || uses.*field) return;
    std::vector<std::string> takers;
    for (const auto& op : opreg::problem_ops()) {
      if (opreg::problem_options(op).*field) takers.push_back(op);
    }
    throw Usage{fmt::format("run: {} does not apply to {} (it applies to {})", option, o.op, fmt::join(takers, ", "))};
  };
  refuse_unless(o.wdtype_f32.has_value(), &opreg::ProblemOptions::wdtype, "--wdtype");
  refuse_unless(o.eps.has_value(), &opreg::ProblemOptions::eps, "--eps");
  refuse_unless(o.offset.has_value(), &opreg::ProblemOptions::offset, "--offset");
  refuse_unless(o.casting.has_value(), &opreg::ProblemOptions::casting, "--casting");
  refuse_unless(o.groups.has_value(), &opreg::ProblemOptions::groups, "--groups");
  refuse_unless(o.inplace, &opreg::ProblemOptions::in_place, "--inplace");
  refuse_unless(o.no_weight, &opreg::ProblemOptions::weight, "--no-weight");
  refuse_unless(o.no_bias, &opreg::ProblemOptions::bias, "--no-bias");
  const bool params = (uses.weight && !o.no_weight) || (uses.bias && !o.no_bias);
  if (o.wdtype_f32.has_value() && !params) {
    throw Usage{fmt::format("run: --wdtype does not apply: {} runs without a weight{}", o.op,
                            uses.bias ? " or a bias" : "")};
  }
  const bool group_norm = uses.groups;

  opreg::ProblemSpec spec;
  spec.op = o.op;
  spec.dtype = o.dtype.value_or(opreg::DType::f32);
  spec.wdtype = o.wdtype_f32.value_or(false) ? opreg::DType::f32 : spec.dtype;
  spec.shape = o.shape.value_or(group_norm ? opreg::Shape{16, 128, 1024} : opreg::Shape{4096, 4096});
  if (group_norm) {
    const std::int64_t channels = spec.shape.ndim() >= 2 ? spec.shape[1] : 0;
    spec.groups = o.groups.value_or(channels > 0 && channels % 32 == 0 ? 32 : 1);
  }
  spec.has_weight = !o.no_weight;
  spec.has_bias = !o.no_bias;
  spec.eps = o.eps.value_or(uses.eps_default);
  spec.offset = o.offset.value_or(0.0);
  spec.casting = o.casting.value_or(opreg::Casting::llama);
  spec.in_place = o.inplace;
  spec.seed = o.seed.value_or(1);
  spec.tol_scale = o.tol_scale.value_or(1.0);
  const std::int64_t repeat = o.repeat.value_or(3);

  auto& reg = opreg::default_registry();
  const opreg::Device device = o.device ? reg.parse_device(*o.device) : reg.infer_device().device;
  reg.check_device(device);

  opreg::Problem problem(reg, spec, device);
  opreg::DispatchResult result;
  std::vector<double> times_us;
  times_us.reserve(static_cast<std::size_t>(repeat));
  for (std::int64_t k = 0; k < repeat; ++k) {
    // Poisoned before every run so the checked outputs are the last run's own, and an in-place
    // problem starts each run from the same inputs; the poison is synchronized outside the clock.
    problem.poison();
    problem.synchronize();
    const auto start = std::chrono::steady_clock::now();
    result = problem.run();
    problem.synchronize();
    const auto stop = std::chrono::steady_clock::now();
    times_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  const opreg::CheckReport report = problem.check();

  std::sort(times_us.begin(), times_us.end());
  const std::size_t mid = times_us.size() / 2;
  const double time_us = times_us.size() % 2 == 1 ? times_us[mid] : (times_us[mid - 1] + times_us[mid]) / 2;
  // bytes / (us * 1e3) = GB/s (decimal gigabytes, as every bandwidth figure in docs/perf.md).
  const double gbps = time_us > 0 ? static_cast<double>(problem.bytes()) / (time_us * 1e3) : 0.0;

  std::string line = fmt::format("result op={} device={} emulated={} variant={}", spec.op, reg.device_name(device),
                                 reg.device_props(device).emulated ? 1 : 0,
                                 result.variant != nullptr ? result.variant->name : std::string("-"));
  if (result.fell_back) line += " fallback=1";
  if (o.no_weight) line += " weight=none";
  if (o.no_bias) line += " bias=none";
  line += fmt::format(" dtype={} wdtype={} shape={} err={:.3g} time_us={} gbps={} status={}",
                      opreg::to_string(spec.dtype), params ? opreg::to_string(spec.wdtype) : std::string_view("-"),
                      spec.shape.str(), report.err, plain3(time_us), plain3(gbps), report.pass() ? "pass" : "fail");
  fmt::print("{}\n", line);
  std::fflush(stdout);
  if (report.pass()) return kExitOk;

  std::string summary = report.summary();
  std::replace(summary.begin(), summary.end(), '\n', ' ');  // errors are one line
  std::fprintf(stderr, "opreg: run: check failed: %s; replay: opreg run %s\n", summary.c_str(),
               spec.cli_args(reg.device_name(device)).c_str());
  return kExitCheckFailed;
}

int run(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) throw Usage{"no command given"};
  const std::string_view command = args.front();
  args.erase(args.begin());
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kMainHelp, stdout);
    return kExitOk;
  }
  if (command == "devices") return cmd_devices(args);
  if (command == "ops") return cmd_ops(args);
  if (command == "run") return cmd_run(args);
  throw Usage{fmt::format("unknown command '{}'", command)};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Usage& u) {
    // A command's own usage error points at that command's help, where its options are.
    std::string see = "opreg --help";
    for (const char* cmd : {"devices", "ops", "run"}) {
      if (u.message.starts_with(std::string(cmd) + ": ")) see = fmt::format("opreg {} --help", cmd);
    }
    std::fprintf(stderr, "opreg: %s (see `%s`)\n", u.message.c_str(), see.c_str());
    return kExitUsage;
  } catch (const opreg::Error& e) {
    std::fprintf(stderr, "opreg: error: %s\n", e.what());
    switch (e.kind()) {
      case ErrorKind::invalid_argument:
        return kExitUsage;
      case ErrorKind::unsupported:
      case ErrorKind::device:
        return kExitUnsupported;
      case ErrorKind::internal:
        return kExitCheckFailed;
    }
    return kExitCheckFailed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opreg: internal error: %s\n", e.what());
    return kExitCheckFailed;
  }
}
