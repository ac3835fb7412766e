// opreg::Error: the one exception type of the library.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace opreg {

enum class ErrorKind {
  invalid_argument,  // the caller passed something malformed (shape, dtype, name, env value)
  unsupported,       // well-formed, but nothing registered can do it
  device,            // a device is missing, unavailable or failed
  internal,          // a bug in opreg
};

std::string_view to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace opreg
