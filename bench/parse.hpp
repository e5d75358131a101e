// Parsing of the bench's size arguments: element counts ("1e6", "1M", "250000") and byte sizes
// ("64K", "2M", "4096").
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace reservoir::bench {

namespace detail {
inline std::uint64_t parse_scaled(std::string_view text, bool binary, const char* what) {
  const std::string s(text);
  auto fail = [&]() -> std::uint64_t {
    throw std::invalid_argument(
        std::string("invalid ") + what + " '" + s +
        (binary ? "': use e.g. 4096, 64K, 2M, 1G" : "': use e.g. 1000, 1e6, 2.5e6, 1K, 1M, 1G"));
  };
  if (s.empty()) return fail();
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    return fail();
  }
  double scale = 1;
  std::string_view rest = std::string_view(s).substr(used);
  if (!rest.empty()) {
    const double unit = binary ? 1024.0 : 1000.0;
    switch (rest[0]) {
      case 'k':
      case 'K':
        scale = unit;
        break;
      case 'm':
      case 'M':
        scale = unit * unit;
        break;
      case 'g':
      case 'G':
        scale = unit * unit * unit;
        break;
      case 't':
      case 'T':
        scale = unit * unit * unit * unit;
        break;
      default:
        return fail();
    }
    rest.remove_prefix(1);
    if (binary && (rest == "iB" || rest == "B" || rest == "i")) rest = {};
    if (!rest.empty()) return fail();
  }
  const double result = value * scale;
  if (!std::isfinite(result) || result < 1 || result >= 1.8e19 || result != std::floor(result)) {
    return fail();
  }
  return static_cast<std::uint64_t>(result);
}
}  // namespace detail

// "1e6", "2.5e6", "1M" (= 10^6), "1000": a positive whole element count.
inline std::uint64_t parse_count(std::string_view text) {
  return detail::parse_scaled(text, false, "size");
}

// "64K" (= 65536), "2M", "4096": a positive whole byte count.
inline std::uint64_t parse_bytes(std::string_view text) {
  return detail::parse_scaled(text, true, "byte size");
}

// "1e3,1e6,1M" -> {1000, 1000000, 1000000}
inline std::vector<std::uint64_t> parse_count_list(std::string_view text) {
  std::vector<std::uint64_t> out;
  while (true) {
    const auto comma = text.find(',');
    out.push_back(parse_count(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

// 1000 -> "1e3", 2500000 -> "2.5e6", 1234 -> "1234".
inline std::string format_count(std::uint64_t n) {
  if (n < 1000) return std::to_string(n);
  int exp = 0;
  std::uint64_t m = n;
  while (m % 10 == 0) {
    m /= 10;
    ++exp;
  }
  // Built with snprintf: g++ 12 at -O3 warns falsely (-Wrestrict) on chains of string +.
  char buf[32];
  if (m < 10) {
    std::snprintf(buf, sizeof buf, "%llue%d", static_cast<unsigned long long>(m), exp);
    return buf;
  }
  if (m < 100 && exp > 0) {
    std::snprintf(buf, sizeof buf, "%llu.%llue%d", static_cast<unsigned long long>(m / 10),
                  static_cast<unsigned long long>(m % 10), exp + 1);
    return buf;
  }
  return std::to_string(n);
}

// "" if text is one finite number within [lo, hi], else why not: the bench's checks of its
// seconds and percent options (a range check alone lets "nan" through: no comparison fails).
inline std::string finite_in_range(const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi) {
    char why[128];
    std::snprintf(why, sizeof why, "'%s' is not a number from %g to %g", text.c_str(), lo, hi);
    return why;
  }
  return {};
}

// The key=value fields of a child's "ok k1=v1 k2=v2 ..." result line (the status word skipped).
inline std::map<std::string, std::string> parse_fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  in >> word;  // the status
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

}  // namespace reservoir::bench
