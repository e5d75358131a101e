#include "table_mixed.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <sstream>

#include <reservoir/pal.hpp>

#include "parse.hpp"
#include "platform.hpp"

namespace reservoir::bench::mixed {
namespace {

namespace pal = reservoir::pal;
namespace rb = reservoir::bench;

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(ch));
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

void run_cell(Cell& cell, std::uint64_t seed) {
  rb::ProcessResult r;
  const std::vector<std::string> args = {"--child-mixed", cell.container, cell.type,
                                         std::to_string(cell.iterations), std::to_string(seed)};
  if (std::error_code ec = rb::run_process(rb::self_reexec_path(), args, &r)) {
    cell.status = "cannot start child: " + pal::describe(ec);
    return;
  }
  const std::string line = r.output.substr(0, r.output.find('\n'));
  if (r.exited && r.exit_code == 0 && line.rfind("ok", 0) == 0) {
    auto f = parse_fields(line);
    Stats& s = cell.stats;
    s.total_seconds = std::strtod(f["total"].c_str(), nullptr);
    for (int a = 0; a < kActions; ++a) {
      s.seconds[a] = std::strtod(f[kActionNames[a]].c_str(), nullptr);
      s.count[a] = std::strtoull(f[std::string("n_") + kActionNames[a]].c_str(), nullptr, 10);
    }
    s.checksum = std::strtoull(f["checksum"].c_str(), nullptr, 16);
    s.elements = std::strtoull(f["elements"].c_str(), nullptr, 10);
    s.arrays = std::strtoull(f["arrays"].c_str(), nullptr, 10);
    cell.peak_bytes = std::strtoull(f["peak"].c_str(), nullptr, 10);
    return;
  }
  if (line.rfind("error ", 0) == 0) {
    cell.status = line.substr(6);
  } else if (r.signal) {
    cell.status = fmt::format("killed by signal {}{}", r.signal,
                              r.signal == 9 ? " (SIGKILL: out of memory?)" : "");
  } else if (r.exception) {
    cell.status = fmt::format("died of exception 0x{:08X}", r.exception);
  } else {
    cell.status = fmt::format("exited with code {}", r.exit_code);
  }
}

}  // namespace

int child_main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "reservoir-bench: bad --child-mixed arguments\n");
    return 2;
  }
  try {
    Stats s;
    if (!run_named(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10),
                   std::strtoull(argv[5], nullptr, 10), &s)) {
      std::printf("error unknown container or type\n");
      return 3;
    }
    std::string line = fmt::format("ok total={:.9g}", s.total_seconds);
    for (int a = 0; a < kActions; ++a) {
      line += fmt::format(" {}={:.9g} n_{}={}", kActionNames[a], s.seconds[a], kActionNames[a],
                          s.count[a]);
    }
    line += fmt::format(" checksum={:016x} elements={} arrays={} peak={}\n", s.checksum, s.elements,
                        s.arrays, rb::peak_rss());
    std::fputs(line.c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    std::printf("error %s\n", what.c_str());
    return 3;
  }
}

std::vector<Cell> run_table(const TableOptions& options, bool* consistent) {
  std::vector<Cell> cells;
  *consistent = true;
  const bool progress = options.progress && rb::stderr_is_terminal();
  for (std::uint64_t iterations : options.iterations) {
    for (const std::string& type : options.types) {
      const std::size_t first = cells.size();
      for (const std::string& container : options.containers) {
        Cell cell;
        cell.container = container;
        cell.type = type;
        cell.iterations = iterations;
        if (progress) {
          std::fprintf(stderr, "\r\033[Kmixed: %s %llu iterations %s", type.c_str(),
                       static_cast<unsigned long long>(iterations), container.c_str());
        }
        run_cell(cell, options.seed);
        cells.push_back(std::move(cell));
      }
      // Every container ran the same operations: the final contents must agree.
      const Cell* reference = nullptr;
      for (std::size_t i = first; i < cells.size(); ++i) {
        if (cells[i].status != "ok") continue;
        if (reference == nullptr) {
          reference = &cells[i];
        } else if (cells[i].stats.checksum != reference->stats.checksum ||
                   cells[i].stats.elements != reference->stats.elements) {
          cells[i].status =
              fmt::format("error: final checksum {:016x} differs from {}'s {:016x}",
                          cells[i].stats.checksum, reference->container, reference->stats.checksum);
          *consistent = false;
        }
      }
    }
  }
  if (progress) std::fprintf(stderr, "\r\033[K");
  return cells;
}

void print_table(const std::vector<Cell>& cells) {
  fmt::print(
      "\n   Mixed workload (rvector thesis): V<V<T>> created, copied, grown, shrunk and edited;\n"
      "   seconds in total and per action, peak RSS; (x) = vector's total / this total\n\n");
  fmt::print("{:>8} {:>6} {:>9} {:>9} {:>7}", "type", "iter", "container", "total", "(x)");
  for (const char* a : kActionNames)
    fmt::print(" {:>9}", a);
  fmt::print(" {:>10}\n", "peak");
  for (const Cell& c : cells) {
    fmt::print("{:>8} {:>6} {:>9}", c.type, c.iterations, c.container);
    if (c.status != "ok") {
      fmt::print(" {}\n", c.status);
      continue;
    }
    const Cell* vec = nullptr;
    for (const Cell& o : cells) {
      if (o.container == "vector" && o.type == c.type && o.iterations == c.iterations &&
          o.status == "ok") {
        vec = &o;
      }
    }
    const std::string ratio =
        vec && c.stats.total_seconds > 0
            ? fmt::format("{:.2f}x", vec->stats.total_seconds / c.stats.total_seconds)
            : "";
    fmt::print(" {:>9.3f} {:>7}", c.stats.total_seconds, ratio);
    for (double s : c.stats.seconds)
      fmt::print(" {:>9.3f}", s);
    fmt::print(" {:>10}\n", format_bytes(c.peak_bytes));
  }
}

std::string json_rows(const std::vector<Cell>& cells) {
  std::string out;
  for (const Cell& c : cells) {
    if (!out.empty()) out += ",\n    ";
    out += fmt::format(
        "{{\"table\": \"mixed\", \"container\": {}, \"type\": {}, \"iterations\": {}, "
        "\"status\": {}",
        json_escape(c.container), json_escape(c.type), c.iterations, json_escape(c.status));
    if (c.status == "ok") {
      out += fmt::format(", \"seconds\": {:.9g}, \"peak_bytes\": {}, \"checksum\": \"{:016x}\"",
                         c.stats.total_seconds, c.peak_bytes, c.stats.checksum);
      out += fmt::format(", \"elements\": {}, \"arrays\": {}, \"actions\": {{", c.stats.elements,
                         c.stats.arrays);
      for (int a = 0; a < kActions; ++a) {
        out += fmt::format("{}\"{}\": {{\"count\": {}, \"seconds\": {:.9g}}}", a ? ", " : "",
                           kActionNames[a], c.stats.count[a], c.stats.seconds[a]);
      }
      out += "}";
    }
    out += "}";
  }
  return out;
}

}  // namespace reservoir::bench::mixed
