// OPREG_* environment variables: syntax checks here; names are checked against a registry
// when a configuration is applied (Registry::set_config).
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "opreg/registry.h"
#include "registry/env.h"
#include "registry/fail.h"
#include "registry/names.h"

extern char** environ;

namespace opreg {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<std::string> get(const char* name) { return env_value(name); }

std::vector<std::string> comma_list(const char* var, const std::string& value, std::string_view what) {
  std::vector<std::string> out;
  for (auto part : names::split(value, ',')) {
    part = trim(part);
    if (part.empty()) {
      fail(ErrorKind::invalid_argument, "{}='{}': empty entry; expected a comma-separated list of {}", var,
           value, what);
    }
    out.emplace_back(part);
  }
  return out;
}

int small_int(const char* var, const std::string& value, int lo, int hi, std::string_view what) {
  int n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < lo || n > hi) {
    fail(ErrorKind::invalid_argument, "{}='{}': expected {}", var, value, what);
  }
  return n;
}

}  // namespace

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || trim(v).empty()) return std::nullopt;
  return std::string(trim(v));
}

const std::vector<std::string>& Config::variables() {
  static const std::vector<std::string> vars = {
      "OPREG_DEVICE",   "OPREG_BACKEND_ORDER", "OPREG_DISABLE",    "OPREG_FORCE_VARIANT",
      "OPREG_FALLBACK", "OPREG_VERBOSE",       "OPREG_NUM_THREADS"};
  return vars;
}

Config Config::from_env(std::vector<std::string>* unknown) {
  Config c;
  if (auto v = get("OPREG_DEVICE")) {
    auto parts = names::split(*v, ':');
    bool ok = (parts.size() == 1 || parts.size() == 2) && names::is_word(parts[0]);
    if (ok && parts.size() == 2) {
      ok = !parts[1].empty() && parts[1].find_first_not_of("0123456789") == std::string_view::npos &&
           parts[1].size() <= 5;
    }
    if (!ok) {
      fail(ErrorKind::invalid_argument,
           "OPREG_DEVICE='{}': expected a device such as cpu, cuda, cuda:1, npu:0, xpu or a custom backend's name",
           *v);
    }
    c.device = *v;
  }
  if (auto v = get("OPREG_BACKEND_ORDER")) c.backend_order = comma_list("OPREG_BACKEND_ORDER", *v, "backend names");
  if (auto v = get("OPREG_DISABLE")) c.disable = comma_list("OPREG_DISABLE", *v, "backend or variant names");
  if (auto v = get("OPREG_FORCE_VARIANT")) {
    c.force_variants = comma_list("OPREG_FORCE_VARIANT", *v, "full variant names");
  }
  if (auto v = get("OPREG_FALLBACK")) {
    if (*v == "error") c.fallback = FallbackPolicy::error;
    else if (*v == "warn") c.fallback = FallbackPolicy::warn;
    else if (*v == "silent") c.fallback = FallbackPolicy::silent;
    else fail(ErrorKind::invalid_argument, "OPREG_FALLBACK='{}': expected error, warn or silent", *v);
  }
  if (auto v = get("OPREG_VERBOSE")) {
    c.verbose = small_int("OPREG_VERBOSE", *v, 0, 2, "0 (silent), 1 (first dispatch of each problem) or 2 "
                          "(also rejected variants)");
  }
  if (auto v = get("OPREG_NUM_THREADS")) {
    c.num_threads = small_int("OPREG_NUM_THREADS", *v, 1, 4096, "a whole number of threads from 1 to 4096");
  }
  if (unknown != nullptr) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string_view entry(*e);
      if (entry.substr(0, 6) != "OPREG_") continue;
      std::string name(entry.substr(0, entry.find('=')));
      const auto& known = variables();
      if (std::find(known.begin(), known.end(), name) == known.end()) unknown->push_back(std::move(name));
    }
  }
  return c;
}

}  // namespace opreg
