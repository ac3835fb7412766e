#include "opreg/version.h"

namespace opreg {

const char* library_version() { return OPREG_VERSION; }

}  // namespace opreg
