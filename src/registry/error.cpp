#include "opreg/error.h"

#include "registry/spellings.h"

namespace opreg {

std::string_view to_string(ErrorKind kind) {
  static constexpr auto kNames =
      spellings<ErrorKind>("invalid argument", "unsupported", "device", "internal");
  return kNames(kind);
}

}  // namespace opreg
