// The norm kernels compiled for AVX2, FMA and F16C (CMakeLists.txt sets -mavx2 -mfma -mf16c on this file).
#define OPREG_CPU_NS avx2
#include "backends/cpu/norm/kernels.inc"
