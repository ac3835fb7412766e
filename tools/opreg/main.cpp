// opreg: the command-line face of the registry.
// Exit codes: 0 success, 1 a result failed its check, 2 bad input or usage, 3 the device or op
// is unsupported or unavailable. Errors are one line on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "opreg/ops.h"
#include "opreg/registry.h"
#include "bench.h"
#include "opreg/version.h"
#include "ops/problem.h"
#include "registry/fail.h"
#include "registry/quote.h"
#include "run_options.h"

namespace {

using opreg::ErrorKind;
using opreg::cli::RunOptions;
using opreg::cli::Usage;

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnsupported = 3;


// Errors are one line: control characters in a message (a value the user typed, echoed back)
// are shown escaped (\n, \t, \x01), so the line cannot be split or spoofed.
std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

void print_error(std::string_view line) { std::fprintf(stderr, "opreg: %s\n", one_line(line).c_str()); }


constexpr const char* kMainHelp = R"(usage: opreg <command> [options]

commands:
  devices   every backend, its devices and properties, and the device inference picks
  ops       every op and, per backend, its variants in choice order
  run       run one op on a device, check it against the reference, time it
  bench     time every op on every device; Liger-Kernel-schema JSON and CSV, plots
  help      this text; `opreg <command> --help` for one command
  --version the library's version

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

options (each takes one value, as `--opt V` or `--opt=V`, and may be given once):
  --device D        cpu, cuda:1, npu, ... (default: the device inference picks, see `opreg devices`)
  --dtype T         x's dtype: f32, f16, bf16 (default f32)
  --wdtype W        weight and bias dtype: same (as --dtype) or f32 (default same; norms only;
                    rope: cos's and sin's)
  --no-weight       the norms: call without a weight (torch's weight=None); a backward then
                    computes no dweight
  --no-bias         layer_norm, group_norm: call without a bias (a backward: no dbias)
  --shape S         x's shape (a's for geglu, swiglu), e.g. 4096x4096 (default 4096x4096;
                    group_norm: N x C x spatial..., default 16x128x1024; rope: q's B x H x T x D,
                    default 2x32x1024x128)
  --groups G        group_norm's group count, dividing C (default 32 if it divides C, else 1)
  --eps E           the norms' epsilon, a number from 0 to 1e300 (default: the op's, 1e-6 for
                    rms_norm and fused_add_rms_norm, 1e-5 for layer_norm and group_norm; a
                    backward problem uses it for the forward statistics it is given)
  --offset O        rms_norm, fused_add_rms_norm: y = x * rstd * (O + w), O from -1e300 to 1e300
                    (default 0)
  --casting C       rms_norm, fused_add_rms_norm: llama, gemma, none (default llama)
  --rounding R      geglu, swiglu: once (act(a) in f32, one rounding of each result) or torch
                    (act(a) rounded to the dtype before the multiply, as PyTorch and Liger-Kernel
                    do; geglu's backward also rounds dc * b); the same in f32 (default once)
  --kv-heads K      rope: k's head count (default: q's, shape[1])
  --style S         rope: half (pairs (i, i + D/2), HF's rotate_half) or interleaved (pairs
                    (2i, 2i + 1)) (default half)
  --table T         rope: cos and sin as shared [1, T, D] (default), batched [B, T, D], flat
                    [T, D], half [1, T, D/2], or positions ([T + 3, D] rows gathered by
                    position_ids [B, T], out of order)
  --transposed      rope: q, k and their outputs are HF's transposed views ([B, T, H, D] memory)
  --inplace         backward ops: the input gradient overwrites dy (glu: da is a, db is b);
                    rope (both directions): the outputs overwrite q and k (dq_out and dk_out)
  --values V        the activation inputs: random (default: uniform in [-2, 2], away from 0),
                    large (magnitudes near the top of the dtype), equal (one value per row or
                    group), special (NaN and infinities in the first rows)
  --seed N          input seed, 0 to 2^64-1 (default 1)
