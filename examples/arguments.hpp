// The examples' command-line numbers: a whole number within stated bounds, or the example's usage
// line on standard error and exit code 2 (as reservoir-bench exits on a usage error). "abc", "-5",
// "1.5" or "99999999999999999999" never reach the program as 0 or as a wrapped-around count.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>

namespace example {

// Exits with the usage line (and why, if given) when more than `max_arguments` are given.
inline void check_argument_count(int argc, int max_arguments, const char* usage) {
  if (argc - 1 > max_arguments) {
    std::fprintf(stderr, "too many arguments\nusage: %s\n", usage);
    std::exit(2);
  }
}

// argv[index] as a whole number in [min, max]; `fallback` when there is no such argument.
inline std::uint64_t number_argument(int argc, char** argv, int index, std::uint64_t fallback,
                                     std::uint64_t min, std::uint64_t max, const char* usage) {
  if (index >= argc) return fallback;
  const std::string_view text = argv[index];
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    std::fprintf(stderr, "'%s': expected a whole number from %llu to %llu\nusage: %s\n",
                 argv[index], static_cast<unsigned long long>(min),
                 static_cast<unsigned long long>(max), usage);
    std::exit(2);
  }
  return value;
}

}  // namespace example
