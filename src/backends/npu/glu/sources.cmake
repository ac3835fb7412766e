# The npu gated units: geglu and swiglu.
set(OPREG_NPU_GLU_SOURCES
  glu/plan.cpp
  glu/kernels.cpp
  glu/list.cpp)
