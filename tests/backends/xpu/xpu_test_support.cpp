#include "xpu_test_support.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "opreg/registry.h"

namespace opreg::xpu_test {

std::string cpu_device() {
  Registry& registry = default_registry();
  for (const auto& b : registry.backends()) {
    if (b.name != "xpu") continue;
    for (std::size_t i = 0; i < b.devices.size(); ++i) {
      if (b.devices[i].emulated) return "xpu:" + std::to_string(i);
    }
  }
  return "xpu:0";
}

Output run(const std::string& command) {
  Output out;
  const std::string full = command + " 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.text.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string temp_dir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/opreg-xpu-" + tag + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  return pattern;
}

}  // namespace opreg::xpu_test
