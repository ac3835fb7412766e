// The Python module opreg._opreg: what its three files share.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "opreg/registry.h"

namespace opreg::py {

namespace nb = nanobind;

// Bumped whenever the registry's backends may have changed (a plugin loaded): ops.cpp caches the
// backend of each DLPack device type until it changes.
extern std::uint64_t g_registry_generation;

// A Python str argument as UTF-8, whole: `what` names it in errors ("rms_norm.fwd: casting",
// "config.device", "load_plugin: path"). Anything but a str, and a str holding a NUL character
// (which a C string would silently end at), is an InvalidArgumentError naming the value escaped.
std::string text_argument(nb::handle value, const std::string& what);

// ops.cpp: every op direction of the manifest, its explain form, and the call result type.
void bind_ops(nb::module_& m);
// registry.cpp: devices, ops and their variants, device inference, configuration, plugins.
void bind_registry(nb::module_& m);

}  // namespace opreg::py
