/* An OpenCL vendor library that aborts the process when it is loaded: what a broken OpenCL
 * installation can do (PoCL asserting on an empty POCL_CACHE_DIR did). detection_test.cpp points
 * the ICD loader at it to show that a disabled xpu backend loads no OpenCL at all. */
#include <stdlib.h>

__attribute__((constructor)) static void abort_on_load(void) { abort(); }
