// main() of opreg_xpu_tests: the OpenCL environment every xpu test runs in, set before anything
// loads the ICD loader (it reads it once). ctest's ENVIRONMENT property would do, but
// gtest_discover_tests keeps only one element of a list-valued property (CMake 3.25).
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  ::setenv("OCL_ICD_VENDORS", OPREG_TEST_POCL_ICD, 1);      // PoCL only
  ::setenv("POCL_CACHE_DIR", OPREG_TEST_POCL_CACHE, 0);     // shared by the test processes
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
