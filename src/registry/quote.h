// One way to echo a value someone typed (a device string, an environment value, a name, a path)
// in a message: in single quotes, with control characters, backslashes and single quotes
// escaped, so that every error and warning stays on one line and shows exactly what was given
// ('cpu\nX' for a value holding a newline, '\x1b[31m' for an escape sequence).
#pragma once

#include <string>
#include <string_view>

namespace opreg {

// The value with control characters escaped, and also backslashes and single quotes when it is
// to be quoted: for text from elsewhere put into a message, such as a plugin's error message.
inline std::string escape(std::string_view value, bool quoting = false) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += quoting ? "\\\\" : "\\"; break;
      case '\'': out += quoting ? "\\'" : "'"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += "\\x";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Appended rather than `"'" + ... + "'"`: g++ 12 at -O3 warns (-Wrestrict) about the latter once
// inlined into some callers.
inline std::string quote(std::string_view value) {
  std::string out(1, '\'');
  out += escape(value, true);
  out += '\'';
  return out;
}

}  // namespace opreg
