// reservoir-bench compare: each cell's change in its ratio to its table's baseline.
#include "tour.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "cli_checks.hpp"

namespace reservoir::bench::tour {

namespace {

using nlohmann::json;

//   reservoir-bench compare BASE.json NEW.json [--threshold PCT]
// Every cell's ratio to its table's baseline in both files, and the change of that ratio, so that
// runs on different machines compare. Only the library's own contenders decide the exit code
// (is_own); the reference rows are shown. Exit 1 if a stable gated cell got worse by more than
// PCT percent, 2 on bad input, 0 otherwise (see docs/bench.md).

// How one table is compared: the row every other row is divided by, and the figure.
struct TableRule {
  const char* table;
  const char* baseline;  // nullptr: each row's own (the bulk table's memset / memcpy)
  const char* figure;    // seconds, peak_bytes, or latency_ns/p99
  bool gated;            // false: shown only (a tail percentile moves more than any threshold)
};
constexpr TableRule kRules[] = {
    {"memory", "vector", "peak_bytes", true},
    {"throughput", "vector", "seconds", true},
    {"latency", "vector", "latency_ns/p99", false},
    {"concurrent", "vector_mutex", "seconds", true},
    {"collatz", "vector_shared_mutex", "seconds", true},
    {"mixed", "vector", "seconds", true},
    {"many", "vector", "seconds", true},
    {"bulk", nullptr, "seconds", true},
};
// Tables with no single figure to compare: named in the output, never read.
constexpr const char* kNotCompared[] = {"timeline"};

const TableRule* rule_for(const std::string& table) {
  for (const TableRule& r : kRules) {
    if (table == r.table) return &r;
  }
  return nullptr;
}

// The library's own contenders: DynArray, ArenaResource, ConcurrentDynArray in every flavour, and
// DynArray's bulk operations. Everything else (std::vector and its variants, std::deque, the
// floors, peers such as tbb::concurrent_vector) is a reference row.
bool is_own(const std::string& table, const std::string& container) {
  if (table == "bulk") return container != "memset" && container != "memcpy";
  return container == "dynarray" || container == "pmr_arena" ||
         container.rfind("concurrent_dynarray", 0) == 0;
}

struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Cell {
  double ratio = 0;  // speed: baseline's figure / this one's (> 1: faster); memory: peak / base's
  bool unstable = false;
};
using CellKey = std::tuple<std::string, std::string, std::string, double, double>;

struct FileCells {
  std::map<CellKey, Cell> cells;
  std::set<std::string> not_compared;  // tables present that compare skips
  int below_resolution = 0;            // memory rows of data too small for a peak to mean much
};

// The JSON key whose value starts before byte `at`: the last "name": before it, or "".
std::string key_before(const std::string& text, std::size_t at) {
  if (at == 0 || text.empty()) return "";
  const std::size_t colon = text.rfind(':', std::min(at, text.size()) - 1);
  if (colon == std::string::npos) return "";
  const std::size_t close = text.rfind('"', colon);
  if (close == std::string::npos || close == 0) return "";
  const std::size_t open = text.rfind('"', close - 1);
  return open == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

std::string row_name(const json& r) {
  const double size = r.value("size", 0.0);
  std::string name = fmt::format(
      "{}/{}/{}/{}", r.value("table", "?"), r.value("container", "?"), r.value("type", "?"),
      size >= 0 && size < 1.8e19 ? rb::format_count(static_cast<std::uint64_t>(size)) : "?");
  if (r.contains("threads")) name += fmt::format(" threads {}", r["threads"].dump());
  return name;
}

// The number at `path` ("seconds", "latency_ns/p99") in row r; BadInput unless it is a finite
// number, and positive for a time (a zero or negative time would switch the check off).
double figure(const json& r, std::string_view path) {
  const json* v = &r;
  std::string_view rest = path;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string key(rest.substr(0, slash));
    if (!v->is_object() || !v->contains(key)) {
      throw BadInput(fmt::format("{}: no key {}", row_name(r), path));
    }
    v = &(*v)[key];
    rest = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  }
  if (!v->is_number()) {
    throw BadInput(fmt::format("{}: key {} is {}, not a number", row_name(r), path, v->dump()));
  }
  const double x = v->get<double>();
  const bool time = path == "seconds";
  if (!std::isfinite(x) || x < 0 || (time && x == 0)) {
    throw BadInput(fmt::format("{}: key {} is {}: it must be a finite {} number", row_name(r), path,
                               v->dump(), time ? "positive" : "non-negative"));
  }
  return x;
}

FileCells read_cells(const json& doc) {
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array()) {
    throw BadInput("no \"results\" array");
  }
  FileCells out;
  std::map<CellKey, const json*> ok_rows;
  for (const json& r : doc["results"]) {
    if (!r.is_object() || !r.contains("table") || !r["table"].is_string()) {
      throw BadInput(fmt::format("a result without a table: {}", r.dump().substr(0, 80)));
    }
    const std::string table = r["table"].get<std::string>();
    if (!rule_for(table)) {
      out.not_compared.insert(table);
      continue;
    }
    if (r.value("status", "") != "ok") continue;
    for (const char* key : {"container", "type"}) {
      if (!r.contains(key) || !r[key].is_string()) {
        throw BadInput(fmt::format("{}: no string key {}", row_name(r), key));
      }
    }
    const double size = figure(r, "size");
    const double threads = r.contains("threads") ? figure(r, "threads") : 0.0;
    ok_rows[CellKey{table, r["container"].get<std::string>(), r["type"].get<std::string>(), size,
                    threads}] = &r;
  }
  for (const auto& [key, row] : ok_rows) {
    const json& r = *row;
    const TableRule& rule = *rule_for(std::get<0>(key));
    const double mine = figure(r, rule.figure);
    const std::string base_name = rule.baseline ? rule.baseline : bulk_floor(std::get<1>(key));
    if (std::get<1>(key) == base_name) continue;
    auto base_key = key;
    std::get<1>(base_key) = base_name;
    const auto b = ok_rows.find(base_key);
    if (b == ok_rows.end()) continue;
    const double base = figure(*b->second, rule.figure);
    Cell c;
    if (rule.figure == std::string_view("peak_bytes")) {
      const bool small = r.contains("data_bytes") &&
                         figure(r, "data_bytes") < static_cast<double>(kPeakResolution);
      if (small || base <= 0 || mine <= 0) {
        ++out.below_resolution;
        continue;
      }
      c.ratio = mine / base;
    } else {
      if (mine <= 0 || base <= 0) {  // a latency percentile of 0 ns: under the clock's tick
        ++out.below_resolution;
        continue;
      }
      c.ratio = base / mine;
      c.unstable = r.value("unstable", false) || b->second->value("unstable", false);
    }
    out.cells[key] = c;
  }
  return out;
}

// Reads and checks one file; BadInput says what is wrong (the key, where a number is bad).
FileCells load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput("cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  json doc;
  try {
    doc = json::parse(s);
  } catch (const json::parse_error& e) {
    const std::size_t at = e.byte > 0 ? e.byte - 1 : 0;
    const std::string key = key_before(s, at);
    const bool nonfinite = s.compare(at, 3, "NaN") == 0 || s.compare(at, 8, "Infinity") == 0 ||
                           s.compare(at, 9, "-Infinity") == 0;
    throw BadInput(fmt::format(
        "not JSON at byte {}{}{}: {}", e.byte, key.empty() ? "" : fmt::format(" (key {})", key),
        nonfinite ? ", NaN and Infinity are not JSON numbers (Python: json.dump(allow_nan=False))"
                  : "",
        e.what()));
  }
  return read_cells(doc);
}

}  // namespace

