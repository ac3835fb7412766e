// Configuration: the OPREG_* environment variables read and their syntax checked
// (Config::from_env), then names checked against a registry's registrations and applied
// (Registry::set_config, reload_config).
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "opreg/registry.h"
#include "registry/env.h"
#include "registry/fail.h"
#include "registry/names.h"
#include "registry/quote.h"
#include "registry/dispatch.h"
#include "registry/state.h"

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
      fail(ErrorKind::invalid_argument, "{}={}: empty entry; expected a comma-separated list of {}", var,
           quote(value), what);
    }
    out.emplace_back(part);
  }
  return out;
}

int small_int(const char* var, const std::string& value, int lo, int hi, std::string_view what) {
  int n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < lo || n > hi) {
    fail(ErrorKind::invalid_argument, "{}={}: expected {}", var, quote(value), what);
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
      "OPREG_FALLBACK", "OPREG_VERBOSE",       "OPREG_NUM_THREADS",   "OPREG_PLUGINS"};
  return vars;
}

Config Config::from_env(std::vector<std::string>* unknown) {
  Config c;
  if (auto v = get("OPREG_DEVICE")) {
    // The syntax parse_device accepts; whether the index exists is for the device to say.
    auto parts = names::split(*v, ':');
    bool ok = (parts.size() == 1 || parts.size() == 2) && names::is_word(parts[0]);
    if (ok && parts.size() == 2) {
      ok = !parts[1].empty() && parts[1].find_first_not_of("0123456789") == std::string_view::npos;
    }
    if (!ok) {
      fail(ErrorKind::invalid_argument,
           "OPREG_DEVICE={}: expected a device such as cpu, cuda, cuda:1, npu:0, xpu or a custom backend's name",
           quote(*v));
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
    else fail(ErrorKind::invalid_argument, "OPREG_FALLBACK={}: expected error, warn or silent", quote(*v));
  }
  if (auto v = get("OPREG_VERBOSE")) {
    c.verbose = small_int("OPREG_VERBOSE", *v, 0, 2, "0 (silent), 1 (first dispatch of each problem) or 2 "
                          "(also rejected variants)");
  }
  if (auto v = get("OPREG_NUM_THREADS")) {
    c.num_threads = small_int("OPREG_NUM_THREADS", *v, 1, 4096, "a whole number of threads from 1 to 4096");
  }
  if (auto v = get("OPREG_PLUGINS")) {
    for (auto part : names::split(*v, ':')) {
      part = trim(part);
      if (part.empty()) {
        fail(ErrorKind::invalid_argument, "OPREG_PLUGINS={}: empty entry; expected plugin paths separated by ':'",
             quote(*v));
      }
      c.plugins.emplace_back(part);
    }
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

// ---------------------------------------------------------------------------------------------
// Applying a configuration to a registry: names checked against its registrations.

using detail::backend_names;
using detail::join;
using detail::parse_device_text;
using detail::RegistryCore;
using detail::State;
using detail::VariantEntry;

bool Registry::is_disabled(const VariantInfo& v) const {
  const detail::StateRef ref(*core_);
  const auto& d = ref->config.disable;
  return std::find(d.begin(), d.end(), v.name) != d.end() || std::find(d.begin(), d.end(), v.backend) != d.end();
}

bool Registry::is_forced(const VariantInfo& v) const {
  const detail::StateRef ref(*core_);
  const auto& f = ref->config.force_variants;
  return std::find(f.begin(), f.end(), v.name) != f.end();
}

namespace {

// <backend>.<op>.<fwd|bwd>.<impl> of an op defined in this process.
bool is_variant_of_defined_op(std::string_view name) {
  if (!names::is_variant_name(name)) return false;
  const auto parts = names::split(name, '.');
  const std::string op = fmt::format("{}.{}", parts[1], parts[2]);
  if (!names::is_op_name(op)) return false;
  const auto ops = all_ops();
  return std::any_of(ops.begin(), ops.end(), [&](const detail::OpDef* d) { return d->name == op; });
}

std::string defined_ops() {
  std::vector<std::string> out;
  for (const auto* op : all_ops()) out.push_back(op->name);
  return out.empty() ? std::string("none") : join(out);
}

}  // namespace

std::vector<std::string> RegistryCore::validate(const Config& c) const {
  // Names of backends that are not registered are kept: custom backends register after the
  // environment is first read. OPREG_DEVICE and OPREG_BACKEND_ORDER are resolved where they are
  // used (inference refuses a name still unknown then, so they draw no warning here);
  // OPREG_DISABLE and OPREG_FORCE_VARIANT entries are only ever matched, so a name no backend has
  // yet is returned as pending, for one warning line each.
  std::vector<std::string> pending;
  const std::vector<std::string> registered = backend_names(backends);
  auto is_backend = [&](std::string_view n) {
    return std::find(registered.begin(), registered.end(), n) != registered.end();
  };
  auto is_absent = [&](std::string_view n) {
    return std::any_of(absent.begin(), absent.end(), [&](const auto& a) { return a.first == n; });
  };
  if (!c.device.empty()) {
    const auto parts = names::split(c.device, ':');
    if (is_backend(parts[0]) || !names::is_word(parts[0]) || parts.size() > 2) {
      try {
        (void)parse_device_text(*published, c.device);
      } catch (const Error& e) {
        fail(e.kind(), "OPREG_DEVICE={}: {}", quote(c.device), e.what());
      }
    }
  }
  if (c.verbose < 0 || c.verbose > 2) {
    fail(ErrorKind::invalid_argument, "OPREG_VERBOSE={}: expected 0, 1 or 2", c.verbose);
  }
  if (c.num_threads < 0 || c.num_threads > 4096) {
    fail(ErrorKind::invalid_argument, "OPREG_NUM_THREADS={}: expected 1 to 4096 (0 in a Config: the machine's cores)",
         c.num_threads);
  }
  std::set<std::string> seen;
  for (const auto& n : c.backend_order) {
    if (!names::is_word(n)) {
      fail(ErrorKind::invalid_argument, "OPREG_BACKEND_ORDER: {} is not a backend name; registered backends are {}",
           quote(n), join(registered));
    }
    if (!seen.insert(n).second) fail(ErrorKind::invalid_argument, "OPREG_BACKEND_ORDER: {} is listed twice", quote(n));
  }
  for (const auto& n : c.disable) {
    if (n == kCpuBackendName) {
      fail(ErrorKind::invalid_argument, "OPREG_DISABLE: the cpu backend cannot be disabled (it is the fallback "
           "target); disable its variants by name instead");
    }
    const bool word = names::is_word(n);
    if (!word && !is_variant_of_defined_op(n)) {
      fail(ErrorKind::invalid_argument, "OPREG_DISABLE: {} is neither a backend name (registered: {}) nor a variant "
           "name <backend>.<op>.<fwd|bwd>.<impl> of a defined op ({})", quote(n), join(registered), defined_ops());
    }
    const auto backend = names::split(n, '.')[0];
    if (!word && is_backend(backend) && active_variant(n) == nullptr) {
      fail(ErrorKind::invalid_argument, "OPREG_DISABLE: no variant {} is registered (see `opreg ops`)", quote(n));
    }
    if (!is_backend(backend) && !is_absent(backend)) pending.push_back(fmt::format("OPREG_DISABLE entry {}", quote(n)));
  }
  std::map<std::pair<int, std::string>, std::string> forced_for;
  for (const auto& n : c.force_variants) {
    if (!is_variant_of_defined_op(n)) {
      fail(ErrorKind::invalid_argument, "OPREG_FORCE_VARIANT: {} is not a variant name "
           "<backend>.<op>.<fwd|bwd>.<impl> of a defined op ({})", quote(n), defined_ops());
    }
    const auto backend = names::split(n, '.')[0];
    const VariantEntry* v = active_variant(n);
    if (v == nullptr && is_backend(backend)) {
      fail(ErrorKind::invalid_argument, "OPREG_FORCE_VARIANT: unknown variant {} (see `opreg ops` for the "
           "registered variants)", quote(n));
    }
    if (v == nullptr && is_absent(backend)) {
      fail(ErrorKind::unsupported, "OPREG_FORCE_VARIANT: {} belongs to the {} backend, which is not built into this "
           "opreg", quote(n), backend);
    }
    if (std::find(c.disable.begin(), c.disable.end(), n) != c.disable.end()) {
      fail(ErrorKind::invalid_argument, "variant {} is both forced (OPREG_FORCE_VARIANT) and disabled "
           "(OPREG_DISABLE)", quote(n));
    }
    if (v == nullptr) {  // its backend is not registered yet
      pending.push_back(fmt::format("OPREG_FORCE_VARIANT entry {}", quote(n)));
      continue;
    }
    auto [it, fresh] = forced_for.emplace(std::make_pair(v->op->id, v->info->backend), n);
    if (!fresh) {
      fail(ErrorKind::invalid_argument, "OPREG_FORCE_VARIANT: '{}' and '{}' are both forced for {} on {}; force one",
           it->second, n, v->info->op, v->info->backend);
    }
  }
  return pending;
}

void Registry::set_config(const Config& config) {
  detail::WriteLock lock(*core_);
  const std::vector<std::string> pending = core_->validate(config);
  Config previous = std::exchange(core_->config, config);
  auto backends_before = core_->backends;
  try {
    core_->probe_enabled();  // a backend registered while disabled, enabled now
    core_->publish(-1);
  } catch (...) {
    core_->config = std::move(previous);
    core_->backends = std::move(backends_before);
    throw;
  }
  {
    std::lock_guard seen_lock(core_->seen_mutex);
    core_->seen.clear();
  }
  for (auto& per_op : core_->warned) {
    for (auto& flag : per_op) flag.store(false, std::memory_order_relaxed);
  }
  lock.unlock();
  for (const auto& what : pending) {
    core_->log(fmt::format("opreg: warning: {} names a backend that is not registered (yet); it takes effect "
                           "when a backend of that name registers", what));
  }
}

void detail::preset_disable(Registry& registry, std::vector<std::string> disable) {
  RegistryCore& core = CoreAccess::core(registry);
  std::lock_guard lock(core.mutex);
  core.config.disable = std::move(disable);
}

void Registry::reload_config() {
  std::vector<std::string> unknown;
  Config c = Config::from_env(&unknown);
  set_config(c);
  const detail::StateRef ref(*core_);
  const State& s = *ref;
  for (const auto& name : unknown) {
    bool backend_var = false;
    std::vector<std::string> known = Config::variables();
    for (const auto& b : s.backends) {
      if (!b) continue;
      known.insert(known.end(), b->env_vars.begin(), b->env_vars.end());
      backend_var = backend_var || std::find(b->env_vars.begin(), b->env_vars.end(), name) != b->env_vars.end();
    }
    if (!backend_var) {
      core_->log(fmt::format("opreg: warning: {} is not a variable this opreg reads (known: {}); it has no effect",
                             quote(name), join(known)));
    }
  }
}

Config Registry::config() const { return detail::StateRef(*core_)->config; }

void Registry::set_log_sink(Function<void(std::string_view)> sink) {
  std::lock_guard lock(core_->log_mutex);
  core_->sink = std::move(sink);
}

}  // namespace opreg
