// Devices: names, parsing, checks, absent built-in backends and device inference.
#include <algorithm>
#include <charconv>
#include <cstdint>

#include "opreg/registry.h"
#include "registry/fail.h"
#include "registry/names.h"
#include "registry/quote.h"
#include "registry/state.h"

namespace opreg {

using detail::absent_names;
using detail::accepted_devices;
using detail::BackendRecord;
using detail::backend_names;
using detail::join;
using detail::missing_device;
using detail::parse_device_in;
using detail::State;

std::string Registry::device_name(Device device) const {
  const detail::StateRef ref(*core_);
  const State& s = *ref;
  if (device.backend >= kMaxBackends || !s.backends[device.backend]) {
    return fmt::format("backend#{}:{}", static_cast<int>(device.backend), device.index);
  }
  const auto& name = s.backends[device.backend]->name;
  if (device.backend == kCpuBackendId && device.index == 0) return name;
  return fmt::format("{}:{}", name, device.index);
}

namespace detail {

std::string accepted_devices(const State& s) {
  std::vector<std::string> items;
  for (const auto& b : s.backends) {
    if (!b) continue;
    const int n = b->availability.device_count;
    if (b->id == kCpuBackendId) {
      items.push_back(b->name);
    } else if (!b->availability.available) {
      items.push_back(fmt::format("{} (unavailable)", b->name));
    } else if (n == 0) {
      items.push_back(fmt::format("{} (no devices)", b->name));
    } else if (n == 1) {
      items.push_back(fmt::format("{}, {}:0", b->name, b->name));
    } else {
      items.push_back(fmt::format("{}, {}:0..{}:{}", b->name, b->name, b->name, n - 1));
    }
  }
  return join(items);
}

namespace {

bool is_index(std::string_view digits) {
  return !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

// Devices are <backend> or <backend>:<index>, the index any number of decimal digits. Exit 2
// (invalid_argument) for what is malformed or names no backend, 3 (unsupported) for a built-in
// backend this build lacks; an index beyond the device count is left to missing_device().
DeviceText parse_device_text(const State& s, std::string_view text) {
  const auto parts = names::split(text, ':');
  const bool well_formed = parts.size() == 1 || (parts.size() == 2 && is_index(parts[1]));
  if (!well_formed) {
    fail(ErrorKind::invalid_argument, "invalid device {}: expected <backend> or <backend>:<index> with a decimal "
         "index; accepted devices are {}", quote(text), accepted_devices(s));
  }
  for (const auto& b : s.backends) {
    if (b && b->name == parts[0]) return {b.get(), parts.size() == 2 ? parts[1] : std::string_view("0")};
  }
  for (const auto& [name, why] : s.absent) {
    if (parts[0] == name) {
      fail(ErrorKind::unsupported, "device {}: the {} backend is not built into this opreg ({})", quote(text), name,
           why);
    }
  }
  fail(ErrorKind::invalid_argument, "invalid device {}: accepted devices are {}", quote(text), accepted_devices(s));
}

[[noreturn]] void missing_device(const BackendRecord& b, std::string_view shown) {
  if (!b.availability.available) {
    fail(ErrorKind::device, "device {} is unavailable: {}", shown, b.availability.reason);
  }
  const int n = b.availability.device_count;
  fail(ErrorKind::device, "device {} does not exist: {} has {} device(s){}", shown, b.name, n,
       n == 1 ? fmt::format(" ({}:0)", b.name) : n > 1 ? fmt::format(" ({}:0..{}:{})", b.name, b.name, n - 1) : "");
}

Device parse_device_in(const State& s, std::string_view text) {
  const DeviceText parsed = parse_device_text(s, text);
  // An index past what a Device holds is past every device count too: the same error as cpu:5.
  std::int64_t index = 0;
  const auto [end, ec] = std::from_chars(parsed.index.data(), parsed.index.data() + parsed.index.size(), index);
  if (ec != std::errc() || index > INT16_MAX) missing_device(*parsed.backend, quote(text));
  return Device{parsed.backend->id, static_cast<std::int16_t>(index)};
}

}  // namespace detail

Device Registry::parse_device(std::string_view text) const {
  // A device named explicitly of a backend registered while disabled (so not probed): probe it
  // now. Disabling keeps a backend's runtime unloaded until one of its devices is asked for.
  const std::string_view backend = text.substr(0, text.find(':'));
  bool unprobed = false;
  {
    const detail::StateRef ref(*core_);
    for (const auto& b : ref->backends) unprobed = unprobed || (b && !b->probed && b->name == backend);
  }
  if (unprobed) core_->probe_named(backend);
  return parse_device_in(*detail::StateRef(*core_), text);
}

// For log lines and errors: an emulated device says so wherever it is shown.
std::string Registry::device_label(Device device) const {
  std::string name = device_name(device);
  const detail::StateRef ref(*core_);
  const State& s = *ref;
  const BackendRecord* b = device.backend < kMaxBackends ? s.backends[device.backend].get() : nullptr;
  if (b != nullptr && device.index >= 0 && static_cast<std::size_t>(device.index) < b->props.size() &&
      b->props[static_cast<std::size_t>(device.index)].emulated) {
    name += " (emulated)";
  }
  return name;
}

void Registry::declare_absent_backend(std::string name, std::string why) {
  detail::WriteLock lock(*core_);
  core_->absent.emplace_back(std::move(name), std::move(why));
  core_->publish(-1);
}

std::vector<std::pair<std::string, std::string>> Registry::absent_backends() const {
  return detail::StateRef(*core_)->absent;
}

void Registry::check_device(Device device) const {
  const detail::StateRef ref(*core_);
  const State& s = *ref;
  if (device.backend >= kMaxBackends || !s.backends[device.backend]) {
    fail(ErrorKind::device, "device {} does not exist: no backend has id {} (registered: {})", device_name(device),
         static_cast<int>(device.backend), accepted_devices(s));
  }
  const auto& b = *s.backends[device.backend];
  if (!b.availability.available || device.index < 0 || device.index >= b.availability.device_count) {
    missing_device(b, device_name(device));
  }
}

Inference Registry::infer_device() const {
  const detail::StateRef ref(*core_);
  const State& s = *ref;
  if (!s.config.device.empty()) {
    // Every error says the device came from OPREG_DEVICE: the command line may not name one.
    Device d;
    try {
      d = parse_device(s.config.device);
      check_device(d);
    } catch (const Error& e) {
      fail(e.kind(), "OPREG_DEVICE={}: {}", quote(s.config.device), e.what());
    }
    if (s.disabled[d.backend]) {
      fail(ErrorKind::device, "OPREG_DEVICE={}: backend {} is disabled by OPREG_DISABLE", quote(s.config.device),
           s.backends[d.backend]->name);
    }
    std::string why = fmt::format("OPREG_DEVICE={}", s.config.device);
    if (s.backends[d.backend]->props[static_cast<std::size_t>(d.index)].emulated) why += " (emulated, named explicitly)";
    return {d, why};
  }
  std::vector<const BackendRecord*> order;
  std::vector<std::string> names;
  std::vector<std::string> skipped;
  const bool explicit_order = !s.config.backend_order.empty();
  if (explicit_order) {
    for (const auto& name : s.config.backend_order) {
      names.push_back(name);
      // Names are resolved here: a custom backend may register after the environment was read.
      if (auto id = find_backend(name)) {
        order.push_back(s.backends[*id].get());
        continue;
      }
      // The documented default order names every built-in backend; one this build lacks is skipped.
      const auto absent = std::find_if(s.absent.begin(), s.absent.end(), [&](const auto& a) { return a.first == name; });
      if (absent == s.absent.end()) {
        fail(ErrorKind::invalid_argument, "OPREG_BACKEND_ORDER: no backend {} is registered (registered: {}; not "
             "built: {})", quote(name), join(backend_names(s.backends)), join(absent_names(s)));
      }
      skipped.push_back(fmt::format("{} (not built: {})", name, absent->second));
    }
  } else {
    for (const auto& b : s.backends) {
      if (b) order.push_back(b.get());
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const BackendRecord* a, const BackendRecord* b) { return a->priority > b->priority; });
  }
  if (!explicit_order) {
    for (const auto* b : order) names.push_back(b->name);
  }
  for (const auto* b : order) {
    if (s.disabled[b->id]) {
      skipped.push_back(fmt::format("{} (disabled by OPREG_DISABLE)", b->name));
      continue;
    }
    if (!b->availability.available) {
      skipped.push_back(fmt::format("{} (unavailable: {})", b->name, b->availability.reason));
      continue;
    }
    if (b->availability.device_count == 0) {
      skipped.push_back(fmt::format("{} (no devices)", b->name));
      continue;
    }
    int index = -1;
    for (int i = 0; i < b->availability.device_count && index < 0; ++i) {
      if (!b->props[static_cast<std::size_t>(i)].emulated) index = i;
    }
    if (index < 0) {
      skipped.push_back(fmt::format("{} (emulated: used only when named, e.g. OPREG_DEVICE={})", b->name, b->name));
      continue;
    }
    std::string why = fmt::format("first available in {} order {}", explicit_order ? "OPREG_BACKEND_ORDER" : "priority",
                                  join(names, ","));
    if (!skipped.empty()) why += "; skipped " + join(skipped, ", ");
    return {Device{b->id, static_cast<std::int16_t>(index)}, why};
  }
  fail(ErrorKind::device, "no device available in {} order {}: skipped {}",
       explicit_order ? "OPREG_BACKEND_ORDER" : "priority", join(names, ","), join(skipped, ", "));
}

std::string to_string(Device device) { return default_registry().device_name(device); }
Device parse_device(std::string_view text) { return default_registry().parse_device(text); }

}  // namespace opreg
