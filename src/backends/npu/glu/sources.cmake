# The npu gated units: geglu and swiglu.
set(OPREG_NPU_GLU_SOURCES
  glu/list.cpp)
