// What every xpu family's plan.h declares its variants with: the facts their supports() read
// (the device's DeviceInfo, behind DeviceProps::facts) and the geometry a plan is sized by, both
// only named here, so that a family's list.cpp includes neither the runtime nor the OpenCL headers.
#pragma once

#include "opreg/registry.h"
#include "ops/families.h"

namespace opreg::xpu {

struct DeviceInfo;  // runtime.h
struct Geometry;    // launch.h

}  // namespace opreg::xpu
