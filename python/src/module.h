// The Python module opreg._opreg: what its three files share.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "opreg/registry.h"

namespace opreg::py {

namespace nb = nanobind;

// Bumped whenever the registry's backends may have changed (a plugin loaded): ops.cpp caches the
// backend of each DLPack device type until it changes.
extern std::uint64_t g_registry_generation;

// ops.cpp: every op direction of the manifest, its explain form, and the call result type.
void bind_ops(nb::module_& m);
// registry.cpp: devices, ops and their variants, device inference, configuration, plugins.
void bind_registry(nb::module_& m);

}  // namespace opreg::py
