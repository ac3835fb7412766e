// fail(): throws opreg::Error with a message built by fmt. Internal to the library (and its tests,
// tools and built-in backends): the public headers do not depend on fmt.
#pragma once

#include <fmt/format.h>

#include <utility>

#include "opreg/error.h"

namespace opreg {

template <class... A>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<A...> format, A&&... args) {
  throw Error(kind, fmt::format(format, std::forward<A>(args)...));
}

}  // namespace opreg
