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
#include "registry/fail.h"
#include "registry/names.h"
#include "registry/quote.h"

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

// A list setting as OPREG_* spells it ("npu,cuda,cpu": entries trimmed, an empty one refused, as
// the variable's is) or as a list of names.
std::vector<std::string> string_list(nb::handle value, const char* key, const char* what) {
  if (value.is_none()) return {};
  const std::string where = fmt::format("config.{}", key);
  std::vector<std::string> out;
  auto add = [&](std::string_view part, const std::string& whole) {
    while (!part.empty() && (part.front() == ' ' || part.front() == '\t')) part.remove_prefix(1);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\t')) part.remove_suffix(1);
    if (part.empty()) fail(ErrorKind::invalid_argument, "{}={}: empty entry; expected {}", where, quote(whole), what);
    out.emplace_back(part);
  };
  if (PyUnicode_Check(value.ptr())) {
    const std::string text = text_argument(value, where);
    if (text.find_first_not_of(" \t") == std::string::npos) return {};  // as an unset variable
    for (std::string_view part : names::split(text, ',')) add(part, text);
    return out;
  }
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    fail(ErrorKind::invalid_argument, "{}: expected a list of names or a comma-separated string, got {}", where,
         nb::type_name(value.type()).c_str());
  }
  for (nb::handle item : nb::borrow<nb::sequence>(value)) {
    const std::string name = text_argument(item, where + " entry");
    add(name, name);
  }
  return out;
}

// An int in [lo, hi]; anything else (a bool, a float, an int past 64 bits) is refused by name.
int whole_number(nb::handle value, const char* key, long long lo, long long hi, const char* accepted) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    fail(ErrorKind::invalid_argument, "config.{}: expected a whole number ({}), got {}", key, accepted,
         nb::type_name(value.type()).c_str());
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred() != nullptr) throw nb::python_error();
  if (overflow != 0 || v < lo || v > hi) {
    const std::string shown = nb::cast<std::string>(nb::str(value));
    fail(ErrorKind::invalid_argument, "config.{}={}: out of range; expected {}", key, shown, accepted);
  }
  return static_cast<int>(v);
}

// Changes the given keys of the default registry's configuration; set_config validates the result
// (as it validates OPREG_*), and on error nothing changes.
void update_config(const nb::dict& changes) {
  Registry& reg = default_registry();
  Config c = reg.config();
  for (auto [key_obj, value] : changes) {
    const std::string key = text_argument(key_obj, "config key");
    if (key == "device") {
      c.device = value.is_none() ? std::string() : text_argument(value, "config.device");
    } else if (key == "backend_order") {
      c.backend_order = string_list(value, "backend_order", "a comma-separated list of backend names");
    } else if (key == "disable") {
      c.disable = string_list(value, "disable", "a comma-separated list of backend or variant names");
    } else if (key == "force_variant") {
      c.force_variants = string_list(value, "force_variant", "a comma-separated list of full variant names");
    } else if (key == "fallback") {
      if (value.is_none()) {
        c.fallback.reset();
      } else {
        const std::string v = text_argument(value, "config.fallback");
        if (v == "error") c.fallback = FallbackPolicy::error;
        else if (v == "warn") c.fallback = FallbackPolicy::warn;
        else if (v == "silent") c.fallback = FallbackPolicy::silent;
        else fail(ErrorKind::invalid_argument, "config.fallback={}: expected 'error', 'warn', 'silent' or None",
                  quote(v));
      }
    } else if (key == "verbose") {
      c.verbose = whole_number(value, "verbose", 0, 2, "0, 1 or 2");
    } else if (key == "num_threads") {
      c.num_threads = value.is_none() ? 0 : whole_number(value, "num_threads", 0, 4096,
                                                          "0 (the machine's cores) to 4096, or None");
    } else {
      fail(ErrorKind::invalid_argument,
           "config.{}: no such setting; settable: device, backend_order, disable, force_variant, fallback, verbose, "
           "num_threads (plugins: opreg.load_plugin)",
           escape(key));
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
      [](nb::handle path_obj) {
        const std::string path = text_argument(path_obj, "load_plugin: path");
        ++g_registry_generation;  // also on failure: a partial registration was undone
        default_registry().load_plugin(path);
        ++g_registry_generation;
      },
      nb::arg("path"));
  m.def("plugins", [] { return default_registry().plugins(); });
  m.def("fallback_count", [] { return default_registry().fallback_count(); });
  m.def("cache_misses", [] { return default_registry().cache_misses(); });
  m.def("is_emulated", [](nb::handle device) {
    Registry& reg = default_registry();
    return reg.device_props(reg.parse_device(text_argument(device, "is_emulated: device"))).emulated;
  });
}

}  // namespace opreg::py
