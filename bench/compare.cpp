// reservoir-bench compare: each cell's change in its ratio to its table's baseline.
#include "tour.hpp"

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>
#include <tuple>

#include "cli_checks.hpp"
#include "json_mini.hpp"

namespace reservoir::bench::tour {

namespace {

//   reservoir-bench compare BASE.json NEW.json [--threshold PCT]
// Every timed cell's ratio to its table's baseline (std::vector; vector_mutex, vector_shared_mutex
// for tables 4 and 5) and every memory cell's peak relative to std::vector's, in both files; the
// change of that ratio, so runs on different machines compare. Exit 1 if a stable cell got worse
// by more than PCT percent, 2 on bad input, 0 otherwise.

struct CompareCell {
  double ratio = 0;  // > 1: better than the baseline (speed), or peak / vector's peak (memory)
  bool unstable = false;
};

using CellKey = std::tuple<std::string, std::string, std::string, double, double>;

std::map<CellKey, CompareCell> compare_cells(const rb::json::Value& doc) {
  std::map<CellKey, CompareCell> out;
  const auto& results = doc["results"].arr;
  auto key_of = [](const rb::json::Value& r, const std::string& container) {
    return CellKey{r["table"].str, container, r["type"].str, r["size"].num,
                   r.has("threads") ? r["threads"].num : 0.0};
  };
  std::map<CellKey, const rb::json::Value*> by_key;
  for (const auto& r : results) {
    if (r["status"].str == "ok") by_key[key_of(r, r["container"].str)] = &r;
  }
  for (const auto& [key, r] : by_key) {
    const std::string& table = std::get<0>(key);
    if (table == "latency") continue;
    const std::string base_name = table == "concurrent" ? "vector_mutex"
                                  : table == "collatz"  ? "vector_shared_mutex"
                                                        : "vector";
    if (std::get<1>(key) == base_name) continue;
    auto bk = key;
    std::get<1>(bk) = base_name;
    const auto b = by_key.find(bk);
    if (b == by_key.end()) continue;
    const rb::json::Value& base = *b->second;
    CompareCell c;
    if (table == "memory") {
      if (base["peak_bytes"].num <= 0) continue;
      c.ratio = (*r)["peak_bytes"].num / base["peak_bytes"].num;
    } else {
      if ((*r)["seconds"].num <= 0) continue;
      c.ratio = base["seconds"].num / (*r)["seconds"].num;
      c.unstable = (r->has("unstable") && (*r)["unstable"].b) ||
                   (base.has("unstable") && base["unstable"].b);
    }
    out[key] = c;
  }
  return out;
}

}  // namespace

int compare_main(int argc, char** argv) {
  CLI::App app{"reservoir-bench compare: each cell's change in its ratio to std::vector",
               "reservoir-bench compare"};
  std::string base_file, new_file;
  double threshold = 10;
  app.add_option("BASE", base_file, "JSON written by reservoir-bench --json")->required();
  app.add_option("NEW", new_file, "JSON written by reservoir-bench --json")->required();
  app.add_option("--threshold", threshold, "Percent a ratio may worsen before it counts")
      ->capture_default_str()
      ->check(rb::finite_range(0, 1e6));
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::map<CellKey, CompareCell> cells[2];
  const std::string* files[2] = {&base_file, &new_file};
  for (int i = 0; i < 2; ++i) {
    std::ifstream in(*files[i]);
    if (!in) {
      std::fprintf(stderr, "reservoir-bench compare: cannot read %s\n", files[i]->c_str());
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    try {
      cells[i] = compare_cells(rb::json::parse(text.str()));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reservoir-bench compare: %s: not a reservoir-bench JSON file (%s)\n",
                   files[i]->c_str(), e.what());
      return 2;
    }
  }
  fmt::print("{:<11}{:<11}{:>6}{:>4}  {:<22}{:>10}{:>10}{:>10}\n", "table", "type", "size", "T",
             "container", "base", "new", "change");
  int regressions = 0, compared = 0;
  for (const auto& [key, nc] : cells[1]) {
    const auto bc = cells[0].find(key);
    if (bc == cells[0].end()) continue;
    const auto& [table, container, type, size, threads] = key;
    const bool memory = table == "memory";
    // Positive change: better. Memory ratios are better when smaller.
    const double change =
        memory ? (bc->second.ratio / nc.ratio - 1) * 100 : (nc.ratio / bc->second.ratio - 1) * 100;
    const bool unstable = nc.unstable || bc->second.unstable;
    const bool worse = change < -threshold;
    if (worse && !unstable) ++regressions;
    ++compared;
    fmt::print("{:<11}{:<11}{:>6}{:>4}  {:<22}{:>10.3f}{:>10.3f}{:>+9.1f}%{}\n", table, type,
               rb::format_count(static_cast<std::uint64_t>(size)),
               threads > 0 ? fmt::format("{:g}", threads) : std::string("-"), container,
               bc->second.ratio, nc.ratio, change,
               worse ? (unstable ? "  worse (unstable: not counted)" : "  REGRESSED")
                     : (unstable ? "  ?" : ""));
  }
  if (compared == 0) {
    std::fprintf(stderr, "reservoir-bench compare: the two files have no cell in common\n");
    return 2;
  }
  fmt::print("\n{} cells compared, {} regressed by more than {:g}%\n", compared, regressions,
             threshold);
  return regressions > 0 ? 1 : 0;
}

}  // namespace reservoir::bench::tour
