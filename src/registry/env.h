// The one rule for reading an OPREG_* environment variable, shared by the registry's
// configuration and the built-in backends' own variables (OPREG_NPU_PROFILE, ...): surrounding
// blanks (spaces, tabs) are trimmed, and an unset or blank variable reads as absent.
#pragma once

#include <optional>
#include <string>

namespace opreg {

std::optional<std::string> env_value(const char* name);

}  // namespace opreg
