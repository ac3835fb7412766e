// Helpers shared by the xpu tests.
#pragma once

#include <string>

namespace opreg::xpu_test {

// The name of the first OpenCL CPU device of the xpu backend ("xpu:0" where PoCL is the only
// platform); "xpu:0" when there is none, so that tests fail saying the device is missing
// rather than pass having run nothing.
std::string cpu_device();

// Runs `command` through the shell, returning its exit status and its stdout and stderr.
struct Output {
  int status = -1;
  std::string text;
};
Output run(const std::string& command);

// A fresh directory under the system's temporary directory (removed by the caller if wanted).
std::string temp_dir(const std::string& tag);

}  // namespace opreg::xpu_test
