#include "opreg/error.h"

namespace opreg {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument:
      return "invalid argument";
    case ErrorKind::unsupported:
      return "unsupported";
    case ErrorKind::device:
      return "device";
    case ErrorKind::internal:
      return "internal";
  }
  // A value outside the enumerators can only come from a bad cast.
  return "unknown";
}

}  // namespace opreg
