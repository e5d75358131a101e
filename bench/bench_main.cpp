// reservoir-bench: peak memory, throughput and append latency of DynArray against std::vector and
// other containers (tour.hpp). This file parses the options and runs the tables asked for.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "cli_checks.hpp"
#include "clock.hpp"
#include "many_arrays.hpp"
#include "parse.hpp"
#include "timeline.hpp"
#include "tour.hpp"

namespace {

namespace rb = reservoir::bench;

template <class E, std::size_t N>
std::vector<E> parse_names(const std::string& list, const E (&all)[N], const char* what) {
  std::vector<E> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto e = rb::parse_enum(item, all);
    if (!e) {
      std::string known;
      for (E x : all)
        known += std::string(known.empty() ? "" : ", ") + rb::name(x);
      throw CLI::ValidationError(what, "unknown '" + item + "' (known: " + known + ")");
    }
    out.push_back(*e);
  }
  return out;
}

// True if the two paths name one file: the same path once made absolute and normal, or (where
// both exist) the same file by the OS's identity, through links too.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec)) return true;
  auto normal = [](const std::string& p) {
    std::error_code e;
    fs::path full = fs::weakly_canonical(fs::absolute(p, e), e);
    return e ? fs::path(p).lexically_normal() : full;
  };
  return normal(a) == normal(b);
}

