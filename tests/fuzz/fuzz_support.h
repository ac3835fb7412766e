// What the fuzz targets share: the one rule (opreg::Error, and the CLI's Usage, are the only
// exceptions a parser may throw; anything else escapes and libFuzzer reports it as a crash),
// and splitting an input into NUL-separated strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "opreg/error.h"

namespace opreg::fuzz {

template <class F>
void expect_only_opreg_errors(F&& f) {
  try {
    f();
  } catch (const Error&) {
    // The contract: a clear error, never a crash, hang or another exception.
  }
}

inline std::vector<std::string> split(const std::uint8_t* data, std::size_t size, char sep = '\0') {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (static_cast<char>(data[i]) == sep) {
      out.emplace_back();
    } else {
      out.back() += static_cast<char>(data[i]);
    }
  }
  return out;
}

}  // namespace opreg::fuzz
