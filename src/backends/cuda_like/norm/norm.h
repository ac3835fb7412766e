// The cuda layer_norm and group_norm variants: cuda.{layer_norm,group_norm}.{fwd,bwd}.sets.
#pragma once

#include "opreg/registry.h"

namespace opreg::cuda_like {

void register_norm(Registry& registry);

}  // namespace opreg::cuda_like
