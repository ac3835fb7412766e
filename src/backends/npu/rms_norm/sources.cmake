# The npu rms_norm family: rms_norm and fused_add_rms_norm.
set(OPREG_NPU_RMS_NORM_SOURCES
  rms_norm/plan.cpp
  rms_norm/fwd.cpp
  rms_norm/bwd.cpp
  rms_norm/list.cpp)
