// An assertion for opreg::Error: its kind, and words its message must contain.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "opreg/error.h"

namespace opreg::testing {

// Runs f; succeeds when it throws opreg::Error of `kind` whose message contains every needle.
// The message is kept in *message when given.
template <class F>
::testing::AssertionResult ThrowsError(F&& f, ErrorKind kind, const std::vector<std::string>& needles,
                                       std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (message != nullptr) *message = what;
    if (e.kind() != kind) {
      return ::testing::AssertionFailure() << "threw opreg::Error of kind " << to_string(e.kind()) << " (expected "
                                           << to_string(kind) << "): " << what;
    }
    for (const auto& n : needles) {
      if (what.find(n) == std::string::npos) {
        return ::testing::AssertionFailure() << "message does not contain '" << n << "': " << what;
      }
    }
    return ::testing::AssertionSuccess() << what;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-opreg exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw (expected opreg::Error of kind " << to_string(kind) << ")";
}

}  // namespace opreg::testing
