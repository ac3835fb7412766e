// Spelling rules for backend, op and variant names (DESIGN.md, "Names and contracts").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace opreg::names {

// [a-z][a-z0-9_]*
inline bool is_word(std::string_view s) {
  if (s.empty() || s[0] < 'a' || s[0] > 'z') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    auto at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

// <name>.<direction>, direction fwd or bwd, e.g. rms_norm.fwd
inline bool is_op_name(std::string_view s) {
  auto parts = split(s, '.');
  return parts.size() == 2 && is_word(parts[0]) && (parts[1] == "fwd" || parts[1] == "bwd");
}

// <backend>.<name>.<direction>.<impl>, e.g. npu.rms_norm.fwd.chunked
inline bool is_variant_name(std::string_view s) {
  auto parts = split(s, '.');
  if (parts.size() != 4) return false;
  for (auto p : parts) {
    if (!is_word(p)) return false;
  }
  return true;
}

}  // namespace opreg::names
