// opreg: the command-line face of the registry.
// Exit codes: 0 success, 1 a result failed its check, 2 bad input or usage, 3 the device or op
// is unsupported or unavailable. Errors are one line on stderr.
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "opreg/registry.h"

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
  --op NAME   only this op (e.g. rms_norm.fwd)
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
  for (const auto& [name, why] : reg.absent_backends()) fmt::print("{:<8} {:>2} {:>5}  {:<8} not built: {}\n", name, "-", "-", "-", why);
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
  for (const auto* op : ops) {
    if (!only.empty() && op->name != only) continue;
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
                       fmt::format("unknown op '{}'; defined ops: {}", only, fmt::join(names, ", ")));
  }
  if (ops.empty()) fmt::print("(no ops are defined in this build)\n");
  return kExitOk;
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
  throw Usage{fmt::format("unknown command '{}'", command)};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Usage& u) {
    std::fprintf(stderr, "opreg: %s (see `opreg --help`)\n", u.message.c_str());
    return kExitUsage;
  } catch (const opreg::Error& e) {
    std::fprintf(stderr, "opreg: error: %s\n", e.what());
    switch (e.kind()) {
      case ErrorKind::invalid_argument: return kExitUsage;
      case ErrorKind::unsupported:
      case ErrorKind::device: return kExitUnsupported;
      case ErrorKind::internal: return kExitCheckFailed;
    }
    return kExitCheckFailed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opreg: internal error: %s\n", e.what());
    return kExitCheckFailed;
  }
}
