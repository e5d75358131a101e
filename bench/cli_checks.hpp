// The bench's checks of number options that CLI11 does not make itself.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <string>

#include "parse.hpp"

namespace reservoir::bench {

// A number option's check: one finite number within [lo, hi]. CLI::Range alone lets "nan" pass
// (no comparison with NaN fails), which would turn a budget or a threshold off.
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator([lo, hi](std::string& text) { return finite_in_range(text, lo, hi); },
                        fmt::format("FLOAT in [{:g} - {:g}]", lo, hi));
}

}  // namespace reservoir::bench
