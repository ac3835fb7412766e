// The spellings of an enum whose enumerators run 0..N-1: one table, in the enumerators' order,
// gives to_string, parsing and the "accepted: ..." list of an error message, so each enum opreg
// prints (dtypes, error kinds, policies, casting and rounding modes, the CLI's modes) is spelled
// in one place.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace opreg {

template <class E, std::size_t N>
struct Spellings {
  std::array<std::string_view, N> names;

  // A value outside the enumerators can only come from a bad cast: "unknown".
  constexpr std::string_view operator()(E value) const {
    const auto i = static_cast<std::size_t>(value);
    return i < N ? names[i] : std::string_view("unknown");
  }

  constexpr std::optional<E> parse(std::string_view text) const {
    for (std::size_t i = 0; i < N; ++i) {
      if (names[i] == text) return static_cast<E>(i);
    }
    return std::nullopt;
  }

  // "a, b, c"
  std::string accepted() const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      if (i != 0) out += ", ";
      out += names[i];
    }
    return out;
  }
};

template <class E, class... Name>
constexpr Spellings<E, sizeof...(Name)> spellings(Name... name) {
  return {{std::string_view(name)...}};
}

}  // namespace opreg
