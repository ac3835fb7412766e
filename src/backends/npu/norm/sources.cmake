# The npu affine and grouped norms: layer_norm and group_norm.
set(OPREG_NPU_NORM_SOURCES
  norm/plan.cpp
  norm/fwd.cpp
  norm/bwd.cpp
  norm/list.cpp)
