// reservoir-bench table 7: the mixed workload of the rvector thesis (mixed.hpp), one cell per
// iteration count, element type and container, run through the tour's cell runner.
#include "table_mixed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "platform.hpp"
#include "tour.hpp"

namespace reservoir::bench::mixed {

std::string run_child(const std::string& container, const std::string& type,
                      std::uint64_t iterations, std::uint64_t seed) {
  Stats s;
  if (!run_named(container, type, iterations, seed, &s)) {
    throw std::invalid_argument("mixed: unknown container '" + container + "' or type '" + type +
                                "'");
  }
  std::string line = fmt::format("ok total={:.9g}", s.total_seconds);
  for (int a = 0; a < kActions; ++a) {
    line += fmt::format(" {}={:.9g} n_{}={}", kActionNames[a], s.seconds[a], kActionNames[a],
                        s.count[a]);
  }
  line += fmt::format(" checksum={:016x} elements={} arrays={} peak={}", s.checksum, s.elements,
                      s.arrays, reservoir::bench::peak_rss());
  return line;
}

}  // namespace reservoir::bench::mixed

namespace reservoir::bench::tour {

namespace {

namespace mx = reservoir::bench::mixed;

void run_mixed(const Config& cfg, std::vector<Result>& out) {
  const mx::TableOptions& o = cfg.mixed;
  Progress progress(!cfg.quiet, o.iterations.size() * o.types.size() * o.containers.size() *
                                    static_cast<std::size_t>(cfg.reps));
  for (std::uint64_t iterations : o.iterations) {
    for (const std::string& type : o.types) {
      std::vector<Result> cells;
      std::vector<std::vector<std::array<double, mx::kActions>>> action_samples;
      for (const std::string& c : o.containers) {
        cells.emplace_back("mixed", c, type, iterations);
        action_samples.emplace_back();
      }
      // Interleaved: every repetition runs every contender once, so drift hits all alike.
      for (int rep = 0; rep < cfg.reps; ++rep) {
        for (std::size_t i = 0; i < cells.size(); ++i) {
          Result& r = cells[i];
          if (r.status != "ok") continue;
          progress.show(fmt::format("mixed: {} {} iterations rep {}/{} {}", type, iterations,
                                    rep + 1, cfg.reps, r.container));
          auto f = run_cell(cfg, "mixed", r.container, type, iterations, o.seed, &r.status);
          if (r.status != "ok") continue;
          r.samples.push_back(std::stod(f["total"]));
          std::array<double, mx::kActions> actions{};
          for (int a = 0; a < mx::kActions; ++a) {
            actions[a] = std::stod(f[mx::kActionNames[a]]);
            r.action_counts[a] = std::stoull(f[std::string("n_") + mx::kActionNames[a]]);
          }
          action_samples[i].push_back(actions);
          r.checksum = f["checksum"];
          r.elements = std::stoull(f["elements"]);
          r.arrays = std::stoull(f["arrays"]);
          r.peak_bytes = std::max<std::uint64_t>(r.peak_bytes, std::stoull(f["peak"]));
        }
      }
      // Every container ran the same operations: the final contents must agree.
      const Result* reference = nullptr;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        Result& r = cells[i];
        summarize(r, iterations);
        r.peak_bytes = r.peak_bytes > cfg.idle_peak ? r.peak_bytes - cfg.idle_peak : 0;
        for (int a = 0; a < mx::kActions; ++a) {
          std::vector<double> s;
          for (const auto& rep : action_samples[i])
            s.push_back(rep[a]);
          r.action_seconds[a] = median(std::move(s));
        }
        if (r.status != "ok") continue;
        if (reference == nullptr) {
          reference = &r;
        } else if (r.checksum != reference->checksum || r.elements != reference->elements) {
          r.status = fmt::format("{}: final checksum {} differs from {}'s {}", kMixedDisagreement,
                                 r.checksum, reference->container, reference->checksum);
        }
      }
      for (Result& r : cells)
        out.push_back(std::move(r));
    }
  }
  progress.done();
}

void print_mixed(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print(
      "7. Mixed workload (rvector thesis): arrays of arrays created, copied, grown, shrunk and\n"
      "   edited; time in total (median of {} interleaved reps) and spent in each action, peak "
      "above\n   an idle child; (x) = std::vector's total / this total (2.00x: half the time)\n\n",
      cfg.reps);
  fmt::print("{:>8} {:>6} {:>9} {:>11} {:>9}", "type", "iter", "container", "total", "(x)");
  for (const char* a : mx::kActionNames)
    fmt::print(" {:>9}", a);
  fmt::print(" {:>10}\n", "peak");
  for (const Result& r : rs) {
    if (r.table != "mixed") continue;
    fmt::print("{:>8} {:>6} {:>9}", r.type, r.size, r.container);
    if (r.status != "ok") {
      fmt::print(" {}\n", r.status);
      continue;
    }
    const Result* vec = find(rs, "mixed", "vector", r.type, r.size);
    const std::string ratio = vec && vec != &r && vec->status == "ok" && r.seconds > 0
                                  ? fmt::format("{:.2f}x{}", vec->seconds / r.seconds,
                                                vec->unstable || r.unstable ? " ?" : "")
                                  : "";
    fmt::print(" {:>11} {:>9}", format_seconds(r.seconds) + (r.unstable ? " ?" : ""), ratio);
    for (double s : r.action_seconds)
      fmt::print(" {:>9}", s > 0 ? format_seconds(s) : std::string("-"));
    fmt::print(" {:>10}\n", format_bytes(r.peak_bytes));
  }
  fmt::print("\n");
}

}  // namespace

const Table kMixedTable = {"mixed", run_mixed, print_mixed};

}  // namespace reservoir::bench::tour