// Every table's contenders, for --help: the names the tables and the result files use.
std::string contenders_help() {
  namespace tour = reservoir::bench::tour;
  auto list = [](const auto& names) {
    std::string out;
    for (const auto& n : names) {
      if constexpr (std::is_same_v<std::decay_t<decltype(n)>, rb::Container>) {
        out += (out.empty() ? "" : ", ") + std::string(rb::name(n));
      } else {
        out += (out.empty() ? "" : ", ") + std::string(n);
      }
    }
    return out;
  };
  return fmt::format(
      "Contenders, per table:\n"
      "  1-3 memory, throughput, latency (--containers): {}\n"
      "  4 concurrent: {} (tbb_concurrent_vector only when built with TBB)\n"
      "  5 collatz: concurrent_dynarray, concurrent_dynarray_writer, concurrent_dynarray_blocks, "
      "vector_shared_mutex\n"
      "  6 timeline: {}\n"
      "  7 mixed: {}\n"
      "  8 many: {}\n"
      "  9 bulk (--only bulk): {}",
      list(rb::kAllContainers), list(rb::kConcurrentContainers), list(rb::kTimelineContainers),
      list(rb::mixed::kContainers), list(rb::kManyArraysContainers),
      list(tour::bulk_operation_names()));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace reservoir::bench::tour;
  if (argc > 1 && std::string_view(argv[1]) == "--child") return child_main(argc, argv);
  if (argc > 1 && std::string_view(argv[1]) == "compare") return compare_main(argc, argv);

  CLI::App app{
      "reservoir-bench: peak memory, throughput and append latency of reservoir::DynArray "
      "against std::vector, std::vector with reserve, and std::deque.\nRun without "
      "arguments for the quick tour (about a minute on 2 cores: --budget 70 --cell-budget 20).\n"
      "reservoir-bench compare BASE.json NEW.json [--threshold PCT]: each cell's change in its "
      "ratio to std::vector; exit 1 on a regression.\n"
      "Exit codes: 0 done; 1 a run that failed (a cell that failed or crashed, a result file not "
      "written, containers that disagree; cells skipped or timed out by a budget are not "
      "failures); 2 a usage error (bad option or value, an output path that cannot be written, "
      "sizes that cannot fit); 3 no cell measured anything (every one skipped or timed out).\n" +
      contenders_help()};
  Config cfg;
  std::string sizes = "1e3,1e6,1e7",
              containers = "dynarray,vector,vector_reserve,deque,vector_populate,floor,floor_huge",
              types = "int",  // the quick tour; --types int,unique_ptr,string for all
      reserve, only;
  // The library's defaults (the first step one page, or the page size where pages are larger).
  std::string granule = std::to_string(std::max<std::size_t>(reservoir::kDefaultCommitGranule,
                                                             reservoir::pal::page_size())),
              max_step = std::to_string(reservoir::kDefaultMaxCommitStep);
  // A text option, shown with its default in --help.
  auto text_option = [&app](const char* name, std::string& value, const std::string& help) {
    app.add_option(name, value, help)->capture_default_str();
  };
  text_option("--sizes", sizes, "Element counts, e.g. 1e3,1e6,1e9 or 1K,1M,1G");
  app.add_option(
         "--containers", containers,
         "Contenders of tables 1-3, any of: " +
             [] {
               std::string all;
               for (rb::Container c : rb::kAllContainers)
                 all += (all.empty() ? "" : ",") + std::string(rb::name(c));
               return all;
             }())
      ->capture_default_str();
  text_option("--types", types,
              "Element types: int,unique_ptr,string (the quick tour: int, so that it ends in "
              "about a minute)");
  app.add_option("--reps", cfg.reps, "Throughput repetitions per cell (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  text_option("--granule", granule, "DynArray commit granule, e.g. 4K, 64K, 2M");
  text_option("--max-step", max_step, "DynArray largest commit step (= --granule: fixed steps)");
  app.add_option("--reserve", reserve,
                 "DynArray reservation in bytes, e.g. 1G (default: the library's 64 GiB)");
  // The library's default differs by OS: the help names the one of the platform it runs on.
  const bool prefault_default = reservoir::ArenaOptions{}.prefault;
  auto* prefault_on = app.add_flag_callback(
      "--prefault", [&cfg] { cfg.prefault = true; },
      std::string("DynArray: populate each committed step ahead of the appender") +
          (prefault_default ? " (the library's default here)" : ""));
  app.add_flag_callback(
         "--no-prefault", [&cfg] { cfg.prefault = false; },
         std::string("DynArray: let page faults populate the committed steps") +
             (prefault_default ? "" : " (the library's default here)"))
      ->excludes(prefault_on);
  app.add_option("--huge-pages", cfg.huge_pages,
                 "DynArray: transparent huge pages past 4 MiB: auto (the library default: where "
                 "they pay), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  std::string threads = "auto";
  text_option("--threads", threads,
              "Thread counts for the concurrent-append and Collatz tables (auto: 1, 2, 4 and "
              "the powers of two up to the machine's core count, then the core count; empty "
              "or 0: skip them)");
  bool pin = false;
  app.add_flag("--pin", pin, "Concurrent table: pin thread t to CPU t (Linux; elsewhere ignored)");
  app.add_option("--only", only,
                 "Tables to run, e.g. latency,memory (memory, throughput, latency, concurrent, "
                 "collatz, timeline, mixed, many; and bulk, not in the default run)");
  app.add_option("--cell-budget", cfg.cell_budget,
                 "Seconds one cell's child may run before it is ended (default: 20 for the "
                 "quick tour, 60 when --sizes, --types, --containers, --reps, --only, --threads, "
                 "--mixed-* or --many-arrays chooses what to measure)")
      ->check(rb::finite_range(1, 86400));
  app.add_option("--budget", cfg.total_budget,
                 "Seconds for the whole run; cells after it are skipped (0: no limit; default: 70 "
                 "for the quick tour, 0 when options choose what to measure)")
      ->check(rb::finite_range(0, 1e7));
  std::string mixed_iterations = "100";
  text_option("--mixed-iterations", mixed_iterations,
              "Mixed table: iteration counts, e.g. 300 or 1000,3000");
  std::string mixed_types = "int,string,array10,heap,all";
  text_option("--mixed-types", mixed_types,
              "Mixed table: element types (int,string,array10,heap; all: the four at once)");
  app.add_option("--many-arrays", cfg.many_arrays, "Many-arrays table: arrays alive at once")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}));
  std::string batch_elements = "2e6";
  text_option("--batch-elements", batch_elements,
              "Throughput cells smaller than half this repeat their build until about this many "
              "elements are appended, latency cells until a twentieth of it (a smoke run can "
              "make it small)");
  app.add_option("--json", cfg.json, "Write results as JSON (ns, bytes) to FILE");
  app.add_option("--csv", cfg.csv, "Write results as CSV to FILE");
  app.add_option("--markdown", cfg.markdown, "Write results as Markdown to FILE");
  app.add_flag("-q,--quiet", cfg.quiet, "Print no tables or progress (files only)");
  try {
    app.parse(argc, argv);
    // A parse error names the option it came from.
    auto counts = [](const char* option, const std::string& text) {
      try {
        return rb::parse_count_list(text);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(option) + ": " + e.what());
      }
    };
    cfg.sizes = counts("--sizes", sizes);
    cfg.mixed.iterations = counts("--mixed-iterations", mixed_iterations);
    try {
      cfg.batch_elements = rb::parse_count(batch_elements);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--batch-elements: ") + e.what());
    }
    cfg.mixed.types.clear();
    for (std::string_view rest = mixed_types; !rest.empty();) {
      const auto comma = rest.find(',');
      const std::string name(rest.substr(0, comma));
      if (std::find(std::begin(rb::mixed::kTypes), std::end(rb::mixed::kTypes), name) ==
          std::end(rb::mixed::kTypes)) {
        throw std::invalid_argument("--mixed-types: unknown type '" + name + "'");
      }
      cfg.mixed.types.push_back(name);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    cfg.containers = parse_names(containers, rb::kAllContainers, "--containers");
    cfg.types = parse_names(types, rb::kAllTypes, "--types");
    cfg.granule = rb::parse_bytes(granule);
    cfg.max_step = rb::parse_bytes(max_step);
    if (!reserve.empty()) cfg.reserve_bytes = rb::parse_bytes(reserve);
    if (!only.empty()) {
      std::vector<std::string> known = cfg.tables;
      known.push_back("bulk");
      cfg.tables.clear();
      std::stringstream in(only);
      std::string item;
      while (std::getline(in, item, ',')) {
        if (std::find(known.begin(), known.end(), item) == known.end()) {
          throw std::invalid_argument("--only: unknown table '" + item +
                                      "' (known: memory, throughput, latency, concurrent, "
                                      "collatz, timeline, mixed, many, bulk)");
        }
        cfg.tables.push_back(item);
      }
    }
    if (pin) rb::request_pinning();  // inherited by the cells' child processes
    cfg.threads.clear();
    if (threads == "auto") {
      const std::uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
      for (std::uint64_t t = 1;
           t <= std::max<std::uint64_t>(4, std::min<std::uint64_t>(cores, 256)); t *= 2)
        cfg.threads.push_back(t);
      if (cores > cfg.threads.back() && cores <= 256) cfg.threads.push_back(cores);
    } else if (!threads.empty() && threads != "0") {
      std::vector<std::uint64_t> list;
      try {
        list = rb::parse_count_list(threads);
      } catch (const std::invalid_argument&) {
        throw std::invalid_argument(
            "--threads must be positive thread counts (e.g. 1,2,4; 0: no "
            "concurrent tables), not '" +
            threads + "'");
      }
      for (std::uint64_t t : list) {
        if (t > 256) throw std::invalid_argument("--threads: at most 256");
        cfg.threads.push_back(t);
      }
    }
    // The quick tour (what the options choose when none is given) is bounded so that it ends in
    // about a minute even on a busy 2-core machine; any run that chooses its own workload runs
    // to the end unless it gives budgets itself.
    bool quick_tour = true;
    for (const char* o : {"--sizes", "--containers", "--types", "--reps", "--only", "--threads",
                          "--mixed-iterations", "--mixed-types", "--many-arrays"}) {
      if (app.count(o) > 0) quick_tour = false;
    }
    if (app.count("--budget") == 0) cfg.total_budget = quick_tour ? 70 : 0;
    if (app.count("--cell-budget") == 0) cfg.cell_budget = quick_tour ? 20 : 60;
    // Sizes whose data alone exceeds the address space can never run: say so now, before a
    // child tries (and before n * bytes could overflow anything downstream).
    const double space = static_cast<double>(pal::address_space_size());
    for (std::uint64_t n : cfg.sizes) {
      for (rb::Type t : cfg.types) {
        const double bytes = static_cast<double>(n) * static_cast<double>(rb::element_size(t));
        if (space > 0 && bytes > space) {
          throw std::invalid_argument(fmt::format(
              "--sizes {}: {} elements of {} are {}, more than this process's address space "
              "({}): no cell could ever run (sizes beyond free memory are skipped per cell, "
              "with the reason)",
              rb::format_count(n), rb::format_count(n), rb::name(t),
              format_bytes(bytes >= 1.8e19 ? UINT64_MAX : static_cast<std::uint64_t>(bytes)),
              format_bytes(pal::address_space_size())));
        }
      }
    }
    // A DynArray reservation that cannot hold a cell's data fails every DynArray cell of that
    // size: say so now. The many-arrays table reserves it per array, for arrays far smaller
    // than a size: not checked when it is the only table.
    const bool many_only = cfg.tables.size() == 1 && cfg.tables.front() == "many";
    if (cfg.reserve_bytes != 0 && !many_only) {
      for (std::uint64_t n : cfg.sizes) {
        for (rb::Type t : cfg.types) {
          const double bytes = static_cast<double>(n) * static_cast<double>(rb::element_size(t));
          if (bytes > static_cast<double>(cfg.reserve_bytes)) {
            throw std::invalid_argument(fmt::format(
                "--reserve {}: {} elements of {} need {}, more than the reservation: every "
                "DynArray cell of that size would fail (give at least that, or leave --reserve "
                "out for the library's default)",
                reserve, rb::format_count(n), rb::name(t),
                format_bytes(static_cast<std::uint64_t>(bytes))));
          }
        }
      }
    }
    // Every output path is checked before the first cell, so that a long run never ends with
    // its results thrown away: each can be written, and no two name the same file (the later
    // file would replace the earlier one).
    const std::pair<const char*, const std::string*> outputs[] = {
        {"--json", &cfg.json}, {"--csv", &cfg.csv}, {"--markdown", &cfg.markdown}};
    for (std::size_t i = 0; i < std::size(outputs); ++i) {
      const auto& [option, path] = outputs[i];
      if (path->empty()) continue;
      for (std::size_t j = 0; j < i; ++j) {
        if (!outputs[j].second->empty() && same_file(*outputs[j].second, *path)) {
          throw std::invalid_argument(fmt::format(
              "{} {} and {} {} name the same file: one result file would replace the other; "
              "nothing was run",
              outputs[j].first, *outputs[j].second, option, *path));
        }
      }
      if (std::string why = check_writable(*path); !why.empty()) {
        throw std::invalid_argument(
            fmt::format("{} {}: cannot write there ({}); nothing was run", option, *path, why));
      }
    }
  } catch (const CLI::ParseError& e) {
    // CLI11 prints its message; its own exit codes differ per error kind (105, 109, ...): every
    // usage error exits with 2 here, --help with 0.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "reservoir-bench: %s\n", e.what());
    return 2;
  }
  if (cfg.granule % pal::page_size() != 0 || cfg.max_step % pal::page_size() != 0) {
    std::fprintf(stderr,
                 "reservoir-bench: --granule %s / --max-step %s: not a multiple of the page size "
                 "(%zu)\n",
                 granule.c_str(), max_step.c_str(), pal::page_size());
    return 2;
  }
  if (rb::self_executable_path().empty()) {
    std::fprintf(stderr, "reservoir-bench: cannot find my own executable to re-run it\n");
    return 1;
  }
  // No cell outlives the run: SIGTERM, SIGINT and SIGHUP end the running cell first (and a
  // SIGKILL, which no program sees, ends it through the process layer's parent-death watch).
  if (const std::error_code ec = rb::end_children_on_signals()) {
    std::fprintf(stderr, "reservoir-bench: cannot handle termination signals: %s\n",
                 pal::describe(ec).c_str());
    return 1;
  }

  // Read by every child (child_main): the cell budget.
  if (!rb::set_environment("RESERVOIR_BENCH_CELL_BUDGET", fmt::format("{:g}", cfg.cell_budget))) {
    std::fprintf(stderr, "reservoir-bench: cannot pass the cell budget to the cells\n");
    return 1;
  }
  cfg.ns_per_tick = rb::TickClock::calibrate();
  cfg.overhead_ticks = rb::TickClock::overhead_ticks();
  const std::uint64_t idle = idle_peak(cfg);
  const Context ctx = make_context(cfg, idle);
  if (!cfg.quiet) print_header(ctx);
  if (is_debug_build()) std::fprintf(stderr, "reservoir-bench: WARNING: debug build\n");

  cfg.idle_peak = idle;
  std::vector<Result> results;
  auto wanted = [&](const char* t) {
    return std::find(cfg.tables.begin(), cfg.tables.end(), t) != cfg.tables.end();
  };
  auto run = [&](const Table& table) {
    if (!wanted(table.name)) return;
    table.run(cfg, results);
    if (!cfg.quiet) table.print(cfg, results);
  };
  for (const Table* table :
       {&kMemoryTable, &kThroughputTable, &kLatencyTable, &kConcurrentTable, &kCollatzTable,
        &kTimelineTable, &kMixedTable, &kManyArraysTable, &kBulkTable}) {
    run(*table);
  }
  bool consistent = true;
  std::size_t failed = 0;
  for (const Result& r : results) {
    if (r.status.rfind(kMixedDisagreement, 0) == 0) consistent = false;
    if (cell_failed(r.status)) ++failed;
    if (r.status != "ok" && !cfg.quiet) {
      fmt::print("note: {} {} {} {}: {}\n", r.table, r.type, rb::format_count(r.size), r.container,
                 r.status);
    }
  }
  std::fflush(stdout);
  int rc = 0;
  auto report = [&](const char* option, const std::string& path, const std::string& why) {
    if (path.empty()) return;
    if (why.empty()) {
      if (!cfg.quiet) fmt::print("wrote {}\n", path);
      return;
    }
    std::fprintf(stderr, "reservoir-bench: %s %s: the results could not be written (%s)\n", option,
                 path.c_str(), why.c_str());
    rc = 1;
  };
  if (!cfg.json.empty()) report("--json", cfg.json, write_json(cfg.json, ctx, results));
  if (!cfg.csv.empty()) report("--csv", cfg.csv, write_csv(cfg.csv, results));
  if (!cfg.markdown.empty()) {
    report("--markdown", cfg.markdown, write_markdown(cfg.markdown, cfg, ctx, results));
  }
  if (!cfg.quiet) print_summary(cfg, ctx, results);
  std::fflush(stdout);
  if (!consistent) {
    std::fprintf(stderr, "reservoir-bench: mixed: containers disagree on the final contents\n");
    rc = 1;
  }
  if (failed > 0) {
    std::fprintf(stderr,
                 "reservoir-bench: %zu of %zu cells failed (the notes above say why); the "
                 "others' results stand\n",
                 failed, results.size());
    rc = 1;
  }
  // A run that measured nothing is not a result, even under --quiet: exit 3, saying why.
  const auto measured = std::find_if(results.begin(), results.end(),
                                     [](const Result& r) { return r.status == "ok"; });
  if (rc == 0 && measured == results.end()) {
    std::fprintf(stderr, "reservoir-bench: no cell measured anything: %s\n",
                 results.empty()
                     ? "the options leave no cell to run"
                     : fmt::format("all {} were skipped or timed out ({}: {})", results.size(),
                                   results.front().container, results.front().status)
                           .c_str());
    rc = 3;
  }
  return rc;
}