Numbers are decimal; one too small for a double (1e-400) is the nearest one (0 or a subnormal).
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
  // --op NAME or --op=NAME, once (as `opreg run`'s options): an empty name would select every op
  // and a second one would silently replace the first.
  std::optional<std::string_view> only_op;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view value;
    if (args[i] == "--op") {
      if (i + 1 == args.size()) throw Usage{"ops: --op needs an op name (e.g. rms_norm.fwd)"};
      value = args[++i];
    } else if (args[i].starts_with("--op=")) {
      value = args[i].substr(5);
    } else {
      throw Usage{fmt::format("ops: unexpected argument '{}'", args[i])};
    }
    if (only_op) throw Usage{fmt::format("ops: --op is given twice ('{}' and '{}')", *only_op, value)};
    if (value.find_first_not_of(" \t") == std::string_view::npos) {
      throw Usage{fmt::format("ops: invalid --op '{}'; accepted: an op name such as rms_norm.fwd, or a base name "
                              "such as rms_norm", value)};
    }
    only_op = value;
  }
  const std::string_view only = only_op.value_or("");
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
  const RunOptions o = opreg::cli::parse_run_args(args);

  const opreg::ProblemSpec spec = opreg::cli::to_spec(o);
  const opreg::ProblemOptions uses = opreg::problem_options(spec.op);
  const bool params = (uses.weight && spec.has_weight) || (uses.bias && spec.has_bias) || uses.rope;
  const std::int64_t repeat = o.repeat.value_or(3);

  auto& reg = opreg::default_registry();
  // OPREG_DEVICE is checked even when --device overrides it (a malformed or unknown name is an
  // error; an unavailable device is not, since it is not used): a bad value is never dropped, and
  // the error says where the value came from.
  if (const std::string env = reg.config().device; o.device && !env.empty()) {
    try {
      (void)reg.parse_device(env);
    } catch (const opreg::Error& e) {
      throw opreg::Error(e.kind(), fmt::format("OPREG_DEVICE={}: {}", opreg::quote(env), e.what()));
    }
  }
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
  if (!result.fell_back) line += reg.backend(device.backend).last_run_note(device.index);
  fmt::print("{}\n", line);
  std::fflush(stdout);
  if (report.pass()) return kExitOk;

  print_error(fmt::format("run: check failed: {}; replay: opreg run {}", report.summary(),
                          spec.cli_args(reg.device_name(device))));
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
  if (command == "--version" || command == "version") {
    if (!args.empty()) throw Usage{fmt::format("--version takes no arguments (got '{}')", args[0])};
    fmt::print("opreg {}\n", opreg::library_version());
    return kExitOk;
  }
  if (command == "devices") return cmd_devices(args);
  if (command == "ops") return cmd_ops(args);
  if (command == "run") return cmd_run(args);
  if (command == "bench") {
    if (wants_help(args)) {
      std::fputs(opreg::cli::kBenchHelp, stdout);
      return kExitOk;
    }
    return opreg::cli::run_bench(opreg::cli::parse_bench_args(args));
  }
  throw Usage{fmt::format("unknown command '{}'", command)};
}

}  // namespace

void output_lost(std::string_view why) { print_error(fmt::format("error: cannot write to standard output: {}", why)); }

// What a command wrote must have reached stdout: a full disk or a closed pipe is an error, not a
// silent success with the result line lost.
int flushed(int code) {
  // errno still holds the failed write's reason when an earlier write (a full buffer) failed.
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    output_lost(errno != 0 ? std::strerror(errno) : "write error");
    return code == kExitOk ? kExitCheckFailed : code;
  }
  return code;
}

int main(int argc, char** argv) {
  try {
    return flushed(run(argc, argv));
  } catch (const std::system_error& e) {
    // fmt::print throws when a write fails midway (output longer than stdout's buffer).
    if (std::ferror(stdout) != 0) {
      output_lost(e.code().message());
    } else {
      print_error(fmt::format("internal error: {}", e.what()));
    }
    return kExitCheckFailed;
  } catch (const Usage& u) {
    // A command's own usage error points at that command's help, where its options are.
    std::string see = "opreg --help";
    for (const char* cmd : {"devices", "ops", "run", "bench"}) {
      if (u.message.starts_with(std::string(cmd) + ": ")) see = fmt::format("opreg {} --help", cmd);
    }
    print_error(fmt::format("{} (see `{}`)", u.message, see));
    return kExitUsage;
  } catch (const opreg::Error& e) {
    print_error(fmt::format("error: {}", e.what()));
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
    print_error(fmt::format("internal error: {}", e.what()));
    return kExitCheckFailed;
  }
}