int compare_main(int argc, char** argv) {
  CLI::App app{"reservoir-bench compare: each cell's change in its ratio to its table's baseline",
               "reservoir-bench compare"};
  std::string base_file, new_file;
  double threshold = 10;
  app.add_option("BASE", base_file, "JSON written by reservoir-bench --json")->required();
  app.add_option("NEW", new_file, "JSON written by reservoir-bench --json")->required();
  app.add_option("--threshold", threshold,
                 "Percent a gated cell's ratio may worsen before the comparison fails")
      ->capture_default_str()
      ->check(rb::finite_range(0, 1e6));
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  FileCells files[2];
  const std::string* names[2] = {&base_file, &new_file};
  for (int i = 0; i < 2; ++i) {
    try {
      files[i] = load(*names[i]);
    } catch (const std::exception& e) {  // BadInput, or a JSON type error in a malformed file
      std::fprintf(stderr, "reservoir-bench compare: %s: %s\n", names[i]->c_str(), e.what());
      return 2;
    }
  }
  fmt::print(
      "ratio: the baseline's time / the cell's (above 1: faster than its table's baseline); "
      "memory:\n  the cell's peak / std::vector's (below 1: smaller). latency: of p99. change: "
      "how much\n  better (+) or worse (-) NEW's ratio is than BASE's. Gated (own): the library's "
      "contenders;\n  ref rows (std::vector variants, std::deque, floors, peers) and latency are "
      "shown, never fail.\n\n");
  fmt::print("{:<11}{:<11}{:>6}{:>4}  {:<28}{:>9}{:>9}{:>9}\n", "table", "type", "size", "T",
             "container", "base", "new", "change");
  int regressions = 0, compared = 0, gated = 0, ref_worse = 0;
  for (const auto& [key, nc] : files[1].cells) {
    const auto bc = files[0].cells.find(key);
    if (bc == files[0].cells.end()) continue;
    const auto& [table, container, type, size, threads] = key;
    const bool memory = table == "memory";
    const double change =
        memory ? (bc->second.ratio / nc.ratio - 1) * 100 : (nc.ratio / bc->second.ratio - 1) * 100;
    const bool unstable = nc.unstable || bc->second.unstable;
    const bool worse = change < -threshold;
    const bool gates = rule_for(table)->gated && is_own(table, container);
    std::string note;
    if (!gates) {
      note = is_own(table, container) ? "  shown" : "  ref";
      if (worse) ++ref_worse, note += ", worse (not counted)";
    } else if (worse) {
      note = unstable ? "  worse (unstable: not counted)" : "  REGRESSED";
    } else if (unstable) {
      note = "  ?";
    }
    if (gates && worse && !unstable) ++regressions;
    gated += gates ? 1 : 0;
    ++compared;
    fmt::print("{:<11}{:<11}{:>6}{:>4}  {:<28}{:>9.3f}{:>9.3f}{:>+8.1f}%{}\n", table, type,
               rb::format_count(static_cast<std::uint64_t>(size)),
               threads > 0 ? fmt::format("{:g}", threads) : std::string("-"), container,
               bc->second.ratio, nc.ratio, change, note);
  }
  std::set<std::string> skipped = files[0].not_compared;
  skipped.insert(files[1].not_compared.begin(), files[1].not_compared.end());
  for (const std::string& t : skipped) {
    const bool known =
        std::find(std::begin(kNotCompared), std::end(kNotCompared), t) != std::end(kNotCompared);
    fmt::print("not compared: table {} ({})\n", t,
               known ? "a curve, no single figure" : "not a table compare knows");
  }
  if (const int n = files[0].below_resolution + files[1].below_resolution; n > 0) {
    fmt::print("not compared: {} rows below resolution (memory data under {}, or 0 ns)\n", n,
               format_bytes(kPeakResolution));
  }
  if (compared == 0) {
    std::fprintf(stderr, "reservoir-bench compare: the two files have no cell in common\n");
    return 2;
  }
  fmt::print(
      "\n{} cells compared, {} regressed by more than {:g}% of {} gated{}; {} not gated "
      "worse (not counted)\n",
      compared, regressions, threshold, gated, regressions > 0 ? " (exit 1)" : "", ref_worse);
  return regressions > 0 ? 1 : 0;
}

}  // namespace reservoir::bench::tour
