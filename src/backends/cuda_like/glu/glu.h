// The cuda geglu and swiglu variants: cuda.{geglu,swiglu}.{fwd,bwd}.stream.
#pragma once

#include "opreg/registry.h"

namespace opreg::cuda_like {

void register_glu(Registry& registry);

}  // namespace opreg::cuda_like
