// The registry to Python: devices, ops with their variants in choice order, device inference,
// the OPREG_* configuration (read and set through Registry::set_config, which validates it as it
// validates the environment) and plugins. Everything is plain data (dicts and lists): the package
// python/opreg shapes it for users.
#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "module.h"

namespace opreg::py {
namespace {

nb::dict device_dict(const Registry& reg, Device device, const DeviceProps& p) {
  nb::dict d;
  d["device"] = reg.device_name(device);
  d["name"] = p.name;
  d["emulated"] = p.emulated;
  d["memory_bytes"] = p.memory_bytes;
  d["compute_units"] = p.compute_units;
  nb::dict extra;
  for (const auto& [k, v] : p.extra) extra[k.c_str()] = v;
  d["extra"] = extra;
  return d;
}

nb::list devices() {
  Registry& reg = default_registry();
  nb::list out;
  for (const BackendInfo& b : reg.backends()) {
    nb::dict d;
    d["backend"] = b.name;
    d["id"] = static_cast<int>(b.id);
    d["priority"] = b.priority;
    d["fallback"] = std::string(to_string(b.fallback));
    d["available"] = b.availability.available;
    d["reason"] = b.availability.reason;
    d["disabled"] = b.disabled;
    d["site"] = b.site;
    nb::list devs;
    for (std::size_t i = 0; i < b.devices.size(); ++i) {
      devs.append(device_dict(reg, Device{b.id, static_cast<std::int16_t>(i)}, b.devices[i]));
    }
    d["devices"] = devs;
    out.append(d);
  }
  for (const auto& [name, why] : reg.absent_backends()) {
    nb::dict d;
    d["backend"] = name;
    d["available"] = false;
    d["reason"] = "not built: " + why;
    d["devices"] = nb::list();
    out.append(d);
  }
  return out;
}

nb::dict ops() {
  Registry& reg = default_registry();
  nb::dict out;
  for (const detail::OpDef* op : all_ops()) {
    nb::list variants;
    for (const VariantInfo& v : reg.variants(op->name)) {
      nb::dict d;
      d["name"] = v.name;
      d["backend"] = v.backend;
      d["impl"] = v.impl;
      d["priority"] = v.priority;
      nb::dict tunables;
      for (const Tunable& t : v.tunables) tunables[t.name.c_str()] = t.value;
      d["tunables"] = tunables;
      d["site"] = v.site;
      d["plugin"] = v.plugin.empty() ? nb::none() : nb::cast(v.plugin);
      d["disabled"] = reg.is_disabled(v);
      d["forced"] = reg.is_forced(v);
      d["override"] = v.is_override;
      d["strided"] = v.strided;
      variants.append(d);
    }
    out[op->name.c_str()] = variants;
  }
  return out;
}

nb::dict config_dict(const Config& c) {
  nb::dict d;
  d["device"] = c.device.empty() ? nb::none() : nb::cast(c.device);
  d["backend_order"] = c.backend_order;
  d["disable"] = c.disable;
  d["force_variant"] = c.force_variants;
  d["fallback"] = c.fallback ? nb::cast(std::string(to_string(*c.fallback))) : nb::none();
  d["verbose"] = c.verbose;
  d["num_threads"] = c.num_threads;
  d["plugins"] = c.plugins;
  return d;
}

std::vector<std::string> string_list(nb::handle value, const char* key) {
  if (value.is_none()) return {};
  if (nb::isinstance<nb::str>(value)) {
    // The environment's spelling: "npu,cuda,cpu".
    std::vector<std::string> out;
    const std::string text = nb::cast<std::string>(value);
    std::size_t at = 0;
    while (at <= text.size()) {
      const std::size_t comma = text.find(',', at);
      const std::string part = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (!part.empty()) out.push_back(part);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    return out;
  }
  try {
    return nb::cast<std::vector<std::string>>(value);
  } catch (const nb::cast_error&) {
    throw Error(ErrorKind::invalid_argument,
                fmt::format("config.{}: expected a list of names or a comma-separated string, got {}", key,
                            nb::type_name(value.type()).c_str()));
  }
}

int whole_number(nb::handle value, const char* key) {
  if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value)) {
    throw Error(ErrorKind::invalid_argument,
                fmt::format("config.{}: expected a whole number, got {}", key, nb::type_name(value.type()).c_str()));
  }
  const long long v = nb::cast<long long>(value);
  if (v < -1 || v > 1'000'000) {
    throw Error(ErrorKind::invalid_argument, fmt::format("config.{}={}: out of range", key, v));
  }
  return static_cast<int>(v);
}

// Changes the given keys of the default registry's configuration; set_config validates the result
// (as it validates OPREG_*), and on error nothing changes.
void update_config(const nb::dict& changes) {
  Registry& reg = default_registry();
  Config c = reg.config();
  for (auto [key_obj, value] : changes) {
    const std::string key = nb::cast<std::string>(key_obj);
    if (key == "device") {
      c.device = value.is_none() ? std::string() : nb::cast<std::string>(value);
    } else if (key == "backend_order") {
      c.backend_order = string_list(value, "backend_order");
    } else if (key == "disable") {
      c.disable = string_list(value, "disable");
    } else if (key == "force_variant") {
      c.force_variants = string_list(value, "force_variant");
    } else if (key == "fallback") {
      if (value.is_none()) {
        c.fallback.reset();
      } else {
        const std::string v = nb::cast<std::string>(value);
        if (v == "error") c.fallback = FallbackPolicy::error;
        else if (v == "warn") c.fallback = FallbackPolicy::warn;
        else if (v == "silent") c.fallback = FallbackPolicy::silent;
        else throw Error(ErrorKind::invalid_argument,
                         fmt::format("config.fallback='{}': expected 'error', 'warn', 'silent' or None", v));
      }
    } else if (key == "verbose") {
      c.verbose = whole_number(value, "verbose");
    } else if (key == "num_threads") {
      c.num_threads = value.is_none() ? 0 : whole_number(value, "num_threads");
    } else {
      throw Error(ErrorKind::invalid_argument,
                  fmt::format("config.{}: no such setting; settable: device, backend_order, disable, force_variant, "
                              "fallback, verbose, num_threads (plugins: opreg.load_plugin)",
                              key));
    }
  }
  reg.set_config(c);
}

}  // namespace

void bind_registry(nb::module_& m) {
  m.def("devices", &devices, "every backend with its availability, properties and devices");
  m.def("ops", &ops, "every op and its variants in choice order, with where each was registered");
  m.def("infer_device", [] {
    const Inference inf = default_registry().infer_device();
    return nb::make_tuple(default_registry().device_name(inf.device), inf.why);
  });
  m.def("get_config", [] { return config_dict(default_registry().config()); });
  m.def("update_config", &update_config, nb::arg("changes"));
  m.def("reload_config", [] { default_registry().reload_config(); });
  m.def("config_variables", [] { return Config::variables(); });
  m.def(
      "load_plugin",
      [](const std::string& path) {
        ++g_registry_generation;  // also on failure: a partial registration was undone
        default_registry().load_plugin(path);
        ++g_registry_generation;
      },
      nb::arg("path"));
  m.def("plugins", [] { return default_registry().plugins(); });
  m.def("fallback_count", [] { return default_registry().fallback_count(); });
  m.def("cache_misses", [] { return default_registry().cache_misses(); });
  m.def("is_emulated", [](const std::string& device) {
    Registry& reg = default_registry();
    return reg.device_props(reg.parse_device(device)).emulated;
  });
}

}  // namespace opreg::py
