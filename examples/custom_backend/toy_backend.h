// A complete custom backend written against opreg's public C++ API only: the "toy" accelerator,
// a device whose memory is host memory it allocates and accounts for itself, with its own device
// properties and an rms_norm forward and backward kernel. A program (or a test) registers it at
// run time; OPREG_DEVICE=toy then makes it the device inference picks. tests/plugins holds it
// against the reference through the conformance harness.
#pragma once

#include <vector>

#include "opreg/registry.h"

namespace toy {

// Registers the toy backend and its variants on `registry`; keep the handles as long as the
// backend should stay (destroying them unregisters it).
std::vector<opreg::Registration> register_toy(opreg::Registry& registry);

}  // namespace toy
