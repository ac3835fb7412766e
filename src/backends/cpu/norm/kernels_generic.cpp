// The norm kernels compiled for the x86-64 baseline.
#define OPREG_CPU_NS generic
#include "backends/cpu/norm/kernels.inc"
